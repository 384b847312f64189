package activity

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestBatchRolledBackWhenASavepointCannotBeReleased: a request that failed
// and whose savepoint could not be undone, or that succeeded and whose
// savepoint could not be released, may leave what it wrote in the shared
// transaction. Committing the batch then kept writes whose caller was
// told they failed (and a log chain the next request did not continue),
// so the whole batch is rolled back and every request in it fails.
func TestBatchRolledBackWhenASavepointCannotBeReleased(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "log.db"), Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	call := func(w *Tx) error {
		_, err := w.RecordCall(Call{Actor: "agent:a", Method: "tools/list", Disposition: DispositionRefused, Reason: "test"})
		return err
	}
	for attempt := 0; attempt < 20; attempt++ {
		before, err := s.LogSize(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Queued first, no caller waits on it: the committer lingers and
		// the next write shares its batch, as the first request (w0).
		first := s.WriteAsync(ctx, func(w *Tx) error {
			if err := call(w); err != nil {
				return err
			}
			return w.execNow("RELEASE w0") // the committer's own RELEASE then fails
		})
		_, second := s.Write(ctx, call)
		firstErr := <-first
		if second == nil {
			continue // the two did not share a batch this time (the first failed alone)
		}
		if firstErr == nil || !strings.Contains(second.Error(), "the batch it shared was rolled back") {
			t.Fatalf("first: %v; second: %v", firstErr, second)
		}
		after, err := s.LogSize(ctx)
		if err != nil || after != before {
			t.Fatalf("the log grew from %d to %d records (%v): a rolled-back batch was kept", before, after, err)
		}
		if _, err := s.Write(ctx, call); err != nil {
			t.Fatalf("the write after: %v", err)
		}
		if n, err := s.LogSize(ctx); err != nil || n != before+1 {
			t.Fatalf("after one more write the log holds %d records, want %d (%v)", n, before+1, err)
		}
		return
	}
	t.Fatal("the two writes never shared a batch in 20 attempts")
}
