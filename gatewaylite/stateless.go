package gatewaylite

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The pieces a 2026-07-28 (stateless) request must carry: without a
// session, each request says itself who it is and what it asks.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// missingStateless lists every piece a 2026-07-28 request lacks, where the
// SDK would name only the first: the Mcp-Method and Mcp-Name headers
// (matching the body) and the _meta protocol version and client
// capabilities. Nil when the request is complete or not one to check (a
// notification or a response).
func missingStateless(h http.Header, r *rpcMessage, version string) []string {
	if r.Method == "" || len(r.ID) == 0 {
		return nil
	}
	var missing []string
	switch m := h.Get("Mcp-Method"); {
	case m == "":
		missing = append(missing, fmt.Sprintf("the Mcp-Method header (%q)", r.Method))
	case m != r.Method:
		missing = append(missing, fmt.Sprintf("an Mcp-Method header equal to the body's method (%q, not %q)", r.Method, m))
	}
	name := r.Params.Name
	if r.Method == "resources/read" {
		name = r.Params.URI
	}
	if r.Method == "tools/call" || r.Method == "resources/read" || r.Method == "prompts/get" {
		switch n := h.Get("Mcp-Name"); {
		case n == "":
			missing = append(missing, fmt.Sprintf("the Mcp-Name header (%q)", name))
		case n != name:
			missing = append(missing, fmt.Sprintf("an Mcp-Name header equal to the body's name (%q, not %q)", name, n))
		}
	}
	var pv string
	if json.Unmarshal(r.Params.Meta[metaProtocolVersion], &pv) != nil || pv == "" {
		missing = append(missing, fmt.Sprintf("params._meta[%q] (%q)", metaProtocolVersion, version))
	}
	var caps map[string]any
	if json.Unmarshal(r.Params.Meta[metaClientCapabilities], &caps) != nil || caps == nil {
		missing = append(missing, fmt.Sprintf("params._meta[%q] (an object; {} for none)", metaClientCapabilities))
	}
	return missing
}

// refuseIncomplete answers a 2026-07-28 request that lacks pieces with
// one JSON-RPC error naming all of them (and data.missing listing them).
func refuseIncomplete(w http.ResponseWriter, r *rpcMessage, missing []string) {
	msg := "this " + protocolStateless + " request lacks " + strings.Join(missing, ", ") +
		" (README.md, \"The two protocol eras\", has a complete example)"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": r.ID,
		"error": map[string]any{"code": -32602, "message": msg, "data": map[string]any{"missing": missing}}})
}
