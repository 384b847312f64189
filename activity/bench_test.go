package activity_test

import (
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
				_, err := s.Write(ctx, func(w *activity.Writer) error {
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
		if _, err := s.Write(ctx, func(w *activity.Writer) error {
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
			if _, err := s.Write(ctx, func(w *activity.Writer) error {
				_, err := w.Transition(activity.Transition{ExecutionID: id, To: to})
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "executions/s")
}
