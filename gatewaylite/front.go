package gatewaylite

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/internal/termsafe"
)

// protocolStateless is the first MCP revision without sessions; requests
// that declare it (or later) go to the stateless handler.
const protocolStateless = "2026-07-28"

// authenticator maps bearer tokens to actors. Tokens come from the
// environment and are only ever held as SHA-256 digests, compared in
// constant time.
type authenticator struct {
	digests map[string][32]byte // actor → sha256(token)
}

func newAuthenticator(actors []ActorConfig) (*authenticator, error) {
	a := &authenticator{digests: map[string][32]byte{}}
	for _, ac := range actors {
		tok, ok := os.LookupEnv(ac.TokenEnv)
		if !ok || len(tok) < 16 {
			return nil, fmt.Errorf("actor %s: environment variable %s must hold a bearer token of at least 16 characters", ac.Name, ac.TokenEnv)
		}
		a.digests[ac.Name] = sha256.Sum256([]byte(tok))
	}
	return a, nil
}

// actor returns the actor whose token the request carries, or a reason.
// The scheme is matched case-insensitively (RFC 9110 §11.1), as the SDK's
// own bearer middleware does.
func (a *authenticator) actor(r *http.Request) (string, string) {
	tok, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return "", "401: no bearer token"
	}
	d := sha256.Sum256([]byte(tok))
	found := ""
	for name, want := range a.digests {
		if subtle.ConstantTimeCompare(d[:], want[:]) == 1 {
			found = name
		}
	}
	if found == "" {
		return "", "401: bearer token matches no actor"
	}
	return found, ""
}

func bearerToken(h string) (string, bool) {
	f := strings.Fields(h)
	if len(f) != 2 || !strings.EqualFold(f[0], "bearer") {
		return "", false
	}
	return f[1], true
}

// front checks Origin, authenticates every request from its headers alone
// (a stranger's body is never read beyond a bounded prefix), bounds and
// times the body of the rest, applies the actor's rate limit, notes the
// JSON-RPC ids of calls, routes each protocol era to its handler, and
// watches what is written back so result delivery can be recorded.
func (g *Gateway) front(stateful, stateless http.Handler) http.Handler {
	lim := g.cfg.Limits
	// The SDK binds a session to the TokenInfo.UserID of the request that
	// created it and refuses it to any other (403 "session user mismatch"):
	// actor B can neither call into nor DELETE actor A's session.
	bind := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{UserID: r.Header.Get(headerActor), Expiration: time.Now().Add(time.Hour)}, nil
	}, nil)
	stateful, stateless = bind(stateful), bind(stateless)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-mcpdup-") {
				delete(r.Header, k)
			}
		}
		if !originAllowed(r, lim.AllowedOrigins) {
			http.Error(w, fmt.Sprintf("forbidden: Origin %q is not allowed", termsafe.Line(r.Header.Get("Origin"))), http.StatusForbidden)
			return
		}
		actor, why := g.auth.actor(r)
		if actor == "" {
			g.strangers.refuse(w, r, why)
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcpdup"`)
			w.Header().Set("Connection", "close") // do not keep a stranger's connection
			http.Error(w, "unauthorized: "+why[5:], http.StatusUnauthorized)
			return
		}
		body, status, err := readBody(w, r, lim)
		if err != nil {
			// The body was not read: what it held is unknown. Its refusal
			// counts against the actor's rate, as any request does, and is
			// recorded as the rate's are: a few a second, the rest counted
			// into the next record (a flood of oversized bodies was an
			// fsynced record each, and never met the rate limit).
			w.Header().Set("Connection", "close")
			if !g.limits.allow(actor) {
				g.refuseRate(w, r, actor, rpcBody{})
				return
			}
			if more, ok := g.unread.take("unread requests"); ok {
				g.recordRefused(context.Background(), activity.Call{Actor: actor, Method: truncate(cmp.Or(r.Header.Get("Mcp-Method"), "unread"), maxSummaryName),
					ReceivedAt: g.now().UTC(), Reason: fmt.Sprintf("%d: %v (from %s)%s", status, err, r.RemoteAddr, more)})
			}
			http.Error(w, err.Error(), status)
			return
		}
		msg := parseBody(body)
		if !g.limits.allow(actor) {
			g.refuseRate(w, r, actor, msg)
			return
		}
		if msg.badID != nil {
			refuseID(w, msg.badID)
			return
		}
		var dw *deliveryWriter
		opening := opensSession(r, msg)
		if opening {
			if !g.sessions.open(actor, g.now()) {
				refuseSession(w, msg.single, lim.MaxSessions, g.cfg.RunIdleTimeout.Duration)
				return
			}
			// Counted when the answer's status is set (sessionAnswer); an
			// answer that never came through the handler gives the place
			// back here.
			defer func() {
				if dw == nil || !dw.answered() {
					g.sessions.opened(actor, w.Header().Get("Mcp-Session-Id"), g.now())
				}
			}()
		}
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
			g.sessions.begin(actor, sid)
			defer func() { g.sessions.end(actor, sid, g.now()) }()
		}
		if v := r.Header.Get("MCP-Protocol-Version"); v >= protocolStateless && msg.single != nil {
			if req, missing := msg.single, missingStateless(r.Header, msg.single, v); len(missing) > 0 {
				if req.Method == "tools/call" {
					c := g.callSummary(r, actor, req)
					c.Reason = "400: incomplete " + protocolStateless + " request: lacks " + strings.Join(missing, ", ")
					g.recordRefused(context.Background(), c)
				}
				refuseIncomplete(w, req, missing)
				return
			}
		}
		if ss, ok := g.resumesElsewhere(r); ok {
			g.replayShared(w, r, actor, ss)
			return
		}
		token := newToken()
		r.Header.Set(headerActor, actor)
		r.Header.Set(headerRequest, token)
		if msg.calls > 0 {
			c := g.callSummary(r, actor, msg.singleCall())
			if c.JSONRPCID.OK {
				r.Header.Set(headerRPCID, c.JSONRPCID.V)
			}
			g.delivery.begin(token, msg.calls, c)
		}
		dw = &deliveryWriter{ResponseWriter: w, onStatus: g.sessionAnswer(w, r, actor, opening)}
		h := stateful
		if v := r.Header.Get("MCP-Protocol-Version"); v >= protocolStateless {
			h = stateless
		}
		h.ServeHTTP(dw, r)
		g.delivery.finish(token, dw, r.Method, r.Context().Err() != nil)
	})
}

