package gatewaylite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
)

func statusOf(t *testing.T, cs *mcp.ClientSession, id string) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res := mustCall(t, cs, gatewaylite.ToolExecutionStatus, map[string]any{"execution_id": id}, nil)
	sc, _ := res.StructuredContent.(map[string]any)
	return res, sc
}

// The agent asks instead of retrying: it looks an execution up by id and
// asks for an operator's verification of an unknown one, in both eras and
// across a gateway restart; another actor learns nothing; the inquiries
// are recorded and never count as retries.
func TestAgentAsksInsteadOfRetrying(t *testing.T) {
	t.Setenv("TEST_OTHER_TOKEN", otherToken)
	h := newHarness(t, secondActor)
	h.proxy.Next(loopback.DropResponse, loopback.DropResponse) // the send and its resend: both answers lost
	cs := h.connect(loopback.ProtocolLegacy, false)
	res := mustCall(t, cs, "deploy_release", map[string]any{"service": "pay", "version": "3"}, nil)
	m := execMeta(t, res)
	id, _ := m["id"].(string)
	if m["state"] != "unknown" {
		t.Fatalf("setup: %v %s", m, resultText(res))
	}
	for _, era := range eras {
		res, sc := statusOf(t, h.connect(era, false), id)
		if res.IsError || sc["state"] != "unknown" || !strings.Contains(resultText(res), id) {
			t.Fatalf("%s: status: %v %s", era, sc, resultText(res))
		}
	}
	stateless := h.connect(loopback.ProtocolStateless, false)
	res = mustCall(t, stateless, gatewaylite.ToolRequestVerification, map[string]any{"execution_id": id, "note": "the deploy API showed a 502"}, nil)
	if sc, _ := res.StructuredContent.(map[string]any); res.IsError || sc["state"] != "pending_verification" {
		t.Fatalf("verification request: %v %s", res.StructuredContent, resultText(res))
	}
	pending, _ := h.store.Executions(ctx, activity.ExecutionFilter{States: []activity.State{activity.StatePendingVerification}})
	if len(pending) != 1 || string(pending[0].ID) != id || !strings.Contains(pending[0].Error, "the deploy API showed a 502") {
		t.Fatalf("the operator's pending view: %+v", pending)
	}
	// Another actor cannot read or touch it.
	other, err := loopback.Connect(ctx, h.endpoint(false), otherToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if res, _ := statusOf(t, other, id); !res.IsError || strings.Contains(resultText(res), "pending") {
		t.Fatalf("another actor's lookup: %s", resultText(res))
	}

	// After a restart the answers come from the record.
	h.gw.Close()
	gw, err := gatewaylite.New(ctx, mustConfig(t, h, secondActor), h.store, gatewaylite.Options{KeyDir: filepath.Join(h.dir, "keys"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	mux := http.NewServeMux()
	mux.Handle("/mcp", gw.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, era := range eras {
		cs2, err := loopback.Connect(ctx, srv.URL+"/mcp", agentToken, era)
		if err != nil {
			t.Fatal(err)
		}
		if res, sc := statusOf(t, cs2, id); sc["state"] != "pending_verification" {
			t.Fatalf("%s after restart: %v %s", era, sc, resultText(res))
		}
		cs2.Close()
	}
	if _, _, err := h.store.Resolve(context.Background(), activity.Resolution{ExecutionID: activity.ExecutionID(id), Outcome: activity.ResolutionVerified, Operator: "alice", Note: "deploy 3 is live"}); err != nil {
		t.Fatal(err)
	}
	cs3, err := loopback.Connect(ctx, srv.URL+"/mcp", agentToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	defer cs3.Close()
	if res, sc := statusOf(t, cs3, id); sc["state"] != "verified" {
		t.Fatalf("after the operator verified: %v %s", sc, resultText(res))
	}
	// Inquiries are recorded, and none of them is a retry.
	if calls := h.calls(activity.ExecutionID(id)); len(calls) != 1 {
		t.Fatalf("%d calls attached to the execution, want only the first", len(calls))
	}
	if n := h.countCalls(`disposition = 'inquiry'`); n != 7 {
		t.Fatalf("%d inquiries recorded, want 7 (every lookup and request, the other actor's too)", n)
	}
	if h.target.Total() != 1 {
		t.Fatalf("the target acted %d times", h.target.Total())
	}
}

// countCalls counts recorded calls matching a SQL condition.
func (h *harness) countCalls(where string, args ...any) int {
	h.t.Helper()
	c, err := sql.Open("sqlite", "file:"+filepath.Join(h.dir, "gw.db")+"?mode=ro")
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	var n int
	if err := c.QueryRow(`SELECT count(*) FROM calls WHERE `+where, args...).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

func mustConfig(t *testing.T, h *harness, extra string) *gatewaylite.Config {
	t.Helper()
	cfg, err := gatewaylite.ParseConfig([]byte(testConfig(h.target.URL, h.proxy.URL, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// An inquiry's answer names an execution but does not deliver its
// result: a result not delivered stays not delivered after a verification
// request, and the next retry still gets it with the text that says so.
func TestInquiryDoesNotDeliver(t *testing.T) {
	h := newHarness(t, "")
	cs := h.connect(loopback.ProtocolStateless, false)
	// A result not delivered: the agent gives up while the target acts.
	// Under load the gateway can write the result before it sees the
	// client go (the write into the socket succeeds, and is recorded
	// delivered, truly), so the cut is tried again with another intent
	// until one result is not delivered.
	var id activity.ExecutionID
	for try := 0; id == "" && try < 5; try++ {
		args := map[string]any{"service": "billing", "version": fmt.Sprint(8 + try)}
		hold := make(chan struct{})
		h.target.SetHold(hold)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			cs.CallTool(cctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: args})
			close(done)
		}()
		waitFor(t, func() bool { return h.target.Total() == int64(try+1) }, "the target to act")
		cancel()
		<-done
		h.target.SetHold(nil)
		close(hold)
		es := h.executions("deploy_release") // oldest first
		e := es[len(es)-1]
		if h.waitState(e.ID, activity.StateNotDelivered, activity.StateDelivered).State == activity.StateNotDelivered {
			id = e.ID
		}
	}
	if id == "" {
		t.Fatal("every result was delivered although the agent had given up: 5 tries")
	}
	mustCall(t, cs, gatewaylite.ToolRequestVerification, map[string]any{"execution_id": string(id)}, nil)
	time.Sleep(100 * time.Millisecond) // deliveries are recorded in the background
	if e, _ := h.store.Execution(ctx, id); e.State != activity.StateNotDelivered {
		t.Fatalf("a verification request marked the result %s", e.State)
	}
}
