package gatewaylite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/mcpdup/mcpdup/activity"
)

// Outcome is what a dispatch observed.
type Outcome struct {
	// State is succeeded, failed, unknown or failed_before_dispatch.
	State activity.State
	// Status is the HTTP status, when one arrived.
	Status activity.Opt[int]
	// ExitCode is a remote command's exit code (SSH).
	ExitCode activity.Opt[int]
	// Result is what the agent gets back: stored behind a result reference.
	Result json.RawMessage
	// Reason explains failures and unknowns in one sentence.
	Reason string
	// cut: the target's answer was longer than maxResultBytes and its
	// end was dropped, perhaps in the middle of a secret it echoed.
	cut bool
	// NeverStarted: a lookup found no trace of the execution on a target
	// that refuses to start one execution id twice (the SSH marker), so
	// sending it again under the same id cannot make it act twice.
	NeverStarted bool
	// Running: a lookup found the action under way on the target.
	Running bool
}

// maxResultBytes bounds how much of a target's response is kept.
const maxResultBytes = 1 << 20

// httpTarget dispatches one configured HTTP tool.
type httpTarget struct {
	tool       *ToolConfig
	credHeader string
	credValue  string // read from the environment at start; never stored
	credPrefix string // the credential's configured prefix ("Bearer "), before the secret
	client     *http.Client
}

func newHTTPTarget(t *ToolConfig, creds map[string]CredentialConfig, client *http.Client) (*httpTarget, error) {
	if !hasBody(t.Method) && activity.Contract(t.Contract) != activity.ContractReadOnly {
		// net/http would resend its request, unrecorded, on a reused
		// connection that broke after the request was written (dispatch);
		// a connection used once is never reused. An empty body that
		// cannot rewind would stop it too, but reached HTTP/2 targets as a
		// GET or DELETE of unknown length.
		client = newHTTPClient()
		client.Transport.(*http.Transport).DisableKeepAlives = true
	}
	ht := &httpTarget{tool: t, client: client}
	if t.CredentialRef != "" {
		c := creds[t.CredentialRef]
		v, ok := os.LookupEnv(c.ValueEnv)
		if !ok || v == "" {
			return nil, fmt.Errorf("tool %s: credential %s: environment variable %s is not set", t.Name, t.CredentialRef, c.ValueEnv)
		}
		ht.credHeader, ht.credValue, ht.credPrefix = c.Header, c.Prefix+v, c.Prefix
	}
	return ht, nil
}

// target is the host and path template an execution is recorded against:
// no query values, no credentials.
func (h *httpTarget) target() string {
	u, err := url.Parse(placeholderRE.ReplaceAllString(h.tool.URL, "{$1}"))
	if err != nil {
		return h.tool.URL
	}
	return u.Host + u.Path
}

// expandURL fills {arg} placeholders with path-escaped argument values.
// A value of "." or ".." is refused: escaping leaves dots alone, and a
// server or proxy that normalises the path would send the request to
// another endpoint than the template names.
func expandURL(tmpl string, args map[string]any) (string, error) {
	var missing, dots []string
	out := placeholderRE.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := args[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		s := fmt.Sprint(v)
		if s == "." || s == ".." {
			dots = append(dots, name)
		}
		return url.PathEscape(s)
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("url needs argument(s) %s", strings.Join(missing, ", "))
	}
	if len(dots) > 0 {
		return "", fmt.Errorf("url argument(s) %s: \".\" and \"..\" are not path segments a template can name", strings.Join(dots, ", "))
	}
	return out, nil
}

