package analyze

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAnswerWithoutEvidenceJSON: an answer with no evidence lists it as
// [], not null (jq '.evidence[]' failed on analyze -o json).
func TestAnswerWithoutEvidenceJSON(t *testing.T) {
	b, err := json.Marshal(Answer{N: 1, Answer: Unknown})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"evidence":[]`) || !strings.Contains(string(b), `"n":1`) {
		t.Fatalf("answer: %s", b)
	}
}
