package activity

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// Edge is a tlog.HashReader over the right edge of a Merkle tree: for each
// level, the newest complete subtree. That is all tlog reads to append a
// record or to compute the current root, so a verifier or a writer can
// follow a log of any length in O(log n) memory. Hashes it does not hold
// are read from Fallback, when set.
type Edge struct {
	n        [64]int64
	hash     [64]tlog.Hash
	set      [64]bool
	Fallback tlog.HashReader
}

// Add records the stored hashes tlog.StoredHashesForRecordHash returned
// for record n: the leaf at level 0, then one per subtree it completed.
func (e *Edge) Add(n int64, hashes []tlog.Hash) {
	for level, h := range hashes {
		e.n[level], e.hash[level], e.set[level] = n>>uint(level), h, true
	}
}

// seed sets the newest complete subtree at level: node k, hash h.
func (e *Edge) seed(level int, k int64, h tlog.Hash) {
	e.n[level], e.hash[level], e.set[level] = k, h, true
}

// ReadHashes implements tlog.HashReader.
func (e *Edge) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	var missing []int
	for i, idx := range indexes {
		level, n := tlog.SplitStoredHashIndex(idx)
		if level < len(e.n) && e.set[level] && e.n[level] == n {
			out[i] = e.hash[level]
			continue
		}
		if e.Fallback == nil {
			return nil, fmt.Errorf("hash at level %d index %d is not on the tree's right edge", level, n)
		}
		missing = append(missing, i)
	}
	if len(missing) == 0 {
		return out, nil
	}
	idx := make([]int64, len(missing))
	for j, i := range missing {
		idx[j] = indexes[i]
	}
	hs, err := e.Fallback.ReadHashes(idx)
	if err != nil {
		return nil, err
	}
	for j, i := range missing {
		out[i] = hs[j]
	}
	return out, nil
}
