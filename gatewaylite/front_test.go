package gatewaylite_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
)

const otherToken = "canary-other-actor-token-55e1"

const secondActor = `
[[actor]]
name = "agent:other"
token_env = "TEST_OTHER_TOKEN"
`

// post sends one raw JSON-RPC message to the gateway.
func (h *harness) post(token, session, origin, body string) *http.Response {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.endpoint(false), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", loopback.ProtocolLegacy)
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

const listTools = `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`

// A session belongs to the actor that created it: another actor's token
// can neither call into it nor end it.
func TestSessionIsBoundToItsActor(t *testing.T) {
	t.Setenv("TEST_OTHER_TOKEN", otherToken)
	h := newHarness(t, secondActor)
	cs := h.connect(loopback.ProtocolLegacy, false)
	sid := cs.ID()
	if sid == "" {
		t.Fatal("no session id")
	}
	call := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"deploy_release","arguments":{"service":"x","version":"1"}}}`
	if r := h.post("Bearer "+otherToken, sid, "", call); r.StatusCode != http.StatusForbidden {
		t.Fatalf("actor B calling into A's session: %d", r.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodDelete, h.endpoint(false), nil)
	req.Header.Set("Authorization", "Bearer "+otherToken)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", loopback.ProtocolLegacy)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("actor B deleting A's session: %d", resp.StatusCode)
	}
	if h.target.Total() != 0 {
		t.Fatal("B's call reached the target")
	}
	if n := h.countCalls(`actor = 'agent:other' AND disposition = 'refused' AND reason LIKE 'refused by the MCP layer before the tool ran: HTTP 403%'`); n != 1 {
		t.Fatalf("B's refused call recorded %d times, want once", n)
	}
	// A's session is intact.
	if res := mustCall(t, cs, "deploy_release", map[string]any{"service": "x", "version": "1"}, nil); res.IsError {
		t.Fatalf("A's own session: %s", resultText(res))
	}
}

// Origin is checked like Host; the auth scheme is case-insensitive.
func TestOriginAndSchemeCase(t *testing.T) {
	h := newHarness(t, "[limits]\nallowed_origins = [\"https://console.example.com\"]\n")
	for _, c := range []struct {
		origin string
		want   int
	}{
		{"", http.StatusOK},
		{"https://console.example.com", http.StatusOK},
		{"http://localhost:3000", http.StatusOK}, // loopback page, loopback gateway
		{"https://evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
	} {
		if r := h.post("Bearer "+agentToken, "", c.origin, initialize); r.StatusCode != c.want {
			t.Errorf("Origin %q: %d, want %d", c.origin, r.StatusCode, c.want)
		}
	}
	for _, scheme := range []string{"bearer ", "BEARER ", "Bearer  "} {
		if r := h.post(scheme+agentToken, "", "", initialize); r.StatusCode != http.StatusOK {
			t.Errorf("scheme %q: %d", scheme, r.StatusCode)
		}
	}
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// Over its rate, an actor gets 429 and a JSON-RPC error; the refused call
// is recorded and nothing reaches the target.
func TestRateLimitRefusesAndRecords(t *testing.T) {
	h := newHarness(t, "[limits]\nrate_per_second = 0.001\nrate_burst = 2\n")
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"deploy_release","arguments":{"service":"x","version":"1"}}}`
	var codes []int
	for range 4 {
		codes = append(codes, h.post("Bearer "+agentToken, "", "", call).StatusCode)
	}
	if codes[2] != http.StatusTooManyRequests || codes[3] != http.StatusTooManyRequests {
		t.Fatalf("statuses %v: want the 3rd and 4th refused with 429", codes)
	}
	refused := h.countCalls(`disposition = ? AND reason LIKE '429: rate limit%' AND tool = 'deploy_release'`, string(activity.DispositionRefused))
	if refused != 2 {
		t.Fatalf("%d rate-limited calls recorded, want 2", refused)
	}
}