// readBody reads an authenticated request's body, at most MaxBodyBytes
// within ReadTimeout, and puts it back for the handler.
func readBody(w http.ResponseWriter, r *http.Request, lim LimitsConfig) ([]byte, int, error) {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil, 0, nil
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(lim.ReadTimeout.Duration))
	body, err := io.ReadAll(io.LimitReader(r.Body, lim.MaxBodyBytes+1))
	rc.SetReadDeadline(time.Time{})
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, http.StatusRequestTimeout, fmt.Errorf("request body not received within %s", lim.ReadTimeout.Duration)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("read request: %v", err)
	}
	if int64(len(body)) > lim.MaxBodyBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body larger than %d bytes", lim.MaxBodyBytes)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, 0, nil
}

// refuseRate answers a request over its actor's rate limit: HTTP 429 with
// Retry-After and a JSON-RPC error written for the agent. A refused
// tools/call is recorded (no execution, nothing sent).
func (g *Gateway) refuseRate(w http.ResponseWriter, r *http.Request, actor string, rb rpcBody) {
	lim := g.cfg.Limits
	msg := fmt.Sprintf("rate limit: actor %s is over %g requests per second (burst %d); nothing was sent to any target. Retry after a second.",
		actor, lim.RatePerSecond, lim.RateBurst)
	var m rpcMessage
	if rb.single != nil {
		m = *rb.single
	}
	// Recorded as strangers are: at most a few per second (a retry storm
	// is what this limit meets), the rest counted into the next record.
	if m.Method == "tools/call" {
		if more, ok := g.overLimit.take("rate-limited calls"); ok {
			c := g.callSummary(r, actor, &m)
			c.Reason = "429: " + msg + more
			g.recordRefused(context.Background(), c)
		}
	}
	tooMany(w, m.ID, "1", msg)
}

