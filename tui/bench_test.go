package tui

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/internal/termsafe"
)

// manySuspects makes n suspects by varying the ones the incident gives:
// every verdict, tool names and times spread out, ids unique.
func manySuspects(t testing.TB, m *Model, n int) []*analyze.Suspect {
	t.Helper()
	base, err := analyze.All(context.Background(), m.store, analyze.Options{})
	if err != nil || len(base) == 0 {
		t.Fatal("no suspects to copy")
	}
	out := make([]*analyze.Suspect, n)
	verdicts := analyze.Verdicts
	for i := range out {
		s := *base[i%len(base)]
		s.ID = fmt.Sprintf("sus_%026d", i)
		s.Tool = fmt.Sprintf("%s_%d", s.Tool, i%997)
		s.Verdict = verdicts[i%len(verdicts)]
		s.FirstAt = s.FirstAt.Add(time.Duration(i*7919%n) * time.Second)
		out[i] = &s
	}
	return out
}

// BenchmarkKeypress times what one key costs the console with 100,000
// suspects loaded: Update with the key, then View of the whole screen at
// 200×60, as the program does for every key. The goal is 16 ms (one
// frame at 60 Hz); ms/key and budget (ms/key over 16 ms) are reported.
//
//	go test ./tui -run '^$' -bench Keypress
func BenchmarkKeypress(b *testing.B) {
	const n = 100_000
	keys := []struct {
		name string
		keys []tea.KeyMsg // pressed in turn, one per op
		pre  []tea.KeyMsg // pressed once before timing
	}{
		{"down", []tea.KeyMsg{runes("j")}, nil},
		{"page_down_up", []tea.KeyMsg{keyOf(tea.KeyPgDown), keyOf(tea.KeyPgUp)}, nil},
		{"sort", []tea.KeyMsg{runes("s")}, nil},
		{"filter_first_letter", []tea.KeyMsg{runes("e"), keyOf(tea.KeyBackspace)}, []tea.KeyMsg{runes("/")}},
		{"filter_type", []tea.KeyMsg{runes("x"), keyOf(tea.KeyBackspace)}, []tea.KeyMsg{runes("/"), runes("d"), runes("e"), runes("p")}},
		{"open_detail_back", []tea.KeyMsg{keyOf(tea.KeyEnter), keyOf(tea.KeyEsc)}, nil},
		{"tab", []tea.KeyMsg{keyOf(tea.KeyTab)}, nil},
	}
	for _, k := range keys {
		b.Run(k.name, func(b *testing.B) {
			m, _, _ := newTestModel(b, 200, 60)
			m.Update(suspectsMsg{gen: m.gen, suspects: manySuspects(b, m, n-len(m.suspects.All())), done: true})
			if _, total, _ := m.suspects.Counts(); total != n {
				b.Fatalf("%d suspects loaded", total)
			}
			for _, km := range k.pre {
				m.Update(km)
			}
			b.ResetTimer()
			for i := range b.N {
				m.Update(k.keys[i%len(k.keys)])
				_ = m.View()
			}
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / 1e6
			b.ReportMetric(per, "ms/key")
			b.ReportMetric(per/16, "budget")
		})
	}
}

// BenchmarkLoad100k times streaming 100,000 suspects into the list in
// the batches the loader sends (64, then 8,192), with every sort order
// kept up to date as they arrive.
func BenchmarkLoad100k(b *testing.B) {
	m, _, _ := newTestModel(b, 200, 60)
	more := manySuspects(b, m, 100_000)
	b.ResetTimer()
	for range b.N {
		m.suspects.SetSuspects(nil)
		m.Update(suspectsMsg{gen: m.gen, suspects: more[:64]})
		for i := 64; i < len(more); i += 8192 {
			m.Update(suspectsMsg{gen: m.gen, suspects: more[i:min(i+8192, len(more))]})
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/load")
}

// BenchmarkScrubSuspect times what scrubbing costs a suspect as the
// console loads it (termsafe.Scrub walks every string it holds), beside
// the load of the same suspects into the list:
//
//	go test ./tui -run '^$' -bench 'ScrubSuspect|Load100k'
func BenchmarkScrubSuspect(b *testing.B) {
	m, _, _ := newTestModel(b, 200, 60)
	sus := manySuspects(b, m, 1000)
	b.ResetTimer()
	for i := range b.N {
		termsafe.Scrub(sus[i%len(sus)])
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/suspect")
}

// BenchmarkConsoleMemory opens the console on a store with about 100,000
// suspects (1.3M records of activitytest.FillMixed, every second execution
// retried; built once into the temp directory, minutes) and reports the
// heap the loaded console keeps (after a GC) and its peak while loading:
//
//	go test ./tui -run '^$' -bench ConsoleMemory -benchtime 1x -timeout 60m
func BenchmarkConsoleMemory(b *testing.B) {
	path, keyDir := activitytest.Cached(b, "console-100k-suspects", func(ctx context.Context, s *activity.Store) error {
		return activitytest.FillMixed(ctx, s, 1_300_000, 3000, 2)
	})
	s, err := activity.Open(context.Background(), path, activity.Options{ReadOnly: true, KeyDir: keyDir})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var kept, peak float64
	var suspects int
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		stop := activitytest.PeakHeap()
		m := New(s, Options{Poll: -1})
		m.Update(tea.WindowSizeMsg{Width: 200, Height: 60})
		run(m, m.Init())
		peak = stop()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		kept = float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
		_, suspects, _ = m.suspects.Counts()
		runtime.KeepAlive(m)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/load")
	b.ReportMetric(float64(suspects), "suspects")
	b.ReportMetric(kept, "MB-kept")
	b.ReportMetric(peak, "MB-peak")
}
