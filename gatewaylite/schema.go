package gatewaylite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpdup/mcpdup/activity"
)

// inputSchema is a tool's input_schema, resolved once, enforced on every
// call before anything is recorded as accepted or sent. The validator is
// github.com/google/jsonschema-go, the one the go-sdk itself uses for its
// typed tools (draft 2020-12 and draft-07), so an MCP client and the
// gateway read a schema the same way.
type inputSchema struct {
	resolved *jsonschema.Resolved
}

// compileSchema resolves a schema given as JSON; empty means none.
func compileSchema(raw []byte) (*inputSchema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("input_schema: %w", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("input_schema: %w", err)
	}
	return &inputSchema{resolved: r}, nil
}

// check validates arguments (raw JSON; absent means {}) and returns the
// validator's message, with the values of secret arguments cut out: a
// message may quote the value it rejects.
func (s *inputSchema) check(raw json.RawMessage, secrets []string, hide func(string) string) error {
	if s == nil {
		return nil
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	var instance any
	if err := json.Unmarshal(raw, &instance); err != nil {
		return fmt.Errorf("arguments are not JSON: %v", err)
	}
	err := s.resolved.Validate(instance)
	if err == nil {
		return nil
	}
	msg := err.Error()
	m, _ := instance.(map[string]any)
	for _, k := range secrets {
		// A failure inside a secret argument says so and no more: the
		// validator quotes the value it rejects, at any depth.
		if strings.Contains(msg, "/properties/"+k+":") || strings.Contains(msg, "/properties/"+k+"/") {
			return fmt.Errorf("argument %s does not match its schema (its value is secret and not shown)", k)
		}
		if v, ok := m[k]; ok {
			msg = redactValue(msg, v)
		}
	}
	// The validator quotes what it rejects, whole (a 3 MB string came back
	// as a 3 MB error, answered and recorded) and calls a null an invalid
	// reflect.Value.
	msg = activity.RedactText(strings.ReplaceAll(msg, "<invalid reflect.Value>", "null"))
	if hide != nil {
		msg = hide(msg) // before the cut: a secret cut in two would match nothing
	}
	if len(msg) > maxSchemaMessage {
		cut := len(msg) - maxSchemaMessage
		msg = strings.ToValidUTF8(msg[:maxSchemaMessage], "") + fmt.Sprintf("… (%d bytes more)", cut)
	}
	return fmt.Errorf("%s", msg)
}

// maxSchemaMessage bounds a schema error's text, as answered and recorded.
const maxSchemaMessage = 512

// redactValue removes every spelling of v, and of every value inside it,
// that the validator may have used.
func redactValue(msg string, v any) string {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			msg = redactValue(msg, x)
		}
	case []any:
		for _, x := range v {
			msg = redactValue(msg, x)
		}
	}
	forms := []string{fmt.Sprint(v), fmt.Sprintf("%q", fmt.Sprint(v))}
	if b, err := json.Marshal(v); err == nil {
		forms = append(forms, string(b))
	}
	for _, f := range forms {
		if len(f) >= 3 {
			msg = strings.ReplaceAll(msg, f, "[secret]")
		}
	}
	return msg
}

// describe gives a tool without a description one derived from its
// contract, so MCP clients (and the conformance suite's tools/list) see a
// complete tool, and an agent learns how a retry is treated.
func describe(spec *toolSpec) string {
	what := spec.target
	if spec.method != "" {
		what = spec.method + " " + spec.target
	}
	var retry string
	switch spec.contract {
	case activity.ContractReadOnly:
		retry = "a read: every call runs, and repeating it is safe"
	case activity.ContractRepeatableWithKey:
		retry = "a retry of the same arguments returns the first call's result, or resends it with the same Idempotency-Key when its outcome is unknown; it never acts twice"
	case activity.ContractRecoverableByLookup:
		retry = "a retry of the same arguments returns the first call's result, asking the target's status endpoint when its outcome is unknown; it never acts twice"
	default:
		retry = "a retry of the same arguments returns the first call's result; after an unknown outcome it is never resent and waits for an operator's verification"
	}
	return fmt.Sprintf("%s (through the mcpdup gateway, contract %s: %s).", what, spec.contract, retry)
}
