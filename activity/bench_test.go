package activity_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
)

// BenchmarkAppend measures the durable append rate: each commit is on disk
// (WAL, synchronous=FULL) before Write returns. Sub-benchmarks run side by
// side so their events/s can be compared in one run:
//
//	go test ./activity -run '^$' -bench Append -benchtime 2000x
func BenchmarkAppend(b *testing.B) {
	for _, bc := range []struct {
		name  string
		batch int
	}{{"one_transition_per_commit", 1}, {"batched_100_per_commit", 100}} {
		b.Run(bc.name, func(b *testing.B) {
			s, _ := activitytest.Open(b, activity.Options{})
			// One long-lived execution bouncing between states would break
			// the state machine, so append call records: the same log
			// write, chain, tree and projection work as a transition.
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(bc.batch, b.N-done)
				_, err := s.Write(ctx, func(w *activity.Tx) error {
					for range n {
						if _, err := w.RecordCall(activity.Call{Actor: "agent:bench", Method: "tools/call", Tool: "deploy_release",
							JSONRPCID: activity.Some("1"), Disposition: activity.DispositionRefused, Reason: "bench"}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				done += n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkLifecycle measures a whole execution (call, accept, authorized,
// dispatched, succeeded, delivered: 6 records) with each step committed
// durably on its own, as the gateway does.
func BenchmarkLifecycle(b *testing.B) {
	s, _ := activitytest.Open(b, activity.Options{})
	b.ResetTimer()
	for range b.N {
		var id activity.ExecutionID
		if _, err := s.Write(ctx, func(w *activity.Tx) error {
			c, err := w.RecordCall(activity.Call{Actor: "agent:bench", Method: "tools/call", Tool: "t", Disposition: activity.DispositionNewExecution})
			if err != nil {
				return err
			}
			e, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:bench", Tool: "t", Channel: activity.ChannelHTTP}, CreatedByCall: c.ID})
			id = e.ID
			return err
		}); err != nil {
			b.Fatal(err)
		}
		for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded, activity.StateDelivered} {
			if _, err := s.Write(ctx, func(w *activity.Tx) error {
				_, err := w.Transition(activity.Transition{ExecutionID: id, To: to})
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "executions/s")
}

// BenchmarkGatewayCall writes what one gateway tools/call writes, in the
// gateway's three commits: the call with accept, authorized and dispatched;
// the outcome with its result; the delivery. It reports CPU time per call
// (user+system, which the fsync wait does not count) beside the rate, as
// the committer's CPU is what bounds the gateway's throughput.
//
//	go test ./activity -run '^$' -bench GatewayCall -benchtime 2000x
func BenchmarkGatewayCall(b *testing.B) {
	s, _ := activitytest.Open(b, activity.Options{})
	var run activity.Run
	if _, err := s.Write(ctx, func(w *activity.Tx) error {
		var err error
		run, err = w.StartRun(activity.Run{Actor: "agent:bench", IdentifiedBy: activity.RunByToken})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	write := func(fn func(w *activity.Tx) error) {
		if _, err := s.Write(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := activitytest.CPUTime()
	b.ResetTimer()
	for i := range b.N {
		var e activity.Execution
		write(func(w *activity.Tx) error {
			fp := fmt.Sprintf("fp-%d", i)
			if _, err := w.LatestMatch(fp, "agent:bench", "run"); err != nil {
				return err
			}
			c, err := w.RecordCall(activity.Call{Actor: "agent:bench", Method: "tools/call", Tool: "deploy_release", RunID: run.ID,
				Arguments: []byte(`{"service":"api","version":"1.2.3"}`), Disposition: activity.DispositionNewExecution})
			if err != nil {
				return err
			}
			e, err = w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:bench", Tool: "deploy_release", Channel: activity.ChannelHTTP,
				Target: "http://127.0.0.1:9400/v1/releases", Method: "POST", Arguments: []byte(`{"service":"api","version":"1.2.3"}`), IntentScope: "run"},
				Fingerprint: fp, RunID: run.ID, CreatedByCall: c.ID, Contract: activity.ContractRepeatableWithKey})
			if err != nil {
				return err
			}
			if _, _, err := w.VaultLocked(); err != nil {
				return err
			}
			if e, err = w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateAuthorized}); err != nil {
				return err
			}
			e, err = w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateDispatched})
			return err
		})
		write(func(w *activity.Tx) error {
			ref, err := w.PutResult([]byte(`{"content":[{"type":"text","text":"ok"}]}`))
			if err != nil {
				return err
			}
			_, err = w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateSucceeded, TargetStatus: activity.Some(201), ResultRef: ref})
			return err
		})
		write(func(w *activity.Tx) error {
			_, err := w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateDelivered})
			return err
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric(float64((activitytest.CPUTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/call")
}

// BenchmarkDurableCommitFloor sets the gateway's first commit (the one
// durable write before dispatch: call, accept, authorized, dispatched)
// beside the least any durable write through this driver costs: one
// one-row INSERT committed with the same WAL and synchronous=FULL. The
// difference is what fewer statements and pages could still win; the
// floor is what no schema can. Each reports the WAL frames (pages) one
// commit writes: SQLite checksums and writes each, so a commit's CPU
// grows with them.
//
//	go test ./activity -run '^$' -bench DurableCommitFloor -benchtime 2000x
func BenchmarkDurableCommitFloor(b *testing.B) {
	b.Run("bare_one_row_commit", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "floor.db")
		dsn := "file:" + path +
			"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=wal_autocheckpoint(0)"
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		if _, err := db.Exec(`CREATE TABLE t(seq INTEGER PRIMARY KEY, v BLOB NOT NULL) STRICT`); err != nil {
			b.Fatal(err)
		}
		v := make([]byte, 400) // about one canonical call record
		frames := walFrames(b, path+"-wal")
		b.ResetTimer()
		for i := range b.N {
			tx, err := db.Begin()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(`INSERT INTO t(seq, v) VALUES(?, ?)`, i, v); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			frames.commit()
		}
		frames.report()
	})
	b.Run("gateway_first_commit", func(b *testing.B) {
		path := activitytest.SQLite.DB(b)
		s, err := activity.Open(ctx, path, activity.Options{KeyDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		var run activity.Run
		if _, err := s.Write(ctx, func(w *activity.Tx) error {
			var err error
			run, err = w.StartRun(activity.Run{Actor: "agent:bench", IdentifiedBy: activity.RunByToken})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		args := []byte(`{"service":"api","version":"1.2.3"}`)
		frames := walFrames(b, path+"-wal")
		b.ResetTimer()
		for i := range b.N {
			if _, err := s.Write(ctx, func(w *activity.Tx) error {
				fp := fmt.Sprintf("fp-%d", i)
				if _, err := w.LatestMatch(fp, "agent:bench", "run"); err != nil {
					return err
				}
				c, err := w.RecordCall(activity.Call{Actor: "agent:bench", Method: "tools/call", Tool: "deploy_release", RunID: run.ID,
					Arguments: args, Disposition: activity.DispositionNewExecution})
				if err != nil {
					return err
				}
				e, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:bench", Tool: "deploy_release", Channel: activity.ChannelHTTP,
					Target: "http://127.0.0.1:9400/v1/releases", Method: "POST", Arguments: args, IntentScope: "run"},
					Fingerprint: fp, RunID: run.ID, CreatedByCall: c.ID, Contract: activity.ContractRepeatableWithKey})
				if err != nil {
					return err
				}
				if e, err = w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateAuthorized}); err != nil {
					return err
				}
				_, err = w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateDispatched})
				return err
			}); err != nil {
				b.Fatal(err)
			}
			frames.commit()
		}
		frames.report()
	})
}

// walCounter adds up a WAL file's growth commit by commit. The store
// resets its WAL now and then (past 32 MiB), so a commit that finds the
// file shorter counts only what it finds.
type walCounter struct {
	b         *testing.B
	path      string
	last, sum int64
	commits   int
}

func walFrames(b *testing.B, path string) *walCounter {
	c := &walCounter{b: b, path: path}
	c.last = c.size()
	return c
}

func (c *walCounter) size() int64 {
	st, err := os.Stat(c.path)
	if err != nil {
		return 0 // not created yet, or just truncated
	}
	return st.Size()
}

func (c *walCounter) commit() {
	n := c.size()
	if n < c.last {
		c.last = 32 // a reset WAL starts again after its header
	}
	c.sum += n - c.last
	c.last = n
	c.commits++
}

// report gives frames per commit: each frame is a page and its 24-byte
// header.
func (c *walCounter) report() {
	if c.commits > 0 {
		c.b.ReportMetric(float64(c.sum)/float64(activity.DefaultPageSize+24)/float64(c.commits), "wal-pages/commit")
	}
}
