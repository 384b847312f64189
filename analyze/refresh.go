package analyze

import (
	"context"
	"fmt"
	"slices"

	"github.com/mcpdup/mcpdup/activity"
)

// Touched is what a stretch of the log changed, for an incremental
// analysis: the effect keys of every execution its records created or
// moved (a call, an acceptance, a transition, a resolution, an approval).
// Only those keys' suspects can differ from before.
type Touched struct {
	Keys []string
	// Executions are the touched executions as they stand now (for a
	// list of executions to update in place).
	Executions []activity.Execution
	Runs       bool  // a run started or ended
	Through    int64 // the log size read through
}

// TouchedSince reads the log from record since on: a short read of the new
// records only, not of the tables a writer is appending to.
func TouchedSince(ctx context.Context, s *activity.Store, since int64) (Touched, error) {
	ids := map[activity.ExecutionID]bool{}
	t := Touched{Through: since}
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
	for chunk := range slices.Chunk(list, 500) {
		execs, err := s.ExecutionsByID(ctx, chunk)
		if err != nil {
			return t, err
		}
		for _, e := range execs {
			t.Keys = append(t.Keys, e.EffectKey())
			t.Executions = append(t.Executions, e)
		}
	}
	slices.Sort(t.Keys)
	t.Keys = slices.Compact(t.Keys)
	return t, nil
}

// Rebuild analyses the suspects of these effect keys alone: each key's
// calls are read through the effect index and cut into windows as Scan
// cuts them, so the result is exactly Scan's suspects for those keys.
func Rebuild(ctx context.Context, s *activity.Store, opts Options, keys []string) ([]*Suspect, error) {
	names, err := loadSourceNames(ctx, s)
	if err != nil {
		return nil, err
	}
	// Every group first, then their records in one batch (as Scan reads
	// them), not three queries per group.
	var groups []*group
	for _, key := range keys {
		err := effectGroups(ctx, s, opts, key, names, func(g *group) error {
			if len(g.calls) >= 2 {
				groups = append(groups, g)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	recs, err := loadGroupRecords(ctx, s, groups)
	if err != nil {
		return nil, err
	}
	out := make([]*Suspect, 0, len(groups))
	for _, g := range groups {
		sus, err := analyseLoaded(ctx, s, g, names, recs)
		if err != nil {
			return nil, fmt.Errorf("suspect %s: %w", g.key, err)
		}
		out = append(out, sus)
	}
	return out, nil
}

// effectGroups cuts one effect's calls, in the order they were received,
// into the groups Scan makes of them (a group is the calls inside its first
// call's window), and calls fn with each, the last included.
func effectGroups(ctx context.Context, s *activity.Store, opts Options, key string, names sourceNames, fn func(*group) error) error {
	var g *group
	err := s.ScanCallsOfEffect(ctx, key, func(r *activity.CallRow) error {
		if g != nil && r.ReceivedAt.Sub(g.first) > g.window {
			if err := fn(g); err != nil {
				return err
			}
			g = nil
		}
		if g == nil {
			g = newGroup(opts, r)
		}
		g.calls = append(g.calls, callRef(r, names))
		return nil
	})
	if err == nil && g != nil {
		err = fn(g)
	}
	return err
}
