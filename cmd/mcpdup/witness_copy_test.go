package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCopyThatSignsNamesTheWitness: a copy of the database that signs
// records of its own with the same key directory writes its checkpoint to
// the same witness file, and the original then fails its rollback check.
// The failure names the witness file and says a copy may be why; it named
// neither.
func TestCopyThatSignsNamesTheWitness(t *testing.T) {
	dir, db := demoDB(t)
	code, out, _ := mcpdup(t, "status", "-o", "json")
	var st struct {
		Pending []struct {
			ID string `json:"id"`
		} `json:"pending"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Pending) == 0 {
		t.Fatalf("status: %d\n%s", code, out)
	}
	cp := filepath.Join(dir, "copy.db")
	for _, ext := range []string{"", "-wal"} {
		b, err := os.ReadFile(db + ext)
		if err != nil && ext == "" {
			t.Fatal(err)
		}
		if err == nil {
			if err := os.WriteFile(cp+ext, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if code, _, errs := mcpdup(t, "resolve", "--db", cp, st.Pending[0].ID, "--verified", "--note", "checked on a copy", "--operator", "erin"); code != 0 {
		t.Fatalf("resolve on the copy: %d %s", code, errs)
	}
	code, out, errs := mcpdup(t, "audit", "verify")
	if code != 1 || !strings.Contains(out+errs, "witnessed in ") || !strings.Contains(out+errs, "a copy of this database signed records of its own") {
		t.Fatalf("verify of the original after its copy signed: exit %d, want 1 naming the witness file\n%s%s", code, out, errs)
	}
}
