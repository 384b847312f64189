package activity_test

import (
	"encoding/hex"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mcpdup/mcpdup/activity"
)

// fullTree keeps every stored hash, the way the database does.
type fullTree []tlog.Hash

func (f *fullTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = (*f)[x]
	}
	return out, nil
}

func TestEdgeMatchesFullTree(t *testing.T) {
	var full fullTree
	var e activity.Edge
	for n := int64(0); n < 1100; n++ {
		h := tlog.RecordHash([]byte{byte(n), byte(n >> 8)})
		hs, err := tlog.StoredHashesForRecordHash(n, h, &full)
		if err != nil {
			t.Fatal(err)
		}
		full = append(full, hs...)
		hs2, err := tlog.StoredHashesForRecordHash(n, h, &e)
		if err != nil {
			t.Fatalf("edge cannot append record %d: %v", n, err)
		}
		e.Add(n, hs2)
		want, _ := tlog.TreeHash(n+1, &full)
		got, err := tlog.TreeHash(n+1, &e)
		if err != nil || got != want {
			t.Fatalf("size %d: edge root %v (%v), full root %v", n+1, got, err, want)
		}
	}
}

func TestEdgeRFC6962Vector(t *testing.T) {
	// Leaves and 8-leaf root from RFC 6962's reference vectors (as
	// transparency-dev/merkle's testonly package lists them).
	leaves := []string{"", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"}
	var e activity.Edge
	for i, l := range leaves {
		data, _ := hex.DecodeString(l)
		hs, err := tlog.StoredHashes(int64(i), data, &e)
		if err != nil {
			t.Fatal(err)
		}
		e.Add(int64(i), hs)
	}
	root, err := tlog.TreeHash(8, &e)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(root[:]); got != "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328" {
		t.Fatalf("root = %s", got)
	}
}
