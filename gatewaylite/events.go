package gatewaylite

// The event store of 2025-era resumable streams. One gateway keeps its
// streams in memory; replicas on PostgreSQL write them to the database
// (sharedEvents), and a resumption (GET with Last-Event-ID) of a session
// another replica serves is answered here from the database (replayShared):
// a client whose connection dropped, sent elsewhere by its load balancer,
// still gets its answer.

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
)

// eventStore is the store for the gateway's streams.
func (g *Gateway) eventStore() mcp.EventStore {
	if g.store.IsPostgres() {
		return &sharedEvents{g: g, next: map[string]int{}}
	}
	return mcp.NewMemoryEventStore(nil)
}

// sharedEvents is mcp.EventStore on the database replicas share. It
// counts each stream's events as the SDK does (every Append, stored or
// not), so the stored indexes are the event ids the client saw.
type sharedEvents struct {
	g    *Gateway
	mu   sync.Mutex
	next map[string]int // session NUL stream → index of its next event
}

func (e *sharedEvents) Open(ctx context.Context, session, stream string) error {
	actor := ""
	if ti := auth.TokenInfoFromContext(ctx); ti != nil {
		actor = ti.UserID // none: no other replica will replay it
	}
	return e.g.store.OpenStream(ctx, session, stream, actor, e.g.lease.ID)
}

func (e *sharedEvents) Append(ctx context.Context, session, stream string, data []byte) error {
	key := session + "\x00" + stream
	e.mu.Lock()
	idx := e.next[key]
	e.next[key] = idx + 1
	e.mu.Unlock()
	return e.g.store.AppendEvent(ctx, session, stream, idx, data)
}

func (e *sharedEvents) After(ctx context.Context, session, stream string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		events, _, err := e.g.store.EventsAfter(ctx, session, stream, index)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, d := range events {
			if !yield(d, nil) {
				return
			}
		}
	}
}

func (e *sharedEvents) SessionClosed(ctx context.Context, session string) error {
	e.mu.Lock()
	for k := range e.next {
		if strings.HasPrefix(k, session+"\x00") {
			delete(e.next, k)
		}
	}
	e.mu.Unlock()
	return e.g.store.CloseSession(ctx, session)
}

// resumesElsewhere reports whether r resumes a stream of a session
// another replica serves (so this one's SDK does not know it).
func (g *Gateway) resumesElsewhere(r *http.Request) (activity.StreamSession, bool) {
	if !g.store.IsPostgres() || r.Method != http.MethodGet || r.Header.Get("Last-Event-ID") == "" {
		return activity.StreamSession{}, false
	}
	ss, err := g.store.Session(r.Context(), r.Header.Get("Mcp-Session-Id"))
	if err != nil || ss.Replica == g.lease.ID {
		return ss, false
	}
	return ss, true
}

// replayShared answers a resumption of another replica's stream: the
// events after Last-Event-ID from the database, then those still to come
// (the other replica may still be working on the call) until the stream's
// answer has been sent, the attach wait passes, or the client goes.
func (g *Gateway) replayShared(w http.ResponseWriter, r *http.Request, actor string, ss activity.StreamSession) {
	if ss.Actor == "" || ss.Actor != actor {
		http.Error(w, "session user mismatch", http.StatusForbidden)
		return
	}
	session := r.Header.Get("Mcp-Session-Id")
	stream, index, ok := parseEventID(r.Header.Get("Last-Event-ID"))
	if !ok {
		http.Error(w, "malformed Last-Event-ID", http.StatusBadRequest)
		return
	}
	events, last, err := g.store.EventsAfter(r.Context(), session, stream, index)
	if err != nil {
		http.Error(w, "stream replay unsupported: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Mcp-Session-Id", session)
	w.WriteHeader(http.StatusOK)
	flush := http.NewResponseController(w)
	deadline := time.Now().Add(g.cfg.AttachWait.Duration)
	for {
		for i, data := range events {
			idx := last - len(events) + 1 + i
			if len(data) == 0 {
				continue // a priming event: only its index counts
			}
			fmt.Fprintf(w, "event: message\nid: %s_%d\ndata: %s\n\n", stream, idx, data)
			flush.Flush()
			if isResponse(data) {
				return // the answer the client was waiting for
			}
		}
		if !time.Now().Before(deadline) {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		if events, last, err = g.store.EventsAfter(r.Context(), session, stream, last); err != nil {
			return
		}
	}
}

// parseEventID reads the SDK's event id, "<stream>_<index>".
func parseEventID(id string) (stream string, index int, ok bool) {
	stream, n, found := strings.Cut(id, "_")
	if !found || strings.Contains(n, "_") {
		return "", 0, false
	}
	index, err := strconv.Atoi(n)
	return stream, index, err == nil && index >= 0
}

// isResponse: a JSON-RPC response (what ends a call's stream).
func isResponse(data []byte) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &m) == nil && m.Method == "" && len(m.ID) > 0 && (m.Result != nil || m.Error != nil)
}
