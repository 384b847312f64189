// Package gatewaytest provides real loopback parts for exercising the
// gateway: a target API that acts and counts its effects, a fault proxy
// that cuts HTTP exchanges at chosen points, and an MCP client with
// bearer-token authentication and a naive retry layer. Tests, the chaos
// run and the demo share them.
package gatewaytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Target is an HTTP API that performs an effect for every request it
// accepts and counts them, keyed by the request body (the intent). Like
// Stripe, it honours Idempotency-Key: a repeated key replays the stored
// answer (Idempotent-Replayed: true) instead of acting again. Requests
// without the header always act.
type Target struct {
	*httptest.Server
	mu      sync.Mutex
	effects map[string]int          // body → times acted
	byKey   map[string]storedAnswer // Idempotency-Key → first answer
	keyed   map[string]string       // Idempotency-Key → body
	arrived map[string]int          // Idempotency-Key → requests that carried it
	total   atomic.Int64
	hold    chan struct{}
	delay   time.Duration
	fail    int // answer this many more actions 503 without acting
}

// FailNext makes the next n actions answer 503 without acting: a known
// failure, no effect.
func (t *Target) FailNext(n int) {
	t.mu.Lock()
	t.fail = n
	t.mu.Unlock()
}

// SetHold makes each action wait until hold is closed (nil: no wait). The
// effect is counted first, so a client cut during the wait leaves an
// effect behind.
func (t *Target) SetHold(hold chan struct{}) {
	t.mu.Lock()
	t.hold = hold
	t.mu.Unlock()
}

// SetDelay makes each action sleep d after acting, before answering.
func (t *Target) SetDelay(d time.Duration) {
	t.mu.Lock()
	t.delay = d
	t.mu.Unlock()
}

type storedAnswer struct {
	status int
	body   []byte
}

// NewTarget starts a target on a loopback port. Routes:
//
//	POST /v1/{anything}         act; 201 with {"id":..., "n": effects so far}
//	GET  /v1/status/{key}       200 with the stored answer if that Idempotency-Key acted, else 404
//	GET  /v1/read/{anything}    a read: 200, no effect
func NewTarget() *Target {
	t := &Target{effects: map[string]int{}, byKey: map[string]storedAnswer{}, keyed: map[string]string{}, arrived: map[string]int{}}
	t.Server = httptest.NewServer(http.HandlerFunc(t.serve))
	return t
}

func (t *Target) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/status/"):
		key := strings.TrimPrefix(r.URL.Path, "/v1/status/")
		t.mu.Lock()
		a, ok := t.byKey[key]
		t.mu.Unlock()
		if !ok {
			http.Error(w, `{"error":"no such request"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(a.body)
	case r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"read":%q}`, r.URL.Path)
	case r.Method == http.MethodPost:
		t.act(w, r)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (t *Target) act(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away before the request arrived: no effect
	}
	key := r.Header.Get("Idempotency-Key")
	intent := r.URL.Path + " " + string(body)
	t.mu.Lock()
	if key != "" {
		t.arrived[key]++
	}
	if t.fail > 0 {
		t.fail--
		t.mu.Unlock()
		http.Error(w, `{"error":"temporarily unavailable, nothing done"}`, http.StatusServiceUnavailable)
		return
	}
	if a, ok := t.byKey[key]; ok && key != "" {
		t.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(a.status)
		w.Write(a.body)
		return
	}
	t.effects[intent]++
	n := t.effects[intent]
	answer := storedAnswer{http.StatusCreated, []byte(fmt.Sprintf(`{"id":"eff_%d","intent_effects":%d}`, t.total.Add(1), n))}
	if key != "" {
		t.byKey[key], t.keyed[key] = answer, intent
	}
	hold, delay := t.hold, t.delay
	t.mu.Unlock()
	if hold != nil {
		<-hold
	}
	time.Sleep(delay)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(answer.status)
	w.Write(answer.body)
}

// Effects returns how many times the target acted for each intent.
func (t *Target) Effects() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.effects))
	for k, v := range t.effects {
		out[k] = v
	}
	return out
}

// Arrivals is how many action requests carrying Idempotency-Key key
// reached the target, whether they acted or were replayed.
func (t *Target) Arrivals(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.arrived[key]
}

// Total is how many effects the target performed.
func (t *Target) Total() int64 { return t.total.Load() }

// Duplicates counts effects beyond the first for every intent.
func (t *Target) Duplicates() int {
	n := 0
	for _, c := range t.Effects() {
		if c > 1 {
			n += c - 1
		}
	}
	return n
}

// DuplicatedIntents lists intents the target acted on more than once.
func (t *Target) DuplicatedIntents() []string {
	var out []string
	for k, c := range t.Effects() {
		if c > 1 {
			out = append(out, fmt.Sprintf("%dx %s", c, k))
		}
	}
	sort.Strings(out)
	return out
}

// Fault is what the proxy does to one HTTP exchange.
type Fault int

