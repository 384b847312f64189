package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyDB copies a SQLite database (and its WAL) to path.
func copyDB(t *testing.T, from, to string) {
	t.Helper()
	for _, ext := range []string{"", "-wal"} {
		b, err := os.ReadFile(from + ext)
		if err != nil && ext == "" {
			t.Fatal(err)
		}
		if err == nil {
			if err := os.WriteFile(to+ext, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestNoKeyIsNotVerified: with the key files gone, audit verify said
// "OK: no tampering found" (exit 0) and analyze "verified … key not
// pinned", though no signature was checked: a log rewritten and re-chained
// by anyone with the database passed. Now nothing says verified without
// a key.
func TestNoKeyIsNotVerified(t *testing.T) {
	demoDB(t)
	t.Setenv("MCPDUP_KEY_DIR", t.TempDir()) // another host's: no key for this log
	code, out, errs := mcpdup(t, "audit", "verify")
	if code != 2 || !strings.Contains(out, "NOT VERIFIED") || !strings.Contains(errs, "no key") {
		t.Errorf("audit verify without a key: exit %d, want 2 and NOT VERIFIED\n%s%s", code, out, errs)
	}
	code, out, errs = mcpdup(t, "analyze")
	if strings.Contains(out+errs, "verified: log") || !strings.Contains(out+errs, "not checked: no key") {
		t.Errorf("analyze without a key (exit %d) says:\n%s%s", code, out, errs)
	}
}

// TestWitnessGapsAreSaid: the witness file outside the database is what
// shows a rollback to an older copy. Deleted, it was silently not used
// (audit verify "OK" after a rollback); deleted and begun again by the
// next decision, it vouched for the rolled-back history. Both are said
// now.
func TestWitnessGapsAreSaid(t *testing.T) {
	dir, db := demoDB(t)
	keys := os.Getenv("MCPDUP_KEY_DIR")
	witness, err := filepath.Glob(filepath.Join(keys, "*.witness"))
	if err != nil || len(witness) != 1 {
		t.Fatalf("witness files: %v %v", witness, err)
	}
	old := filepath.Join(dir, "old.db")
	copyDB(t, db, old)
	pending := pendingIDs(t)
	if code, _, errs := mcpdup(t, "resolve", pending[0], "--rejected", "--note", "not at the target", "--operator", "bob"); code != 0 {
		t.Fatalf("resolve: %d %s", code, errs)
	}
	// Roll back to the older copy, and take the witness away.
	for _, ext := range []string{"-wal", "-shm"} {
		os.Remove(db + ext)
	}
	copyDB(t, old, db)
	if err := os.Remove(witness[0]); err != nil {
		t.Fatal(err)
	}
	code, out, errs := mcpdup(t, "audit", "verify")
	if code != 0 || !strings.Contains(out, "holds no checkpoint") {
		t.Errorf("verify with the witness removed: exit %d\n%s%s", code, out, errs)
	}
	if _, out, errs = mcpdup(t, "analyze"); !strings.Contains(out+errs, "witness incomplete") {
		t.Errorf("analyze with the witness removed says:\n%s%s", out, errs)
	}
	// The next decision begins the witness again, from the rolled-back
	// history: the file says so by where it begins.
	if code, _, errs := mcpdup(t, "resolve", pendingIDs(t)[0], "--verified", "--note", "seen", "--operator", "mallory"); code != 0 {
		t.Fatalf("resolve: %d %s", code, errs)
	}
	code, out, errs = mcpdup(t, "audit", "verify")
	if !strings.Contains(out, "witnessing began again") {
		t.Errorf("verify with the witness begun again: exit %d\n%s%s", code, out, errs)
	}
}

// pendingIDs lists the executions waiting for an operator, from status.
func pendingIDs(t *testing.T) []string {
	t.Helper()
	code, out, errs := mcpdup(t, "status", "-o", "json")
	var st struct {
		Pending []struct {
			ID string `json:"id"`
		} `json:"pending"`
	}
	if code != 0 || jsonUnmarshal(out, &st) != nil || len(st.Pending) == 0 {
		t.Fatalf("status: %d\n%s%s", code, out, errs)
	}
	ids := make([]string, len(st.Pending))
	for i, p := range st.Pending {
		ids[i] = p.ID
	}
	return ids
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// TestVerifyRecordsCoversWhatTheAnswersRead: report --verify-records said
// "verified" over a call moved to another run (Q1 then read "two agent
// processes", a verdict of its own), a run's identification rewritten, a
// transition's reason the answers quote, and an execution's error: none
// of them was compared with its record.
func TestVerifyRecordsCoversWhatTheAnswersRead(t *testing.T) {
	for name, forge := range map[string]string{
		"a call's run":        `UPDATE calls SET run_id = (SELECT r.id FROM runs r WHERE r.id <> calls.run_id ORDER BY r.seq LIMIT 1) WHERE seq = (SELECT MAX(seq) FROM calls WHERE run_id IS NOT NULL AND execution_id IN (%s))`,
		"a run's evidence":    `UPDATE runs SET evidence = 'forged', identified_by = 'explicit_run_id' WHERE id IN (SELECT run_id FROM calls WHERE execution_id IN (%s))`,
		"a transition reason": `UPDATE transitions SET reason = 'FORGED REASON' WHERE execution_id IN (%s)`,
		"an execution error":  `UPDATE executions SET error = 'forged' WHERE id IN (%s)`,
	} {
		t.Run(name, func(t *testing.T) {
			_, db := demoDB(t)
			raw, err := sql.Open("sqlite", db)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			raw.Exec(`DROP TRIGGER IF EXISTS transitions_no_update`)
			var sus *jsonSuspect
			for _, s := range listSuspects(t) { // the first whose rows have one
				var ids []string
				for _, e := range s.Executions {
					ids = append(ids, "'"+e.ID+"'")
				}
				if len(ids) == 0 {
					continue
				}
				r, err := raw.Exec(fmt.Sprintf(forge, strings.Join(ids, ",")))
				if err != nil {
					t.Fatal(err)
				}
				if n, _ := r.RowsAffected(); n > 0 {
					sus = &s
					break
				}
			}
			if sus == nil {
				t.Fatal("no suspect has one to forge")
			}
			if code, out, errs := mcpdup(t, "report", "--verify-records", sus.ID); code != 1 || !strings.Contains(out, "TAMPERED") {
				t.Fatalf("report --verify-records over %s: exit %d\n%s%s", name, code, out, errs)
			}
		})
	}
}

// TestStatusAndApprovalsSayWhatIsProven: status counted and listed rows
// edited behind the store's back (a charge shown delivered, dropping out
// of the verification queue) and approvals listed an answered approval as
// pending, with nothing said about integrity and exit 0.
func TestStatusAndApprovalsSayWhatIsProven(t *testing.T) {
	_, db := demoDB(t)
	if code, out, errs := mcpdup(t, "status"); code != 0 || !strings.Contains(out, "verified: log and tables") {
		t.Fatalf("status of an untouched database: exit %d\n%s%s", code, out, errs)
	}
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE executions SET state = 'delivered', outcome = 'success' WHERE state IN ('unknown', 'pending_verification')`); err != nil {
		t.Fatal(err)
	}
	code, out, errs := mcpdup(t, "status", "-o", "json")
	var st struct {
		Integrity struct {
			State string `json:"state"`
		} `json:"integrity"`
	}
	if code != 1 || jsonUnmarshal(out, &st) != nil || st.Integrity.State != "tampered" || !strings.Contains(errs, "TAMPERED") {
		t.Errorf("status -o json of an edited database: exit %d, integrity %q\n%s%s", code, st.Integrity.State, out, errs)
	}
	if code, out, errs := mcpdup(t, "approvals", "--all"); code != 1 || !strings.Contains(out, "integrity: TAMPERED") {
		t.Errorf("approvals of an edited database: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := mcpdup(t, "status", "--no-verify"); code != 0 || !strings.Contains(out, "not checked: --no-verify") {
		t.Errorf("status --no-verify: exit %d\n%s%s", code, out, errs)
	}
}

// TestUnreadablePublicKeyFile: a .pub file that is no key for this log
// (its text edited) made audit verify exit 2 with nothing on stdout,
// while analyze verified with the signing key's half: the two disagreed.
// Both verify with the signing key now, and audit verify says the file
// was replaced.
func TestUnreadablePublicKeyFile(t *testing.T) {
	dir, _ := demoDB(t)
	pubs, _ := filepath.Glob(filepath.Join(dir, "keys", "*.pub"))
	if len(pubs) != 1 {
		t.Fatalf("key files: %v", pubs)
	}
	if err := os.WriteFile(pubs[0], []byte("mcpdup.local/forged+deadbeef+AAAA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := mcpdup(t, "audit", "verify")
	if code != 0 || !strings.Contains(errs, "it was replaced") || !strings.Contains(out, "result: OK") {
		t.Fatalf("audit verify with an unreadable .pub: exit %d\n%s\n%s", code, out, errs)
	}
}
