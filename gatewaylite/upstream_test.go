package gatewaylite_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
)

// TestUpstreamMCPServerProcess re-exports the tools of a real MCP server
// process (stdio) and checks contracts: unwritten → blocked_after_unknown,
// a readOnlyHint seeds read_only, a written contract beats a hint.
func TestUpstreamMCPServerProcess(t *testing.T) {
	bin, effects := buildUpstream(t)
	h := newHarness(t, `
[[upstream]]
name = "notes"
command = ["`+bin+`"]
[upstream.tools.send_digest]
contract = "repeatable_with_key"
fingerprint = ["text"]
`)
	cs := h.connect(loopback.ProtocolStateless, false)
	res := mustCall(t, cs, "append_note", map[string]any{"text": "hello"}, nil)
	if res.IsError || execMeta(t, res)["state"] != "succeeded" {
		t.Fatalf("append_note: %v %s", execMeta(t, res), resultText(res))
	}
	// The same intent again attaches: the note is written once.
	res = mustCall(t, cs, "append_note", map[string]any{"text": "hello"}, nil)
	if execMeta(t, res)["replayed"] != true {
		t.Fatalf("retry: %v", execMeta(t, res))
	}
	mustCall(t, cs, "send_digest", map[string]any{"text": "weekly"}, nil)
	res = mustCall(t, cs, "count_notes", nil, nil)
	if !strings.Contains(resultText(res), `"notes":2`) {
		t.Fatalf("count_notes: %s", resultText(res))
	}
	if logs := h.logs.String(); !strings.Contains(logs, `msg="upstream stderr" upstream=notes line="upstreamserver: notes ready"`) {
		t.Fatalf("the upstream's stderr was not logged:\n%s", logs)
	}
	if logs := h.logs.String(); !strings.Contains(logs, `msg=call actor=agent:deployer tool=append_note`) {
		t.Fatalf("no per-call log line:\n%s", logs)
	}
	b, _ := os.ReadFile(effects)
	if string(b) != "note hello\ndigest weekly\n" {
		t.Fatalf("upstream effects: %q", b)
	}
	contracts := map[string]activity.Contract{}
	for _, tool := range []string{"append_note", "count_notes", "send_digest"} {
		es := h.executions(tool)
		if len(es) != 1 || es[0].Channel != activity.ChannelMCP {
			t.Fatalf("%s: %+v", tool, es)
		}
		contracts[tool] = es[0].Contract
	}
	want := map[string]activity.Contract{"append_note": activity.ContractBlockedAfterUnknown,
		"count_notes": activity.ContractReadOnly, "send_digest": activity.ContractRepeatableWithKey}
	for k, v := range want {
		if contracts[k] != v {
			t.Errorf("%s: contract %s, want %s", k, contracts[k], v)
		}
	}
}

// TestUpstreamToolTimeoutIsUnknown: an upstream tool whose error answer
// says its own request timed out may have acted: the execution's outcome
// is unknown and a retry is held for an operator (no contract written:
// blocked_after_unknown), never run again. A plain refusal stays a
// failure. Every upstream isError was a failure, and the retry opened a
// second ticket.
func TestUpstreamToolTimeoutIsUnknown(t *testing.T) {
	bin, effects := buildUpstream(t)
	h := newHarness(t, `
[[upstream]]
name = "tickets"
command = ["`+bin+`"]
`)
	cs := h.connect(loopback.ProtocolStateless, false)
	for range 2 {
		res := mustCall(t, cs, "file_ticket", map[string]any{"text": "disk full"}, nil)
		if st := execMeta(t, res)["state"]; st != string(activity.StateUnknown) && st != string(activity.StatePendingVerification) {
			t.Fatalf("file_ticket: state %v, want unknown or pending_verification: %s", st, resultText(res))
		}
	}
	if b, _ := os.ReadFile(effects); string(b) != "ticket disk full\n" {
		t.Fatalf("upstream effects %q: want one ticket", b)
	}
	res := mustCall(t, cs, "reject_note", map[string]any{"text": "short"}, nil)
	if st := execMeta(t, res)["state"]; st != string(activity.StateFailed) {
		t.Fatalf("reject_note: state %v, want failed: %s", st, resultText(res))
	}
}

// buildUpstream builds the test's upstream MCP server and names the file
// its tools append their effects to.
func buildUpstream(t *testing.T) (bin, effects string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "upstreamserver")
	if out, err := exec.Command("go", "build", "-o", bin, "./gatewaytest/upstreamserver").CombinedOutput(); err != nil {
		t.Fatalf("build upstream server: %v\n%s", err, out)
	}
	effects = filepath.Join(dir, "effects.txt")
	t.Setenv("UPSTREAM_EFFECTS", effects)
	return bin, effects
}
