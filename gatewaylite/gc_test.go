package gatewaylite

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "100")
	if prev := TuneGC(); prev != 100 || percent() != 100 {
		t.Fatalf("GOGC set by the user: returned %d, percent now %d; want 100 left alone", prev, percent())
	}
	os.Unsetenv("GOGC") // t.Setenv restores it
	if prev := TuneGC(); prev != 100 || percent() != GCPercent {
		t.Fatalf("GOGC unset: returned %d, percent now %d; want 100 and %d", prev, percent(), GCPercent)
	}
}

func percent() int {
	p := debug.SetGCPercent(0)
	debug.SetGCPercent(p)
	return p
}
