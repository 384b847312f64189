package main

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportOfATamperedLogSaysSo: an export is verified as it is
// written. A database whose record was edited behind the store's back is
// still exported whole (the evidence, byte for byte as stored), but the
// command says the log does not verify and exits 1; it exited 0 and
// only the export's reader found out.
func TestExportOfATamperedLogSaysSo(t *testing.T) {
	dir, db := demoDB(t)
	clean := filepath.Join(dir, "clean.jsonl")
	if code, _, errs := mcpdup(t, "export", "-f", clean); code != 0 || strings.Contains(errs, "does not verify") {
		t.Fatalf("export of a clean log: exit %d\n%s", code, errs)
	}
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER audit_log_no_update`,
		`UPDATE audit_log SET canonical = CAST(replace(CAST(canonical AS TEXT), '"agent:', '"agent-') AS BLOB) WHERE seq = 3`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var edited []byte
	raw.QueryRow(`SELECT canonical FROM audit_log WHERE seq = 3`).Scan(&edited)
	raw.Close()
	if !bytes.Contains(edited, []byte(`"agent-`)) {
		t.Fatalf("the edit changed nothing: %s", edited)
	}
	bad := filepath.Join(dir, "tampered.jsonl")
	code, _, errs := mcpdup(t, "export", "-f", bad)
	if code != 1 || !strings.Contains(errs, "does not verify") || !strings.Contains(errs, "audit verify") {
		t.Fatalf("export of a tampered log: exit %d\n%s", code, errs)
	}
	data, err := os.ReadFile(bad)
	if err != nil {
		t.Fatalf("the export was not kept: %v", err)
	}
	if !bytes.Contains(data, edited) {
		t.Fatal("the export does not hold the record as stored")
	}
	cleanData, _ := os.ReadFile(clean)
	if n, m := bytes.Count(data, []byte("\n")), bytes.Count(cleanData, []byte("\n")); n < m {
		t.Fatalf("the tampered export has %d lines, the clean one %d", n, m)
	}
}
