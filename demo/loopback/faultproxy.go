package loopback

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

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
	*Server
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
	p.Server = Serve(http.HandlerFunc(p.serve))
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
		panic("loopback: response writer cannot hijack")
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