// TestOversizedBodiesMeetTheRateLimit: a request whose body is too large
// counts against the actor's rate as any other (150 oversized bodies at
// one request a second were 150 answers of 413 beside 149 of 429 for
// small ones), and a flood of them is not an fsynced record each.
func TestOversizedBodiesMeetTheRateLimit(t *testing.T) {
	h := newHarness(t, "[limits]\nrate_per_second = 0.001\nrate_burst = 2\nmax_body_bytes = 1024\nunauthenticated_records_per_second = 1\n")
	big := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"deploy_release","arguments":{"service":"` + strings.Repeat("x", 2048) + `"}}}`
	codes := map[int]int{}
	for range 50 {
		codes[h.post("Bearer "+agentToken, "", "", big).StatusCode]++
	}
	if codes[http.StatusRequestEntityTooLarge] != 2 || codes[http.StatusTooManyRequests] != 48 {
		t.Fatalf("statuses %v: want 2 refused as too large (the burst), the rest 429", codes)
	}
	if n := h.countCalls(`disposition = ? AND reason LIKE '413:%'`, string(activity.DispositionRefused)); n < 1 || n > 2 {
		t.Fatalf("%d oversized requests recorded one by one, want 1 or 2", n)
	}
}

// A call of a tool that does not exist gets the SDK's standard JSON-RPC
// error, and is recorded.
func TestUnknownToolIsRecorded(t *testing.T) {
	h := newHarness(t, "")
	for _, era := range eras {
		if _, err := call(t, h.connect(era, false), "no_such_tool", map[string]any{}, nil); err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Fatalf("%s: %v", era, err)
		}
	}
	if n := h.countCalls(`tool = 'no_such_tool' AND disposition = 'refused' AND reason = 'no such tool'`); n != len(eras) {
		t.Fatalf("%d unknown-tool calls recorded, want %d", n, len(eras))
	}
}

// A 2026-07-28 request missing several pieces is told all of them in one
// error (the SDK alone names one at a time), and the refused call is
// recorded.
func TestIncompleteStatelessRequestNamesEveryMissingPiece(t *testing.T) {
	h := newHarness(t, "")
	req, _ := http.NewRequest(http.MethodPost, h.endpoint(false), strings.NewReader(
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_status","arguments":{"service":"a"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+agentToken)
	req.Header.Set("MCP-Protocol-Version", loopback.ProtocolStateless)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"Mcp-Method", "Mcp-Name", "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities", `"code":-32602`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("%d %s: the error does not name %s", resp.StatusCode, b, want)
		}
	}
	if resp.StatusCode != http.StatusBadRequest || h.target.Reads() != 0 {
		t.Fatalf("status %d, %d reads", resp.StatusCode, h.target.Reads())
	}
	if n := h.countCalls(`tool = 'get_status' AND disposition = 'refused' AND reason LIKE '400: incomplete%'`); n != 1 {
		t.Fatalf("%d refused calls recorded, want 1", n)
	}
}

// A tools/call the SDK answers itself (here: before the session was
// initialised) is recorded, and the exchange behind it ends.
func TestCallAnsweredByTheSDKIsRecorded(t *testing.T) {
	h := newHarness(t, "")
	r := h.post("Bearer "+agentToken, "", "", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"deploy_release","arguments":{"service":"x","version":"1"}}}`)
	if r.StatusCode >= 500 {
		t.Fatalf("status %d", r.StatusCode)
	}
	if n := h.countCalls(`tool = 'deploy_release' AND disposition = 'refused' AND (reason LIKE 'answered by the MCP layer%' OR reason LIKE 'refused by the MCP layer%')`); n != 1 {
		t.Fatalf("%d refusals recorded, want 1 (status %d)", n, r.StatusCode)
	}
	if h.target.Total() != 0 {
		t.Fatal("the call reached the target")
	}
}

