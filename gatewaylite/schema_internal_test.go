package gatewaylite

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A validator message never quotes a secret argument, however deep in it
// the failing value sits.
func TestSchemaMessageHidesSecrets(t *testing.T) {
	s, err := compileSchema([]byte(`{"type":"object","properties":{
		"card":{"type":"object","properties":{"number":{"type":"string","pattern":"^[0-9]{16}$"}}},
		"toks":{"type":"array","items":{"type":"string","maxLength":4}},
		"n":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{
		`{"card":{"number":"4111-1111-1111-1111"}}`,
		`{"toks":["sk_live_abcdef"]}`,
	} {
		err := s.check(json.RawMessage(args), []string{"card", "toks"}, nil)
		if err == nil {
			t.Fatalf("%s passed", args)
		}
		if strings.Contains(err.Error(), "4111") || strings.Contains(err.Error(), "sk_live") {
			t.Fatalf("the message quotes a secret: %v", err)
		}
	}
	if err := s.check(json.RawMessage(`{"n":"seven"}`), []string{"card"}, nil); err == nil || !strings.Contains(err.Error(), "/properties/n") {
		t.Fatalf("a non-secret failure must keep the validator's words: %v", err)
	}
}

// TestSchemaMessageBounded: the validator quotes what it rejects whole; a
// 1 MB value is answered and recorded as a bounded message, and a null
// is called a null.
func TestSchemaMessageBounded(t *testing.T) {
	s, err := compileSchema([]byte(`{"type":"object","properties":{"note":{"type":"string","maxLength":10},"n":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	big, _ := json.Marshal(map[string]any{"note": strings.Repeat("é", 1<<19)})
	err = s.check(big, nil, nil)
	if err == nil || len(err.Error()) > maxSchemaMessage+64 || !strings.Contains(err.Error(), "bytes more") {
		t.Fatalf("a 1 MB value's error is %d bytes: %.200v", len(fmt.Sprint(err)), err)
	}
	err = s.check(json.RawMessage(`{"n":null}`), nil, nil)
	if err == nil || strings.Contains(err.Error(), "reflect") || !strings.Contains(err.Error(), "null") {
		t.Fatalf("a null: %v", err)
	}
}

// TestDotSegmentsRefused: "." and ".." fill no placeholder (escaping
// leaves dots, and a normalising server would reach another endpoint).
func TestDotSegmentsRefused(t *testing.T) {
	for v, ok := range map[string]bool{"..": false, ".": false, "...": true, "a.b": true, "billing": true} {
		_, err := expandURL("http://h/v1/releases/{service}", map[string]any{"service": v})
		if (err == nil) != ok {
			t.Errorf("%q: %v", v, err)
		}
	}
}
