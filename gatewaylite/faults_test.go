package gatewaylite_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
	"github.com/mcpdup/mcpdup/gatewaylite/gatewaytest"
)

// The fault-injection suite: each case cuts a real loopback connection at
// one point of the exchange and checks the state the execution ends in,
// the answer the agent gets, the answer its retry gets, and that the
// target acted at most once.

func TestFaultConnectionRefusedBeforeSend(t *testing.T) {
	h := newHarness(t, fmt.Sprintf(`
[[tool]]
name = "deploy_dead"
url = "%s/v1/releases"
contract = "repeatable_with_key"
`, gatewaytest.DeadURL()))
	cs := h.connect(loopback.ProtocolStateless, false)
	res := mustCall(t, cs, "deploy_dead", map[string]any{"service": "x"}, nil)
	m := execMeta(t, res)
	if !res.IsError || m["state"] != "failed_before_dispatch" || m["retry_safe"] != true {
		t.Fatalf("refused connection: %v %s", m, resultText(res))
	}
	es := h.executions("deploy_dead")
	if got := h.path(es[0].ID); got != "accepted>authorized>dispatched>failed_before_dispatch" {
		t.Fatalf("lifecycle %s", got)
	}
	// Nothing was sent, so the retry is a new attempt.
	res = mustCall(t, cs, "deploy_dead", map[string]any{"service": "x"}, nil)
	if execMeta(t, res)["replayed"] != false || len(h.executions("deploy_dead")) != 2 {
		t.Fatalf("retry after a safe failure should be a new execution: %v", execMeta(t, res))
	}
}

func TestFaultAfterRequestWritten(t *testing.T) {
	h := newHarness(t, "")
	h.proxy.Next(loopback.DropRequest)
	cs := h.connect(loopback.ProtocolLegacy, false)
	res := mustCall(t, cs, "deploy_release", map[string]any{"service": "billing", "version": "7"}, nil)
	m := execMeta(t, res)
	if res.IsError || m["state"] != "succeeded" {
		t.Fatalf("after a resend with the key the call should succeed: %v %s", m, resultText(res))
	}
	e := h.executions("deploy_release")[0]
	if got := h.path(e.ID); !strings.HasPrefix(got, "accepted>authorized>dispatched>unknown>dispatched>succeeded") {
		t.Fatalf("lifecycle %s", got)
	}
	if h.target.Total() != 1 || h.proxy.Count(loopback.DropRequest) != 1 {
		t.Fatalf("effects %d, drops %d", h.target.Total(), h.proxy.Count(loopback.DropRequest))
	}
}

func TestFaultAfterTargetAnswered(t *testing.T) {
	h := newHarness(t, "")
	h.proxy.Next(loopback.DropResponse)
	cs := h.connect(loopback.ProtocolStateless, false)
	res := mustCall(t, cs, "deploy_release", map[string]any{"service": "billing", "version": "8"}, nil)
	if m := execMeta(t, res); res.IsError || m["state"] != "succeeded" {
		t.Fatalf("%v %s", m, resultText(res))
	}
	if h.target.Total() != 1 {
		t.Fatalf("the target acted %d times", h.target.Total())
	}
	trs, _ := h.store.Transitions(ctx, h.executions("deploy_release")[0].ID)
	last := trs[len(trs)-1]
	if last.To == activity.StateDelivered {
		last = trs[len(trs)-2]
	}
	if !strings.Contains(last.Reason, "replayed its stored answer") {
		t.Fatalf("the resend should be answered by the target's replay: %+v", last)
	}
}

