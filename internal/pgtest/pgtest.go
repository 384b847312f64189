// Package pgtest gives tests a real PostgreSQL server they start
// themselves, as the SSH tests start sshd: initdb into a temporary
// directory, postgres listening only on a unix socket inside it, stopped
// when the tests end. MCPDUP_TEST_POSTGRES (a postgres:// URL) points the
// tests at an existing server instead; each test still gets a database of
// its own there.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvServer names an existing server to use instead of a throwaway one.
const EnvServer = "MCPDUP_TEST_POSTGRES"

var (
	once    sync.Once
	shared  *Server
	initErr error
	dbSeq   atomic.Int64
)

// Main runs a package's tests and stops the cluster they started, if any.
// Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the cluster DB started, if it did; for a TestMain that
// has more to do than Main.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

// DB returns the URL of a new, empty database, dropped when tb ends. The
// server is started on first use.
func DB(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		if u := os.Getenv(EnvServer); u != "" {
			shared, initErr = &Server{url: u}, nil
			return
		}
		shared, initErr = Start()
	})
	if initErr != nil {
		tb.Fatalf("postgres: %v", initErr)
	}
	return shared.NewDB(tb)
}

// NewDB creates a new, empty database on s, dropped when tb ends, and
// returns its URL.
func (s *Server) NewDB(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	if err := s.exec(fmt.Sprintf("CREATE DATABASE %s", name)); err != nil {
		tb.Fatalf("postgres: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.exec(fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			tb.Errorf("postgres: %v", err)
		}
	})
	return s.URL(name)
}

// Own starts a cluster for tb alone, stopped when tb ends: for a test
// that pauses its server (MCPDUP_TEST_POSTGRES's is not ours to pause).
func Own(tb testing.TB) *Server {
	tb.Helper()
	s, err := Start()
	if err != nil {
		tb.Fatalf("postgres: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Pause stops every process of a server Start ran (SIGSTOP): it keeps
// its connections and answers nothing, as a server frozen or cut off
// does, until resume (also run when tb ends).
func (s *Server) Pause(tb testing.TB) (resume func()) {
	tb.Helper()
	if s.cmd == nil {
		tb.Fatal("pgtest: Pause needs a server the tests started (Own)")
	}
	pids := append([]int{s.cmd.Process.Pid}, children(s.cmd.Process.Pid)...)
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGSTOP)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGCONT)
			}
		})
	}
	tb.Cleanup(resume)
	return resume
}

// children lists the processes whose parent is pid (from /proc).
func children(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, child)
		}
	}
	return out
}

// Server is a PostgreSQL server the tests use.
type Server struct {
	url string    // an existing server's URL; empty for one Start ran
	dir string    // data directory and socket directory's parent
	cmd *exec.Cmd // the postmaster
}

// URL returns the URL of database name on the server.
func (s *Server) URL(name string) string {
	if s.url != "" {
		u, err := url.Parse(s.url)
		if err != nil {
			return s.url
		}
		u.Path = "/" + name
		return u.String()
	}
	q := url.Values{"host": {s.dir}, "user": {"mcpdup"}}
	return "postgres:///" + name + "?" + q.Encode()
}

func (s *Server) exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

// Start initialises a cluster in a new temporary directory and starts it
// on a unix socket there. As root it runs as the postgres user (or
// nobody): postgres refuses to run as root.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mcpdup-pg-")
	if err != nil {
		return nil, err
	}
	cred, err := runAs(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "mcpdup", "-A", "trust",
		"--no-locale", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir,
		"-c", "listen_addresses=", "-c", "max_connections=300", "-c", "shared_buffers=64MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: a test binary that is killed takes its server with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &Server{dir: dir, cmd: cmd}
	if err := s.waitReady(30 * time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
		s.Stop()
		return nil, fmt.Errorf("%w\n%s", err, log)
	}
	return s, nil
}

func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := s.exec("SELECT 1")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after %v: %w", limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop shuts a started server down (fast: clients are disconnected) and
// removes its directory. Stopping a server the tests did not start does
// nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(s.dir)
}

// binDir finds initdb and postgres: on PATH, or where distributions put
// them (Debian's /usr/lib/postgresql/N/bin, RHEL's /usr/pgsql-N/bin).
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	var found []string
	for _, pat := range []string{"/usr/lib/postgresql/*/bin/initdb", "/usr/pgsql-*/bin/initdb", "/usr/local/pgsql/bin/initdb"} {
		m, _ := filepath.Glob(pat)
		found = append(found, m...)
	}
	if len(found) == 0 {
		return "", errors.New("initdb not found (install PostgreSQL's server package, or set " + EnvServer + " to a postgres:// URL)")
	}
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	return filepath.Dir(found[0]), nil
}

// version is the major version in a path like /usr/lib/postgresql/15/bin.
func version(p string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
	return n
}

// runAs returns the credential to run the server with, and gives it dir:
// nil when not root.
func runAs(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("running as root and no postgres or nobody user to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
