package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PassThrough is the baseline the gateway is measured against: a plain MCP
// server that turns each tools/call into one HTTP POST to the target, with
// no execution identity, no Idempotency-Key and no record. Whatever the
// agent's retry layer resends, it sends.
type PassThrough struct {
	*httptest.Server
}

// NewPassThrough serves tools (name → target URL) over Streamable HTTP
// (stateless), accepting any bearer token.
func NewPassThrough(tools map[string]string) *PassThrough {
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
				resp, err := client.Do(r)
				if err != nil {
					return nil, fmt.Errorf("upstream: %w", err) // the agent sees an error, and retries
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, IsError: resp.StatusCode >= 400}, nil
			})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	return &PassThrough{Server: httptest.NewServer(h)}
}
