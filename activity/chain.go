package activity

// The hash-chain append: every event becomes a record chained to the one
// before it and a leaf of the Merkle tree.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// append adds one record to the log: chain link, leaf and tree hashes.
func (w *Tx) append(kind Kind, data any) (Record, error) {
	if kind == KindVault {
		w.vaultMoved, w.vaultState = true, nil
	}
	if !w.loaded {
		if err := w.loadHead(); err != nil {
			return Record{}, err
		}
	}
	rec, err := EncodeRecord(w.next, w.head, w.now, kind, data)
	if err != nil {
		return Record{}, err
	}
	hashes, err := tlog.StoredHashesForRecordHash(rec.Seq, rec.Hash, &w.edge)
	if err != nil {
		return Record{}, fmt.Errorf("record %d: tree: %w", rec.Seq, err)
	}
	tree := make([]byte, 0, (len(hashes)-1)*tlog.HashSize)
	for _, h := range hashes[1:] {
		tree = append(tree, h[:]...)
	}
	if err := w.insert(&w.logRows, logInsert, rec.Seq, rec.Bytes, rec.Hash[:], tree, string(kind), FormatTime(rec.Time)); err != nil {
		return Record{}, fmt.Errorf("record %d: %w", rec.Seq, err)
	}
	w.edge.Add(rec.Seq, hashes)
	w.head, w.next = rec.Hash, rec.Seq+1
	w.appended++
	if !w.bulk || len(w.records) == 0 {
		w.records = append(w.records, rec)
	}
	return rec, nil
}

// loadHead reads the last record inside the transaction and re-hashes its
// bytes: the chain continues from what is stored, never from a cached hash
// that could have been altered.
func (w *Tx) loadHead() error {
	var seq int64
	var canonical []byte
	err := w.queryRow(`SELECT seq, canonical FROM audit_log ORDER BY seq DESC LIMIT 1`).Scan(&seq, &canonical)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		w.head, w.next = GenesisHash(w.s.origin), 0
	case err != nil:
		return fmt.Errorf("read log head: %w", err)
	default:
		w.head, w.next = tlog.RecordHash(canonical), seq+1
	}
	// Reuse the edge this process left after its last commit if the log
	// has not moved since; otherwise read what is needed from the log.
	w.s.edgeMu.Lock()
	if w.s.edgeSize == w.next {
		w.edge = w.s.edge
	}
	w.s.edgeMu.Unlock()
	w.edge.Fallback = tlog.HashReaderFunc(w.readHashes)
	w.loaded = true
	return nil
}

// readHashes reads stored tree hashes with a prepared query.
func (w *Tx) readHashes(indexes []int64) ([]tlog.Hash, error) {
	if err := w.insertRows(&w.logRows); err != nil {
		return nil, err
	}
	return readStoredHashes(indexes, func(seq int64) ([]byte, []byte, error) {
		var leaf, tree []byte
		err := w.queryRow(`SELECT leaf_hash, tree_hashes FROM audit_log WHERE seq = ?`, seq).Scan(&leaf, &tree)
		return leaf, tree, err
	})
}

// readStoredHashes resolves tlog stored-hash indexes against the log: the
// node at (level, k) was completed by record ((k+1) << level) - 1, which
// keeps its leaf in leaf_hash and its level ≥ 1 nodes in tree_hashes.
func readStoredHashes(indexes []int64, row func(seq int64) (leaf, tree []byte, err error)) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		level, k := tlog.SplitStoredHashIndex(idx)
		seq := (k+1)<<uint(level) - 1
		leaf, tree, err := row(seq)
		if err != nil {
			return nil, fmt.Errorf("tree hash of record %d level %d: %w", seq, level, notFound(err))
		}
		b := leaf
		if level > 0 {
			if len(tree) < level*tlog.HashSize {
				return nil, fmt.Errorf("record %d: tree hashes cut short", seq)
			}
			b = tree[(level-1)*tlog.HashSize : level*tlog.HashSize]
		}
		if len(b) != tlog.HashSize {
			return nil, fmt.Errorf("record %d: tree hash has %d bytes", seq, len(b))
		}
		out[i] = tlog.Hash(b)
	}
	return out, nil
}

// txHashReader reads stored tree hashes inside a transaction.
type txHashReader struct {
	ctx context.Context
	q   interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}
}

func (r txHashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	return readStoredHashes(indexes, func(seq int64) ([]byte, []byte, error) {
		var leaf, tree []byte
		err := r.q.QueryRowContext(r.ctx, `SELECT leaf_hash, tree_hashes FROM audit_log WHERE seq = ?`, seq).Scan(&leaf, &tree)
		return leaf, tree, err
	})
}
