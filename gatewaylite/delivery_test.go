package gatewaylite_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
)

// The agent gives up (its connection is cut) while the target acts: in
// either era the result is recorded as not delivered, the retry gets it
// with a text that says so, and that delivery is recorded.
func TestCutBeforeResultIsRecordedUndelivered(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			h := newHarness(t, "")
			cs := h.connect(era, false)
			args := map[string]any{"service": "billing", "version": "7"}
			hold := make(chan struct{})
			h.target.SetHold(hold)
			cctx, cancel := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: args})
				errc <- err
			}()
			waitFor(t, func() bool { return h.target.Total() == 1 }, "the target to act")
			cancel()
			if err := <-errc; err == nil {
				t.Fatal("the cancelled call returned a result")
			}
			// The client is gone: without this, the 2025-era client could
			// still be resuming its stream (GET with Last-Event-ID) when the
			// result is written, and get it (seen once in CI, under load).
			cs.Close()
			h.target.SetHold(nil)
			close(hold)
			es := h.executions("deploy_release")
			if len(es) != 1 {
				t.Fatalf("%d executions", len(es))
			}
			e := h.waitState(es[0].ID, activity.StateNotDelivered, activity.StateDelivered)
			if e.State != activity.StateNotDelivered {
				t.Fatalf("%s: a cut before the result was written is recorded %s (%s)", era, e.State, h.path(e.ID))
			}
			res := mustCall(t, h.connect(era, false), "deploy_release", args, nil)
			if m := execMeta(t, res); m["replayed"] != true || !strings.Contains(resultText(res), "its result was not delivered then") {
				t.Fatalf("retry: %v %s", m, resultText(res))
			}
			h.waitState(e.ID, activity.StateDelivered)
			// Once delivered, a further repeat says so.
			time.Sleep(50 * time.Millisecond)
			res = mustCall(t, h.connect(loopback.ProtocolStateless, false), "deploy_release", args, nil)
			if !strings.Contains(resultText(res), "its result was written to the agent at") {
				t.Fatalf("repeat after delivery: %s", resultText(res))
			}
			if h.target.Total() != 1 {
				t.Fatalf("the target acted %d times", h.target.Total())
			}
		})
	}
}
