package gctune

import (
	"runtime/debug"
	"testing"
)

func TestRaiseNests(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	end1 := raise(400, false)
	end2 := raise(400, false)
	if got := percent(); got != 400 {
		t.Fatalf("during two raises: percent %d, want 400", got)
	}
	end1()
	if got := percent(); got != 400 {
		t.Fatalf("one raise still on: percent %d, want 400", got)
	}
	end2()
	if got := percent(); got != 100 {
		t.Fatalf("after both: percent %d, want 100 restored", got)
	}

	debug.SetGCPercent(800)
	end := raise(400, false)
	if got := percent(); got != 800 {
		t.Fatalf("a higher percent already set: %d while raised, want 800 kept", got)
	}
	end()
	if got := percent(); got != 800 {
		t.Fatalf("a higher percent already set: %d after, want 800", got)
	}
}

// A GOGC the user set, seen by raise or read from the environment by
// Raise, is left as it is.
func TestRaiseLeavesTheUsersGOGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for name, start := range map[string]func() func(){
		"raise":       func() func() { return raise(400, true) },
		"environment": func() func() { t.Setenv("GOGC", "100"); return Raise(400) },
	} {
		debug.SetGCPercent(100)
		end := start()
		if got := percent(); got != 100 {
			t.Fatalf("%s: GOGC set by the user: percent %d while raised, want 100 untouched", name, got)
		}
		end()
	}
}

func percent() int {
	p := debug.SetGCPercent(0)
	debug.SetGCPercent(p)
	return p
}
