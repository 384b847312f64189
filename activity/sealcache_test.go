package activity_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
)

// TestSealNeverSignsTheCache: a seal takes from the stored tree hashes only
// what the previous checkpoint's signed root checks, and recomputes the
// unsealed tail from its records. A tail row's tree_hashes edited had the
// store sign a root its records do not make (and witness it): a true log
// that audit verify then called rewritten, for good.
func TestSealNeverSignsTheCache(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	if err := activitytest.Fill(ctx, s, 20, 20); err != nil {
		t.Fatal(err)
	}
	first, err := s.Seal(ctx, activity.SealManual)
	if err != nil {
		t.Fatal(err)
	}
	if err := activitytest.Fill(ctx, s, 40, 40); err != nil {
		t.Fatal(err)
	}
	size, err := s.LogSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The newest odd record past the checkpoint: its level-1 node is read
	// for the new root.
	seq := size - 1
	if seq%2 == 0 {
		seq--
	}
	if seq < first.Size {
		t.Fatalf("record %d is not in the unsealed tail (checkpoint at %d)", seq, first.Size)
	}
	edit(t, s.Path(), `UPDATE audit_log SET tree_hashes = CAST(zeroblob(length(tree_hashes)) AS BLOB) WHERE seq = `+strconv.FormatInt(seq, 10))
	cp, err := s.Seal(ctx, activity.SealManual)
	if err == nil {
		t.Fatalf("sealed over an edited tree cache: checkpoint at %d", cp.Size)
	}
	if !strings.Contains(err.Error(), "refusing to sign") {
		t.Fatalf("seal: %v, want a refusal", err)
	}
	if latest, err := s.LatestCheckpoint(ctx); err != nil || latest.Size != first.Size {
		t.Fatalf("a checkpoint was written: %+v, %v", latest, err)
	}
}