// tooMany answers 429 with Retry-After and a JSON-RPC error under the
// request's id (null when it has none, or one too long to echo).
func tooMany(w http.ResponseWriter, id json.RawMessage, retryAfter, msg string) {
	if len(id) == 0 || len(id) > maxRPCID {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", retryAfter)
	w.WriteHeader(http.StatusTooManyRequests)
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32000, "message": msg}})
}

// callSummary is a tools/call as the front knows it before the SDK runs
// it, to record it if it is refused: bounded copies of what the request
// says (m nil: a batch, whose ids and tools are not attributed). A
// JSON-RPC id is kept for correlation, not in full.
func (g *Gateway) callSummary(r *http.Request, actor string, m *rpcMessage) activity.Call {
	c := activity.Call{Actor: actor, Method: "tools/call", ReceivedAt: g.now().UTC(),
		ProtocolVersion: optString(truncate(r.Header.Get("MCP-Protocol-Version"), 32)),
		SessionID:       optString(truncate(r.Header.Get("Mcp-Session-Id"), maxRPCID))}
	if m != nil {
		c.Method, c.Tool = truncate(m.Method, maxSummaryName), truncate(m.Params.Name, maxSummaryName)
		c.JSONRPCID = optString(truncate(string(m.ID), maxRPCID))
	}
	return c
}

// rpcMessage is the part of a JSON-RPC message the front reads.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string                     `json:"name"`
		URI  string                     `json:"uri"`
		Meta map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// UnmarshalJSON reads a message's members by their exact names, as the
// SDK does: encoding/json matches names regardless of case, so with
// {"id":1.5,"ID":"x"} the front read the id "x" and let through an id the
// SDK answers as 1.
func (m *rpcMessage) UnmarshalJSON(b []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return err
	}
	*m = rpcMessage{ID: top["id"]}
	if raw, ok := top["method"]; ok {
		if err := json.Unmarshal(raw, &m.Method); err != nil {
			return err
		}
	}
	var params map[string]json.RawMessage
	if raw, ok := top["params"]; ok && json.Unmarshal(raw, &params) == nil {
		json.Unmarshal(params["name"], &m.Params.Name)
		json.Unmarshal(params["uri"], &m.Params.URI)
		json.Unmarshal(params["_meta"], &m.Params.Meta)
	}
	return nil
}

// rpcBody is what the front learns from a body, parsed once: the message
// when it is one, and how many tools/call requests it carries (one
// message, or a 2025-03-26 batch whose ids are not attributed to calls and
// stay "not recorded").
type rpcBody struct {
	single *rpcMessage
	calls  int
	// badID is a number id the SDK would answer under another id (it
	// reads ids as float64, then int64: 1.5 came back 1, 2^53+1 as 2^53):
	// a client matching answers by id would never get its result.
	badID json.RawMessage
}

// maxExactID is the largest integer a float64 holds exactly.
const maxExactID = 1<<53 - 1

// inexactID reports whether id is a JSON number the SDK cannot answer
// under itself: not an integer literal, or beyond ±maxExactID.
func inexactID(id json.RawMessage) bool {
	s := string(bytes.TrimSpace(id))
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false // a string, null or absent
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return err != nil || n > maxExactID || n < -maxExactID
}

func parseBody(body []byte) rpcBody {
	b := bytes.TrimSpace(body)
	switch {
	case len(b) == 0:
	case b[0] == '{':
		var m rpcMessage
		if json.Unmarshal(b, &m) == nil {
			rb := rpcBody{single: &m}
			if inexactID(m.ID) {
				rb.badID = m.ID
			}
			if m.Method == "tools/call" && len(m.ID) > 0 {
				rb.calls = 1
			}
			return rb
		}
	case b[0] == '[':
		var batch []rpcMessage
		if json.Unmarshal(b, &batch) == nil {
			var rb rpcBody
			for _, m := range batch {
				if m.Method == "tools/call" && len(m.ID) > 0 {
					rb.calls++
				}
				if inexactID(m.ID) && rb.badID == nil {
					rb.badID = m.ID
				}
			}
			return rb
		}
	}
	return rpcBody{}
}