func TestFaultBlockedToolGoesToPendingVerification(t *testing.T) {
	h := newHarness(t, "")
	h.proxy.Next(loopback.DropResponse)
	cs := h.connect(loopback.ProtocolStateless, false)
	args := map[string]any{"amount_cents": 4200, "card_token": secretValue}
	res := mustCall(t, cs, "charge_card", args, nil)
	m := execMeta(t, res)
	if res.IsError || m["state"] != "pending_verification" || m["retry_safe"] != false ||
		!strings.Contains(resultText(res), "Do not retry") {
		t.Fatalf("unknown outcome on a blocked tool: %v %s", m, resultText(res))
	}
	// The retry is told the same and nothing is sent.
	res = mustCall(t, cs, "charge_card", args, nil)
	if m := execMeta(t, res); m["replayed"] != true || m["state"] != "pending_verification" {
		t.Fatalf("retry: %v", m)
	}
	if h.target.Total() != 1 || len(h.executions("charge_card")) != 1 {
		t.Fatalf("effects %d executions %d", h.target.Total(), len(h.executions("charge_card")))
	}
	id := h.executions("charge_card")[0].ID
	if _, _, err := h.store.Resolve(ctx, activity.Resolution{ExecutionID: id, Outcome: activity.ResolutionVerified,
		Operator: "alice", Note: "charge present at the processor"}); err != nil {
		t.Fatal(err)
	}
	res = mustCall(t, cs, "charge_card", args, nil)
	if m := execMeta(t, res); m["state"] != "verified" || res.IsError || h.target.Total() != 1 {
		t.Fatalf("after verification: %v %s", m, resultText(res))
	}
}

func TestFaultLookupToolRecoversFromStatusEndpoint(t *testing.T) {
	h := newHarness(t, "")
	cs := h.connect(loopback.ProtocolStateless, false)

	// The target acted; the answer was lost: the status endpoint says so.
	h.proxy.Next(loopback.DropResponse)
	res := mustCall(t, cs, "open_ticket", map[string]any{"title": "disk full"}, nil)
	if m := execMeta(t, res); m["state"] != "succeeded" || res.IsError {
		t.Fatalf("lookup after a lost answer: %v %s", m, resultText(res))
	}
	trs, _ := h.store.Transitions(ctx, h.executions("open_ticket")[0].ID)
	if !strings.Contains(trs[len(trs)-1].Reason+trs[max(0, len(trs)-2)].Reason, "recovered by lookup") {
		t.Fatalf("how it was resolved is not recorded: %+v", trs)
	}

	// The request never arrived: the status endpoint has no record (yet),
	// so it is sent again under the same execution id and key, not
	// recorded as "never acted" (a retry would then act under a new key).
	h.proxy.Next(loopback.DropRequest)
	res = mustCall(t, cs, "open_ticket", map[string]any{"title": "cpu hot"}, nil)
	if m := execMeta(t, res); m["state"] != "succeeded" || res.IsError {
		t.Fatalf("lookup of a request that never arrived: %v %s", m, resultText(res))
	}
	execs := h.executions("open_ticket")
	if h.target.Total() != 2 || len(execs) != 2 {
		t.Fatalf("effects %d, executions %d", h.target.Total(), len(execs))
	}
	trs, _ = h.store.Transitions(ctx, execs[1].ID)
	var path []string
	resent := false
	for _, tr := range trs {
		path = append(path, string(tr.To))
		resent = resent || strings.Contains(tr.Reason, "404") && strings.Contains(tr.Reason, "sent again under the same execution id")
	}
	if got := strings.Join(path, ">"); !resent || !strings.HasPrefix(got, "accepted>authorized>dispatched>unknown>dispatched>succeeded") {
		t.Fatalf("lifecycle %s, resent %v: %+v", got, resent, trs)
	}
	if n := h.target.Arrivals(string(execs[1].ID)); n != 1 {
		t.Fatalf("requests under the execution's key: %d", n)
	}
	// The agent's retry gets the stored result; nothing acts again.
	h.waitState(execs[1].ID, activity.StateDelivered)
	res = mustCall(t, cs, "open_ticket", map[string]any{"title": "cpu hot"}, nil)
	if m := execMeta(t, res); m["replayed"] != true || h.target.Total() != 2 {
		t.Fatalf("retry after the resend: %v, effects %d", m, h.target.Total())
	}
}

