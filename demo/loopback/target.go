package loopback

import (
	"fmt"
	"io"
	"net/http"
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
	*Server
	mu      sync.Mutex
	effects map[string]int          // body → times acted
	byKey   map[string]storedAnswer // Idempotency-Key → first answer
	keyed   map[string]string       // Idempotency-Key → body
	arrived map[string]int          // Idempotency-Key → requests that carried it
	total   atomic.Int64
	reads   atomic.Int64
	hold    chan struct{}
	delay   time.Duration
	fail    int // answer this many more actions 503 without acting
	broken  int // answer this many more actions 500 after acting
}

// ErrorAfterActing makes the next n actions act, then answer 500: a
// server that failed after its side effect (the effect and its key's
// answer are kept, as a keyed API's are once it began executing).
func (t *Target) ErrorAfterActing(n int) {
	t.mu.Lock()
	t.broken = n
	t.mu.Unlock()
}

// FailNext makes the next n actions answer 503 without acting: a known
// failure, no effect.
func (t *Target) FailNext(n int) {
	t.mu.Lock()
	t.fail = n
	t.mu.Unlock()
}

// SetHold makes each action and read wait until hold is closed (nil: no
// wait). The effect is counted first, so a client cut during the wait
// leaves an effect behind.
func (t *Target) SetHold(hold chan struct{}) {
	t.mu.Lock()
	t.hold = hold
	t.mu.Unlock()
}

// SetDelay makes each action and read sleep d before answering.
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
	t.Server = Serve(http.HandlerFunc(t.serve))
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
		t.reads.Add(1)
		t.mu.Lock()
		hold, delay := t.hold, t.delay
		t.mu.Unlock()
		if hold != nil {
			<-hold
		}
		time.Sleep(delay)
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
	broken := t.broken > 0
	if broken {
		t.broken--
	}
	t.mu.Unlock()
	if hold != nil {
		<-hold
	}
	time.Sleep(delay)
	if broken {
		http.Error(w, `{"error":"internal server error"}`, http.StatusInternalServerError)
		return
	}
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

// Reads is how many reads (GET outside /v1/status/) arrived.
func (t *Target) Reads() int64 { return t.reads.Load() }

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
