package analyze

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// Touched is what a stretch of the log changed, for an incremental
// analysis: the effect keys of every execution its records created or
// moved (a call, an acceptance, a transition, a resolution, an approval).
// Only those keys' suspects can differ from before.
type Touched struct {
	Since int64 // the first record read
	Keys  []string
	// Executions are the touched executions as they stand now (for a
	// list of executions to update in place).
	Executions []activity.Execution
	// Calls are the new calls that created or attached to an execution,
	// by their keys, in log order (a near-miss finder orders what it
	// follows itself).
	Calls   []activity.CallKey
	Runs    bool  // a run started or ended
	Through int64 // the log size read through
}

// TouchedSince reads the log from record since on: a short read of the new
// records only, not of the tables a writer is appending to.
func TouchedSince(ctx context.Context, s *activity.Store, since int64) (Touched, error) {
	ids := map[activity.ExecutionID]bool{}
	type newCall struct {
		seq int64
		c   *activity.Call
	}
	var calls []newCall
	t := Touched{Since: since, Through: since}
	err := s.ScanLog(ctx, since, func(seq int64, canonical, _ []byte) error {
		t.Through = seq + 1
		rec, err := activity.ParseRecord(canonical)
		if err != nil {
			return nil // audit verify's to report; nothing to analyse
		}
		ev, err := rec.Event()
		if err != nil {
			return nil
		}
		switch v := ev.(type) {
		case *activity.Call:
			ids[v.ExecutionID] = true
			calls = append(calls, newCall{seq, v})
		case *activity.Execution:
			ids[v.ID] = true
		case *activity.Transition:
			ids[v.ExecutionID] = true
		case *activity.Resolution:
			ids[v.ExecutionID] = true
		case *activity.Approval:
			ids[v.ExecutionID] = true
		case *activity.Run, *activity.RunEnd:
			t.Runs = true
		}
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("read new records: %w", err)
	}
	delete(ids, "")
	list := make([]activity.ExecutionID, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	byID := map[activity.ExecutionID]activity.Execution{}
	for chunk := range slices.Chunk(list, 500) {
		execs, err := s.ExecutionsByID(ctx, chunk)
		if err != nil {
			return t, err
		}
		for _, e := range execs {
			t.Keys = append(t.Keys, e.EffectKey())
			t.Executions = append(t.Executions, e)
			byID[e.ID] = e
		}
	}
	slices.Sort(t.Keys)
	t.Keys = slices.Compact(t.Keys)
	for _, nc := range calls {
		if e, ok := byID[nc.c.ExecutionID]; ok {
			t.Calls = append(t.Calls, activity.CallKey{Seq: nc.seq, ReceivedAt: nc.c.ReceivedAt, ExecutionID: e.ID,
				EffectKey: e.EffectKey(), Window: e.Window, Tool: nc.c.Tool})
		}
	}
	return t, nil
}

// Rebuilt is what new records made of the suspects of the effects they
// touched: Fresh holds the suspects analysed again (new ones, and old ones
// the records changed); Kept names those effects' suspects that stand as
// they were. Any other suspect of those effects is gone.
type Rebuilt struct {
	Fresh []*Suspect
	Kept  []string
	Read  int // calls read by their keys to cut the windows
}

// Rebuild brings the suspects of the effects t touched up to date: each
// key's calls are read through the effect index (their keys alone) and
// cut into windows as Scan cuts them, and a group is analysed again only
// if the new records could have changed it: it holds a touched execution,
// or a new call was received before its window ended (a new call changes
// no group whose window closed before it; the windows before it are cut
// the same). An effect called all day thus costs the analysis of its last
// group, not of its whole history; with opts.Cuts, reading its calls
// costs its last group too (EffectCuts). Kept and Fresh together are
// exactly Scan's suspects for those keys.
func Rebuild(ctx context.Context, s *activity.Store, opts Options, t Touched) (Rebuilt, error) {
	var out Rebuilt
	names, err := loadSourceNames(ctx, s)
	if err != nil {
		return out, err
	}
	touched := make(map[activity.ExecutionID]bool, len(t.Executions))
	for _, e := range t.Executions {
		touched[e.ID] = true
	}
	// Every group first, then their records in one batch (as Scan reads
	// them), not three queries per group.
	var changed, kept []*group
	effects := make([]rebuiltEffect, 0, len(t.Keys))
	for _, key := range t.Keys {
		ef, err := cutEffect(ctx, s, opts, key, t)
		if err != nil {
			return out, err
		}
		for _, g := range ef.groups {
			if groupChanged(g, ef.firstNew, touched) {
				changed = append(changed, g)
			} else {
				kept = append(kept, g)
			}
		}
		out.Kept = append(out.Kept, ef.before...)
		out.Read += ef.read
		effects = append(effects, ef)
	}
	ids := make(map[*group]string, len(kept)+len(changed))
	keptIDs, err := groupIDs(ctx, s, names, kept)
	if err != nil {
		return out, err
	}
	for i, g := range kept {
		ids[g] = keptIDs[i]
	}
	out.Kept = append(out.Kept, keptIDs...)
	out.Fresh = make([]*Suspect, 0, len(changed))
	err = analyseGroups(ctx, s, names, changed, func(sus *Suspect) error {
		ids[changed[len(out.Fresh)]] = sus.ID
		out.Fresh = append(out.Fresh, sus)
		return nil
	})
	if err != nil || opts.Cuts == nil {
		return out, err
	}
	for _, ef := range effects {
		before := slices.Clone(ef.before)
		for _, g := range ef.groups {
			if g != ef.last {
				before = append(before, ids[g])
			}
		}
		if err := opts.Cuts.remember(ctx, s, ef.key, ef.last, before); err != nil {
			return out, err
		}
	}
	return out, nil
}

// rebuiltEffect is one effect's part of a rebuild.
type rebuiltEffect struct {
	key      string
	before   []string  // suspects before the calls read, standing as they were
	groups   []*group  // the groups read with two calls or more, in order
	last     *group    // the last group read, whatever its size
	firstNew time.Time // the earliest new call
	read     int       // calls read
}

// cutEffect reads key's calls by their keys and cuts them into groups:
// from its last group on if opts.Cuts allows (the groups before it stand),
// else all of them.
func cutEffect(ctx context.Context, s *activity.Store, opts Options, key string, t Touched) (rebuiltEffect, error) {
	ef := rebuiltEffect{key: key}
	var touchedHere []activity.Execution
	for _, e := range t.Executions {
		if e.EffectKey() == key {
			touchedHere = append(touchedHere, e)
		}
	}
	cut, fromTail, err := opts.Cuts.tail(ctx, s, key, touchedHere)
	if err != nil {
		return ef, err
	}
	each := func(g *group) error {
		for _, c := range g.calls {
			if c.Seq >= t.Since && (ef.firstNew.IsZero() || c.ReceivedAt.Before(ef.firstNew)) {
				ef.firstNew = c.ReceivedAt
			}
		}
		if len(g.calls) >= 2 {
			ef.groups = append(ef.groups, g)
		}
		ef.last = g
		ef.read += len(g.calls)
		return nil
	}
	scan := func(fn func(*activity.CallKey) error) error { return s.ScanCallKeysOfEffect(ctx, key, fn) }
	if fromTail {
		ef.before = cut.before
		scan = func(fn func(*activity.CallKey) error) error {
			return s.ScanCallKeysOfEffectFrom(ctx, key, cut.fromSeq, cut.tail, fn)
		}
	}
	return ef, cutGroups(opts, scan, each)
}

// groupChanged reports whether new records could have changed g: it
// holds a touched execution, or a new call came (at firstNew) before its
// window closed.
func groupChanged(g *group, firstNew time.Time, touched map[activity.ExecutionID]bool) bool {
	if !firstNew.IsZero() && firstNew.Sub(g.first) <= g.window {
		return true
	}
	return slices.ContainsFunc(g.calls, func(c CallRef) bool { return touched[c.ExecutionID] })
}

// groupIDs returns the suspect ids of groups: their first calls' (read
// whole for it, in one query per batch).
func groupIDs(ctx context.Context, s *activity.Store, names sourceNames, gs []*group) ([]string, error) {
	firsts := make([]*CallRef, len(gs))
	for i, g := range gs {
		firsts[i] = &g.calls[0]
	}
	if err := fillCalls(ctx, s, names, firsts); err != nil {
		return nil, err
	}
	ids := make([]string, len(gs))
	for i, c := range firsts {
		ids[i] = suspectID(c.ID)
	}
	return ids, nil
}

// effectGroups cuts one effect's calls, in the order they were received,
// into the groups Scan makes of them (a group is the calls inside its first
// call's window), and calls fn with each, the last included.
func effectGroups(ctx context.Context, s *activity.Store, opts Options, key string, fn func(*group) error) error {
	return cutGroups(opts, func(each func(*activity.CallKey) error) error { return s.ScanCallKeysOfEffect(ctx, key, each) }, fn)
}

// cutGroups cuts the calls scan reads (one effect's, in the order they
// were received) into groups, and calls fn with each, the last included.
func cutGroups(opts Options, scan func(func(*activity.CallKey) error) error, fn func(*group) error) error {
	var g *group
	err := scan(func(r *activity.CallKey) error {
		if g != nil && r.ReceivedAt.Sub(g.first) > g.window {
			if err := fn(g); err != nil {
				return err
			}
			g = nil
		}
		if g == nil {
			g = newGroup(opts, r)
		}
		g.calls = append(g.calls, keyRef(r))
		return nil
	})
	if err == nil && g != nil {
		err = fn(g)
	}
	return err
}