// TestFaultLookupLateRequestActsOnce: the first send is lost to the
// client but reaches the target later than the status lookup. "No record
// yet" must not become "never acted": the resend under the same key and
// the late first send are one effect.
func TestFaultLookupLateRequestActsOnce(t *testing.T) {
	h := newHarness(t, "")
	cs := h.connect(loopback.ProtocolStateless, false)
	h.proxy.Next(loopback.LateRequest)
	res := mustCall(t, cs, "open_ticket", map[string]any{"title": "late"}, nil)
	if m := execMeta(t, res); m["state"] != "succeeded" || res.IsError {
		t.Fatalf("after a 404 lookup: %v %s", m, resultText(res))
	}
	h.proxy.WaitLate()
	id := string(h.executions("open_ticket")[0].ID)
	if n := h.target.Arrivals(id); n != 2 {
		t.Fatalf("sends that reached the target under key %s: %d, want the resend and the late first send", id, n)
	}
	// A naive retry after the answer: attaches, acts no more.
	mustCall(t, cs, "open_ticket", map[string]any{"title": "late"}, nil)
	if h.target.Total() != 1 || h.target.Duplicates() != 0 || len(h.executions("open_ticket")) != 1 {
		t.Fatalf("effects %d, duplicates %d, executions %d", h.target.Total(), h.target.Duplicates(), len(h.executions("open_ticket")))
	}
}

func TestFaultDuringResultDeliveryOfBlockedTool(t *testing.T) {
	h := newHarness(t, "")
	agent := &loopback.NaiveAgent{Endpoint: h.endpoint(true), Token: agentToken, Protocol: loopback.ProtocolStateless, Attempts: 3}
	defer agent.Close()
	h.agentProxy.Plan = dropFirstCall()
	res, err := agent.Call(ctx, callParams("charge_card", map[string]any{"amount_cents": 100, "card_token": secretValue}))
	if err != nil {
		t.Fatal(err)
	}
	if m := execMeta(t, res); m["replayed"] != true || m["state"] == "pending_verification" || res.IsError {
		t.Fatalf("the outcome was known: the retry must get the stored result: %v %s", m, resultText(res))
	}
	if h.target.Total() != 1 {
		t.Fatalf("target acted %d times", h.target.Total())
	}
}

// TestNoHiddenResendOnReusedConnection: a broken keep-alive connection
// must not make the HTTP client resend a blocked tool's request behind the
// record's back (net/http does that for requests with Idempotency-Key).
func TestNoHiddenResendOnReusedConnection(t *testing.T) {
	h := newHarness(t, "")
	cs := h.connect(loopback.ProtocolStateless, false)
	// Warm a pooled connection to the target proxy.
	mustCall(t, cs, "charge_card", map[string]any{"amount_cents": 1, "card_token": secretValue}, nil)
	h.proxy.Next(loopback.DropResponse)
	res := mustCall(t, cs, "charge_card", map[string]any{"amount_cents": 2, "card_token": secretValue}, nil)
	if m := execMeta(t, res); m["state"] != "pending_verification" {
		t.Fatalf("a dropped answer on a reused connection: %v %s", m, resultText(res))
	}
	if h.proxy.Count(loopback.Pass)+h.proxy.Count(loopback.DropResponse) != 2 {
		t.Fatalf("the target proxy saw %d+%d requests: a hidden resend happened",
			h.proxy.Count(loopback.Pass), h.proxy.Count(loopback.DropResponse))
	}
}

// TestOutcomeWriteRetried: the database away for a moment as an answer
// came (a PostgreSQL restart) left the execution dispatched while the
// replica lived: its lease renewed, no recovery ran, and every retry was
// told "in progress" for good. The outcome's write is retried until it
// lands.
func TestOutcomeWriteRetried(t *testing.T) {
	var fails atomic.Int32
	fails.Store(3)
	// Restored after the harness's gateway has stopped (cleanups run
	// last first), never under its goroutines.
	t.Cleanup(gatewaylite.SetOutcomeWriteFault(func() error {
		if fails.Add(-1) >= 0 {
			return errors.New("injected: the database is away")
		}
		return nil
	}))
	h := newHarness(t, "")
	res := mustCall(t, h.connect(loopback.ProtocolStateless, false), "deploy_release", map[string]any{"service": "api", "version": "9"}, nil)
	id := activity.ExecutionID(execMeta(t, res)["id"].(string))
	waitFor(t, func() bool {
		e, err := h.store.Execution(ctx, id)
		return err == nil && e.State != activity.StateDispatched
	}, "the outcome to be recorded after the database came back")
	if e, _ := h.store.Execution(ctx, id); e.Outcome != activity.OutcomeSuccess {
		t.Fatalf("after the retried write: %+v", e)
	}
}
