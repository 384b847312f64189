package analyze

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// DefaultWindow groups calls whose tool's attach window is not recorded
// (most imported logs): two calls for the same effect within an hour are
// a suspect.
const DefaultWindow = activity.DefaultAttachWindow

// Options tune an analysis.
type Options struct {
	// Window overrides every group's window; zero uses the tool's recorded
	// attach window, else DefaultWindow.
	Window time.Duration
	// Progress, if set, is called now and then with calls read so far.
	Progress func(calls int64)
	// NearMisses, if set, is called once at the end of a scan with the
	// near misses found (at most maxNearMisses) and how many were left
	// out.
	NearMisses func(found []NearMiss, omitted int)
	// Finder, if set with NearMisses, is the near-miss finder the scan
	// feeds, for a caller that goes on feeding it new calls.
	Finder *NearMissFinder
	// Cuts, if set, lets Rebuild read each effect from its last group on
	// (EffectCuts), for a caller that rebuilds the same effects again and
	// again (the live console).
	Cuts *EffectCuts
	// From and To, if either is set, keep the suspects whose first call
	// was received between them (both included; zero: no bound), found
	// without reading the rest of the log. Near misses are then those
	// between two calls of the range.
	From, To time.Time
}

// group is calls for one effect inside one window.
type group struct {
	key    string
	first  time.Time
	window time.Duration
	calls  []CallRef
	closed bool // emitted (still in the queue until it reaches the front)
}

// CallRef is a call as a suspect lists it.
type CallRef struct {
	Seq         int64                `json:"seq"` // its log record
	ID          activity.CallID      `json:"id"`
	Actor       string               `json:"actor"`
	RunID       activity.RunID       `json:"run_id,omitempty"`
	ReceivedAt  time.Time            `json:"received_at"`
	Disposition activity.Disposition `json:"disposition"`
	ExecutionID activity.ExecutionID `json:"execution_id"`
	Reason      string               `json:"reason,omitempty"` // how the gateway matched it
	Source      string               `json:"source,omitempty"` // where an imported call came from: file:line record
	Imported    bool                 `json:"-"`
	prov        activity.Provenance  // its source record, for what signs it
}

