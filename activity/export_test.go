package activity

import (
	"context"
	"hash/maphash"
)

// Hooks for the table check's cost benchmark (tablecheck_test.go).

// ReadTablesOnly reads every checked table of the snapshot, values
// discarded: the least any table check must do.
func (sn *Snapshot) ReadTablesOnly(ctx context.Context) (rows int64, err error) {
	for _, t := range append(checkedTables, resultsTable) {
		err = sn.scan(ctx, t, func([]any) error {
			rows++
			return nil
		})
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// ReplayOnly replays the snapshot's log into the digests the tables are
// compared with, reading no table.
func (sn *Snapshot) ReplayOnly(ctx context.Context) error {
	return sn.replayInto(ctx, newDigestSink(newHasher(maphash.MakeSeed(), maphash.MakeSeed())))
}

// CheckpointStep runs one step of the background checkpoint now.
func (s *Store) CheckpointStep() { s.checkpointStep() }

// SetSealedHook runs f after each seal commits, while the seal still
// holds its lock: a test holds a seal open with it.
func (s *Store) SetSealedHook(f func()) { s.sealedHook = f }

// CheckpointPassive runs only its PASSIVE checkpoint (what the store did
// before WALLimit), for comparison.
func (s *Store) CheckpointPassive() { s.checkpointWAL("PASSIVE") }

// AppendOnly appends a record to the log (chain, leaf, tree hashes) and
// writes no projection row: the promise alone, for the benchmarks that
// measure the most that taking the projection tables off the gateway's
// commit could win (log_only in BenchmarkGatewayCall and
// BenchmarkDurableCommitFloor).
func (w *Tx) AppendOnly(kind Kind, data any) error {
	_, err := w.append(kind, data)
	return err
}

// ForceApprovalRecord appends a as a record and writes its row with no
// rule checked: what a forger holding the key, or an older writer, could
// leave in a log, for the table check to judge.
func (w *Tx) ForceApprovalRecord(a Approval) error {
	rec, err := w.append(KindApproval, a)
	if err != nil {
		return err
	}
	return w.putApproval(a, rec.Seq)
}
