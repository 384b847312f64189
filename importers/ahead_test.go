package importers

import (
	"bytes"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestDecodeAheadBoundsBytes: however deep the queue, the lines parsed
// ahead of the writer stay within aheadBytes (plus the batch being
// filled), and every line is applied once, in order.
func TestDecodeAheadBoundsBytes(t *testing.T) {
	defer func(n int) { aheadBytes = n }(aheadBytes)
	aheadBytes = 256 << 10
	const lineLen, n, batch = 16 << 10, 400, 4
	path := filepath.Join(t.TempDir(), "big.jsonl")
	line := append(bytes.Repeat([]byte("x"), lineLen-1), '\n')
	if err := os.WriteFile(path, bytes.Repeat(line, n), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := openLines(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var parsed, applied, worst atomic.Int64
	var next int64 = 1
	k := &sink{file: path, rep: &FileReport{}}
	err = decodeAhead(ctx, in, k, batch, func(l []byte) (int, error) {
		parsed.Add(int64(len(l)))
		return len(l), nil
	}, func(ln int64, size int, _ error) error {
		if ln != next {
			t.Fatalf("applied line %d, want %d", ln, next)
		}
		next++
		if ahead := parsed.Load() - applied.Load(); ahead > worst.Load() {
			worst.Store(ahead)
		}
		applied.Add(int64(size))
		time.Sleep(50 * time.Microsecond) // a writer slower than the parser
		return nil
	})
	if err != nil || next != n+1 {
		t.Fatalf("applied %d lines, %v", next-1, err)
	}
	bound := int64(aheadBytes) + 2*batch*(lineLen-1)
	if worst.Load() > bound {
		t.Fatalf("%d bytes parsed ahead of the writer, bound %d", worst.Load(), bound)
	}
	t.Logf("at most %d KiB parsed ahead (bound %d KiB; without it %d KiB)", worst.Load()>>10, bound>>10, int64(aheadBatches*batch*(lineLen-1))>>10)
}

func TestByteBudget(t *testing.T) {
	b := newByteBudget(100)
	if !b.take(60) || !b.take(40) {
		t.Fatal("room refused")
	}
	got := make(chan bool)
	go func() { got <- b.take(10) }()
	select {
	case <-got:
		t.Fatal("took past the limit")
	case <-time.After(20 * time.Millisecond):
	}
	b.give(60)
	if !<-got {
		t.Fatal("no room after give")
	}
	b.give(50)
	if !b.take(500) {
		t.Fatal("an oversized take with nothing held must pass")
	}
	go func() { got <- b.take(1) }()
	b.close()
	if <-got {
		t.Fatal("take after close reported room")
	}
}
