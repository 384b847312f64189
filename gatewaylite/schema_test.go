package gatewaylite_test

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/demo/loopback"
)

// Arguments that violate a tool's input_schema are refused before
// dispatch with the validator's message, and recorded; nothing is sent.
func TestInputSchemaIsEnforced(t *testing.T) {
	h := newHarness(t, "")
	for _, era := range eras {
		cs := h.connect(era, false)
		for _, args := range []map[string]any{
			{"service": "api"},                  // "version" is required
			{"service": "api", "version": 12.5}, // a string is required
		} {
			res := mustCall(t, cs, "deploy_release", args, nil)
			if !res.IsError || !strings.Contains(resultText(res), "Invalid arguments for deploy_release") || !strings.Contains(resultText(res), "version") {
				t.Fatalf("%s %v: %s", era, args, resultText(res))
			}
		}
	}
	if h.target.Total() != 0 || len(h.executions("deploy_release")) != 0 {
		t.Fatalf("invalid arguments reached the target (%d effects, %d executions)", h.target.Total(), len(h.executions("deploy_release")))
	}
	st, _ := h.store.Stats(ctx)
	if st.Calls != int64(2*len(eras)) {
		t.Fatalf("%d calls recorded, want every refused one (%d)", st.Calls, 2*len(eras))
	}
	// Valid arguments pass.
	if res := mustCall(t, h.connect(loopback.ProtocolStateless, false), "deploy_release", map[string]any{"service": "api", "version": "1"}, nil); res.IsError {
		t.Fatalf("valid call: %s", resultText(res))
	}
}

// Every tool in tools/list has a description; one the configuration did
// not write is derived from its contract.
func TestToolsListIsComplete(t *testing.T) {
	h := newHarness(t, "")
	cs := h.connect(loopback.ProtocolLegacy, false)
	res, err := cs.ListTools(ctx, &mcp.ListToolsParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
		if tool.Name == "charge_card" && !strings.Contains(tool.Description, "blocked_after_unknown") {
			t.Errorf("derived description of charge_card: %q", tool.Description)
		}
		if tool.Name == "deploy_release" && tool.Description != "Deploy a release" {
			t.Errorf("a written description must stay as written: %q", tool.Description)
		}
	}
}
