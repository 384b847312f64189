package gatewaylite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/mcpdup/mcpdup/activity"
)

// upstreamTool dispatches to one tool of an upstream MCP server.
type upstreamTool struct {
	session *mcp.ClientSession
	name    string
}

// connectUpstream connects an upstream MCP server (a command over stdio or
// a Streamable HTTP URL) and re-exports its tools. A tool without a written
// contract gets the upstream's default (blocked_after_unknown unless
// configured); MCP annotations never override a written contract, and seed
// only read_only for tools that declare readOnlyHint when no contract is
// written and the upstream default is not stricter by configuration.
func (g *Gateway) connectUpstream(ctx context.Context, u UpstreamConfig) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpdup-gateway", Version: "1"}, nil)
	var transport mcp.Transport
	target := u.URL
	if len(u.Command) > 0 {
		cmd := exec.Command(u.Command[0], u.Command[1:]...)
		// What the server says on stderr is the operator's to read: each
		// line becomes a log line naming the upstream (cut at 1 KiB, made
		// safe for a terminal by the handler's quoting).
		cmd.Stderr = &stderrLines{log: g.log.With("upstream", u.Name), limit: rate.NewLimiter(10, 50)}
		cmd.WaitDelay = 2 * time.Second // a grandchild holding stderr must not hang Close
		transport = &mcp.CommandTransport{Command: cmd}
		target = "stdio:" + u.Name
	} else {
		transport = &mcp.StreamableClientTransport{Endpoint: u.URL, MaxRetries: -1}
	}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return fmt.Errorf("upstream %s: connect: %w", u.Name, err)
	}
	g.closers = append(g.closers, cs.Close)
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("upstream %s: list tools: %w", u.Name, err)
		}
		if _, clash := g.tools[tool.Name]; clash {
			return fmt.Errorf("upstream %s: tool %s is already defined", u.Name, tool.Name)
		}
		contract, written := activity.Contract(u.DefaultContract), u.Tools[tool.Name]
		spec := &toolSpec{
			name: tool.Name, channel: activity.ChannelMCP, target: target, method: "tools/call",
			window: DefaultAttachWindow, timeout: DefaultTimeout,
			upstream: &upstreamTool{session: cs, name: tool.Name},
		}
		switch {
		case written.Contract != "":
			contract = activity.Contract(written.Contract)
			spec.args = ArgSpec{Fingerprint: written.Fingerprint, SecretArgs: written.SecretArgs}
			if written.AttachWindow.Duration > 0 {
				spec.window = written.AttachWindow.Duration
			}
		case tool.Annotations != nil && tool.Annotations.ReadOnlyHint && u.DefaultContract == string(activity.ContractBlockedAfterUnknown):
			// A hint may seed a default, never weaken a written contract.
			contract = activity.ContractReadOnly
		}
		spec.contract = contract
		schema, err := json.Marshal(tool.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = []byte(`{"type":"object"}`)
		}
		// The upstream's own schema is enforced here too, before anything is
		// recorded as sent; one the validator cannot resolve is left to the
		// upstream, and said so.
		if spec.schema, err = compileSchema(schema); err != nil {
			g.log.Warn("upstream tool schema not enforced by the gateway", "upstream", u.Name, "tool", tool.Name, "error", err)
			spec.schema = nil
		}
		if strings.HasPrefix(tool.Name, reservedPrefix) {
			g.log.Warn("upstream tool not offered: the mcpdup_ prefix is the gateway's own", "upstream", u.Name, "tool", tool.Name)
			continue
		}
		g.addTool(spec, &mcp.Tool{Name: tool.Name, Description: tool.Description, InputSchema: json.RawMessage(schema), Annotations: tool.Annotations})
	}
	return nil
}

// dispatch calls the upstream tool. The MCP session cannot tell whether a
// failed call reached the server, so every transport error after the call
// began is an unknown outcome.
func (u *upstreamTool) dispatch(ctx context.Context, id activity.ExecutionID, args map[string]any, timeout time.Duration) Outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := u.session.CallTool(ctx, &mcp.CallToolParams{Name: u.name, Arguments: args,
		Meta: mcp.Meta{MetaExecutionID: string(id)}})
	if err != nil {
		return Outcome{State: activity.StateUnknown, Reason: "the upstream call may have run, but no result came back: " + err.Error()}
	}
	res.Meta = nil
	b, err := json.Marshal(res)
	if err != nil {
		return Outcome{State: activity.StateUnknown, Reason: "upstream result unreadable: " + err.Error()}
	}
	if res.IsError {
		// A tool that says its own request timed out may have acted.
		st, why := activity.ToolErrorState(b)
		out := Outcome{State: st, Reason: "the upstream " + strings.TrimPrefix(why, "the ")}
		if st != activity.StateUnknown {
			out.Result = b // an unknown outcome has no result to return again
		}
		return out
	}
	return Outcome{State: activity.StateSucceeded, Result: b}
}

// stderrLines turns an upstream's stderr into log lines.
type stderrLines struct {
	log     *slog.Logger
	buf     []byte
	limit   *rate.Limiter // a chatty upstream must not flood the gateway's log
	dropped int
}

const maxStderrLine = 1 << 10

func (s *stderrLines) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			if len(s.buf) > maxStderrLine { // a line with no end: say what came so far
				s.emit(s.buf)
				s.buf = s.buf[:0]
			}
			return len(p), nil
		}
		s.emit(s.buf[:i])
		s.buf = s.buf[i+1:]
	}
}

func (s *stderrLines) emit(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if !s.limit.Allow() {
		s.dropped++
		return
	}
	if s.dropped > 0 {
		s.log.Warn("upstream stderr lines dropped (more than 10 a second)", "dropped", s.dropped)
		s.dropped = 0
	}
	s.log.Warn("upstream stderr", "line", truncate(string(line), maxStderrLine))
}
