package gatewaylite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// deliveries records whether results reached the agent's connection. A
// result counts as delivered when the response carrying it was written and
// flushed without error: HTTP cannot tell more (the bytes may still die in
// a buffer), and the record says only what the transport established.
// Recording happens off the request path, in a background writer, so it
// adds no latency to the answer.
type deliveries struct {
	g      *Gateway
	mu     sync.Mutex
	open   map[string]*exchange // request token → what it should carry
	events chan deliveryEvent
	done   chan struct{}
}

// exchange is one request carrying tools/calls, from the front's side and
// the handler's. Either may end first: in the 2025 era the SDK ends a POST
// whose client went away while the tool still runs, so its result is
// expected only after the response is over; the entry lives until both
// sides are done.
type exchange struct {
	expected []activity.ExecutionID
	finished bool // the response is over
	calls    int  // handlers not yet done expecting
	// call describes the request, to record it if the MCP layer refuses
	// it before any handler runs (another actor's session, say).
	call activity.Call
}

type deliveryEvent struct {
	id     activity.ExecutionID
	to     activity.State
	reason string
}

// deliveryLinger is how long delivery records wait to share a commit.
const deliveryLinger = 25 * time.Millisecond

const notWritten = "the agent's connection closed before the result was written"

func newDeliveries(g *Gateway) *deliveries {
	return &deliveries{g: g, open: map[string]*exchange{}, events: make(chan deliveryEvent, 4096), done: make(chan struct{})}
}

// begin opens the exchange of a request that carries calls tools/calls.
func (d *deliveries) begin(token string, calls int, c activity.Call) {
	d.mu.Lock()
	d.open[token] = &exchange{calls: calls, call: c}
	d.mu.Unlock()
}

// expect notes that the response to request token carries id's result. If
// that response is already over, the result was not delivered by it.
func (d *deliveries) expect(token string, id activity.ExecutionID) {
	d.mu.Lock()
	x := d.open[token]
	switch {
	case x == nil:
	case x.finished:
		d.mu.Unlock()
		d.send(deliveryEvent{id, activity.StateNotDelivered, notWritten})
		return
	default:
		x.expected = append(x.expected, id)
	}
	d.mu.Unlock()
}

// handled says the handler of one call on request token is done
// expecting (the calls of a 2025-03-26 batch share one token).
func (d *deliveries) handled(token string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if x := d.open[token]; x != nil {
		x.calls--
		if x.finished && x.calls <= 0 {
			delete(d.open, token)
		}
	}
}

// finish settles a request once the handler has written its response.
// A POST delivers only the results its own calls expected (an id quoted
// anywhere else in an answer, an inquiry's or an upstream's, proves
// nothing); a GET replaying a resumable stream delivers what it writes.
// Failed writes are delivery failures, and expected results never
// written were not delivered. Calls the SDK answered itself, without a
// handler (an HTTP error, or a JSON-RPC error such as a request before the
// session's initialisation), are recorded as refused, and the exchange
// ends with them: clientGone says the response ended because the client
// went away, when handlers may still be running.
func (d *deliveries) finish(token string, w *deliveryWriter, method string, clientGone bool) {
	w.FlushError()
	d.mu.Lock()
	var expected []activity.ExecutionID
	var refused *activity.Call
	if x := d.open[token]; x != nil {
		expected, x.expected, x.finished = x.expected, nil, true
		if x.calls > 0 && (w.status >= 400 || !clientGone) {
			c := x.call
			if w.status >= 400 {
				c.Reason = fmt.Sprintf("refused by the MCP layer before the tool ran: HTTP %d %s", w.status, http.StatusText(w.status))
			} else {
				c.Reason = "answered by the MCP layer before the tool ran (a JSON-RPC error: not initialised, malformed params, a repeated id)"
			}
			refused, x.calls = &c, 0
		}
		if x.calls <= 0 {
			delete(d.open, token)
		}
	}
	d.mu.Unlock()
	if refused != nil {
		d.g.recordRefused(context.Background(), *refused)
	}
	ours := func(id activity.ExecutionID) bool { return method == http.MethodGet || slices.Contains(expected, id) }
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.written {
		if !w.failed[id] && ours(id) {
			d.send(deliveryEvent{id, activity.StateDelivered, "result written to the agent's connection"})
		}
	}
	for id := range w.failed {
		if ours(id) {
			d.send(deliveryEvent{id, activity.StateDeliveryFailed, "writing the result to the agent failed: " + errText(w.writeErr)})
		}
	}
	for _, id := range expected {
		if !w.written[id] && !w.failed[id] {
			d.send(deliveryEvent{id, activity.StateNotDelivered, notWritten})
		}
	}
}

func (d *deliveries) send(ev deliveryEvent) {
	select {
	case d.events <- ev:
	case <-d.done:
	}
}

func (d *deliveries) start() {
	d.g.bg.Add(1)
	go func() {
		defer d.g.bg.Done()
		for {
			select {
			case ev := <-d.events:
				// Linger briefly so deliveries share a commit with each
				// other and with the next call's writes, instead of
				// costing an fsync each on the path of the next call.
				select {
				case <-time.After(deliveryLinger):
				case <-d.done:
				}
				d.record(d.drain(ev))
			case <-d.done:
				for {
					select {
					case ev := <-d.events:
						d.record(d.drain(ev))
					default:
						return
					}
				}
			}
		}
	}()
}

// drain collects whatever else is queued so one commit records many.
func (d *deliveries) drain(first deliveryEvent) []deliveryEvent {
	evs := []deliveryEvent{first}
	for len(evs) < 1024 {
		select {
		case ev := <-d.events:
			evs = append(evs, ev)
		default:
			return evs
		}
	}
	return evs
}

func (d *deliveries) stop() { close(d.done) }

// record writes delivery transitions. A transition the state machine
// refuses (already delivered by a retry, say) is skipped, not an error.
// No agent waits on it: queued as the outcomes are (WriteAsync), it
// shares the commit of the next call's first write instead of costing a
// commit of its own in that call's way.
func (d *deliveries) record(evs []deliveryEvent) {
	err := <-d.g.store.WriteAsync(context.Background(), func(w *activity.Tx) error {
		for _, ev := range evs {
			e, err := w.Execution(ev.id)
			if err != nil {
				continue
			}
			if activity.CheckTransition(e.ID, e.Contract, e.State, ev.to) != nil {
				continue
			}
			if _, err := w.Transition(activity.Transition{ExecutionID: ev.id, From: e.State, To: ev.to, Reason: ev.reason}); err != nil {
				var te *activity.TransitionError
				if errors.As(err, &te) {
					continue
				}
				return err
			}
		}
		return nil
	})
	if err != nil {
		d.g.log.Error("record deliveries", "error", err)
	}
}

func errText(err error) string {
	if err == nil {
		return "no error reported"
	}
	return err.Error()
}
