package gatewaylite

import (
	"os"
	"runtime/debug"
)

// GCPercent is the collector's target a gateway process runs with. Its
// live heap is small (a few MB) while every call allocates JSON-RPC,
// HTTP and SQLite buffers, so at GOGC=100 the collector ran constantly:
// 14% of the CPU in BenchmarkToolsCall, whose 2,000 calls at one client
// went from p50 5.95/5.26 ms to 4.63/3.86 ms at 400 (runs alternated).
const GCPercent = 400

// TuneGC sets this process's collector target to GCPercent, unless GOGC
// is set in the environment, and returns the previous percent. It is for
// a process whose job is the gateway (mcpdup gateway, its benchmark); a
// program embedding the gateway decides for itself.
func TuneGC() (previous int) {
	if _, set := os.LookupEnv("GOGC"); set {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return p
	}
	return debug.SetGCPercent(GCPercent)
}
