package loopback

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol revisions the gateway serves, one per era.
const (
	ProtocolLegacy    = "2025-11-25" // sessions, resumable SSE streams
	ProtocolStateless = "2026-07-28" // no sessions; a broken stream is re-issued
)

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// Connect opens an MCP session to endpoint speaking protocol, presenting
// token. The SDK's own stream resumption is left on (legacy era).
func Connect(ctx context.Context, endpoint, token, protocol string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpdup-demo-agent", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           &http.Client{Transport: bearer{token, http.DefaultTransport.(*http.Transport).Clone()}},
		DisableStandaloneSSE: true,
	}
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		return nil, fmt.Errorf("connect %s (%s): %w", endpoint, protocol, err)
	}
	return cs, nil
}

// NaiveAgent is the retry layer the gateway exists to survive: when a call
// fails for any reason it reconnects and sends the same call again, up to
// Attempts times. It knows nothing about executions.
type NaiveAgent struct {
	Endpoint, Token, Protocol string
	Attempts                  int
	session                   *mcp.ClientSession
	// Retries counts resends.
	Retries int
}

// Call calls a tool, retrying naively on errors.
func (a *NaiveAgent) Call(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	var last error
	for i := 0; i < max(1, a.Attempts); i++ {
		if i > 0 {
			a.Retries++
		}
		if a.session == nil {
			cs, err := Connect(ctx, a.Endpoint, a.Token, a.Protocol)
			if err != nil {
				last = err
				continue
			}
			a.session = cs
		}
		res, err := a.session.CallTool(ctx, params)
		if err == nil {
			return res, nil
		}
		last = err
		a.session.Close()
		a.session = nil
	}
	return nil, errors.Join(errors.New("gave up"), last)
}

// Close ends the agent's session.
func (a *NaiveAgent) Close() {
	if a.session != nil {
		a.session.Close()
		a.session = nil
	}
}
