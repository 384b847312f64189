package report

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEmptyTimelineJSON: a range with no events lists no frames as [],
// not null, so a script can iterate it (jq '.frames[]' failed).
func TestEmptyTimelineJSON(t *testing.T) {
	b, err := json.Marshal(&Timeline{Title: "empty"})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"frames":[]`) || !strings.Contains(s, `"executions":[]`) {
		t.Fatalf("empty timeline: %s", s)
	}
}
