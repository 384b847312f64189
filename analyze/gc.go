package analyze

// GCPercent is the collector's target for a one-shot analysis of a whole
// log (mcpdup analyze, history --check; gctune.Raise): the scan allocates
// a key per call and a batch of rows per group while its live heap stays
// at ~40 MB, so at GOGC=100 the collector ran all the time. At ~1M calls
// (BenchmarkAnalyze -analyze.records 6000000, GOGC from the environment,
// interleaved): 4.80 s at 100 against 3.90 s at 400, peak heap 41 → 102
// MB; the CLI's user CPU 8.7 → 6.8–7.0 s, peak RSS 91 → 150–170 MB. The
// heap stays bounded (~5× the live one, itself independent of the number
// of suspects). The console keeps the default: it stays open beside a
// gateway, and its resident memory is what an operator's laptop pays.
const GCPercent = 400