// dispatch sends the request once, with Idempotency-Key set to the
// execution id, and classifies the result. The caller has already made
// "dispatched" durable.
func (h *httpTarget) dispatch(ctx context.Context, id activity.ExecutionID, args map[string]any) Outcome {
	target, err := expandURL(h.tool.URL, args)
	if err != nil {
		return Outcome{State: activity.StateFailedBefore, Reason: err.Error()}
	}
	var body io.Reader
	if hasBody(h.tool.Method) {
		b, err := json.Marshal(args)
		if err != nil {
			return Outcome{State: activity.StateFailedBefore, Reason: "encode arguments: " + err.Error()}
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, h.tool.Timeout.Duration)
	defer cancel()

	// A byte may leave as soon as a connection is in hand; from then on a
	// failure is an unknown outcome, not a safe one.
	var connected atomic.Bool
	var conns atomic.Int32
	trace := &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { connected.Store(true); conns.Add(1) },
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), h.tool.Method, target, body)
	if err != nil {
		return Outcome{State: activity.StateFailedBefore, Reason: "build request: " + err.Error()}
	}
	// net/http silently resends a request that carries Idempotency-Key, or
	// is a GET, when a reused connection breaks after it was written, if
	// it can rewind the body. That would be a second send the record does
	// not show, and for a tool that must not be resent after an unknown
	// outcome, a possible second action. Without GetBody it cannot rewind
	// a body, so it never resends; our own recovery does, recorded, when
	// the contract allows it. A request with no body needs no rewinding:
	// such a tool has a client of its own that never reuses a connection
	// (newHTTPTarget), and net/http resends only on a reused one.
	req.GetBody = nil
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Idempotency-Key", string(id))
	req.Header.Set("User-Agent", "mcpdup-gateway")
	if h.credHeader != "" {
		req.Header.Set(h.credHeader, h.credValue)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		if !connected.Load() {
			return Outcome{State: activity.StateFailedBefore, Reason: "no connection to the target, nothing was sent: " + scrub(err)}
		}
		return Outcome{State: activity.StateUnknown, Reason: "the request may have reached the target, but no response came back: " + scrub(err)}
	}
	defer resp.Body.Close()
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResultBytes+1))
	out := Outcome{Status: activity.Some(resp.StatusCode)}
	if len(data) > maxResultBytes {
		data, out.cut = data[:maxResultBytes], true
	}
	if n := conns.Load(); n > 1 {
		out.Reason = fmt.Sprintf("the HTTP client resent on %d connections with the same Idempotency-Key; ", n)
	}
	out.State, out.Reason = classifyStatus(resp, data, out.Reason)
	if readErr != nil {
		out.Reason += "response body cut short: " + scrub(readErr)
	}
	out.Result = httpResult(resp, data)
	return out
}

// classifyStatus maps a target's answer to an outcome. 502 and 504 come
// from an intermediary that lost the upstream answer, and 409 with an
// idempotency complaint means the original is still being processed: in
// all three the action may or may not have happened.
func classifyStatus(resp *http.Response, body []byte, prefix string) (activity.State, string) {
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		if resp.Header.Get("Idempotent-Replayed") == "true" {
			return activity.StateSucceeded, prefix + "the target replayed its stored answer for this Idempotency-Key"
		}
		return activity.StateSucceeded, strings.TrimSuffix(prefix, "; ")
	case code == http.StatusConflict && bytes.Contains(bytes.ToLower(body), []byte("idempotency")):
		return activity.StateUnknown, prefix + "the target reports this Idempotency-Key is still being processed (409)"
	}
	st, why := activity.StateForHTTPAnswer(code, string(body))
	return st, prefix + why
}

// httpResult renders the target's answer as an MCP tool result.
func httpResult(resp *http.Response, body []byte) json.RawMessage {
	res := map[string]any{
		"content": []map[string]any{{"type": "text", "text": string(body)}},
	}
	var structured any
	if strings.Contains(resp.Header.Get("Content-Type"), "json") && json.Unmarshal(body, &structured) == nil {
		if _, ok := structured.(map[string]any); ok {
			res["structuredContent"] = structured
		}
	}
	if resp.StatusCode >= 400 {
		res["isError"] = true
	}
	b, _ := json.Marshal(res)
	return b
}

// scrub removes anything credential-like from transport errors before they
// are recorded or answered: Go's errors quote the URL, whose path may
// hold a configured token (a Telegram bot's, a Slack webhook's).
func scrub(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + " " + redactURL(ue.URL) + ": " + ue.Err.Error()
	}
	return err.Error()
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(url)"
	}
	u.User, u.RawQuery = nil, ""
	return activity.RedactText(u.String())
}

// hasBody reports whether a tool's requests carry its arguments as a JSON
// body (GET and DELETE carry them in the URL alone).
func hasBody(method string) bool {
	return method != http.MethodGet && method != http.MethodDelete
}

// newHTTPClient returns the client dispatches use. Redirects are not
// followed: a redirected POST is a second request the record would not
// show.
func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.ResponseHeaderTimeout = 0
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       0, // per-tool timeouts come from the context
	}
}
