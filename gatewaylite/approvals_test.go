package gatewaylite_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
)

const perUseConfig = `
approval_timeout = "3s"
attach_wait = "300ms"
[credential.payments]
header = "X-Api-Key"
value_env = "TEST_DEPLOY_TOKEN"
per_use_approval = true

[[tool]]
name = "refund"
url = "{{proxy}}/v1/refunds"
credential_ref = "payments"
contract = "blocked_after_unknown"
`

func (h *harness) pendingApprovals() []activity.Approval {
	h.t.Helper()
	as, err := h.store.Approvals(ctx, true)
	if err != nil {
		h.t.Fatal(err)
	}
	return as
}

func (h *harness) waitApprovals(n int) []activity.Approval {
	h.t.Helper()
	waitFor(h.t, func() bool { return len(h.pendingApprovals()) == n }, "pending approvals")
	return h.pendingApprovals()
}

func TestPerUseApproval(t *testing.T) {
	for _, decision := range []activity.ApprovalState{activity.ApprovalApproved, activity.ApprovalDenied, activity.ApprovalExpired} {
		t.Run(string(decision), func(t *testing.T) {
			h := newHarness(t, perUseConfig)
			cs := h.connect(loopback.ProtocolStateless, false)
			args := map[string]any{"order": "o-17", "amount_cents": 900}
			first := make(chan *mcp.CallToolResult, 1)
			go func() { first <- mustCall(t, cs, "refund", args, nil) }()
			as := h.waitApprovals(1)
			if as[0].Kind != activity.ApprovalPerUse || as[0].CredentialRef != "payments" || !strings.Contains(as[0].Summary, "refund") {
				t.Fatalf("approval: %+v", as[0])
			}
			// A retry while the first call waits is told so, and asks nothing new.
			cs2 := h.connect(loopback.ProtocolLegacy, false)
			res := mustCall(t, cs2, "refund", args, nil)
			if m := execMeta(t, res); m["state"] != "accepted" || m["replayed"] != true {
				t.Fatalf("retry during approval: %v %s", m, resultText(res))
			}
			if got := len(h.pendingApprovals()); got != 1 {
				t.Fatalf("%d pending approvals after the retry, want 1", got)
			}
			if decision != activity.ApprovalExpired {
				if _, err := h.store.DecideApproval(ctx, as[0].ID, decision, "alice", "checked the order"); err != nil {
					t.Fatal(err)
				}
			}
			res = <-first
			m := execMeta(t, res)
			switch decision {
			case activity.ApprovalApproved:
				if m["state"] != "succeeded" || h.target.Total() != 1 {
					t.Fatalf("approved: %v %s (effects %d)", m, resultText(res), h.target.Total())
				}
			default:
				if m["state"] != "rejected" || !res.IsError || h.target.Total() != 0 || !strings.Contains(resultText(res), string(decision)) {
					t.Fatalf("%s: %v %s", decision, m, resultText(res))
				}
				if !strings.HasPrefix(resultText(res), "This call was refused") {
					t.Fatalf("first call's refusal: %s", resultText(res))
				}
				// The same ambiguous retry, in either era, gets the same
				// refusal, not a new prompt.
				for _, c := range []*mcp.ClientSession{cs, cs2} {
					res = mustCall(t, c, "refund", args, nil)
					if m := execMeta(t, res); m["state"] != "rejected" || len(h.pendingApprovals()) != 0 ||
						!strings.HasPrefix(resultText(res), "This retry is refused") || !strings.Contains(resultText(res), string(decision)) {
						t.Fatalf("retry after %s: %v %s", decision, m, resultText(res))
					}
				}
			}
			all, _ := h.store.Approvals(ctx, false)
			if len(all) != 1 {
				t.Fatalf("%d approvals recorded, want 1", len(all))
			}
		})
	}
}

