package loopback

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PassThrough is the baseline the gateway is measured against: a plain MCP
// server that turns each tools/call into one HTTP POST to the target, with
// no execution identity, no Idempotency-Key and no record. Whatever the
// agent's retry layer resends, it sends.
type PassThrough struct {
	*Server
}

// PassEvent is what a pass-through proxy could log about one call: the
// request it forwarded and what came back (its access log).
type PassEvent struct {
	Tool      string
	Target    string
	Arguments json.RawMessage
	Session   string // the MCP session header, if any
	Sent      time.Time
	Done      time.Time
	Status    int    // 0: no response
	Err       string // transport error, when no response
	Body      []byte // the target's answer, when there was one
}

// NewPassThrough serves tools (name → target URL) over Streamable HTTP
// (stateless), accepting any bearer token. record, if set, is called
// once per forwarded call.
func NewPassThrough(tools map[string]string, record ...func(PassEvent)) *PassThrough {
	srv := mcp.NewServer(&mcp.Implementation{Name: "passthrough", Version: "1"}, nil)
	client := &http.Client{}
	for name, url := range tools {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				r, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, url, bytes.NewReader(req.Params.Arguments))
				if err != nil {
					return nil, err
				}
				r.Header.Set("Content-Type", "application/json")
				ev := PassEvent{Tool: name, Target: url, Arguments: req.Params.Arguments, Sent: time.Now()}
				if req.Extra != nil {
					ev.Session = req.Extra.Header.Get("Mcp-Session-Id")
				}
				resp, err := client.Do(r)
				ev.Done = time.Now()
				if err != nil {
					ev.Err = err.Error()
					for _, rec := range record {
						rec(ev)
					}
					return nil, fmt.Errorf("upstream: %w", err) // the agent sees an error, and retries
				}
				defer resp.Body.Close()
				ev.Status = resp.StatusCode
				b, _ := io.ReadAll(resp.Body)
				ev.Body = b
				for _, rec := range record {
					rec(ev)
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, IsError: resp.StatusCode >= 400}, nil
			})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	return &PassThrough{Server: Serve(h)}
}
