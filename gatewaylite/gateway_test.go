package gatewaylite_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
)

var ctx = context.Background()

var eras = []string{loopback.ProtocolLegacy, loopback.ProtocolStateless}

func TestBothProtocolEras(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			h := newHarness(t, "")
			cs := h.connect(era, false)
			var names []string
			for tool, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, tool.Name)
			}
			if len(names) != 7 || !slices.Contains(names, gatewaylite.ToolExecutionStatus) || !slices.Contains(names, gatewaylite.ToolRequestVerification) {
				t.Fatalf("tools: %v", names)
			}
			res := mustCall(t, cs, "deploy_release", map[string]any{"service": "billing", "version": "2.4.1"}, nil)
			m := execMeta(t, res)
			if res.IsError || m["state"] != "succeeded" || m["replayed"] != false || !strings.Contains(resultText(res), `"intent_effects":1`) {
				t.Fatalf("result: error=%v meta=%v text=%s", res.IsError, m, resultText(res))
			}
			es := h.executions("deploy_release")
			if len(es) != 1 || h.target.Total() != 1 {
				t.Fatalf("%d executions, %d effects", len(es), h.target.Total())
			}
			e := h.waitState(es[0].ID, activity.StateDelivered)
			if e.IdempotencyKey.V != string(e.ID) || e.TargetStatus.V != 201 || !strings.HasPrefix(e.Fingerprint, "hmac-sha256:") {
				t.Fatalf("execution: %+v", e)
			}
			if got := h.path(e.ID); got != "accepted>authorized>dispatched>succeeded>delivered" {
				t.Fatalf("lifecycle %s", got)
			}
			if !strings.Contains(string(e.Arguments), `"region":"us-east-1"`) {
				t.Fatalf("defaults not materialised in the record: %s", e.Arguments)
			}
			calls := h.calls(e.ID)
			if len(calls) != 1 || !calls[0].JSONRPCID.OK || calls[0].ProtocolVersion.V != era {
				t.Fatalf("call record: %+v", calls)
			}
			wantRun := activity.RunBySession
			if era == loopback.ProtocolStateless {
				wantRun = activity.RunByToken
				if calls[0].SessionID.OK {
					t.Fatalf("stateless call has a session id: %+v", calls[0])
				}
			}
			if r := h.run(calls[0].RunID); r.IdentifiedBy != wantRun {
				t.Fatalf("run identified by %s, want %s", r.IdentifiedBy, wantRun)
			}
		})
	}
}

func TestUnauthenticatedCallsAreRefusedAndRecorded(t *testing.T) {
	h := newHarness(t, "")
	body := `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"deploy_release","arguments":{"service":"x","version":"1"}}}`
	for _, auth := range []string{"", "Bearer wrong-token-0000000000"} {
		req, _ := http.NewRequest(http.MethodPost, h.endpoint(false), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", loopback.ProtocolStateless)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	st, _ := h.store.Stats(ctx)
	if st.Executions != 0 || st.Calls != 2 {
		t.Fatalf("refused calls must be recorded as calls, never executions: %+v", st)
	}
	if h.target.Total() != 0 {
		t.Fatal("an unauthenticated call reached the target")
	}
}

// TestRetryAfterLostResponseAttaches: the target acted, the agent never got
// the answer (the agent-side proxy dropped it), the agent retries: the
// retry gets the stored result and the target acts once.
func TestRetryAfterLostResponseAttaches(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			h := newHarness(t, "")
			agent := &loopback.NaiveAgent{Endpoint: h.endpoint(true), Token: agentToken, Protocol: era, Attempts: 3}
			defer agent.Close()
			// Connect (initialize/discover) passes; the first tools/call's
			// answer is dropped on its way back to the agent.
			if _, err := loopback.Connect(ctx, h.endpoint(true), agentToken, era); err != nil {
				t.Fatal(err)
			}
			h.agentProxy.Plan = dropFirstCall()
			res, err := agent.Call(ctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"service": "billing", "version": "3.0.0"}})
			if err != nil {
				t.Fatal(err)
			}
			m := execMeta(t, res)
			if agent.Retries == 0 || m["replayed"] != true || m["state"] == "dispatched" {
				t.Fatalf("retries=%d meta=%v text=%s", agent.Retries, m, resultText(res))
			}
			if h.target.Total() != 1 {
				t.Fatalf("target acted %d times", h.target.Total())
			}
			es := h.executions("deploy_release")
			if len(es) != 1 {
				t.Fatalf("%d executions", len(es))
			}
			e := h.waitState(es[0].ID, activity.StateDelivered)
			calls := h.calls(e.ID)
			if len(calls) < 2 || calls[1].Disposition != activity.DispositionAttached {
				t.Fatalf("calls: %+v", calls)
			}
			if !strings.Contains(h.path(e.ID), "succeeded>") {
				t.Fatalf("lifecycle %s", h.path(e.ID))
			}
		})
	}
}

