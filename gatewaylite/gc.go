package gatewaylite

// GCPercent is the collector's target a gateway process runs with
// (gctune.Raise, from mcpdup gateway and BenchmarkToolsCall; a program
// embedding the gateway decides for itself). Its live heap is small (a
// few MB) while every call allocates JSON-RPC, HTTP and SQLite buffers,
// so at GOGC=100 the collector ran constantly: 14% of the CPU in
// BenchmarkToolsCall, whose 2,000 calls at one client went from p50
// 5.95/5.26 ms to 4.63/3.86 ms at 400 (runs alternated).
const GCPercent = 400
