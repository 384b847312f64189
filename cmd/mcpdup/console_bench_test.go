package main

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity/activitytest"
)

// BenchmarkConsoleMillion opens the real console binary in tmux on a
// 1,000,000-record database (activitytest.Mixed: built once, minutes;
// -console.records=6000000 is about a million calls) and reports, from
// the moment tmux starts it:
//
//   - first_frame_ms: the console's screen is up (tabs and status bar);
//   - first_suspects_ms: the first suspects are listed;
//   - listed_ms: the analysis has finished: every suspect is listed;
//   - loaded_ms: that, and the audit check says "verified" (the whole log
//     re-hashed and its checkpoint checked: it runs beside the analysis);
//   - peak_rss_MB: the process's peak resident memory (VmHWM) by then.
//
// Goals: first frame ≤ 1 s, peak RSS ≤ 300 MB.
//
//	go test ./cmd/mcpdup -run '^$' -bench ConsoleMillion -benchtime 3x
var consoleRecords = flag.Int("console.records", 1_000_000, "records in BenchmarkConsoleMillion's store")

func BenchmarkConsoleMillion(b *testing.B) {
	path, keys := activitytest.Mixed(b, *consoleRecords)
	bin := buildBinary(b)
	var frame, first, listed, loaded, rss float64
	for range b.N {
		start := time.Now()
		tm := startTmux(b, b.TempDir(), 160, 50, bin, "console", "--db", path, "--key-dir", keys, "--operator", "bench", "--no-live")
		tm.wait = 10 * time.Minute
		pid := strings.TrimSpace(tm.run("display-message", "-p", "-t", "e2e", "#{pane_pid}"))
		tm.pollFor(func(s string) bool { return strings.Contains(s, "? help") })
		frame += ms(time.Since(start))
		tm.pollFor(func(s string) bool { return strings.Contains(s, "sus_") })
		first += ms(time.Since(start))
		tm.pollFor(func(s string) bool { return !strings.Contains(s, "analysing") })
		listed += ms(time.Since(start))
		tm.pollFor(func(s string) bool {
			return strings.Contains(s, "audit ✓ verified") && !strings.Contains(s, "analysing")
		})
		loaded += ms(time.Since(start))
		rss = max(rss, peakRSS(b, pid))
		tm.keys("q")
		tm.waitExit()
	}
	n := float64(b.N)
	b.ReportMetric(frame/n, "first_frame_ms")
	b.ReportMetric(first/n, "first_suspects_ms")
	b.ReportMetric(listed/n, "listed_ms")
	b.ReportMetric(loaded/n, "loaded_ms")
	b.ReportMetric(rss, "peak_rss_MB")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// peakRSS reads a process's peak resident set (VmHWM) in MB.
func peakRSS(tb testing.TB, pid string) float64 {
	tb.Helper()
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb / 1024
		}
	}
	tb.Fatalf("no VmHWM in /proc/%s/status", pid)
	return 0
}
