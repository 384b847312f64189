package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"golang.org/x/mod/sumdb/tlog"
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
	fed  int64 // size of the newest stored checkpoint fed; -1: none

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
	v.recent = map[int64]tlog.Hash{}
	return &Follower{s: s, opts: opts, v: v, fed: -1}, nil
}

// Advance verifies what was appended since the last call and reports on
// the whole log so far.
func (f *Follower) Advance(ctx context.Context) (*Report, error) {
	v := f.v
	v.start = timeNow()
	// The checkpoints are read before the records, as VerifyStore reads
	// them: every one is then within the records read, and one past them
	// is a truncated log, not a seal that raced the read. Each is fed
	// once; one beyond the records read so far waits (pending) for them.
	stored, err := f.s.CheckpointsAfter(ctx, f.fed) // only the ones not fed yet
	if err != nil {
		return nil, err
	}
	for _, cp := range stored {
		v.addCheckpoint(cp.Note, fmt.Sprintf("checkpoint at size %d", cp.Size))
		f.fed = cp.Size
	}
	// Roots past the newest checkpoint are kept: the next one may be
	// written after these records are read.
	v.keepRootsFrom = max(f.fed, 1)
	maps.DeleteFunc(v.recent, func(size int64, _ tlog.Hash) bool { return size <= v.keepRootsFrom })
	// The first advance reads the whole log: a reader goroutine keeps a
	// batch ahead of the hashing, as VerifyStore reads. The second's worth
	// of records a live console follows after it is read directly (the
	// batches' buffers would cost it more than they save).
	if v.pos == 0 {
		err = scanBatches(ctx, f.s, v.pos, func(b *rowBatch) {
			for i := range b.seqs {
				v.addRecord(b.seqs[i], b.canonical[i], b.leaf[i], b.tree[i])
			}
		})
	} else {
		err = f.s.ScanLogHashes(ctx, v.pos, func(seq int64, canonical, leaf, tree []byte) error {
			v.addRecord(seq, canonical, leaf, tree)
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
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
