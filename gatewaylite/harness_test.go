package gatewaylite_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
)

// Canary secrets: they travel in requests and must never be recorded.
const (
	agentToken  = "canary-agent-token-7f3a9c2e41"
	credValue   = "canary-credential-value-b61d0e"
	secretValue = "canary-card-token-4e8a11f0"
)

// harness is a gateway on a real loopback HTTP server, in front of a real
// target API reached through a fault proxy, with a second fault proxy
// between the agent and the gateway.
type harness struct {
	t          *testing.T
	target     *loopback.Target
	proxy      *loopback.FaultProxy // gateway → target
	agentProxy *loopback.FaultProxy // agent → gateway
	store      *activity.Store
	gw         *gatewaylite.Gateway
	srv        *httptest.Server
	logs       *syncBuffer
	dir        string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testConfig writes the harness configuration; extra may refer to
// {{proxy}} and {{target}}.
func testConfig(targetURL, proxyURL, extra string) string {
	extra = strings.NewReplacer("{{proxy}}", proxyURL, "{{target}}", targetURL).Replace(extra)
	// Top-level keys in extra (before its first table) go first.
	top := extra
	if i := strings.Index(extra, "\n["); i >= 0 {
		top, extra = extra[:i], extra[i:]
	} else if strings.HasPrefix(strings.TrimSpace(extra), "[") {
		top = ""
	} else {
		extra = ""
	}
	if !strings.Contains(top, "attach_wait") {
		top += "\nattach_wait = \"5s\""
	}
	return fmt.Sprintf(`
listen = "127.0.0.1:0"
%[4]s

[[actor]]
name = "agent:deployer"
token_env = "TEST_AGENT_TOKEN"

[credential.deploy-service]
header = "Authorization"
prefix = "Bearer "
value_env = "TEST_DEPLOY_TOKEN"

[[tool]]
name = "deploy_release"
description = "Deploy a release"
method = "POST"
url = "%[2]s/v1/releases/{service}"
credential_ref = "deploy-service"
contract = "repeatable_with_key"
fingerprint = ["service", "version", "region"]
defaults = { region = "us-east-1" }
attach_window = "1h"
timeout = "5s"
input_schema = '{"type":"object","properties":{"service":{"type":"string"},"version":{"type":"string"},"region":{"type":"string"}},"required":["service","version"]}'

[[tool]]
name = "charge_card"
url = "%[2]s/v1/charges"
credential_ref = "deploy-service"
contract = "blocked_after_unknown"
secret_args = ["card_token"]
timeout = "5s"

[[tool]]
name = "open_ticket"
url = "%[2]s/v1/tickets"
contract = "recoverable_by_lookup"
status_url = "%[1]s/v1/status/{execution_id}"
timeout = "5s"

[[tool]]
name = "get_status"
method = "GET"
url = "%[2]s/v1/read/{service}"
contract = "read_only"

[[tool]]
name = "no_contract"
url = "%[2]s/v1/unwritten"
%[3]s
`, targetURL, proxyURL, extra, top)
}

func newHarness(t *testing.T, extra string) *harness {
	t.Helper()
	t.Setenv("TEST_AGENT_TOKEN", agentToken)
	t.Setenv("TEST_DEPLOY_TOKEN", credValue)
	h := &harness{t: t, target: loopback.NewTarget(), logs: &syncBuffer{}, dir: t.TempDir()}
	t.Cleanup(h.target.Close)
	h.proxy = loopback.NewFaultProxy(h.target.URL)
	t.Cleanup(h.proxy.Close)
	cfg, err := gatewaylite.ParseConfig([]byte(testConfig(h.target.URL, h.proxy.URL, extra)))
	if err != nil {
		t.Fatal(err)
	}
	h.store, err = activity.Open(context.Background(), filepath.Join(h.dir, "gw.db"), activity.Options{KeyDir: filepath.Join(h.dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.store.Close() })
	logger := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.gw, err = gatewaylite.New(context.Background(), cfg, h.store, gatewaylite.Options{KeyDir: filepath.Join(h.dir, "keys"), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.gw.Close() })
	mux := http.NewServeMux()
	mux.Handle("/mcp", h.gw.Handler())
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	h.agentProxy = loopback.NewFaultProxy(h.srv.URL)
	t.Cleanup(h.agentProxy.Close)
	return h
}

// endpoint is the gateway's MCP URL, direct or through the agent proxy.
func (h *harness) endpoint(viaProxy bool) string {
	if viaProxy {
		return h.agentProxy.URL + "/mcp"
	}
	return h.srv.URL + "/mcp"
}

func (h *harness) connect(protocol string, viaProxy bool) *mcp.ClientSession {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := loopback.Connect(ctx, h.endpoint(viaProxy), agentToken, protocol)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, meta mcp.Meta) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
}

func mustCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := call(t, cs, tool, args, meta)
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return res
}

// execMeta reads the execution _meta from a result.
func execMeta(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, ok := res.Meta[gatewaylite.MetaExecution].(map[string]any)
	if !ok {
		t.Fatalf("result has no %s _meta: %+v", gatewaylite.MetaExecution, res.Meta)
	}
	return m
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// executions lists the live executions of a tool.
func (h *harness) executions(tool string) []activity.Execution {
	h.t.Helper()
	h.gw.Settle()
	es, err := h.store.Executions(context.Background(), activity.ExecutionFilter{Tool: tool})
	if err != nil {
		h.t.Fatal(err)
	}
	return es
}

// waitState polls until an execution reaches one of states (delivery is
// recorded in the background).
func (h *harness) waitState(id activity.ExecutionID, states ...activity.State) activity.Execution {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e, err := h.store.Execution(context.Background(), id)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, s := range states {
			if e.State == s {
				return e
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("execution %s is %s, want one of %v", id, e.State, states)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) path(id activity.ExecutionID) string {
	h.t.Helper()
	h.gw.Settle()
	trs, err := h.store.Transitions(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	var p []string
	for _, tr := range trs {
		p = append(p, string(tr.To))
	}
	return strings.Join(p, ">")
}

func callParams(tool string, args map[string]any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: tool, Arguments: args}
}
