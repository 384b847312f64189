package gatewaylite

import (
	"fmt"
	"os"
	"strconv"
	"strings"
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
