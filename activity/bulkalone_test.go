package activity

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestBulkWriteCommitsAlone: a bulk write waiting with others never
// shares their transaction (it would run in a savepoint whose journal
// holds every page the import changes), and the others still commit.
func TestBulkWriteCommitsAlone(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "t.db"), Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	release := make(chan struct{})
	blocked := make(chan struct{})
	go s.Write(ctx, func(w *Tx) error { // holds the committer
		close(blocked)
		<-release
		return nil
	})
	<-blocked

	var mu sync.Mutex
	txs := map[string]*sql.Tx{}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, name := range []string{"a", "bulk", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn := func(w *Tx) error {
				mu.Lock()
				txs[name] = w.tx
				mu.Unlock()
				_, err := w.RecordCall(Call{Actor: "x", Method: "tools/call", Disposition: DispositionRefused, ReceivedAt: time.Now()})
				return err
			}
			var err error
			if name == "bulk" {
				_, err = s.WriteBulk(ctx, fn)
			} else {
				_, err = s.Write(ctx, fn)
			}
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond) // let all three wait on the committer
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(txs) != 3 {
		t.Fatalf("ran %d of 3 writes", len(txs))
	}
	if txs["bulk"] == txs["a"] || txs["bulk"] == txs["c"] {
		t.Fatal("the bulk write shared a transaction with another write")
	}
}
