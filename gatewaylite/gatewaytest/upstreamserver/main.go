// Command upstreamserver is a small real MCP server over stdio, used as an
// upstream in gateway tests: its tools append to a file named by
// $UPSTREAM_EFFECTS so a test can count what actually happened.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type noteArgs struct {
	Text string `json:"text"`
}

func main() {
	effects := os.Getenv("UPSTREAM_EFFECTS")
	fmt.Fprintln(os.Stderr, "upstreamserver: notes ready") // the gateway must pass this on, not swallow it
	srv := mcp.NewServer(&mcp.Implementation{Name: "upstreamserver", Version: "1"}, nil)
	appendLine := func(line string) error {
		f, err := os.OpenFile(effects, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = fmt.Fprintln(f, line)
		return err
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "append_note", Description: "Append a note (a side effect)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in noteArgs) (*mcp.CallToolResult, map[string]any, error) {
			if err := appendLine("note " + in.Text); err != nil {
				return nil, nil, err
			}
			return nil, map[string]any{"appended": in.Text}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "count_notes", Description: "Count notes (read only).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, map[string]any, error) {
			b, _ := os.ReadFile(effects)
			n := 0
			for _, c := range b {
				if c == '\n' {
					n++
				}
			}
			return nil, map[string]any{"notes": n}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "send_digest", Description: "Send a digest (written contract in the gateway config).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, // a wrong hint: the written contract must win
		func(ctx context.Context, req *mcp.CallToolRequest, in noteArgs) (*mcp.CallToolResult, map[string]any, error) {
			if err := appendLine("digest " + in.Text); err != nil {
				return nil, nil, err
			}
			return nil, map[string]any{"sent": in.Text}, nil
		})
	// file_ticket acts, then fails as a tool whose own request timed out
	// after it was sent would: the SDK answers a handler's error as a
	// result with isError.
	mcp.AddTool(srv, &mcp.Tool{Name: "file_ticket", Description: "Open a ticket; its answer is lost (a read timeout)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in noteArgs) (*mcp.CallToolResult, map[string]any, error) {
			if err := appendLine("ticket " + in.Text); err != nil {
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf(`Post "https://tickets.example/v1/tickets": context deadline exceeded`)
		})
	// reject_note refuses before acting, as a validation error.
	mcp.AddTool(srv, &mcp.Tool{Name: "reject_note", Description: "Refuse every note (a validation error)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in noteArgs) (*mcp.CallToolResult, map[string]any, error) {
			return nil, nil, fmt.Errorf("note %q refused: text must be at least 10 characters", in.Text)
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
