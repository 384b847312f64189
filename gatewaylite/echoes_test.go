package gatewaylite_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
)

// echoCore is the letters-and-digits run of echoSecret: every spelling
// of the secret holds it, so finding it anywhere means the secret is
// there in some spelling.
const echoCore = "7a1fcafe9d2b"

// echoSecret has a "/" and a non-ASCII letter, which encoders spell in
// different ways.
const echoSecret = "zq/é-" + echoCore

// echoServer answers every request with what it received (headers, body,
// URL), as httpbin's /anything does, in the encoding its path names: go
// (encoding/json, HTML escapes), ascii (non-ASCII as \uXXXX, as Python's
// json.dumps), slash ("/" as "\/", as PHP's json_encode), text (plain).
func echoServer(t *testing.T) (*httptest.Server, *strings.Builder) {
	var seen strings.Builder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen.WriteString(r.Header.Get("Authorization") + string(body))
		doc := map[string]any{"headers": r.Header, "body": string(body), "url": r.URL.String()}
		b, _ := json.Marshal(doc)
		mode := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		switch mode {
		case "ascii":
			b = []byte(pythonASCII(string(b)))
		case "slash":
			b = bytes.ReplaceAll(b, []byte("/"), []byte(`\/`))
		case "text":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "you sent %s with %s", body, r.Header.Get("Authorization"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// pythonASCII writes non-ASCII runes as JSON's \uXXXX escapes (UTF-16).
func pythonASCII(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 {
			b.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&b, `\u%04x`, u)
		}
	}
	return b.String()
}

// TestTargetEchoesNeverRecorded: a target that repeats what it was sent
// (its credential, a secret argument, an undeclared secret-named one) in
// any of the usual encodings has those cut from the result the store
// keeps, the export, and the answer; the rest of the echo stays, and the
// target still got every secret.
func TestTargetEchoesNeverRecorded(t *testing.T) {
	echo, seen := echoServer(t)
	var tools strings.Builder
	modes := []string{"go", "ascii", "slash", "text"}
	for _, m := range modes {
		fmt.Fprintf(&tools, `
[[tool]]
name = "echo_%[1]s"
url = "%[2]s/anything/%[1]s"
credential_ref = "deploy-service"
contract = "repeatable_with_key"
secret_args = ["password"]
timeout = "5s"
`, m, echo.URL)
	}
	h := newHarness(t, tools.String())
	cs := h.connect(loopback.ProtocolStateless, false)
	var answers strings.Builder
	for _, m := range modes {
		res := mustCall(t, cs, "echo_"+m, map[string]any{"password": echoSecret, "api_key": "undeclared-" + echoCore + "x", "note": "plain-visible-note"}, nil)
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				answers.WriteString(tc.Text)
			}
		}
		if res.StructuredContent != nil {
			b, _ := json.Marshal(res.StructuredContent)
			answers.Write(b)
		}
	}
	if !strings.Contains(seen.String(), echoSecret) || !strings.Contains(seen.String(), credValue) {
		t.Fatalf("the target did not get the secrets it echoes: %.300s", seen.String())
	}
	h.gw.Close() // flush the outcomes and deliveries
	if _, err := h.store.Seal(ctx, activity.SealManual); err != nil {
		t.Fatal(err)
	}
	var export bytes.Buffer
	if _, err := audit.Export(ctx, h.store, &export); err != nil {
		t.Fatal(err)
	}
	sources := map[string][]byte{"answers": []byte(answers.String()), "export": export.Bytes(), "logs": []byte(h.logs.String())}
	for _, f := range []string{"gw.db", "gw.db-wal"} {
		b, err := os.ReadFile(filepath.Join(h.dir, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		sources[f] = b
	}
	for name, data := range sources {
		for _, canary := range []string{echoCore, credValue} {
			if bytes.Contains(data, []byte(canary)) {
				i := bytes.Index(data, []byte(canary))
				t.Errorf("%s holds %q: …%q…", name, canary, data[max(0, i-60):min(len(data), i+40)])
			}
		}
	}
	a := answers.String()
	if n := strings.Count(a, gatewaylite.RedactedEcho); n < len(modes)*2 {
		t.Errorf("the answers name %d redactions, want at least %d: %.400s", n, len(modes)*2, a)
	}
	if strings.Count(a, "plain-visible-note") < len(modes) {
		t.Errorf("the echo of an ordinary argument was lost: %.400s", a)
	}
}

// TestNoSilentResendOfBodylessRequests: a target that acts on a DELETE
// and then closes a reused connection without answering gets that DELETE
// once: net/http resent a body-less request that carries Idempotency-Key
// on a new connection, unrecorded, and a blocked_after_unknown tool acted
// twice while the agent was told it would not be sent again.
func TestNoSilentResendOfBodylessRequests(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	h := harnessBehind(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path]++
		if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
			got["a body was sent"]++ // a DELETE carries none
		}
		mu.Unlock()
		if !strings.HasSuffix(r.URL.Path, "/drop") {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		// Acted, then the connection goes away before any answer.
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}, `
[[tool]]
name = "dequeue"
method = "DELETE"
url = "{{srv}}/v1/queue/{item}"
contract = "blocked_after_unknown"
timeout = "5s"
`)
	cs := h.connect(loopback.ProtocolStateless, false)
	// The first would leave a kept-alive connection for the second to reuse.
	mustCall(t, cs, "dequeue", map[string]any{"item": "keep"}, nil)
	res := mustCall(t, cs, "dequeue", map[string]any{"item": "drop"}, nil)
	if st := execMeta(t, res)["state"]; st != string(activity.StateUnknown) && st != string(activity.StatePendingVerification) {
		t.Fatalf("dequeue drop: state %v, want unknown or pending_verification: %s", st, resultText(res))
	}
	mu.Lock()
	defer mu.Unlock()
	if got["/v1/queue/keep"] != 1 || got["/v1/queue/drop"] != 1 || got["a body was sent"] > 0 {
		t.Fatalf("the target got %v: want each DELETE once", got)
	}
}

