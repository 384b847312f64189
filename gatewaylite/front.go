package gatewaylite

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/mcpdup/mcpdup/activity"
)

// protocolStateless is the first MCP revision without sessions; requests
// that declare it (or later) go to the stateless handler.
const protocolStateless = "2026-07-28"

// maxBody bounds a request body, as the SDK does by default.
const maxBody = 4 << 20

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
func (a *authenticator) actor(r *http.Request) (string, string) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
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

// front authenticates every request, notes the JSON-RPC ids of calls,
// routes each protocol era to its handler, and watches what is written
// back so result delivery can be recorded.
func (g *Gateway) front(stateful, stateless http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-mcpdup-") {
				delete(r.Header, k)
			}
		}
		var body []byte
		if r.Method == http.MethodPost && r.Body != nil {
			var err error
			body, err = io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			if err != nil {
				http.Error(w, "read request: "+err.Error(), http.StatusBadRequest)
				return
			}
			if len(body) > maxBody {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		actor, why := g.auth.actor(r)
		if actor == "" {
			g.recordUnauthenticated(r, body, why)
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcpdup"`)
			http.Error(w, "unauthorized: "+why[5:], http.StatusUnauthorized)
			return
		}
		token := newToken()
		r.Header.Set(headerActor, actor)
		r.Header.Set(headerRequest, token)
		if id := singleCallID(body); id != "" {
			r.Header.Set(headerRPCID, id)
		}
		dw := &deliveryWriter{ResponseWriter: w}
		h := stateful
		if v := r.Header.Get("MCP-Protocol-Version"); v >= protocolStateless {
			h = stateless
		}
		h.ServeHTTP(dw, r)
		g.delivery.finish(token, dw)
	})
}

// rpcMessage is the part of a JSON-RPC message the front reads.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

// singleCallID returns the raw JSON-RPC id of the request body when it is
// one tools/call (batches of the 2025-03-26 era carry several; their ids
// are not attributed to calls and stay "not recorded").
func singleCallID(body []byte) string {
	var m rpcMessage
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &m) != nil || m.Method != "tools/call" {
		return ""
	}
	return string(m.ID)
}

// recordUnauthenticated records a refused call: no execution, no token.
func (g *Gateway) recordUnauthenticated(r *http.Request, body []byte, why string) {
	var m rpcMessage
	if r.Method != http.MethodPost || json.Unmarshal(body, &m) != nil || m.Method == "" || len(m.ID) == 0 {
		return // not a request: nothing a call record could describe
	}
	g.recordRefused(context.Background(), activity.Call{
		Actor: "unauthenticated", Method: m.Method, Tool: m.Params.Name, ReceivedAt: g.now().UTC(),
		JSONRPCID:       activity.Some(string(m.ID)),
		ProtocolVersion: optString(r.Header.Get("MCP-Protocol-Version")),
		SessionID:       optString(r.Header.Get("Mcp-Session-Id")),
		Reason:          why,
	})
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
}

func (d *deliveryWriter) Write(p []byte) (int, error) {
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