// singleCall is the body's one tools/call, or nil.
func (rb rpcBody) singleCall() *rpcMessage {
	if rb.single != nil && rb.calls == 1 {
		return rb.single
	}
	return nil
}

func newToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// executionMarker finds the execution id every result carries in its
// _meta, in whatever framing (JSON body or SSE event) it is written.
var executionMarker = regexp.MustCompile(`"` + regexp.QuoteMeta(MetaExecutionID) + `":"(act_[0-9A-Z]{26})"`)

// deliveryWriter watches a response: which executions' results were
// written and flushed without error, and whether writing failed.
type deliveryWriter struct {
	http.ResponseWriter
	mu       sync.Mutex
	pending  []activity.ExecutionID // written, not yet flushed
	written  map[activity.ExecutionID]bool
	failed   map[activity.ExecutionID]bool
	writeErr error
	status   int // the status written; 0 until then
	// onStatus, when set, hears the status once, before any byte of the
	// response leaves: what the client learns from it must already hold.
	onStatus func(code int)
}

// answered reports whether the handler has set the status.
func (d *deliveryWriter) answered() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status != 0
}

// code is the status written: 200 when the handler wrote none.
func (d *deliveryWriter) code() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return cmp.Or(d.status, http.StatusOK)
}

func (d *deliveryWriter) WriteHeader(code int) {
	d.setStatus(code)
	d.ResponseWriter.WriteHeader(code)
}

// setStatus notes the status written first (a Write before any
// WriteHeader sends 200).
func (d *deliveryWriter) setStatus(code int) {
	d.mu.Lock()
	first := d.status == 0
	if first {
		d.status = code
	}
	d.mu.Unlock()
	if first && d.onStatus != nil {
		d.onStatus(code)
	}
}

func (d *deliveryWriter) Write(p []byte) (int, error) {
	d.setStatus(http.StatusOK)
	n, err := d.ResponseWriter.Write(p)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range executionMarker.FindAllSubmatch(p, -1) {
		id := activity.ExecutionID(m[1])
		if err != nil {
			d.markFailed(id)
		} else {
			d.pending = append(d.pending, id)
		}
	}
	if err != nil && d.writeErr == nil {
		d.writeErr = err
	}
	return n, err
}

func (d *deliveryWriter) markFailed(id activity.ExecutionID) {
	if d.failed == nil {
		d.failed = map[activity.ExecutionID]bool{}
	}
	d.failed[id] = true
}

// FlushError flushes and settles what was written since the last flush.
func (d *deliveryWriter) FlushError() error {
	err := http.NewResponseController(d.ResponseWriter).Flush()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range d.pending {
		if err != nil {
			d.markFailed(id)
		} else {
			if d.written == nil {
				d.written = map[activity.ExecutionID]bool{}
			}
			d.written[id] = true
		}
	}
	d.pending = nil
	if err != nil && d.writeErr == nil {
		d.writeErr = err
	}
	return err
}

func (d *deliveryWriter) Flush() { d.FlushError() }

// Unwrap lets http.ResponseController reach the real writer.
func (d *deliveryWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// refuseID answers a request whose id the SDK would answer as another
// number, before anything runs: JSON-RPC's invalid request.
func refuseID(w http.ResponseWriter, id json.RawMessage) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32600,
		"message": fmt.Sprintf("invalid request: id %s: a number id must be an integer within ±2^53-1 (this server would answer it under another id); nothing was run", truncate(string(id), 40))}})
}

// opensSession reports whether r is a 2025-era initialize that opens a
// session (none named yet).
func opensSession(r *http.Request, rb rpcBody) bool {
	return r.Method == http.MethodPost && rb.single != nil && rb.single.Method == "initialize" &&
		r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("MCP-Protocol-Version") < protocolStateless
}

// refuseSession answers an initialize over its actor's session limit.
func refuseSession(w http.ResponseWriter, m *rpcMessage, max int, window time.Duration) {
	tooMany(w, m.ID, "60", fmt.Sprintf("session limit: this actor holds %d open sessions (limits.max_sessions_per_actor); reuse a session, close the ones you are done with (DELETE), or wait: a session left idle closes after %s", max, window))
}
