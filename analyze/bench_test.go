package analyze_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/analyze"
)

// BenchmarkAnalyze times suspect detection plus the five-question walk
// over a 1,000,000-record store in which one execution in 20 is retried
// (half attached, half duplicated), calls 100ms apart (about 4.7 hours of
// traffic). The store is built once and kept in the temp directory (about
// two minutes; activitytest.MillionMixed). It reports the peak heap, which stays flat as the store
// grows: calls are streamed and only groups still inside their window are
// held.
//
//	go test ./analyze -run '^$' -bench Analyze -benchtime 3x
//
// -analyze.records 6000000 runs it on a store of about a million calls
// (built once: about ten minutes, 5 GB).
var benchRecords = flag.Int("analyze.records", 1_000_000, "records in BenchmarkAnalyze's store")

func BenchmarkAnalyze(b *testing.B) {
	path, keys := activitytest.Mixed(b, *benchRecords)
	s, err := activity.Open(ctx, path, activity.Options{ReadOnly: true, KeyDir: keys})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	peak := activitytest.PeakHeap()
	b.ResetTimer()
	var counts analyze.Counts
	for range b.N {
		counts = analyze.Counts{}
		err := analyze.Scan(ctx, s, analyze.Options{}, func(sus *analyze.Suspect) error {
			counts.Add(sus)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(counts.Total()), "suspects")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/analysis")
	b.ReportMetric(peak(), "peak-heap-MB")
	b.Logf("verdicts: %s", counts)
}

// BenchmarkHistoryCheck runs the history checker over the same
// 1,000,000-record store two ways, side by side: the Checker over the
// history in log order (its maps grow with the executions) and Check,
// which folds it grouped by effect and holds one group at a time. Both
// report their peak heap and time.
//
//	go test ./analyze -run '^$' -bench HistoryCheck -benchtime 2x
func BenchmarkHistoryCheck(b *testing.B) {
	path, keys := activitytest.MillionMixed(b)
	s, err := activity.Open(ctx, path, activity.Options{ReadOnly: true, KeyDir: keys})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		name string
		run  func() (analyze.CheckResult, error)
	}{
		{"log-order", func() (analyze.CheckResult, error) {
			c := analyze.NewChecker()
			err := analyze.History(ctx, s, func(op analyze.Op) error { c.Add(op); return nil })
			return c.Result(), err
		}},
		{"by-effect", func() (analyze.CheckResult, error) { return analyze.Check(ctx, s) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			peak := activitytest.PeakHeap()
			var res analyze.CheckResult
			for range b.N {
				if res, err = c.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/check")
			b.ReportMetric(peak(), "peak-heap-MB")
			b.ReportMetric(float64(res.Invocations), "invocations")
			b.ReportMetric(float64(res.Duplicated), "duplicated")
		})
	}
}

// BenchmarkAnalyzeEngines analyses the same FillMixed traffic on SQLite
// and on PostgreSQL (a cluster the benchmark starts), side by side: the
// time to the first suspect (what the console's first frame waits on),
// the whole analysis, and the store's build. The PostgreSQL store is built
// each run (its cluster is thrown away); -analyze.engine-records sets the
// size (6000000 is about a million calls).
//
//	go test ./analyze -run '^$' -bench AnalyzeEngines -benchtime 1x
var engineRecords = flag.Int("analyze.engine-records", 200_000, "records in BenchmarkAnalyzeEngines' stores")

func BenchmarkAnalyzeEngines(b *testing.B) {
	for _, eng := range activitytest.Engines {
		b.Run(string(eng), func(b *testing.B) {
			db, keys := eng.DB(b), filepath.Join(b.TempDir(), "keys")
			w, err := activity.Open(ctx, db, activity.Options{KeyDir: keys})
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := activitytest.FillMixed(ctx, w, *engineRecords, 3000, 20); err != nil {
				b.Fatal(err)
			}
			built := time.Since(t0)
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			s, err := activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keys})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var first time.Duration
			var counts analyze.Counts
			b.ResetTimer()
			for range b.N {
				counts = analyze.Counts{}
				start := time.Now()
				err := analyze.Scan(ctx, s, analyze.Options{}, func(sus *analyze.Suspect) error {
					if counts.Total() == 0 {
						first += time.Since(start)
					}
					counts.Add(sus)
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(counts.Total()), "suspects")
			b.ReportMetric(first.Seconds()/float64(b.N), "first-suspect-s")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/analysis")
			b.ReportMetric(built.Seconds(), "build-s")
		})
	}
}

// BenchmarkAnalyzeFloor sets the analysis beside the reads it cannot do
// without, on BenchmarkAnalyze's store (-analyze.records), side by side:
//
//   - count_in_engine: SQLite joins every call with its execution in time
//     order and counts them; nothing crosses into Go.
//
//   - two_columns: the same join returning each call's time and effect key,
//     the least a time-ordered grouping by effect must read.
//
//   - call_keys: every call as the analysis reads it (ScanCallKeys).
//
//   - whole_calls: every call whole (ScanCalls), as the analysis
//     read them before it read keys first.
//
//   - suspect_records: the executions, transitions and approvals of every
//     suspect, read in the analysis's batches: what the five questions
//     need.
//
//   - analysis: Scan, the two reads above overlapped on two goroutines,
//     plus grouping and the walk.
//
//     go test ./analyze -run '^$' -bench AnalyzeFloor -benchtime 2x -analyze.records 6000000 -timeout 60m
func BenchmarkAnalyzeFloor(b *testing.B) {
	path, keys := activitytest.Mixed(b, *benchRecords)
	s, err := activity.Open(ctx, path, activity.Options{ReadOnly: true, KeyDir: keys})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	raw := activitytest.SQLite.Raw(b, "file:"+path+"?mode=ro")
	raw.SetMaxOpenConns(1)
	var ids []activity.ExecutionID // every suspect's executions, in the order the analysis reads them
	seen := map[activity.ExecutionID]bool{}
	if err := analyze.Scan(ctx, s, analyze.Options{}, func(sus *analyze.Suspect) error {
		for _, c := range sus.Calls {
			if !seen[c.ExecutionID] {
				seen[c.ExecutionID] = true
				ids = append(ids, c.ExecutionID)
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	const join = ` FROM calls c JOIN executions e ON e.id = c.execution_id ORDER BY c.received_at, c.seq`
	rawRead := func(q string, dest ...any) func() (int, error) {
		return func() (int, error) {
			rows, err := raw.QueryContext(ctx, q)
			if err != nil {
				return 0, err
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				if err := rows.Scan(dest...); err != nil {
					return n, err
				}
				n++
			}
			return n, rows.Err()
		}
	}
	var count int
	var at, key string
	for _, c := range []struct {
		name string
		run  func() (int, error)
	}{
		{"count_in_engine", rawRead(`SELECT count(*)`+join, &count)},
		{"two_columns", rawRead(`SELECT c.received_at, e.effect_key`+join, &at, &key)},
		{"call_keys", func() (int, error) {
			n := 0
			err := s.ScanCallKeys(ctx, func(*activity.CallKey) error { n++; return nil })
			return n, err
		}},
		{"whole_calls", func() (int, error) {
			n := 0
			err := s.ScanCalls(ctx, func(*activity.CallRow) error { n++; return nil })
			return n, err
		}},
		{"suspect_records", func() (int, error) {
			n := 0
			for chunk := range slices.Chunk(ids, 900) { // as loadGroupRecords reads them
				execs, err := s.ExecutionsByID(ctx, chunk)
				if err != nil {
					return n, err
				}
				trs, err := s.TransitionsOf(ctx, chunk)
				if err != nil {
					return n, err
				}
				if _, err := s.ApprovalsOf(ctx, chunk); err != nil {
					return n, err
				}
				n += len(execs)
				for _, t := range trs {
					n += len(t)
				}
			}
			return n, nil
		}},
		{"analysis", func() (int, error) {
			n := 0
			err := analyze.Scan(ctx, s, analyze.Options{}, func(*analyze.Suspect) error { n++; return nil })
			return n, err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var n int
			cpu := activitytest.CPUTime()
			for range b.N {
				if n, err = c.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/op")
			b.ReportMetric((activitytest.CPUTime()-cpu).Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(n), "rows")
		})
	}
}

// BenchmarkRebuildHotEffect times the console's live step for one effect
// called all day: a new call arrives, and Rebuild brings that effect's
// suspects up to date. The effect has 1,000, 10,000 and 100,000 calls a
// minute apart (window an hour: a suspect every 61 calls), side by
// side; Rebuild analyses only the last group again, but it reads every
// call of the effect by its key to cut the windows, and names every
// suspect it keeps: without EffectCuts (-analyze.cuts=false) its time
// grows with the effect's history; with them (the console's) each reads
// from the effect's last group on. The first rebuild (reading the effect
// whole either way) is not timed. dense: 20,000 calls 100 ms apart (a
// tool polled ten times a second), so the last group, analysed again on
// every call, holds them all.
//
//	go test ./analyze -run '^$' -bench RebuildHotEffect -benchtime 5x
var benchCuts = flag.Bool("analyze.cuts", true, "BenchmarkRebuildHotEffect: rebuild with EffectCuts, as the console does")

func BenchmarkRebuildHotEffect(b *testing.B) {
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, hot := range []struct {
		calls int
		every time.Duration
		name  string
	}{{1_000, time.Minute, "calls=1000"}, {10_000, time.Minute, "calls=10000"}, {100_000, time.Minute, "calls=100000"},
		{20_000, 100 * time.Millisecond, "dense/calls=20000"}} {
		calls, every := hot.calls, hot.every
		b.Run(hot.name, func(b *testing.B) {
			path, keys := activitytest.Cached(b, fmt.Sprintf("hot-%d-%s", calls, every), func(ctx context.Context, s *activity.Store) error {
				return activitytest.FillHot(ctx, s, "hot", from, calls, every)
			})
			dir := b.TempDir()
			activitytest.CopyFile(b, path, filepath.Join(dir, "hot.db"))
			s, err := activity.Open(ctx, filepath.Join(dir, "hot.db"), activity.Options{KeyDir: keys})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			next := from.Add(time.Duration(calls) * every)
			opts := analyze.Options{}
			if *benchCuts {
				opts.Cuts = analyze.NewEffectCuts() // as the console: the first rebuild reads the effect whole
			}
			var kept, fresh, read int
			// One call arrives, then the rebuild (timed).
			step := func() {
				b.StopTimer()
				size, err := s.LogSize(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := activitytest.FillHot(ctx, s, "hot", next, 1, every); err != nil {
					b.Fatal(err)
				}
				next = next.Add(every)
				touched, err := analyze.TouchedSince(ctx, s, size)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				rebuilt, err := analyze.Rebuild(ctx, s, opts, touched)
				if err != nil {
					b.Fatal(err)
				}
				kept, fresh, read = len(rebuilt.Kept), len(rebuilt.Fresh), rebuilt.Read
			}
			step() // the console's first refresh, which reads the effect whole
			b.ResetTimer()
			for range b.N {
				step()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/rebuild")
			b.ReportMetric(float64(kept), "kept")
			b.ReportMetric(float64(fresh), "fresh")
			b.ReportMetric(float64(read), "calls-read")
		})
	}
}

// BenchmarkOneLargeGroup analyses one group of 60,000 calls of one effect
// (a busy endpoint's hour in a proxy log that records no bodies: every
// POST is one effect) two ways, side by side: listing the suspect whole,
// as before a suspect listed at most maxListed calls, and as it is now.
// It reports each way's peak heap; the verdict and answers are the same
// (TestPropertyListingCutKeepsTheAnswers).
//
//	go test ./analyze -run '^$' -bench OneLargeGroup -benchtime 3x
func BenchmarkOneLargeGroup(b *testing.B) {
	s, _ := activitytest.Open(b, activity.Options{})
	const calls = 60_000
	base := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	if _, err := s.WriteBulk(ctx, func(w *activity.Tx) error {
		src, err := w.AddSource(activity.Source{Format: "nginx"})
		if err != nil {
			return err
		}
		for i := range calls {
			at := base.Add(time.Duration(i) * 50 * time.Millisecond)
			prov := activity.Provenance{Source: src.ID, Line: int64(i + 1)}
			id := activity.NewExecutionID(at)
			if _, err := w.RecordCall(activity.Call{Actor: fmt.Sprintf("client:10.0.%d.%d", i%200, i%250), Method: "POST", Tool: "http",
				ReceivedAt: at, Disposition: activity.DispositionNewExecution, ExecutionID: id, Source: prov}); err != nil {
				return err
			}
			if _, err := w.Accept(activity.Execution{ID: id, Action: activity.Action{Actor: "client", Tool: "http", Channel: activity.ChannelHTTP,
				Target: "/api/events", Method: "POST"}, Source: prov, NotRecorded: []activity.Fact{activity.FactArguments, activity.FactIdempotencyKey},
				Times: activity.Times{Accepted: activity.Some(at)}}); err != nil {
				return err
			}
			for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded} {
				tr := activity.Transition{ExecutionID: id, To: to, At: activity.Some(at)}
				if to == activity.StateSucceeded {
					tr.TargetStatus = activity.Some(201)
				}
				if _, err := w.Transition(tr); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	for _, way := range []struct {
		name   string
		listed int
	}{{"listed_whole", calls}, {"listed_first_1000", 1000}} {
		b.Run(way.name, func(b *testing.B) {
			defer analyze.SetMaxListed(way.listed)()
			peak := activitytest.PeakHeap()
			var sus *analyze.Suspect
			for range b.N {
				all, err := analyze.All(ctx, s, analyze.Options{})
				if err != nil || len(all) != 1 {
					b.Fatalf("%d suspects, %v", len(all), err)
				}
				sus = all[0]
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/analysis")
			b.ReportMetric(peak(), "peak-heap-MB")
			b.ReportMetric(float64(len(sus.Executions)), "executions-listed")
			b.Logf("%s: %d calls, %s", way.name, sus.CallsTotal, sus.Verdict)
		})
	}
}
