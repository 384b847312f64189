package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRangeReplayNamesTheRecorder: a time range of imported traffic is
// drawn with the log it came from in the middle lane, as a suspect's
// replay is; it read "gateway", a recorder the calls never went through.
func TestRangeReplayNamesTheRecorder(t *testing.T) {
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "c.db"), filepath.Join(dir, "keys")
	if code, _, errs := mcpdup(t, "import", "--db", db, "--key-dir", keys, "../../importers/testdata/har/agent.har"); code != 0 {
		t.Fatalf("import: %d %s", code, errs)
	}
	code, out, errs := mcpdup(t, "replay", "--db", db, "--key-dir", keys, "--from", "2000-01-01T00:00:00Z")
	if code != 0 || !strings.Contains(out, "agent→har") || strings.Contains(out, "gateway") {
		t.Fatalf("range replay of a HAR: exit %d, want its lanes named har\n%s%s", code, out, errs)
	}
}
