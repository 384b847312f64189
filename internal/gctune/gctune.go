// Package gctune raises the Go collector's target for work that allocates
// fast over a small live heap (an import, the gateway's calls), where at
// the default GOGC=100 the collector runs all the time. A GOGC set in the
// environment is the user's choice and is left alone.
package gctune

import (
	"os"
	"runtime/debug"
	"sync"
)

var state struct {
	sync.Mutex
	users int // raises not yet restored
	prev  int // the percent to restore when the last one ends
}

// Raise sets the collector's target to at least percent until the
// returned function is called. Overlapping raises restore the original
// target when the last one ends; a target already higher, or the
// collector turned off, is kept.
func Raise(percent int) (restore func()) {
	_, set := os.LookupEnv("GOGC")
	return raise(percent, set)
}

func raise(percent int, userSet bool) (restore func()) {
	if userSet {
		return func() {}
	}
	state.Lock()
	defer state.Unlock()
	cur := debug.SetGCPercent(percent)
	if state.users == 0 {
		state.prev = cur
	}
	if cur < 0 || cur > percent {
		debug.SetGCPercent(cur) // off or already higher: keep it
	}
	state.users++
	return func() {
		state.Lock()
		defer state.Unlock()
		if state.users--; state.users == 0 {
			debug.SetGCPercent(state.prev)
		}
	}
}
