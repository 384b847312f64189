// Package marker keeps durable state about a command on the host that runs
// it, keyed by execution id, so that after a dropped SSH session recovery
// can read what happened before anything is sent again: not started,
// started (and whether its process is still there), or done with its exit
// code and output. A marker id runs at most once: the claim is an
// exclusive create, and every state is written to a temporary file,
// synced, and renamed into place.
package marker

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// State is what a marker says.
type State string

const (
	Absent  State = "absent"  // never started: safe to send
	Running State = "running" // started, and its process is still there
	Done    State = "done"    // finished, exit code and output recorded
	// Lost: started, its process is gone, and it recorded no end (the host
	// rebooted, or the helper was killed): verification required.
	Lost State = "lost"
)

// Record is the marker file.
type Record struct {
	ID         string    `json:"id"`
	State      State     `json:"state"`
	Argv       []string  `json:"argv,omitempty"`
	Dir        string    `json:"dir,omitempty"` // working directory
	PID        int       `json:"pid,omitempty"` // the command's process
	HelperPID  int       `json:"helper_pid,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	Signal     string    `json:"signal,omitempty"` // when the command was killed by one
	// Output is the command's stdout and stderr interleaved, at most
	// MaxOutput bytes; OutputSHA256 covers all of it.
	Output          string `json:"output,omitempty"`
	OutputTruncated bool   `json:"output_truncated,omitempty"`
	OutputSHA256    string `json:"output_sha256,omitempty"`
}

// MaxOutput bounds the output a marker keeps.
const MaxOutput = 64 << 10

var idRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// ErrStarted is returned when an id has been started before.
var ErrStarted = errors.New("this id has already been started: a marker runs once")

func paths(dir, id string) (claim, state string, err error) {
	if !idRE.MatchString(id) || id == "." || id == ".." {
		return "", "", fmt.Errorf("marker id %q: use letters, digits, '_', '-' and '.' (at most 128)", id)
	}
	return filepath.Join(dir, id+".claim"), filepath.Join(dir, id+".json"), nil
}

// Run claims id in dir, records the start, runs argv with output going to
// stdout and stderr as well as to the marker, and records the end. It
// returns the command's exit code. SIGHUP and SIGPIPE are ignored, by the
// helper and the command: a dropped SSH session must not stop the command
// or its record.
func Run(dir, id, workdir string, argv []string, stdout, stderr io.Writer) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("no command to run")
	}
	// Before anything else: a refusal written to a dropped session must
	// still exit 125, not die of SIGPIPE.
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	claim, state, err := paths(dir, id)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(claim, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return 0, fmt.Errorf("marker %s: %w", id, ErrStarted)
	}
	if err != nil {
		return 0, err
	}
	f.Close()
	if err := syncDir(dir); err != nil {
		return 0, err
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = workdir
	out := &capture{max: MaxOutput, sum: sha256.New()}
	cmd.Stdout = &tee{w: stdout, c: out}
	cmd.Stderr = &tee{w: stderr, c: out}
	// Its own process group: a hang-up sent to the session's group does
	// not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	rec := Record{ID: id, State: Running, Argv: argv, Dir: workdir, HelperPID: os.Getpid(), StartedAt: time.Now().UTC()}
	if err := cmd.Start(); err != nil {
		// Not started (no such program, not executable): exit 127 as a
		// shell does, saying why on stderr as one does, and the record
		// keeps the same words, with their digest.
		code := 127
		why := fmt.Sprintf("mcpdup marker: %s: %v\n", argv[0], err)
		fmt.Fprint(stderr, why)
		sum := sha256.Sum256([]byte(why))
		rec.State, rec.ExitCode, rec.FinishedAt, rec.Output, rec.OutputSHA256 = Done, &code, time.Now().UTC(), why, hex.EncodeToString(sum[:])
		return code, write(state, rec)
	}
	rec.PID = cmd.Process.Pid
	if err := write(state, rec); err != nil {
		cmd.Process.Kill()
		return 0, err
	}
	werr := cmd.Wait()
	rec.State, rec.FinishedAt = Done, time.Now().UTC()
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		rec.Signal = ws.Signal().String()
		code = 128 + int(ws.Signal())
	}
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) {
		return 0, werr
	}
	rec.ExitCode = &code
	rec.Output, rec.OutputTruncated, rec.OutputSHA256 = out.String(), out.truncated, hex.EncodeToString(out.sum.Sum(nil))
	return code, write(state, rec)
}

// Status reads a marker: absent, running, lost or done.
func Status(dir, id string) (Record, error) {
	claim, state, err := paths(dir, id)
	if err != nil {
		return Record{}, err
	}
	b, err := os.ReadFile(state)
	if errors.Is(err, os.ErrNotExist) {
		if _, cerr := os.Stat(claim); cerr == nil {
			// Claimed, but the start was never recorded: the helper died
			// between the two writes, before starting the command.
			return Record{ID: id, State: Lost}, nil
		}
		return Record{ID: id, State: Absent}, nil
	}
	if err != nil {
		return Record{}, err
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, fmt.Errorf("marker %s: %w", state, err)
	}
	if rec.State == Running && !alive(rec.PID) {
		rec.State = Lost
	}
	return rec, nil
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// write replaces path with rec durably: temporary file, fsync, rename,
// fsync of the directory.
func write(path string, rec Record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".marker-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o600); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// capture keeps the first max bytes of the output and a digest of all.
type capture struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
	sum       interface {
		io.Writer
		Sum([]byte) []byte
	}
}

// write keeps p; the caller holds mu.
func (c *capture) write(p []byte) {
	c.sum.Write(p)
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
			c.truncated = true
		} else {
			c.buf.Write(p)
		}
	} else if len(p) > 0 {
		c.truncated = true
	}
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// tee copies to the caller's stream, ignoring its errors (the session may
// be gone), and always to the capture; stdout and stderr take turns, so
// the capture keeps their order.
type tee struct {
	w io.Writer
	c *capture
}

func (t *tee) Write(p []byte) (int, error) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.w != nil {
		t.w.Write(p)
	}
	t.c.write(p)
	return len(p), nil
}
