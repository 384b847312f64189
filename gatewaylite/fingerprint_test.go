package gatewaylite_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/gatewaylite"
)

// TestTargetGetsTheNumbersAsSent: the fingerprint reads numbers in
// canonical form (1 and 1.0 are one intent) but the target gets them as
// the agent wrote them: a 50-digit integer was sent as 1.2345…e+49, which
// a target reads as a lossy float.
func TestTargetGetsTheNumbersAsSent(t *testing.T) {
	f := gatewaylite.NewFingerprinter([]byte("k"))
	const big = "12345678901234567890123456789012345678901234567890"
	in, err := f.PrepareArgs(json.RawMessage(`{"n":`+big+`,"x":1.0}`), gatewaylite.ArgSpec{})
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := json.Marshal(in.Send)
	if !strings.Contains(string(sent), `"n":`+big) || !strings.Contains(string(sent), `"x":1.0`) {
		t.Fatalf("sent %s", sent)
	}
	same, err := f.PrepareArgs(json.RawMessage(`{"x":1,"n":`+big+`}`), gatewaylite.ArgSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if string(same.Effect) != string(in.Effect) {
		t.Fatalf("1 and 1.0 are two intents: %s %s", same.Effect, in.Effect)
	}
}