// dropFirstCall drops the response to the first tools/call POST only.
func dropFirstCall() func(*http.Request, []byte) loopback.Fault {
	var once sync.Once
	return func(_ *http.Request, body []byte) loopback.Fault {
		f := loopback.Pass
		if loopback.IsToolsCall(body) {
			once.Do(func() { f = loopback.DropResponse })
		}
		return f
	}
}

func TestConcurrentIdenticalCallsDispatchOnce(t *testing.T) {
	h := newHarness(t, "")
	h.target.SetDelay(100e6) // 100ms: the calls overlap
	const n = 16
	var wg sync.WaitGroup
	results := make([]*mcp.CallToolResult, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs, err := loopback.Connect(ctx, h.endpoint(false), agentToken, loopback.ProtocolStateless)
			if err != nil {
				t.Error(err)
				return
			}
			defer cs.Close()
			results[i], err = call(t, cs, "deploy_release", map[string]any{"service": "api", "version": "9.9.9"}, nil)
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if h.target.Total() != 1 {
		t.Fatalf("%d concurrent identical calls made %d effects", n, h.target.Total())
	}
	es := h.executions("deploy_release")
	if len(es) != 1 {
		t.Fatalf("%d executions", len(es))
	}
	calls := h.calls(es[0].ID)
	if len(calls) != n {
		t.Fatalf("%d calls recorded, want %d", len(calls), n)
	}
	for i, r := range results {
		if r == nil {
			continue
		}
		if m := execMeta(t, r); m["id"] != string(es[0].ID) || r.IsError {
			t.Errorf("call %d: %v %s", i, m, resultText(r))
		}
	}
}

func TestDifferentArgumentsAreDifferentIntents(t *testing.T) {
	h := newHarness(t, "")
	cs := h.connect(loopback.ProtocolStateless, false)
	mustCall(t, cs, "deploy_release", map[string]any{"service": "a", "version": "1"}, nil)
	mustCall(t, cs, "deploy_release", map[string]any{"service": "a", "version": "2"}, nil)
	// Same effect, spelled differently: default made explicit, key order.
	res := mustCall(t, cs, "deploy_release", map[string]any{"version": "1", "region": "us-east-1", "service": "a"}, nil)
	if execMeta(t, res)["replayed"] != true {
		t.Fatalf("explicit default must match the materialised one: %v", execMeta(t, res))
	}
	if h.target.Total() != 2 || len(h.executions("deploy_release")) != 2 {
		t.Fatalf("%d effects, %d executions", h.target.Total(), len(h.executions("deploy_release")))
	}
	// A deliberate repeat names a new intent scope.
	res = mustCall(t, cs, "deploy_release", map[string]any{"service": "a", "version": "1"}, mcp.Meta{gatewaylite.MetaIntentScope: "rollout-2"})
	if execMeta(t, res)["replayed"] != false || h.target.Total() != 3 {
		t.Fatalf("explicit intent scope did not create a new execution: %v", execMeta(t, res))
	}
}

func TestReadOnlyRepeatsAreNotDeduplicated(t *testing.T) {
	h := newHarness(t, "")
	cs := h.connect(loopback.ProtocolStateless, false)
	for range 3 {
		res := mustCall(t, cs, "get_status", map[string]any{"service": "billing"}, nil)
		if res.IsError || execMeta(t, res)["replayed"] != false {
			t.Fatalf("read: %v", execMeta(t, res))
		}
	}
	if n := len(h.executions("get_status")); n != 3 {
		t.Fatalf("%d read executions, want 3", n)
	}
}

func TestVaultLockRefusesAndRetryGetsSameRefusal(t *testing.T) {
	h := newHarness(t, "")
	if _, err := h.store.Write(ctx, func(w *activity.Tx) error { return w.SetVault(true, "alice", "incident 4711") }); err != nil {
		t.Fatal(err)
	}
	cs := h.connect(loopback.ProtocolStateless, false)
	legacy := h.connect(loopback.ProtocolLegacy, false)
	args := map[string]any{"service": "billing", "version": "5"}
	res := mustCall(t, cs, "deploy_release", args, nil)
	if !res.IsError || !strings.Contains(resultText(res), "vault locked") || !strings.HasPrefix(resultText(res), "This call was refused") {
		t.Fatalf("locked vault: %s", resultText(res))
	}
	for _, c := range []*mcp.ClientSession{cs, legacy} {
		res = mustCall(t, c, "deploy_release", args, nil)
		if m := execMeta(t, res); m["replayed"] != true || m["state"] != "rejected" || !strings.HasPrefix(resultText(res), "This retry is refused") {
			t.Fatalf("retry after refusal: %v %s", m, resultText(res))
		}
	}
	if h.target.Total() != 0 || len(h.executions("deploy_release")) != 1 {
		t.Fatal("a locked vault let a call through, or the retry opened a new execution")
	}
	// Once unlocked, the refusal does not outlive the lock: the retry acts,
	// once, and a further retry attaches to it.
	if _, err := h.store.Write(ctx, func(w *activity.Tx) error { return w.SetVault(false, "alice", "incident over") }); err != nil {
		t.Fatal(err)
	}
	res = mustCall(t, legacy, "deploy_release", args, nil)
	if m := execMeta(t, res); res.IsError || m["replayed"] != false || m["state"] != "succeeded" {
		t.Fatalf("retry after unlock: %v %s", m, resultText(res))
	}
	res = mustCall(t, cs, "deploy_release", args, nil)
	if m := execMeta(t, res); m["replayed"] != true || h.target.Total() != 1 || len(h.executions("deploy_release")) != 2 {
		t.Fatalf("after unlock: %v, %d effects, %d executions", m, h.target.Total(), len(h.executions("deploy_release")))
	}
}

func (h *harness) calls(id activity.ExecutionID) []activity.Call {
	h.t.Helper()
	cs, err := h.store.CallsOf(ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return cs
}

func (h *harness) run(id activity.RunID) activity.Run {
	h.t.Helper()
	r, err := h.store.Run(ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// TestLegacyStreamResumesInsteadOfResending: in the 2025 era a broken
// response stream is resumed with GET + Last-Event-ID from the gateway's
// event store; the agent gets its result without sending the call again.
func TestLegacyStreamResumesInsteadOfResending(t *testing.T) {
	h := newHarness(t, "")
	h.target.SetDelay(300e6) // the result comes after the cut
	cs := h.connect(loopback.ProtocolLegacy, true)
	h.agentProxy.Plan = func(_ *http.Request, body []byte) loopback.Fault {
		if loopback.IsToolsCall(body) {
			return loopback.CutStream
		}
		return loopback.Pass
	}
	res := mustCall(t, cs, "deploy_release", map[string]any{"service": "resume", "version": "1"}, nil)
	if m := execMeta(t, res); res.IsError || m["state"] != "succeeded" || m["replayed"] != false {
		t.Fatalf("resumed call: %v %s", m, resultText(res))
	}
	if h.agentProxy.Count(loopback.CutStream) != 1 {
		t.Fatalf("the stream was cut %d times", h.agentProxy.Count(loopback.CutStream))
	}
	es := h.executions("deploy_release")
	if len(es) != 1 || len(h.calls(es[0].ID)) != 1 || h.target.Total() != 1 {
		t.Fatalf("resume must not resend: %d executions, %d calls, %d effects", len(es), len(h.calls(es[0].ID)), h.target.Total())
	}
	h.waitState(es[0].ID, activity.StateDelivered)
}

func TestDNSRebindingProtection(t *testing.T) {
	h := newHarness(t, "")
	req, _ := http.NewRequest(http.MethodPost, h.endpoint(false), strings.NewReader(`{}`))
	req.Host = "attacker.example:80"
	req.Header.Set("Authorization", "Bearer "+agentToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a non-loopback Host on a loopback listener: status %d, want 403", resp.StatusCode)
	}
}

// TestLateRepeatAfterWindowIsRecorded: once the attach window has passed,
// the finished execution is a tombstone: a repeat acts again and its call
// says it is a late repeat of the earlier execution.
func TestLateRepeatAfterWindowIsRecorded(t *testing.T) {
	h := newHarness(t, `
[[tool]]
name = "short_window"
url = "{{proxy}}/v1/short"
contract = "repeatable_with_key"
attach_window = "200ms"
`)
	cs := h.connect(loopback.ProtocolStateless, false)
	args := map[string]any{"x": 1}
	mustCall(t, cs, "short_window", args, nil)
	first := h.executions("short_window")[0]
	h.waitState(first.ID, activity.StateDelivered)
	time.Sleep(300 * time.Millisecond)
	res := mustCall(t, cs, "short_window", args, nil)
	if execMeta(t, res)["replayed"] != false || h.target.Total() != 2 {
		t.Fatalf("after the window: %v, %d effects", execMeta(t, res), h.target.Total())
	}
	second := h.executions("short_window")[1]
	calls := h.calls(second.ID)
	if len(calls) != 1 || !strings.Contains(calls[0].Reason, "late repeat of "+string(first.ID)) {
		t.Fatalf("the late repeat is not recorded as such: %+v", calls)
	}
}

// TestServerErrorIsNoProofNothingHappened: a target that acted and then
// answered 500 (a server failing part way; Stripe: "treat a 500 as
// indeterminate") leaves the outcome unknown. The agent is told so, and
// its retry is resent under the same Idempotency-Key (the target answers
// from its first execution) or blocked for an operator, never a fresh
// send: the target acts once. On the old rule a 500 was a failure and the
// retry a new execution with a new key: a second effect.
func TestServerErrorIsNoProofNothingHappened(t *testing.T) {
	for _, c := range []struct {
		tool  string
		args  map[string]any
		final activity.State
	}{
		{"deploy_release", map[string]any{"service": "billing", "version": "5.0.0"}, activity.StateDelivered},
		{"charge_card", map[string]any{"amount": 12, "card_token": secretValue}, activity.StatePendingVerification},
	} {
		t.Run(c.tool, func(t *testing.T) {
			h := newHarness(t, "")
			cs := h.connect(loopback.ProtocolStateless, false)
			h.target.ErrorAfterActing(1)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				t.Fatal(err)
			}
			if m := execMeta(t, res); m["state"] == "failed" || m["retry_safe"] == true {
				t.Fatalf("after a 500 the agent was told %v: %s", m, resultText(res))
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args}); err != nil {
				t.Fatal(err)
			}
			if n := h.target.Total(); n != 1 {
				t.Fatalf("the target acted %d times", n)
			}
			es := h.executions(c.tool)
			if len(es) != 1 {
				t.Fatalf("%d executions: %s", len(es), h.path(es[0].ID))
			}
			h.waitState(es[0].ID, c.final)
		})
	}
}

// TestTargetGetsPlainIntegers: canonical form writes an integer of more
// than 40 digits as 1.2345…e+49, which a target reads as a lossy float,
// or refuses. The target gets it in digits, in the body and in a URL
// placeholder alike, and two calls that say one number two ways
// ({"order":1e50} and {"order":100…0}) are one intent that sends one
// request: the path the target acts on is the number the fingerprint read.
func TestTargetGetsPlainIntegers(t *testing.T) {
	h := newHarness(t, `
[[tool]]
name = "pay_order"
url = "{{proxy}}/v1/orders/{order}"
contract = "repeatable_with_key"
`)
	cs := h.connect(loopback.ProtocolStateless, false)
	const amount = "12345678901234567890123456789012345678901234567890"
	order := "1" + strings.Repeat("0", 50)
	mustCall(t, cs, "pay_order", map[string]any{"order": json.Number("1e50"), "amount": json.Number(amount)}, nil)
	res := mustCall(t, cs, "pay_order", map[string]any{"order": json.Number(order), "amount": json.Number(amount)}, nil)
	if res.IsError || execMeta(t, res)["replayed"] != true {
		t.Fatalf("one number written two ways is two intents: %v %s", execMeta(t, res), resultText(res))
	}
	want := "/v1/orders/" + order + ` {"amount":` + amount + `,"order":` + order + `}`
	if got := h.target.Effects(); len(got) != 1 || got[want] != 1 {
		t.Fatalf("the target acted on %v, want once on %s", got, want)
	}
}

// TestAnotherFingerprintKeyRefused: a gateway whose fingerprint key is not
// the one the database's executions were fingerprinted with does not
// start: a replica whose key directory was copied before the first
// gateway made the key made its own, started, and every retry it got was
// a new intent (a second effect).
func TestAnotherFingerprintKeyRefused(t *testing.T) {
	h := newHarness(t, "")
	mustCall(t, h.connect(loopback.ProtocolStateless, false), "deploy_release", map[string]any{"service": "api", "version": "1"}, nil)
	h.gw.Close()
	cfg, err := gatewaylite.ParseConfig([]byte(testConfig(h.target.URL, h.proxy.URL, "")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = gatewaylite.New(context.Background(), cfg, h.store, gatewaylite.Options{KeyDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "fingerprint key") || !strings.Contains(err.Error(), "would act again") {
		t.Fatalf("a gateway with another fingerprint key: %v", err)
	}
	// Its own key directory still starts it.
	gw, err := gatewaylite.New(context.Background(), cfg, h.store, gatewaylite.Options{KeyDir: filepath.Join(h.dir, "keys")})
	if err != nil {
		t.Fatalf("the same key directory: %v", err)
	}
	gw.Close()
}
