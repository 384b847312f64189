package importer

import (
	"os"
	"runtime/debug"
	"sync"
)

// importGCPercent is the collector's target while an import runs. An import
// allocates decode and encode buffers at a high rate while its live heap
// stays small (~30 MB), so at GOGC=100 the collector runs all the time.
// 200k records, two runs each: own export 6.35/6.46 s at 100, 5.50/5.58 s
// at 400; OTLP 10.9/11.4 s at 100, 10.1/9.2 s at 400; 800 gained nothing
// more and doubled the peak heap. The heap stays bounded: ~5× the live one.
const importGCPercent = 400

var gc struct {
	sync.Mutex
	users int // imports running
	prev  int // the percent to restore when the last one ends
}

// relaxGC raises the collector's target for the length of an import and
// returns the function that puts it back. A GOGC the user set is left as
// it is; overlapping imports restore it when the last one ends.
func relaxGC() (restore func()) {
	_, set := os.LookupEnv("GOGC")
	return relaxGCUnless(set)
}

func relaxGCUnless(userSet bool) (restore func()) {
	if userSet {
		return func() {}
	}
	gc.Lock()
	defer gc.Unlock()
	if gc.users == 0 {
		gc.prev = debug.SetGCPercent(importGCPercent)
		if gc.prev < 0 || gc.prev > importGCPercent {
			debug.SetGCPercent(gc.prev) // off or already higher: keep it
		}
	}
	gc.users++
	return func() {
		gc.Lock()
		defer gc.Unlock()
		if gc.users--; gc.users == 0 {
			debug.SetGCPercent(gc.prev)
		}
	}
}