const (
	// Pass forwards the exchange untouched.
	Pass Fault = iota
	// DropRequest reads the whole request, then closes the connection
	// without forwarding it: the client wrote its request, the target
	// never saw it.
	DropRequest
	// DropResponse forwards the request, waits for the target's answer,
	// then closes the client's connection without sending it: the target
	// acted, the client never hears.
	DropResponse
	// CutStream forwards the response headers and its first server-sent
	// event, then cuts the client's connection: a broken SSE stream the
	// client can resume with Last-Event-ID.
	CutStream
	// LateRequest reads the whole request, closes the client's connection
	// at once, and forwards the request to the target LateBy later: a send
	// the client gave up on that still arrives, after any quick lookup.
	LateRequest
)

// LateBy is how long a LateRequest is held before it reaches the target.
const LateBy = 500 * time.Millisecond

func (f Fault) String() string {
	return [...]string{"pass", "drop-request", "drop-response", "cut-stream", "late-request"}[f]
}

// FaultProxy is an HTTP proxy on a loopback port that applies a fault to
// each exchange, chosen by Plan (default: Pass) or queued with Next.
type FaultProxy struct {
	*httptest.Server
	upstream string
	client   *http.Client
	mu       sync.Mutex
	queue    []Fault
	// Plan, when set, chooses the fault for exchanges with an empty queue.
	Plan   func(r *http.Request, body []byte) Fault
	late   []chan struct{} // LateRequests, each closed once it reached the target
	counts [5]atomic.Int64
}

// NewFaultProxy proxies to upstream (a base URL).
func NewFaultProxy(upstream string) *FaultProxy {
	p := &FaultProxy{upstream: strings.TrimSuffix(upstream, "/"), client: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
	}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// IsToolsCall reports whether a proxied POST body is a tools/call.
func IsToolsCall(body []byte) bool { return bytes.Contains(body, []byte(`"method":"tools/call"`)) }

// Next queues faults for the next exchanges, in order.
func (p *FaultProxy) Next(f ...Fault) {
	p.mu.Lock()
	p.queue = append(p.queue, f...)
	p.mu.Unlock()
}

// forwardLate sends a request the client already lost to the target.
func (p *FaultProxy) forwardLate(done chan struct{}, method, uri string, h http.Header, body []byte) {
	defer close(done)
	time.Sleep(LateBy)
	req, err := http.NewRequest(method, p.upstream+uri, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header = h
	if resp, err := p.client.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// WaitLate waits until every LateRequest has reached the target. (Not a
// WaitGroup: its Add would run in the server's goroutine, ordered before
// the test's Wait only through the network, which the race detector
// cannot see.)
func (p *FaultProxy) WaitLate() {
	p.mu.Lock()
	late := p.late
	p.mu.Unlock()
	for _, done := range late {
		<-done
	}
}

// Count returns how many exchanges got fault f.
func (p *FaultProxy) Count(f Fault) int64 { return p.counts[f].Load() }

func (p *FaultProxy) fault(r *http.Request, body []byte) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) > 0 {
		f := p.queue[0]
		p.queue = p.queue[1:]
		return f
	}
	if p.Plan != nil {
		return p.Plan(r, body)
	}
	return Pass
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	f := Pass
	if r.Method == http.MethodPost {
		f = p.fault(r, body)
	}
	p.counts[f].Add(1)
	if f == DropRequest {
		hangUp(w)
		return
	}
	if f == LateRequest {
		done := make(chan struct{}) // noted before the client hears anything
		p.mu.Lock()
		p.late = append(p.late, done)
		p.mu.Unlock()
		go p.forwardLate(done, r.Method, r.URL.RequestURI(), r.Header.Clone(), body)
		hangUp(w)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		hangUp(w)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		hangUp(w)
		return
	}
	defer resp.Body.Close()
	if f == DropResponse {
		io.Copy(io.Discard, resp.Body) // let the upstream finish: it acted
		hangUp(w)
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	if f == CutStream {
		p.cutAfterFirstEvent(w, resp.Body)
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			if fl != nil {
				fl.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// cutAfterFirstEvent relays one SSE event, then hangs up; the rest of the
// upstream stream is drained so the upstream is not blocked.
func (p *FaultProxy) cutAfterFirstEvent(w http.ResponseWriter, body io.Reader) {
	br := bufio.NewReader(body)
	var event bytes.Buffer
	for !bytes.HasSuffix(event.Bytes(), []byte("\n\n")) {
		b, err := br.ReadByte()
		if err != nil {
			break
		}
		event.WriteByte(b)
	}
	w.Write(event.Bytes())
	http.NewResponseController(w).Flush()
	go io.Copy(io.Discard, br)
	hangUp(w)
}

// hangUp closes the client's connection with no response at all.
func hangUp(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("gatewaytest: response writer cannot hijack")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // RST: the client sees a reset, not a clean close
	}
	conn.Close()
}

// DeadURL returns an http URL on a loopback port nothing listens on: a
// connection is refused before any byte is sent.
func DeadURL() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// MustJSON marshals v or panics (test data).
func MustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