// TestInexactNumberIDsRefused: the SDK reads a number id as a float64,
// then an int64, and answers 1.5 as 1 and 2^53+1 as 2^53: a client that
// matches answers by id would never get its result, and two calls could
// share one. Such ids are refused before anything runs; an exact one is
// served.
func TestInexactNumberIDsRefused(t *testing.T) {
	h := newHarness(t, "")
	post := func(id string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, h.endpoint(false), strings.NewReader(
			`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"get_status","arguments":{"service":"a"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+agentToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	// The last with a second id member in other case, which encoding/json
	// read instead and the SDK ignores.
	for _, id := range []string{"1.5", "9007199254740993", "12345678901234567890", "1e3", "-9007199254740993", `1.5,"ID":"x"`} {
		if code, body := post(id); code != http.StatusBadRequest || !strings.Contains(body, `"code":-32600`) {
			t.Errorf("id %s: %d %s", id, code, body)
		}
	}
	if h.target.Reads() != 0 {
		t.Fatalf("%d reads ran for refused ids", h.target.Reads())
	}
	if code, body := post("9007199254740991"); strings.Contains(body, "-32600") || code == http.StatusBadRequest {
		t.Errorf("an exact id was refused: %d %s", code, body)
	}
}

// TestSessionsPerActorBounded: the SDK holds a 2025-era session until it
// is closed or times out (~7 KB each: 12,000 initializes never closed held
// 85 MB), so an actor holds at most max_sessions_per_actor open; the next
// initialize gets 429 and a JSON-RPC error saying why, the sessions
// already open go on working, and closing one (DELETE) makes room. A
// client that closes each session it opens is never refused.
func TestSessionsPerActorBounded(t *testing.T) {
	h := newHarness(t, "\n[limits]\nmax_sessions_per_actor = 3\n")
	for i := range 10 {
		cs, err := loopback.Connect(ctx, h.endpoint(false), agentToken, loopback.ProtocolLegacy)
		if err != nil {
			t.Fatalf("session %d, each closed before the next: %v", i+1, err)
		}
		if err := cs.Close(); err != nil {
			t.Fatal(err)
		}
	}
	open := holdSessions(t, h)
	open[1].Close()
	cs, err := loopback.Connect(ctx, h.endpoint(false), agentToken, loopback.ProtocolLegacy)
	if err != nil {
		t.Fatalf("a session after one of three was closed: %v", err)
	}
	defer cs.Close()
	if _, err := loopback.Connect(ctx, h.endpoint(false), agentToken, loopback.ProtocolLegacy); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("a fourth open session: %v", err)
	}
}

// TestIdleSessionsMakeRoom: a session idle for the session timeout is
// closed by the SDK and no longer counted; one kept busy (a ping within
// each timeout) stays open and counted.
func TestIdleSessionsMakeRoom(t *testing.T) {
	h := newHarness(t, "run_idle_timeout = \"600ms\"\n[limits]\nmax_sessions_per_actor = 3\n")
	open := holdSessions(t, h)
	for range 6 {
		time.Sleep(200 * time.Millisecond)
		for _, cs := range open {
			if err := cs.Ping(ctx, nil); err != nil {
				t.Fatalf("a busy session was closed: %v", err)
			}
		}
	}
	if _, err := loopback.Connect(ctx, h.endpoint(false), agentToken, loopback.ProtocolLegacy); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("three busy sessions past the timeout, and a fourth: %v", err)
	}
	time.Sleep(time.Second)
	cs, err := loopback.Connect(ctx, h.endpoint(false), agentToken, loopback.ProtocolLegacy)
	if err != nil {
		t.Fatalf("a session after three sat idle past the timeout: %v", err)
	}
	cs.Close()
}

// holdSessions opens the harness's three sessions, checks a fourth is
// refused and the three go on working.
func holdSessions(t *testing.T, h *harness) []*mcp.ClientSession {
	t.Helper()
	var open []*mcp.ClientSession
	for range 3 {
		cs, err := loopback.Connect(ctx, h.endpoint(false), agentToken, loopback.ProtocolLegacy)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		open = append(open, cs)
	}
	_, err := loopback.Connect(ctx, h.endpoint(false), agentToken, loopback.ProtocolLegacy)
	if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("a fourth session: %v", err)
	}
	if _, err := open[0].CallTool(ctx, &mcp.CallToolParams{Name: "get_status", Arguments: map[string]any{"service": "a"}}); err != nil {
		t.Fatalf("an open session stopped working: %v", err)
	}
	// The stateless era opens no session: not counted.
	if _, err := loopback.Connect(ctx, h.endpoint(false), agentToken, loopback.ProtocolStateless); err != nil {
		t.Fatalf("stateless: %v", err)
	}
	return open
}