// TestSeeOtherIsAnEffect: a target that answers a POST with 303 See Other
// acted (RFC 9110: the result is elsewhere); redirects are not followed,
// so the gateway recorded a failure, and once it was delivered a retry of
// the same intent made a new attempt: a second effect.
func TestSeeOtherIsAnEffect(t *testing.T) {
	var mu sync.Mutex
	acted := 0
	h := harnessBehind(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		acted++
		n := acted
		mu.Unlock()
		w.Header().Set("Location", fmt.Sprintf("/v1/orders/ord_%d", n))
		w.WriteHeader(http.StatusSeeOther)
	}, `
[[tool]]
name = "place_order"
url = "{{srv}}/v1/orders"
contract = "blocked_after_unknown"
timeout = "5s"
`)
	cs := h.connect(loopback.ProtocolStateless, false)
	args := map[string]any{"sku": "A-1", "qty": 2}
	res := mustCall(t, cs, "place_order", args, nil)
	if m := execMeta(t, res); m["state"] != string(activity.StateSucceeded) {
		t.Fatalf("303: %v %s", m, resultText(res))
	}
	id := activity.ExecutionID(execMeta(t, res)["id"].(string))
	waitFor(t, func() bool {
		e, err := h.store.Execution(ctx, id)
		return err == nil && e.State == activity.StateDelivered
	}, "the answer's delivery")
	mustCall(t, cs, "place_order", args, nil)
	mu.Lock()
	defer mu.Unlock()
	if acted != 1 {
		t.Fatalf("the target acted %d times, want once", acted)
	}
}

// TestEchoCutAtTheResultLimit: a target that echoes the credential right
// where its answer is cut (1 MiB) kept the credential's beginning in the
// stored result and the answer ("Bearer apitok-SUPERS"): the whole
// spelling no longer matched. The cut end is redacted too.
func TestEchoCutAtTheResultLimit(t *testing.T) {
	h := harnessBehind(t, func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(strings.Repeat("a", 1<<20-len(auth)/2)))
		w.Write([]byte(auth)) // its second half falls past the limit
	}, `
[[tool]]
name = "big_echo"
url = "{{srv}}/v1/echo"
credential_ref = "deploy-service"
contract = "repeatable_with_key"
timeout = "5s"
`)
	cs := h.connect(loopback.ProtocolStateless, false)
	res := mustCall(t, cs, "big_echo", map[string]any{"n": 1}, nil)
	text := resultText(res)
	half := credValue[:len(credValue)/2]
	if strings.Contains(text, half) || !strings.HasSuffix(strings.TrimSpace(text), gatewaylite.RedactedEcho) {
		t.Fatalf("the answer ends %q", text[max(0, len(text)-80):])
	}
	h.gw.Close()
	for _, f := range []string{"gw.db", "gw.db-wal"} {
		if b, err := os.ReadFile(filepath.Join(h.dir, f)); err == nil && bytes.Contains(b, []byte(half)) {
			t.Fatalf("%s holds the beginning of the credential", f)
		}
	}
}

// TestEnvoyConnectionTerminationIsUnknown: a target behind Envoy (Istio,
// Envoy Gateway) whose connection closed after the request was written
// answers with Envoy's own 503, "reset reason: connection termination":
// the target may have acted. It was read as a refusal, and once that was
// delivered a retry of a blocked tool was sent anew.
func TestEnvoyConnectionTerminationIsUnknown(t *testing.T) {
	h := harnessBehind(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "envoy")
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "upstream connect error or disconnect/reset before headers. reset reason: connection termination")
	}, `
[[tool]]
name = "pay"
url = "{{srv}}/v1/payments"
contract = "blocked_after_unknown"
timeout = "5s"
`)
	res := mustCall(t, h.connect(loopback.ProtocolStateless, false), "pay", map[string]any{"amount": 5}, nil)
	if st := execMeta(t, res)["state"]; st != string(activity.StatePendingVerification) && st != string(activity.StateUnknown) {
		t.Fatalf("503 connection termination: state %v, want unknown or pending_verification: %s", st, resultText(res))
	}
}

// harnessBehind is a harness whose extra tools (tool: TOML naming the
// server as {{srv}}) reach a target served by handler.
func harnessBehind(t *testing.T, handler http.HandlerFunc, tool string) *harness {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return newHarness(t, strings.ReplaceAll(tool, "{{srv}}", srv.URL))
}
