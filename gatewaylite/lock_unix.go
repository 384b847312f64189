//go:build unix

package gatewaylite

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// lockDatabase takes the gateway lock of db for the life of the process:
// an flock(2) on the lock file, which the kernel releases if the process
// dies, so a crash never leaves a stale lock behind.
func lockDatabase(db string) (release func() error, err error) {
	path := lockPath(db)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("gateway lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Path: path, PID: holderPID(f)}
		}
		return nil, fmt.Errorf("gateway lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() error {
		f.Truncate(0)
		return f.Close() // closing the descriptor releases the flock
	}, nil
}
