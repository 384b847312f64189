package gatewaylite

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpdup/mcpdup/activity"
)

// LockedError is returned by New when another gateway process holds the
// database: its in-flight executions are its own, and recovering them
// would tell its agents "safe to retry" while it is still sending.
type LockedError struct {
	Path string // the lock file
	PID  int    // the holder, as it wrote itself into the file (0: unknown)
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("another gateway is running on this database: %s holds %s; stop it first (one gateway per SQLite database)", holder, e.Path)
}

// ExitCode makes a second gateway exit 2: a usage error, not a failure.
func (e *LockedError) ExitCode() int { return 2 }

// lockPath is the lock file of a database: beside it, so every process
// that opens the same file finds the same lock.
func lockPath(db string) string { return db + ".gateway.lock" }

// holderPID reads the pid a holder wrote into the lock file.
func holderPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid
}

// DatabaseLock is the gateway lock of a database, held until Release.
type DatabaseLock struct {
	release func() error
	once    sync.Once
	err     error
}

// LockDatabase takes the gateway lock of the database at path. Take it
// before the store is opened for writing: opening seals what a crashed
// writer left, which must not happen to a live gateway's tail.
func LockDatabase(path string) (*DatabaseLock, error) {
	if activity.IsPostgres(path) {
		// Replicas share it; each holds a lease instead.
		return &DatabaseLock{release: func() error { return nil }}, nil
	}
	release, err := lockDatabase(path)
	if err != nil {
		return nil, err
	}
	return &DatabaseLock{release: release}, nil
}

// Release lets the lock go; again is a no-op.
func (l *DatabaseLock) Release() error {
	l.once.Do(func() { l.err = l.release() })
	return l.err
}
