package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// Follower verifies a live store's log as it grows (the console beside a
// gateway). The first Advance checks every record and the tables; each
// later one reads and hashes only the records and checkpoints added since:
// the verifier keeps O(log n) state between them (the chain's head and
// the Merkle tree's right edge), so a console that once re-verified a
// million records on every new one now hashes only the new one.
//
// What it gives up: a record edited after the follower passed it is not
// seen until a full verify (audit verify, the console's r), and the
// tables, whose rows change in place, are compared with the log again
// only every TablesEvery; the report then says through which record each
// was proven (Integrity's TablesThrough).
type Follower struct {
	s    *activity.Store
	opts Options
	v    *verifier
	cps  int64 // size of the newest stored checkpoint fed

	// TablesEvery is how often the tables are compared with the log
	// again (a full replay); 0 means DefaultTablesEvery.
	TablesEvery time.Duration
	tables      *activity.TableReport
	tablesAt    time.Time
}

// DefaultTablesEvery is how often a follower checks the tables again.
const DefaultTablesEvery = 5 * time.Minute

// NewFollower follows s with opts (Key, KeyPinned, Trusted; LogOnly skips
// the tables).
func NewFollower(s *activity.Store, opts Options) (*Follower, error) {
	v, err := newVerifier(s.Origin(), opts)
	if err != nil {
		return nil, err
	}
	if opts.Trusted != nil {
		v.setTrusted(opts.Trusted)
	}
	return &Follower{s: s, opts: opts, v: v, cps: -1}, nil
}

// Advance verifies what was appended since the last call and reports on
// the whole log so far.
func (f *Follower) Advance(ctx context.Context) (*Report, error) {
	v := f.v
	v.start = timeNow()
	stored, err := f.s.Checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	feed := func() {
		for _, cp := range stored {
			if cp.Size > f.cps && cp.Size <= v.pos {
				v.addCheckpoint(cp.Note, fmt.Sprintf("checkpoint at size %d", cp.Size))
				f.cps = cp.Size
			}
		}
	}
	feed()
	err = f.s.ScanLog(ctx, v.pos, func(seq int64, canonical, leaf []byte) error {
		v.addRecord(seq, canonical, leaf)
		if len(stored) > 0 && stored[len(stored)-1].Size > f.cps {
			feed()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if stored, err = f.s.Checkpoints(ctx); err != nil { // sealed while the records were read
		return nil, err
	}
	feed()
	every := f.TablesEvery
	if every <= 0 {
		every = DefaultTablesEvery
	}
	if !f.opts.LogOnly && (f.tables == nil || timeNow().Sub(f.tablesAt) >= every) {
		if f.tables, err = f.s.CheckTables(ctx); err != nil {
			return nil, err
		}
		f.tablesAt = timeNow()
	}
	// The report is built on a copy: closing a verifier reports what
	// streaming could not see yet (a checkpoint past the end), which the
	// next Advance may still see.
	c := v.clone()
	c.close()
	if f.tables != nil {
		c.addTables(f.tables)
	}
	if err := c.checkSealingPolicy(ctx, f.s); err != nil {
		return nil, err
	}
	rep := c.report(f.s.Path(), f.opts.Key)
	if f.tables != nil && f.tables.Records < rep.Records {
		rep.TablesThrough = f.tables.Records
	}
	return rep, nil
}

// clone copies the verifier's state, so a report can be closed on the
// copy while the original goes on.
func (v *verifier) clone() *verifier {
	c := *v
	c.missing = maps.Clone(v.missing)
	c.counts = maps.Clone(v.counts)
	c.problems = slices.Clone(v.problems)
	c.pending = slices.Clone(v.pending)
	c.checkpoints = slices.Clone(v.checkpoints)
	return &c
}
