package activity_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// TestRemovedCheckpointsRefuseProofsAndSeals: with the database's newer
// checkpoints deleted, what they covered is not proven by the older one,
// and the store will not sign over it: the witness file remembers them.
func TestRemovedCheckpointsRefuseProofsAndSeals(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	first, _ := s.LatestCheckpoint(ctx)
	if _, err := s.Write(ctx, func(w *activity.Tx) error { return w.SetVault(true, "alice", "later, sealed") }); err != nil {
		t.Fatal(err)
	}
	if err := activitytest.Fill(ctx, s, 12, 6); err != nil {
		t.Fatal(err)
	}
	size, _ := s.LogSize(ctx)
	edit(t, s.Path(), `DELETE FROM audit_checkpoint WHERE size > `+strconv.FormatInt(first.Size, 10))
	if _, err := s.ProveRecord(ctx, size-3); !errors.Is(err, activity.ErrUnproven) || !strings.Contains(err.Error(), "checkpoints were removed") {
		t.Errorf("a record past the removed checkpoints: %v", err)
	}
	if _, err := s.Seal(ctx, activity.SealManual); err == nil || !strings.Contains(err.Error(), "refusing to sign") {
		t.Errorf("sealing over removed checkpoints: %v", err)
	}
}

// TestVaultRecordHiddenFromItsIndex: a lock the gateway has seen cannot be
// hidden by editing the kind column that finds vault records.
func TestVaultRecordHiddenFromItsIndex(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	for _, locked := range []bool{false, true} {
		if _, err := s.Write(ctx, func(w *activity.Tx) error { return w.SetVault(locked, "alice", "x") }); err != nil {
			t.Fatal(err)
		}
	}
	locked := func() (bool, error) {
		var l bool
		_, err := s.Write(ctx, func(w *activity.Tx) error {
			var err error
			l, _, err = w.VaultLocked()
			return err
		})
		return l, err
	}
	if l, err := locked(); err != nil || !l {
		t.Fatalf("locked vault: %v %v", l, err)
	}
	edit(t, s.Path(), `UPDATE audit_log SET kind = 'call' WHERE seq = (SELECT MAX(seq) FROM audit_log WHERE kind = 'vault')`,
		`UPDATE meta SET value = 'unlocked by alice: x' WHERE key = 'vault'`)
	if l, err := locked(); !errors.Is(err, activity.ErrUnproven) {
		t.Fatalf("with the lock hidden from the index: locked %v, %v", l, err)
	}
}

// TestProofsBesideSeals: the gateway proves records while operators'
// decisions are sealed in the same process. A seal between a proof's
// read of the database and its read of the witness file once looked like
// a removed checkpoint, and the demo's approved charge was refused.
func TestProofsBesideSeals(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	if err := activitytest.Fill(ctx, s, 4, 4); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := range 150 {
			if err := activitytest.Fill(ctx, s, 2, 2); err != nil {
				done <- err
				return
			}
			if _, err := s.Seal(ctx, activity.SealResolution); err != nil {
				done <- fmt.Errorf("seal %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		if _, err := s.SignedSize(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