// Scan streams the store's calls in time order, groups them by effect
// within each group's window, and calls fn with every group of two or
// more calls, analysed. Memory holds only the groups still open.
func Scan(ctx context.Context, s *activity.Store, opts Options, fn func(*Suspect) error) error {
	if !opts.From.IsZero() || !opts.To.IsZero() {
		return scanRange(ctx, s, opts, fn)
	}
	names, err := loadSourceNames(ctx, s)
	if err != nil {
		return err
	}
	open := map[string]*group{}
	near := opts.finder()
	var queue []*group // open groups in order of their first call
	var n int64
	// Closed groups of two or more calls are analysed in batches (their
	// records read together), in the order they closed. The first batch
	// is small, so the first suspects come out at once.
	var batch []*group
	batchSize := 16
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := analyseGroups(ctx, s, names, batch, fn); err != nil {
			return err
		}
		batch, batchSize = batch[:0], 256
		return nil
	}
	emit := func(g *group) error {
		g.closed = true
		if len(g.calls) < 2 {
			return nil
		}
		if batch = append(batch, g); len(batch) >= batchSize {
			return flush()
		}
		return nil
	}
	// expire closes, oldest first, the groups whose window ended before
	// now, so suspects come out in time order and memory holds only the
	// groups still inside their window.
	expire := func(now time.Time, all bool) error {
		for len(queue) > 0 {
			g := queue[0]
			if !g.closed && !all && now.Sub(g.first) <= g.window {
				return nil
			}
			queue[0], queue = nil, queue[1:]
			if g.closed {
				continue
			}
			delete(open, g.key)
			if err := emit(g); err != nil {
				return err
			}
		}
		return nil
	}
	err = scanCallsAhead(ctx, s, func(r *activity.CallKey) error {
		n++
		if opts.Progress != nil && n%8192 == 0 {
			opts.Progress(n)
		}
		if err := expire(r.ReceivedAt, false); err != nil {
			return err
		}
		key := r.EffectKey
		g := open[key]
		if g != nil && r.ReceivedAt.Sub(g.first) > g.window {
			delete(open, key)
			if err := emit(g); err != nil {
				return err
			}
			g = nil
		}
		if g == nil {
			g = newGroup(opts, r)
			open[key] = g
			queue = append(queue, g)
		}
		c := keyRef(r)
		g.calls = append(g.calls, c)
		if opts.NearMisses != nil {
			near.see(r, c, windowOf(opts, r))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := expire(time.Time{}, true); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	return near.report(ctx, s, names, opts)
}

// finder is the near-miss finder a scan feeds: the caller's, or its own.
func (opts Options) finder() *NearMissFinder {
	if opts.Finder != nil {
		return opts.Finder
	}
	return NewNearMissFinder()
}

// analyseGroups reads the records of groups together, up to
// maxBatchCalls calls at a time, and hands fn each one's suspect, in
// order. A group of more than maxListed calls is read alone, a chunk at
// a time (analyseLarge).
func analyseGroups(ctx context.Context, s *activity.Store, names sourceNames, groups []*group, fn func(*Suspect) error) error {
	for len(groups) > 0 {
		n, calls := 0, 0
		for n < len(groups) && len(groups[n].calls) <= maxListed && calls+len(groups[n].calls) <= maxBatchCalls {
			calls += len(groups[n].calls)
			n++
		}
		if n == 0 { // a large group, next
			n = 1
		}
		if err := analyseBatch(ctx, s, names, groups[:n], fn); err != nil {
			return err
		}
		groups = groups[n:]
	}
	return nil
}

// analyseBatch analyses groups read together, or one large group.
func analyseBatch(ctx context.Context, s *activity.Store, names sourceNames, groups []*group, fn func(*Suspect) error) error {
	var recs *groupRecords
	if len(groups[0].calls) <= maxListed {
		var err error
		if recs, err = loadGroupRecords(ctx, s, names, groups); err != nil {
			return err
		}
	}
	for _, g := range groups {
		var sus *Suspect
		var err error
		if recs == nil {
			sus, err = analyseLarge(ctx, s, g, names)
		} else {
			sus, err = analyseLoaded(ctx, s, g, names, recs)
		}
		if err != nil {
			return fmt.Errorf("suspect %s: %w", g.key, err)
		}
		if err := fn(sus); err != nil {
			return err
		}
	}
	return nil
}

// newGroup opens a group at call r.
func newGroup(opts Options, r *activity.CallKey) *group {
	return &group{key: r.EffectKey, first: r.ReceivedAt, window: windowOf(opts, r)}
}

// windowOf is a call's window: the tool's recorded attach window unless
// the options override it.
func windowOf(opts Options, r *activity.CallKey) time.Duration {
	if opts.Window != 0 {
		return opts.Window
	}
	if r.Window.OK && r.Window.V > 0 {
		return r.Window.V
	}
	return DefaultWindow
}

// keyRef is the part of a call's CallRef its key holds; fillCalls reads
// the rest once the call is known to share its effect.
func keyRef(k *activity.CallKey) CallRef {
	return CallRef{Seq: k.Seq, ReceivedAt: k.ReceivedAt, ExecutionID: k.ExecutionID}
}

func callRef(r *activity.CallRow, names sourceNames) CallRef {
	return CallRef{Seq: r.Seq, ID: r.ID, Actor: r.Actor, RunID: r.RunID, ReceivedAt: r.ReceivedAt,
		Disposition: r.Disposition, ExecutionID: r.ExecutionID, Reason: r.Reason, Source: names.text(r.Source), Imported: !r.Source.IsZero(),
		prov: r.Source}
}

// fillCalls completes calls read by their keys (keyRef) from the whole
// rows of their executions' calls, in one query per maxBatchIDs
// executions.
func fillCalls(ctx context.Context, s *activity.Store, names sourceNames, calls []*CallRef) error {
	var ids []activity.ExecutionID
	seen := map[activity.ExecutionID]bool{}
	for _, c := range calls {
		if !seen[c.ExecutionID] {
			seen[c.ExecutionID] = true
			ids = append(ids, c.ExecutionID)
		}
	}
	rows := make(map[int64]*activity.CallRow, len(calls))
	for chunk := range slices.Chunk(ids, maxBatchIDs) {
		got, err := s.CallRowsOf(ctx, chunk)
		if err != nil {
			return err
		}
		for i := range got {
			rows[got[i].Seq] = &got[i]
		}
	}
	for _, c := range calls {
		r := rows[c.Seq]
		if r == nil || r.ExecutionID != c.ExecutionID {
			return fmt.Errorf("call record %d of execution %s: %w", c.Seq, c.ExecutionID, activity.ErrNotFound)
		}
		*c = callRef(r, names)
	}
	return nil
}

// loadSourceNames reads the import sources' file names, for evidence.
func loadSourceNames(ctx context.Context, s *activity.Store) (sourceNames, error) {
	srcs, err := s.Sources(ctx)
	if err != nil {
		return nil, fmt.Errorf("sources: %w", err)
	}
	names := sourceNames{}
	for _, src := range srcs {
		names[src.ID] = src
	}
	return names, nil
}

// All collects every suspect (for small stores and tests).
func All(ctx context.Context, s *activity.Store, opts Options) ([]*Suspect, error) {
	var out []*Suspect
	err := Scan(ctx, s, opts, func(sus *Suspect) error {
		out = append(out, sus)
		return nil
	})
	return out, err
}

// Find returns the suspect with this id.
func Find(ctx context.Context, s *activity.Store, opts Options, id string) (*Suspect, error) {
	p := activity.ParsePartialID(id)
	exact := p.Exact("sus_")
	if exact {
		return findExact(ctx, s, opts, id)
	}
	var found []*Suspect
	errFound := errors.New("found")
	err := Scan(ctx, s, opts, func(sus *Suspect) error {
		if exact && sus.ID != id || !exact && !p.Match(sus.ID) {
			return nil
		}
		found = append(found, sus)
		if exact || len(found) > 1 {
			return errFound // a whole id is unique; two matches are enough to refuse
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return nil, err
	}
	ids := make([]string, len(found))
	for i, f := range found {
		ids[i] = f.ID
	}
	pick, err := p.Pick("suspect", ids)
	if err != nil {
		return nil, err
	}
	for _, f := range found {
		if f.ID == pick {
			return f, nil
		}
	}
	return nil, fmt.Errorf("suspect %s: %w", id, activity.ErrNotFound)
}

// scanCallsAhead reads calls in a goroutine, a batch ahead of fn: reading
// the join costs about as much as analysing the suspects, and on two cores
// the two overlap.
func scanCallsAhead(ctx context.Context, s *activity.Store, fn func(*activity.CallKey) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const batch = 1024
	full := make(chan []activity.CallKey, 4)
	errc := make(chan error, 1)
	go func() {
		defer close(full)
		buf := make([]activity.CallKey, 0, batch)
		err := s.ScanCallKeys(ctx, func(r *activity.CallKey) error {
			buf = append(buf, *r)
			if len(buf) == batch {
				select {
				case full <- buf:
				case <-ctx.Done():
					return ctx.Err()
				}
				buf = make([]activity.CallKey, 0, batch)
			}
			return nil
		})
		if err == nil && len(buf) > 0 {
			full <- buf
		}
		errc <- err
	}()
	for rows := range full {
		for i := range rows {
			if err := fn(&rows[i]); err != nil {
				cancel()
				for range full {
				}
				<-errc
				return err
			}
		}
	}
	return <-errc
}

// findExact rebuilds the one group a whole suspect id names, without
// reading the rest of the log: the id is its first call's, so the group is
// among that call's effect's calls (read through an index), cut into
// windows exactly as Scan cuts them. A call that does not start a group of
// two or more is no suspect.
func findExact(ctx context.Context, s *activity.Store, opts Options, id string) (*Suspect, error) {
	first := activity.CallID("call_" + strings.TrimPrefix(id, "sus_"))
	key, seq, err := s.CallEffect(ctx, first)
	if errors.Is(err, activity.ErrNotFound) {
		return nil, fmt.Errorf("suspect %s: %w", id, activity.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	names, err := loadSourceNames(ctx, s)
	if err != nil {
		return nil, err
	}
	var found *group
	errFound := errors.New("found")
	err = effectGroups(ctx, s, opts, key, func(g *group) error {
		if g.calls[0].Seq != seq {
			return nil
		}
		found = g
		return errFound
	})
	if err != nil && !errors.Is(err, errFound) {
		return nil, err
	}
	if found == nil || len(found.calls) < 2 {
		return nil, fmt.Errorf("suspect %s: %w", id, activity.ErrNotFound)
	}
	return analyseGroup(ctx, s, found, names)
}
