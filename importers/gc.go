package importers

// importGCPercent is the collector's target while an import runs
// (gctune.Raise). An import allocates decode and encode buffers at a high
// rate while its live heap stays small (~30 MB), so at GOGC=100 the
// collector runs all the time. 200k records, two runs each: own export
// 6.35/6.46 s at 100, 5.50/5.58 s at 400; OTLP 10.9/11.4 s at 100,
// 10.1/9.2 s at 400; 800 gained nothing more and doubled the peak heap.
// The heap stays bounded: ~5× the live one.
const importGCPercent = 400
