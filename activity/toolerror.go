package activity

import (
	"encoding/json"
	"fmt"
	"strings"
)

// What a tool's own error answer (a result with isError) says about its
// action: the one rule the gateway (an upstream MCP server's answer) and
// the importers (MCP message logs, HAR captures) read it with.

// maxToolErrorText bounds how much of an error answer's text is read.
const maxToolErrorText = 4 << 10

// ToolErrorState is what a tool result with isError says the tool did.
// Most such answers mean it failed and did nothing (a validation error, a
// 4xx from its API). But servers that turn every exception into a tool
// error (FastMCP's "Error executing tool X: <exception>", a handler's
// returned error in the Go and TypeScript SDKs) answer isError too when
// the tool's own request to its target timed out or lost its connection
// after it was sent: then the target may have acted, and the outcome is
// unknown. An error that says the request never got out (a refused
// connection, a failed name lookup, a connect timeout) stays a failure.
func ToolErrorState(result json.RawMessage) (State, string) {
	text := strings.ToLower(ToolResultText(result, maxToolErrorText))
	for _, m := range notSentMarkers {
		if strings.Contains(text, m) {
			return StateFailed, fmt.Sprintf("the tool answered isError (%q): its request did not reach the target", m)
		}
	}
	for _, m := range lostMarkers {
		if strings.Contains(text, m) {
			return StateUnknown, fmt.Sprintf("the tool answered isError (%q): its request to the target got no answer, so the target may have acted", m)
		}
	}
	return StateFailed, "the tool answered isError: it says it failed"
}

// notSentMarkers name errors raised before a request leaves: connecting
// failed (Python's ConnectError and ConnectTimeout, Go's dial errors,
// Node's ECONNREFUSED and ENOTFOUND).
var notSentMarkers = []string{
	"connection refused", "econnrefused", "connecterror", "connect timeout", "connecttimeout", "connect_timeout",
	"dial tcp", "no such host", "enotfound", "name or service not known", "nodename nor servname",
	"temporary failure in name resolution", "failed to establish a new connection", "network is unreachable",
	"no route to host", "certificate verify failed", "x509:", "handshake", // TLS never got to the request
	"failed before anything was sent", "nothing was sent", // a gateway's own words (mcpdup's among them)
}

// lostMarkers name errors raised after a request was sent and before its
// answer came: read timeouts (httpx's ReadTimeout "The read operation
// timed out", Go's "context deadline exceeded", Node's ETIMEDOUT), a
// dropped connection, a gateway's 502/504.
var lostMarkers = []string{
	// Not a bare "timeout": a validation error may name a field so.
	"timed out", "read timeout", "readtimeout", "i/o timeout", "awaiting headers", "deadline exceeded", "etimedout",
	"connection reset", "reset by peer", "econnreset", "broken pipe", "epipe",
	"remotedisconnected", "remote end closed", "server disconnected", "remoteprotocolerror",
	"unexpected eof", "incompleteread", "connection aborted", "socket hang up",
	"bad gateway", "gateway timeout", "gateway time-out",
}

// ToolResultText is the text of a tool result's text blocks, joined by
// newlines and cut at limit bytes.
func ToolResultText(result json.RawMessage, limit int) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(result, &r) != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type != "text" || b.Len() >= limit {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.Text[:min(len(c.Text), limit-b.Len())])
	}
	return b.String()
}