func TestSessionGrantAsk(t *testing.T) {
	h := newHarness(t, `session_grant = "ask"`)
	cs := h.connect(loopback.ProtocolStateless, false)
	meta := mcp.Meta{"mcpdup.dev/run_id": "run-A"}
	first := make(chan *mcp.CallToolResult, 1)
	go func() {
		first <- mustCall(t, cs, "deploy_release", map[string]any{"service": "a", "version": "1"}, meta)
	}()
	as := h.waitApprovals(1)
	if as[0].Kind != activity.ApprovalSession {
		t.Fatalf("approval: %+v", as[0])
	}
	// A second call of the same run waits on the same session approval.
	second := make(chan *mcp.CallToolResult, 1)
	go func() {
		second <- mustCall(t, cs, "deploy_release", map[string]any{"service": "b", "version": "1"}, meta)
	}()
	time.Sleep(300 * time.Millisecond)
	if n := len(h.pendingApprovals()); n != 1 {
		t.Fatalf("%d pending approvals, want the one session approval", n)
	}
	if _, err := h.store.DecideApproval(ctx, as[0].ID, activity.ApprovalApproved, "bob", ""); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []chan *mcp.CallToolResult{first, second} {
		if res := <-ch; execMeta(t, res)["state"] != "succeeded" {
			t.Fatalf("after the session grant: %v", execMeta(t, res))
		}
	}
	// Later calls of the granted run need no approval.
	res := mustCall(t, cs, "deploy_release", map[string]any{"service": "c", "version": "1"}, meta)
	if execMeta(t, res)["state"] != "succeeded" || len(h.pendingApprovals()) != 0 {
		t.Fatalf("granted run: %v", execMeta(t, res))
	}
	run := h.run(h.executions("deploy_release")[0].RunID)
	if len(run.Grants) != 1 || run.Grants[0].GrantedBy != "operator:bob" {
		t.Fatalf("grants: %+v", run.Grants)
	}
}

// TestRetryNeverTakesOverAWaitingCall: a retry that reads a new execution
// in the moment between its acceptance committing and its call taking it
// in hand found it accepted with nobody on it and took it over: it
// authorized and dispatched the refund while its approval was pending.
// The call now holds it before its acceptance commits.
func TestRetryNeverTakesOverAWaitingCall(t *testing.T) {
	gap := make(chan struct{})
	var first atomic.Bool
	t.Cleanup(gatewaylite.SetAfterAccept(func() { // restored once the gateway has stopped
		if first.CompareAndSwap(false, true) {
			<-gap // the first call's only
		}
	}))
	h := newHarness(t, perUseConfig)
	cs := h.connect(loopback.ProtocolStateless, false)
	args := map[string]any{"order": "o-18", "amount_cents": 1200}
	answer := make(chan *mcp.CallToolResult, 1)
	go func() { answer <- mustCall(t, cs, "refund", args, nil) }()
	as := h.waitApprovals(1)
	// The first call is between its commit and its next step: a retry now.
	res := mustCall(t, h.connect(loopback.ProtocolLegacy, false), "refund", args, nil)
	close(gap)
	if m := execMeta(t, res); m["state"] != "accepted" || h.target.Total() != 0 {
		t.Fatalf("retry while the approval was pending: %v %s (effects at the target %d)", m, resultText(res), h.target.Total())
	}
	if _, err := h.store.DecideApproval(ctx, as[0].ID, activity.ApprovalDenied, "alice", "no"); err != nil {
		t.Fatal(err)
	}
	if m := execMeta(t, <-answer); m["state"] != "rejected" || h.target.Total() != 0 {
		t.Fatalf("denied: %v (effects %d)", m, h.target.Total())
	}
}

// TestManyCallsAwaitingApprovals: calls waiting on approvals each read
// their approval's row and then its record; each held one of the store's
// four read connections while asking for a second, so with four or more
// waiting every read of the store waited for good: other calls got no
// answer, the approvals never expired, and the gateway did not stop.
func TestManyCallsAwaitingApprovals(t *testing.T) {
	defer gatewaylite.SetApprovalPoll(time.Millisecond)() // all of them reading at once, all the time
	h := newHarness(t, strings.Replace(perUseConfig, `approval_timeout = "3s"`, `approval_timeout = "2s"`, 1))
	const waiting = 8
	answers := make(chan *mcp.CallToolResult, waiting)
	for i := range waiting {
		cs := h.connect(loopback.ProtocolStateless, false)
		go func() {
			answers <- mustCall(t, cs, "refund", map[string]any{"order": fmt.Sprintf("o-%d", i), "amount_cents": 100 + i}, nil)
		}()
	}
	h.waitApprovals(waiting)
	// An ordinary call is answered meanwhile.
	res := mustCall(t, h.connect(loopback.ProtocolStateless, false), "get_status", map[string]any{"service": "api"}, nil)
	if res.IsError {
		t.Fatalf("a read while %d calls wait on approvals: %s", waiting, resultText(res))
	}
	// And every waiting call ends when its approval expires.
	for range waiting {
		if m := execMeta(t, <-answers); m["state"] != "rejected" {
			t.Fatalf("a call whose approval expired: %v", m)
		}
	}
	if h.target.Total() != 0 {
		t.Fatalf("%d effects at the target, want none (no refund was approved)", h.target.Total())
	}
}
