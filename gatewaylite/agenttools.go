package gatewaylite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
)

// The gateway's own tools: the seed's "a model that sees an explicit
// uncertain state can query the status, ask for verification, or choose a
// safer path". They read and write only the gateway's record; nothing
// reaches a target.
const (
	ToolExecutionStatus     = "mcpdup_execution_status"
	ToolRequestVerification = "mcpdup_request_verification"
	// reservedPrefix is refused for configured and upstream tools.
	reservedPrefix = "mcpdup_"
	maxNote        = 1000
)

var executionIDRE = regexp.MustCompile(`^act_[0-9A-Z]{26}$`)

// inquiryArgs are the arguments of both tools.
type inquiryArgs struct {
	ExecutionID string `json:"execution_id"`
	Note        string `json:"note,omitempty"`
}

func (g *Gateway) addAgentTools() {
	idSchema := `"execution_id":{"type":"string","pattern":"^act_[0-9A-Z]{26}$","description":"the id in _meta[\"mcpdup.dev/execution_id\"] of an earlier result"}`
	status := &mcp.Tool{Name: ToolExecutionStatus,
		Description: "Look up an execution of yours by id instead of retrying: its state, times, the target's status, whether a retry is safe, and the stored result when it completed. Nothing is sent to any target.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + idSchema + `},"required":["execution_id"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}}
	verify := &mcp.Tool{Name: ToolRequestVerification,
		Description: "Ask an operator to verify at the target whether an execution of yours whose outcome is unknown took effect. It then waits in the operator's pending view with your note; it is never resent meanwhile. Nothing is sent to any target.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + idSchema + `,"note":{"type":"string","maxLength":1000,"description":"what you know, for the operator"}},"required":["execution_id"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}
	for _, t := range []*mcp.Tool{status, verify} {
		schema, _ := compileSchema(t.InputSchema.(json.RawMessage))
		name := t.Name
		g.server.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return g.handleInquiry(ctx, name, schema, req)
		})
	}
}

// handleInquiry answers one of the gateway's own tools and records the
// call (disposition inquiry).
func (g *Gateway) handleInquiry(ctx context.Context, tool string, schema *inputSchema, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	info := callInfoFrom(req)
	if info.actor == "" {
		return nil, errors.New("unauthenticated call reached the tool handler")
	}
	ctx = context.WithoutCancel(ctx)
	call := activity.Call{Actor: info.actor, Method: "tools/call", Tool: tool, ReceivedAt: g.now().UTC(), Disposition: activity.DispositionInquiry,
		JSONRPCID: optString(info.rpcID), SessionID: optString(info.session), ProtocolVersion: optString(info.protocol)}
	var args inquiryArgs
	if err := schema.check(req.Params.Arguments, nil, nil); err != nil {
		call.Disposition, call.Reason = activity.DispositionRefused, "arguments do not match the tool's input_schema: "+err.Error()
		g.recordRefused(ctx, call)
		return errorResult("Invalid arguments for %s: %v.", tool, err), nil
	}
	json.Unmarshal(req.Params.Arguments, &args)
	args.Note = truncate(strings.TrimSpace(args.Note), maxNote)
	call.Arguments, _ = json.Marshal(args)
	id := activity.ExecutionID(args.ExecutionID)

	var e activity.Execution
	var found bool
	var res *mcp.CallToolResult
	_, err := g.store.Write(ctx, func(w *activity.Tx) error {
		var err error
		e, err = w.Execution(id)
		// Another actor's execution is not there for this one: its
		// existence is not confirmed either.
		found = err == nil && e.Actor == info.actor && e.Source.IsZero()
		switch {
		case !found:
			call.Reason = "no execution " + string(id) + " of this actor"
		case tool == ToolRequestVerification:
			e, call.Reason, err = requestVerification(w, e, args.Note)
			if err != nil {
				return err
			}
		default:
			call.Reason = "status of " + string(id) + ": " + string(e.State)
		}
		_, err = w.RecordCall(call)
		return err
	})
	if err != nil {
		return g.notRecorded(call, "record inquiry", err), nil
	}
	if !found {
		return errorResult("There is no execution %s of yours. Execution ids are in _meta[%q] of the results the gateway returned.", id, MetaExecutionID), nil
	}
	if tool == ToolRequestVerification {
		res = g.verificationAnswer(e, call.Reason)
	} else {
		res = g.statusAnswer(e)
		if outcomeState(e.State) {
			// The answer carries the stored result: its delivery is this
			// response's, tracked like a retry's.
			g.delivery.expect(info.token, e.ID)
		}
	}
	return res, nil
}

// requestVerification moves an unknown execution to pending verification
// with the agent's note; other states are left as they are and the answer
// says why.
func requestVerification(w *activity.Tx, e activity.Execution, note string) (activity.Execution, string, error) {
	switch e.State {
	case activity.StateUnknown:
		why := "the agent asked for operator verification"
		if note != "" {
			why += ": " + note
		}
		next, err := w.Transition(activity.Transition{ExecutionID: e.ID, From: activity.StateUnknown, To: activity.StatePendingVerification, Reason: why})
		return next, "verification requested for " + string(e.ID), err
	case activity.StatePendingVerification:
		return e, "verification requested again for " + string(e.ID) + " (already pending)", nil
	}
	return e, "verification not needed for " + string(e.ID) + ": " + string(e.State), nil
}

// statusAnswer is the status tool's result: a sentence, the execution's
// _meta fields as structured content, and the stored result when the
// execution completed.
func (g *Gateway) statusAnswer(e activity.Execution) *mcp.CallToolResult {
	a := g.respond(e, "", false)
	text := fmt.Sprintf("Execution %s (%s) is %s; contract %s.", e.ID, e.Tool, e.State, e.Contract)
	if e.TargetStatus.OK {
		text += fmt.Sprintf(" The target answered %d at %s.", e.TargetStatus.V, timeText(e.Times.Observed))
	}
	res := &mcp.CallToolResult{Content: append([]mcp.Content{&mcp.TextContent{Text: text}}, a.result.Content...),
		Meta: a.result.Meta, StructuredContent: a.result.Meta[MetaExecution]}
	return res
}

func (g *Gateway) verificationAnswer(e activity.Execution, what string) *mcp.CallToolResult {
	var text string
	switch {
	case strings.HasPrefix(what, "verification requested for"):
		text = fmt.Sprintf("Execution %s now awaits an operator's verification at the target, with your note. It will not be sent again meanwhile; ask %s later for the verdict.", e.ID, ToolExecutionStatus)
	case strings.HasPrefix(what, "verification requested again"):
		text = fmt.Sprintf("Execution %s already awaits an operator's verification; your request is recorded. Ask %s later for the verdict.", e.ID, ToolExecutionStatus)
	default:
		text = fmt.Sprintf("Execution %s needs no verification: it is %s. Ask %s for its result.", e.ID, e.State, ToolExecutionStatus)
	}
	m := g.respond(e, "", false).result.Meta
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, Meta: m, StructuredContent: m[MetaExecution]}
}
