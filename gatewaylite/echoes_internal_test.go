package gatewaylite

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestHashedSecretsCutFromALookup: a recovery's lookup has no sent values,
// only the recorded arguments, where secret_args are keyed hashes; the
// marker output a command echoed a secret into was stored whole by a
// replica's background lookup. A word whose keyed hash is recorded is cut.
func TestHashedSecretsCutFromALookup(t *testing.T) {
	fp, err := LoadFingerprinter(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{fp: fp}
	const secret = "tok-LEAKME-777"
	q, _ := json.Marshal(secret)
	recorded, _ := json.Marshal(map[string]any{"token": fp.HashSecret(q), "line": "k1"})
	out := Outcome{Result: commandResult(0, "running k1 with token "+secret+"… done"), Reason: "marker says: token " + secret + "."}
	got := g.withoutHashedSecrets(out, recorded)
	if strings.Contains(string(got.Result), secret) || strings.Contains(got.Reason, secret) ||
		!strings.Contains(string(got.Result), "running k1 with token") || !strings.Contains(got.Reason, RedactedEcho) {
		t.Fatalf("result %s, reason %q", got.Result, got.Reason)
	}
	// Nothing hashed recorded: the result is left as it came.
	if same := g.withoutHashedSecrets(out, json.RawMessage(`{"line":"k1"}`)); string(same.Result) != string(out.Result) {
		t.Fatalf("changed without a hashed secret: %s", same.Result)
	}
}
