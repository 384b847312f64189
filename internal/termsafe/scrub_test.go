package termsafe

import (
	"encoding/json"
	"strings"
	"testing"
)

type scrubID string

type scrubRow struct {
	ID    scrubID
	Tool  string
	Args  json.RawMessage
	Tags  []string
	Attrs map[string]string
	ByID  map[scrubID]string
	Next  *scrubRow
	Any   any
	n     string // unexported: not reached
}

func TestScrubReachesEveryString(t *testing.T) {
	const sgr = "\x1b[31mred\x1b[0m"
	r := &scrubRow{ID: scrubID("ex_" + sgr), Tool: "deploy" + sgr, Args: json.RawMessage(`{"a":"` + "\u202e" + `"}`),
		Tags: []string{sgr}, Attrs: map[string]string{"k": sgr}, ByID: map[scrubID]string{scrubID("x" + sgr): "v"}, Any: sgr, n: sgr}
	r.Next = r // a cycle ends the walk instead of looping
	rows := []*scrubRow{r, {Tool: "clean"}}
	Scrub(&rows)
	for name, got := range map[string]string{"id": string(r.ID), "tool": r.Tool, "args": string(r.Args), "tag": r.Tags[0],
		"attr": r.Attrs["k"], "any": r.Any.(string)} {
		if strings.ContainsRune(got, 0x1b) || strings.ContainsRune(got, 0x202e) {
			t.Errorf("%s still holds an escape: %q", name, got)
		}
	}
	for k := range r.ByID {
		if strings.ContainsRune(string(k), 0x1b) {
			t.Errorf("a map key still holds an escape: %q", k)
		}
	}
	if len(r.ByID) != 1 {
		t.Errorf("the map holds %d keys, want 1", len(r.ByID))
	}
	if !strings.Contains(r.Tool, `\x1b[31m`) {
		t.Errorf("the escape is not shown: %q", r.Tool)
	}
	if rows[1].Tool != "clean" {
		t.Errorf("a clean string changed: %q", rows[1].Tool)
	}
	if r.n != sgr {
		t.Error("an unexported field was written")
	}
}
