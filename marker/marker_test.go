package marker

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRunRecordsExitAndOutput(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	code, err := Run(dir, "act_01", "", []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, &out, &out)
	if err != nil || code != 3 {
		t.Fatalf("run: %d %v", code, err)
	}
	rec, err := Status(dir, "act_01")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(rec.Output))
	if rec.State != Done || rec.ExitCode == nil || *rec.ExitCode != 3 || !strings.Contains(rec.Output, "out\n") || !strings.Contains(rec.Output, "err\n") ||
		rec.OutputSHA256 != hex.EncodeToString(sum[:]) || rec.PID == 0 || rec.FinishedAt.Before(rec.StartedAt) {
		t.Fatalf("record: %+v", rec)
	}
	if !strings.Contains(out.String(), "out") {
		t.Fatal("the output must also reach the caller")
	}
	st, _ := os.Stat(filepath.Join(dir, "act_01.json"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("marker file mode %v", st.Mode())
	}
}

// TestRunsOnce: a second start of an id is refused before the command
// runs, also when many start at once; the effect happens exactly once.
func TestRunsOnce(t *testing.T) {
	dir := t.TempDir()
	effect := filepath.Join(dir, "effect")
	cmd := []string{"sh", "-c", `echo x >> "$0"`, effect}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran, refused := 0, 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := Run(dir, "act_same", "", cmd, io.Discard, io.Discard)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ran++
			case errors.Is(err, ErrStarted):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, _ := os.ReadFile(effect)
	if ran != 1 || refused != 7 || string(b) != "x\n" {
		t.Fatalf("ran %d, refused %d, effect %q", ran, refused, b)
	}
	if _, err := Run(dir, "act_same", "", cmd, io.Discard, io.Discard); !errors.Is(err, ErrStarted) {
		t.Fatalf("a later start: %v", err)
	}
}

func TestStatusStates(t *testing.T) {
	dir := t.TempDir()
	if rec, err := Status(dir, "act_none"); err != nil || rec.State != Absent {
		t.Fatalf("absent: %+v %v", rec, err)
	}
	for _, bad := range []string{"../x", "a/b", "", ".", "a b"} {
		if _, err := Status(dir, bad); err == nil {
			t.Errorf("id %q accepted", bad)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(dir, "act_slow", "", []string{"sleep", "1"}, io.Discard, io.Discard)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, _ := Status(dir, "act_slow")
		if rec.State == Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never seen running: %+v", rec)
		}
		time.Sleep(10 * time.Millisecond)
	}
	<-done
	if rec, _ := Status(dir, "act_slow"); rec.State != Done || *rec.ExitCode != 0 {
		t.Fatalf("after: %+v", rec)
	}
	// A start recorded by a process that is gone, with no end: lost.
	gone := exec.Command("true")
	gone.Run()
	write(filepath.Join(dir, "act_lost.json"), Record{ID: "act_lost", State: Running, PID: gone.Process.Pid, StartedAt: time.Now()})
	if rec, _ := Status(dir, "act_lost"); rec.State != Lost {
		t.Fatalf("lost: %+v", rec)
	}
	// Claimed but never recorded as started: lost too, not absent.
	os.WriteFile(filepath.Join(dir, "act_claimed.claim"), nil, 0o600)
	if rec, _ := Status(dir, "act_claimed"); rec.State != Lost {
		t.Fatalf("claimed: %+v", rec)
	}
}

// TestArgumentsAreData: argv goes to the program as is, never through a
// shell: separators, quotes, substitutions and newlines are data.
func TestArgumentsAreData(t *testing.T) {
	dir := t.TempDir()
	arg := "a; touch " + filepath.Join(dir, "pwned") + " $(touch " + filepath.Join(dir, "pwned2") + ") `id` \"q\" 'r'\nsecond line"
	code, err := Run(dir, "act_args", "", []string{"printf", "%s", arg}, io.Discard, io.Discard)
	if err != nil || code != 0 {
		t.Fatal(code, err)
	}
	rec, _ := Status(dir, "act_args")
	if rec.Output != arg {
		t.Fatalf("output %q, want %q", rec.Output, arg)
	}
	for _, f := range []string{"pwned", "pwned2"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Fatalf("%s exists: an argument ran as code", f)
		}
	}
}

func TestOutputBounded(t *testing.T) {
	dir := t.TempDir()
	code, err := Run(dir, "act_big", "", []string{"sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x"}, io.Discard, io.Discard)
	if err != nil || code != 0 {
		t.Fatal(code, err)
	}
	rec, _ := Status(dir, "act_big")
	sum := sha256.Sum256([]byte(strings.Repeat("x", 200000)))
	if len(rec.Output) != MaxOutput || !rec.OutputTruncated || rec.OutputSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("kept %d bytes, truncated %v", len(rec.Output), rec.OutputTruncated)
	}
}

// TestCommandNotFound: a command that cannot start exits 127, as a shell
// says it, on stderr and in the record (it said nothing, and its record
// had an empty output digest).
func TestCommandNotFound(t *testing.T) {
	dir := t.TempDir()
	var stderr strings.Builder
	code, err := Run(dir, "act_nf", "", []string{"/nonexistent/cmd"}, io.Discard, &stderr)
	rec, _ := Status(dir, "act_nf")
	if err != nil || code != 127 || rec.State != Done || *rec.ExitCode != 127 {
		t.Fatalf("%d %v %+v", code, err, rec)
	}
	if !strings.Contains(stderr.String(), "/nonexistent/cmd") || rec.Output != stderr.String() || rec.OutputSHA256 == "" {
		t.Fatalf("stderr %q, record output %q, digest %q", stderr.String(), rec.Output, rec.OutputSHA256)
	}
}
