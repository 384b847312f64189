package activity_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
)

// TestProveRecord: every record of an untouched log is proven, sealed or
// in the unsealed tail; one whose bytes were edited is not.
func TestProveRecord(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, func(w *activity.Tx) error { return w.SetVault(true, "alice", "incident 4711") }); err != nil {
		t.Fatal(err)
	}
	// An operator's decision is sealed at once: the last record, which
	// nothing yet chains to, is never one a decision rests on.
	if cp, err := s.LatestCheckpoint(ctx); err != nil || cp == nil {
		t.Fatalf("no checkpoint after a vault lock: %v", err)
	} else if n, _ := s.LogSize(ctx); cp.Size != n {
		t.Fatalf("the vault lock was not sealed: checkpoint at %d of %d records", cp.Size, n)
	}
	if err := activitytest.Fill(ctx, s, 12, 6); err != nil { // an unsealed tail
		t.Fatal(err)
	}
	size, err := s.LogSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := s.LatestCheckpoint(ctx)
	if err != nil || cp == nil || cp.Size >= size {
		t.Fatalf("want a sealed prefix and an unsealed tail: checkpoint %+v, size %d, %v", cp, size, err)
	}
	for seq := range size {
		if _, err := s.ProveRecord(ctx, seq); err != nil {
			t.Fatalf("untouched record %d: %v", seq, err)
		}
	}
	for _, seq := range []int64{cp.Size - 2, size - 3} { // sealed, then in the tail (not the newest, which nothing yet commits to)
		edit(t, s.Path(), `UPDATE audit_log SET canonical = CAST(replace(CAST(canonical AS TEXT), '"kind":"', '"kind":"x') AS BLOB) WHERE seq = `+
			strconv.FormatInt(seq, 10))
		if _, err := s.ProveRecord(ctx, seq); !errors.Is(err, activity.ErrUnproven) {
			t.Errorf("edited record %d: %v, want ErrUnproven", seq, err)
		}
	}
}

// TestProvenResult: a stored result is served only when its transition's
// record names it and its content is what the reference names.
func TestProvenResult(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	var e activity.Execution
	execs, err := s.Executions(ctx, activity.ExecutionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range execs {
		if x.ResultRef != "" {
			e = x
		}
	}
	if e.ID == "" {
		t.Fatal("the incident stores no result")
	}
	if _, err := s.ProvenResult(ctx, e); err != nil {
		t.Fatalf("untouched: %v", err)
	}
	forged := e
	forged.ResultRef = "sha256:00"
	if _, err := s.ProvenResult(ctx, forged); !errors.Is(err, activity.ErrUnproven) {
		t.Errorf("a reference no transition recorded: %v", err)
	}
	edit(t, s.Path(), `UPDATE results SET content = CAST('{"content":[{"type":"text","text":"forged"}]}' AS BLOB)`)
	if _, err := s.ProvenResult(ctx, e); !errors.Is(err, activity.ErrUnproven) {
		t.Errorf("edited content: %v", err)
	}
}
