package gatewaylite

import (
	"encoding/json"
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
		err := s.check(json.RawMessage(args), []string{"card", "toks"})
		if err == nil {
			t.Fatalf("%s passed", args)
		}
		if strings.Contains(err.Error(), "4111") || strings.Contains(err.Error(), "sk_live") {
			t.Fatalf("the message quotes a secret: %v", err)
		}
	}
	if err := s.check(json.RawMessage(`{"n":"seven"}`), []string{"card"}); err == nil || !strings.Contains(err.Error(), "/properties/n") {
		t.Fatalf("a non-secret failure must keep the validator's words: %v", err)
	}
}
