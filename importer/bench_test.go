package importer

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/activity/audit"
)

var benchEvents = flag.Int("bench.events", 1_000_000, "events in the generated files the import benchmarks read")

// ownExportFile is an export of a store of about n gateway records,
// built once and kept in the temp directory.
func ownExportFile(b *testing.B, n int) string {
	path, keys := activitytest.Cached(b, fmt.Sprintf("verify-%d", n), func(ctx context.Context, s *activity.Store) error {
		return activitytest.Fill(ctx, s, n, 3000)
	})
	out := filepath.Join(filepath.Dir(path), "log.jsonl")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	s, err := activity.Open(ctx, path, activity.Options{KeyDir: keys})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	f, err := os.Create(out + ".tmp")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := audit.Export(ctx, s, f); err != nil {
		b.Fatal(err)
	}
	f.Close()
	if err := os.Rename(out+".tmp", out); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkImport imports generated files of -bench.events events into a
// fresh database per run and, side by side in the same run, times
// `jq -c . >/dev/null` over the same file: jq only parses, the import
// parses, checks and writes a chained, durable log. Reported: seconds
// each, events/s, and ratio = jq time / import time (≥ 1: faster than jq
// merely parsing).
//
//	go test ./importer -run '^$' -bench Import -benchtime 1x
func BenchmarkImport(b *testing.B) {
	cases := []struct {
		name string
		file func(*testing.B, int) string
	}{
		{"mcpdup_export", ownExportFile},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			path := c.file(b, *benchEvents)
			jq := jqSeconds(b, path)
			b.ResetTimer()
			var events int64
			for range b.N {
				b.StopTimer()
				s := newStore(b)
				b.StartTimer()
				rep, err := Import(ctx, s, path, Options{})
				if err != nil {
					b.Fatal(err)
				}
				events = rep.Lines
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(sec, "s/import")
			b.ReportMetric(jq, "s/jq")
			b.ReportMetric(float64(events)/sec, "events/s")
			b.ReportMetric(jq/sec, "ratio_vs_jq")
		})
	}
}

// jqSeconds times jq parsing the file (decompressed input is the same).
func jqSeconds(b *testing.B, path string) float64 {
	b.Helper()
	if _, err := exec.LookPath("jq"); err != nil {
		b.Fatal("the benchmark compares with jq: install it (apt-get install jq)")
	}
	start := time.Now()
	cmd := exec.Command("sh", "-c", `jq -c . "$1" >/dev/null`, "sh", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("jq: %v\n%s", err, out)
	}
	return time.Since(start).Seconds()
}
