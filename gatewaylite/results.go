package gatewaylite

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
)

// executionMeta is the _meta every result carries, so an agent (and a
// person reading its transcript) can tell a fresh result from a replayed
// one and see what actually happened.
type executionMeta struct {
	ID         activity.ExecutionID `json:"id"`
	State      activity.State       `json:"state"`
	Replayed   bool                 `json:"replayed"`
	RetrySafe  bool                 `json:"retry_safe"`
	Contract   activity.Contract    `json:"contract"`
	AcceptedAt string               `json:"accepted_at,omitempty"`
	Dispatched string               `json:"dispatched_at,omitempty"`
	ObservedAt string               `json:"observed_at,omitempty"`
	Status     *int                 `json:"target_status,omitempty"`
	Recovery   activity.Recovery    `json:"recovery,omitempty"`
}

// respond builds the truthful answer for an execution as it now is. It
// never fabricates a failure: an agent that sees a failure tries again.
func (g *Gateway) respond(e activity.Execution, rec activity.Recovery, replayed bool) answer {
	var res *mcp.CallToolResult
	retrySafe := false
	switch e.State {
	case activity.StateSucceeded, activity.StateFailed, activity.StateDelivered,
		activity.StateDeliveryFailed, activity.StateNotDelivered:
		res = g.storedResult(e)
		if replayed {
			prependText(res, fmt.Sprintf("Previous execution %s completed (%s); %s. Here it is; the action was not repeated.", e.ID, observedText(e), deliveryText(e)))
		}
	case activity.StateAccepted:
		res = textResult(false, "Execution %s is awaiting an operator's approval; nothing has been sent to the target. Do not retry: call again later with the same arguments.", e.ID)
	case activity.StateDispatched, activity.StateAuthorized:
		res = textResult(false, "Execution %s is in progress (dispatched %s). Do not retry: call again later with the same arguments to receive its result.", e.ID, timeText(e.Times.Dispatched))
	case activity.StateUnknown:
		if e.Contract == activity.ContractReadOnly {
			retrySafe = true
			res = textResult(true, "Read %s was sent to the target but its answer never arrived (%s). A read changes nothing: it is safe to retry.", e.ID, e.Error)
			break
		}
		if v, ok := g.lookups.Load(e.ID); ok && v.(Outcome).Running {
			res = textResult(false, "Execution %s is in progress: %s. Do not retry: call again later with the same arguments to receive its result.", e.ID, v.(Outcome).Reason)
			break
		}
		res = textResult(false, "Execution %s was sent to the target but its outcome is unknown (%s). Do not retry: the gateway is resolving it; call again later with the same arguments.", e.ID, e.Error)
	case activity.StatePendingVerification:
		res = textResult(false, "Execution %s is awaiting verification: it was sent to the target at %s and the outcome is unknown. It will not be sent again until an operator verifies it. Do not retry.", e.ID, timeText(e.Times.Dispatched))
	case activity.StateVerified:
		res = textResult(false, "Execution %s was verified by an operator: the action took effect at the target. It was not repeated.", e.ID)
	case activity.StateRejected:
		switch {
		case !replayed:
			res = textResult(true, "This call was refused (execution %s): %s. Nothing was sent to the target.", e.ID, e.Error)
		case e.RefusedByLock():
			res = textResult(true, "This retry is refused: execution %s, the first call of this intent, was refused because the vault is locked (%s), and it is still locked. Nothing was sent to the target; call again after an operator unlocks it.", e.ID, e.Error)
		default:
			res = textResult(true, "This retry is refused: execution %s, the first call of this intent, was refused (%s). The same refusal applies to this retry; nothing was sent to the target.", e.ID, e.Error)
		}
	case activity.StateFailedBefore:
		retrySafe = true
		res = textResult(true, "Execution %s failed before anything was sent to the target (%s). It is safe to retry.", e.ID, e.Error)
	case activity.StateRejectedByOperator:
		retrySafe = true
		res = textResult(true, "Execution %s did not take effect (an operator confirmed it). It is safe to call again.", e.ID)
	default:
		res = textResult(true, "Execution %s is in state %s.", e.ID, e.State)
	}
	m := executionMeta{ID: e.ID, State: e.State, Replayed: replayed, RetrySafe: retrySafe, Contract: e.Contract,
		AcceptedAt: timeText(e.Times.Accepted), Dispatched: timeText(e.Times.Dispatched), ObservedAt: timeText(e.Times.Observed)}
	if e.TargetStatus.OK {
		m.Status = &e.TargetStatus.V
	}
	if replayed {
		m.Recovery = rec
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[MetaExecutionID] = string(e.ID)
	res.Meta[MetaExecution] = m
	return answer{result: res, state: string(e.State)}
}

// storedResult loads the result the target gave, kept behind its
// reference.
func (g *Gateway) storedResult(e activity.Execution) *mcp.CallToolResult {
	if e.ResultRef == "" {
		return textResult(e.State == activity.StateFailed, "Execution %s ended %s with no result body.", e.ID, e.State)
	}
	b, ok := g.results.get(e.ResultRef)
	var err error
	if !ok {
		b, err = g.store.ProvenResult(context.Background(), e)
	}
	if err != nil {
		return textResult(false, "Execution %s ended %s, but its stored result could not be read (%v). It was not repeated.", e.ID, e.State, err)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(b, &res); err != nil {
		return textResult(false, "Execution %s ended %s; stored result: %s", e.ID, e.State, b)
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return &res
}

func textResult(isError bool, format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func prependText(res *mcp.CallToolResult, text string) {
	res.Content = append([]mcp.Content{&mcp.TextContent{Text: text}}, res.Content...)
}

func observedText(e activity.Execution) string {
	if e.TargetStatus.OK {
		return fmt.Sprintf("target answered %d at %s", e.TargetStatus.V, timeText(e.Times.Observed))
	}
	return "at " + timeText(e.Times.Observed)
}

// deliveryText says what the record shows about the first answer's
// delivery, no more.
func deliveryText(e activity.Execution) string {
	switch e.State {
	case activity.StateDelivered:
		return "its result was written to the agent at " + timeText(e.Times.Delivered)
	case activity.StateNotDelivered:
		return "its result was not delivered then"
	case activity.StateDeliveryFailed:
		return "writing its result to the agent failed then"
	}
	return "its delivery is not recorded yet"
}

func timeText(o activity.Opt[time.Time]) string {
	if !o.OK {
		return ""
	}
	return o.V.UTC().Format(time.RFC3339Nano)
}

// textJSON renders a one-text-item tool result as stored JSON.
func textJSON(isError bool, text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": text}}, "isError": isError})
	return b
}

// resultCache keeps the few results just observed, so answering the call
// that produced one does not read it back from the store. It is bounded
// by bytes as well as entries: 256 results of a megabyte each (6 MB once
// JSON escapes a body's control bytes) held the gateway at gigabytes.
type resultCache struct {
	mu    sync.Mutex
	refs  []string
	data  map[string][]byte
	bytes int
}

const (
	resultCacheSize  = 256
	resultCacheBytes = 32 << 20
)

func (c *resultCache) put(ref string, b []byte) {
	if ref == "" || len(b) == 0 || len(b) > resultCacheBytes/4 {
		return // a large result is read back from the store when asked for
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.data == nil {
		c.data = map[string][]byte{}
	}
	if _, ok := c.data[ref]; ok {
		return
	}
	for len(c.refs) > 0 && (len(c.refs) >= resultCacheSize || c.bytes+len(b) > resultCacheBytes) {
		c.bytes -= len(c.data[c.refs[0]])
		delete(c.data, c.refs[0])
		c.refs = c.refs[1:]
	}
	c.refs = append(c.refs, ref)
	c.data[ref] = b
	c.bytes += len(b)
}

func (c *resultCache) get(ref string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.data[ref]
	return b, ok
}
