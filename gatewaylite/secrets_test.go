package gatewaylite_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/demo/loopback"
)

// TestCanarySecretsNeverRecorded sends canary secrets the way real ones
// travel (bearer token, credential value, secret argument, a wrong token)
// through normal calls and faults, then scans everything mcpdup wrote.
func TestCanarySecretsNeverRecorded(t *testing.T) {
	const wrongToken = "canary-wrong-token-91ab77c3d2"
	const keyCanary, headerCanary, cmdCanary = "canary-undeclared-key-5d1e9a", "canary-header-bearer-77e0c4", "canary-cmd-password-0c3f2b"
	const schemaCanary = "canary-schema-password-3b8d0a"
	h := newHarness(t, `
[[tool]]
name = "login"
url = "{{target}}/v1/login"
contract = "repeatable_with_key"
input_schema = '{"type":"object","properties":{"user":{"type":"string"},"password":{"type":"string","maxLength":8},"api_key":{"type":"string","pattern":"^k_"},"headers":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"value":{"type":"string","maxLength":10}}}}},"required":["user"]}'
`)
	for _, era := range eras {
		cs := h.connect(era, false)
		mustCall(t, cs, "charge_card", map[string]any{"amount_cents": 1, "card_token": secretValue}, nil)
		mustCall(t, cs, "deploy_release", map[string]any{"service": "s", "version": era}, nil)
		h.proxy.Next(loopback.DropResponse)
		mustCall(t, cs, "charge_card", map[string]any{"amount_cents": 2, "card_token": secretValue}, nil)
		// A secret argument must not be searchable by value either: two
		// calls differing only in the secret are different intents.
		mustCall(t, cs, "charge_card", map[string]any{"amount_cents": 1, "card_token": secretValue + "x"}, nil)
	}
	// Secrets the tool's config does not declare, named as secrets at any
	// depth or written as text: kept as keyed hashes too, still sent.
	cs := h.connect(loopback.ProtocolStateless, false)
	undeclared := func(key string) map[string]any {
		return map[string]any{"api_key": key, "headers": []any{map[string]any{"name": "Authorization", "value": "Bearer " + headerCanary}},
			"cmd": "deploy --password " + cmdCanary + " --region eu"}
	}
	mustCall(t, cs, "no_contract", undeclared(keyCanary), nil)
	mustCall(t, cs, "no_contract", undeclared(keyCanary+"2"), nil)
	// A refusal that quotes what it refused (input_schema: version must be
	// a string) quoted an undeclared password whole, in the answer and
	// the call's recorded reason.
	for _, args := range []map[string]any{{"user": "u", "password": schemaCanary}, {"user": "u", "api_key": schemaCanary},
		{"user": "u", "headers": []any{map[string]any{"name": "Authorization", "value": "Bearer " + schemaCanary}}}} {
		refused := mustCall(t, cs, "login", args, nil)
		if !refused.IsError || strings.Contains(resultText(refused), schemaCanary) || !strings.Contains(resultText(refused), "Invalid arguments") {
			t.Errorf("input_schema refusal of %v: %s", args, resultText(refused))
		}
	}
	sent := ""
	for intent := range h.target.Effects() {
		sent += intent
	}
	for _, canary := range []string{keyCanary, headerCanary, cmdCanary} {
		if !strings.Contains(sent, canary) {
			t.Errorf("the target never got %q: %s", canary, sent)
		}
	}
	if n := len(h.executions("no_contract")); n != 2 {
		t.Errorf("two calls differing only in an undeclared api_key are %d executions, want 2", n)
	}
	req, _ := http.NewRequest(http.MethodPost, h.endpoint(false), strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"charge_card"}}`))
	req.Header.Set("Authorization", "Bearer "+wrongToken)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	h.gw.Close() // flush delivery records
	if _, err := h.store.Seal(ctx, activity.SealManual); err != nil {
		t.Fatal(err)
	}
	var export bytes.Buffer
	if _, err := audit.Export(ctx, h.store, &export); err != nil {
		t.Fatal(err)
	}
	es, _ := h.store.Executions(ctx, activity.ExecutionFilter{})
	var fps strings.Builder
	for _, e := range es {
		fps.WriteString(e.Fingerprint + string(e.Arguments) + e.Target + e.CredentialRef)
	}
	if len(es) < 5 {
		t.Fatalf("only %d executions recorded", len(es))
	}
	sources := map[string][]byte{"export": export.Bytes(), "logs": []byte(h.logs.String()), "fingerprints": []byte(fps.String())}
	for _, f := range []string{"gw.db", "gw.db-wal"} {
		b, err := os.ReadFile(filepath.Join(h.dir, f))
		if err != nil {
			t.Fatal(err)
		}
		sources[f] = b
	}
	for name, data := range sources {
		for _, canary := range []string{agentToken, credValue, secretValue, wrongToken, "card-token-4e8a", keyCanary, headerCanary, cmdCanary, schemaCanary} {
			if bytes.Contains(data, []byte(canary)) {
				t.Errorf("%s contains the canary %q", name, canary)
			}
		}
	}
	if !bytes.Contains(append(sources["gw.db"], sources["gw.db-wal"]...), []byte("hmac-sha256:")) {
		t.Fatal("the scan found no fingerprints at all: is it reading the right file?")
	}
	// The secret argument is recorded as a keyed hash, and differs by value.
	charges := h.executions("charge_card")
	if !strings.Contains(string(charges[0].Arguments), `"card_token":"hmac-sha256:`) {
		t.Fatalf("secret argument not hashed: %s", charges[0].Arguments)
	}
}
