package importer

import (
	"runtime/debug"
	"testing"
)

func TestRelaxGCLeavesTheUsersGOGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	end := relaxGCUnless(true)
	if got := percent(); got != 100 {
		t.Fatalf("GOGC set by the user: percent %d during an import, want 100 untouched", got)
	}
	end()
}

func TestRelaxGCNests(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	end1 := relaxGCUnless(false)
	end2 := relaxGCUnless(false)
	if got := percent(); got != importGCPercent {
		t.Fatalf("during two imports: percent %d, want %d", got, importGCPercent)
	}
	end1()
	if got := percent(); got != importGCPercent {
		t.Fatalf("one import still running: percent %d, want %d", got, importGCPercent)
	}
	end2()
	if got := percent(); got != 100 {
		t.Fatalf("after both imports: percent %d, want 100 restored", got)
	}

	debug.SetGCPercent(800)
	end := relaxGCUnless(false)
	if got := percent(); got != 800 {
		t.Fatalf("a higher percent already set: %d during an import, want 800 kept", got)
	}
	end()
	if got := percent(); got != 800 {
		t.Fatalf("a higher percent already set: %d after an import, want 800", got)
	}
}

func percent() int {
	p := debug.SetGCPercent(0)
	debug.SetGCPercent(p)
	return p
}
