package activity_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
)

// everyTable builds a database with rows in every projection table: the
// incident, plus a vault lock, approvals decided and pending, and an
// ended run.
func everyTable(t *testing.T) (path string, opts activity.Options) {
	t.Helper()
	s, keyDir := activitytest.Open(t, activity.Options{})
	ids, err := activitytest.Incident(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Write(ctx, func(w *activity.Tx) error {
		if err := w.SetVault(true, "alice", "incident 4411"); err != nil {
			return err
		}
		run, err := w.StartRun(activity.Run{Actor: "agent:ops", IdentifiedBy: activity.RunByMetaID, Evidence: "run-ops"})
		if err != nil {
			return err
		}
		a, err := w.RequestApproval(activity.Approval{Kind: activity.ApprovalSession, RunID: run.ID, Actor: "agent:ops", Summary: "new run"})
		if err != nil {
			return err
		}
		if _, err := w.DecideApproval(a.ID, activity.ApprovalApproved, "bob", "known agent"); err != nil {
			return err
		}
		if _, err := w.RequestApproval(activity.Approval{Kind: activity.ApprovalPerUse, ExecutionID: ids["payment"], Actor: "agent:ops",
			CredentialRef: "stripe-live"}); err != nil {
			return err
		}
		// Arguments as a client sends them, not in canonical form: the
		// row must hold what the record holds.
		raw := json.RawMessage(` { "z" : 1e2 , "y":"\u00e9\n", "a": [1.50] } `)
		c, err := w.RecordCall(activity.Call{Actor: "agent:ops", Method: "tools/call", Tool: "raw_args", Arguments: raw,
			Disposition: activity.DispositionNewExecution})
		if err != nil {
			return err
		}
		if _, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:ops", Tool: "raw_args", Channel: activity.ChannelHTTP,
			Target: "https://api.example", Method: "POST", Arguments: raw}, CreatedByCall: c.ID}); err != nil {
			return err
		}
		return w.EndRun(run.ID, w.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	path = s.Path()
	opts = activity.Options{ReadOnly: true, KeyDir: keyDir}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path, opts
}

func TestTableCheckUntouched(t *testing.T) {
	path, opts := everyTable(t)
	s, err := activity.Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.CheckTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Errorf("false alarm: %s %s: %s", p.Code, p.Table, p.Message)
	}
	if rep.Records == 0 || rep.Rows == 0 {
		t.Fatalf("checked %d records, %d rows", rep.Records, rep.Rows)
	}
}

// tamper is one edit an attacker with the file makes, the triggers
// dropped first.
type tamper struct {
	table, column, op string // op: edit, delete, insert
	sql               string
}

// tampers lists, for every table the check covers, an edit of every
// column of one row, the deletion of that row and the insertion of a
// copy under another key.
func tampers(t *testing.T, db *sql.DB) []tamper {
	t.Helper()
	var out []tamper
	for _, table := range []string{"sources", "runs", "grants", "calls", "executions", "transitions", "resolutions", "approvals", "meta", "results"} {
		cols, types := columns(t, db, table)
		pick := fmt.Sprintf("rowid = (SELECT MIN(rowid) FROM %s)", table)
		if table == "meta" {
			pick = "key = 'vault'"
		}
		for i, c := range cols {
			change := fmt.Sprintf("COALESCE(%s || 'x', 'x')", c)
			switch {
			case i == 0 && types[i] == "INTEGER": // a key: move it past every other
				change = fmt.Sprintf("(SELECT MAX(%s) FROM %s) + 1000", c, table)
			case types[i] == "INTEGER":
				change = fmt.Sprintf("COALESCE(%s + 1, 1)", c)
			case types[i] == "BLOB":
				change = fmt.Sprintf("CAST(%s || 'x' AS BLOB)", c)
			}
			if table == "results" && c == "created_at" {
				continue // not in the log: when the content was stored
			}
			out = append(out, tamper{table, c, "edit", fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s", table, c, change, pick)})
		}
		out = append(out, tamper{table, "", "delete", fmt.Sprintf("DELETE FROM %s WHERE %s", table, pick)})
		key := cols[0]
		copyKey := key + " || 'x'"
		if types[0] == "INTEGER" {
			copyKey = fmt.Sprintf("(SELECT MAX(%s) FROM %s) + 1000", key, table)
		}
		out = append(out, tamper{table, "", "insert", fmt.Sprintf("INSERT INTO %s(%s) SELECT %s, %s FROM %s WHERE %s",
			table, strings.Join(cols, ", "), copyKey, strings.Join(cols[1:], ", "), table, pick)})
	}
	// The kind column the gateway finds vault records by.
	out = append(out, tamper{"audit_log.kind", "", "edit", `UPDATE audit_log SET kind = 'transition' WHERE kind = 'vault'`},
		tamper{"audit_log.kind", "", "insert", `UPDATE audit_log SET kind = 'vault' WHERE seq = 0`})
	return out
}

func columns(t *testing.T, db *sql.DB, table string) (names, types []string) {
	t.Helper()
	rows, err := db.Query("SELECT name, type FROM pragma_table_info(?) ORDER BY cid", table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		names, types = append(names, n), append(types, ty)
	}
	return names, types
}

// TestTableCheckCatchesTampering: every edit, deletion and insertion of
// every table is reported, naming the table; an edited row is named by
// its key and the column that changed.
func TestTableCheckCatchesTampering(t *testing.T) {
	path, opts := everyTable(t)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	all := tampers(t, db)
	db.Close()
	caught := 0
	for _, tc := range all {
		name := tc.table + "/" + tc.op + "/" + tc.column
		dir := t.TempDir()
		copyPath := filepath.Join(dir, "t.db")
		activitytest.CopyFile(t, path, copyPath)
		edit(t, copyPath, tc.sql)
		s, err := activity.Open(ctx, copyPath, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rep, err := s.CheckTables(ctx)
		s.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var found *activity.TableProblem
		for i, p := range rep.Problems {
			if p.Table == tc.table {
				found = &rep.Problems[i]
				break
			}
		}
		switch {
		case found == nil:
			t.Errorf("%s: not caught (%d problems: %+v)", name, len(rep.Problems), rep.Problems)
		case tc.op == "edit" && tc.column != keyColumn[tc.table] && tc.table != "results" && !strings.Contains(found.Message, tc.column+" is "):
			t.Errorf("%s: the message does not name the column: %s", name, found.Message)
		default:
			caught++
		}
	}
	t.Logf("tampering caught: %d of %d", caught, len(all))
}

// keyColumn names each table's rows; an edited key is a row the log
// lacks and a row the table lacks.
var keyColumn = map[string]string{"sources": "id", "runs": "id", "grants": "seq", "calls": "id", "executions": "id", "transitions": "seq",
	"resolutions": "seq", "approvals": "id", "meta": "key", "results": "ref"}

// edit runs an attacker's statement with the append-only triggers gone.
func edit(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'trigger'`)
	if err != nil {
		t.Fatal(err)
	}
	var triggers []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		triggers = append(triggers, n)
	}
	rows.Close()
	for _, tr := range triggers {
		if _, err := db.Exec("DROP TRIGGER " + tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range stmts {
		res, err := db.Exec(stmt)
		if err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			t.Fatalf("%s changed nothing", stmt)
		}
	}
}

// TestTableCheckWhileWriting: a check beside a writer that commits all
// the time sees one consistent snapshot, and so never a false alarm.
func TestTableCheckWhileWriting(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	stop := activitytest.Busy(ctx, s)
	var checked, records int64
	for range 15 {
		rep, err := s.CheckTables(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range rep.Problems {
			t.Errorf("false alarm at %d records: %s", rep.Records, p.Message)
		}
		checked++
		records = rep.Records
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d checks beside a writer, the last over %d records", checked, records)
}

// BenchmarkTableCheckParts splits what the table check costs at a million
// records, each part alone on one goroutine, side by side in one run:
// reading the log, reading every table (values discarded: the least any
// check must pay), replaying the log into digests, and the whole check
// (both at once). audit's BenchmarkVerify times verify itself.
//
//	go test ./activity -run '^$' -bench TableCheckParts -benchtime 2x
func BenchmarkTableCheckParts(b *testing.B) {
	path, keyDir := activitytest.Cached(b, "verify-1000000", func(ctx context.Context, s *activity.Store) error {
		return activitytest.Fill(ctx, s, 1_000_000, 3000)
	})
	ctx := context.Background()
	s, err := activity.Open(ctx, path, activity.Options{ReadOnly: true, KeyDir: keyDir})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	onSnapshot := func(fn func(*activity.Snapshot) error) func(b *testing.B) {
		return func(b *testing.B) {
			for range b.N {
				sn, err := s.Snapshot(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := fn(sn); err != nil {
					b.Fatal(err)
				}
				sn.Close()
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/op")
		}
	}
	b.Run("log-read", onSnapshot(func(sn *activity.Snapshot) error {
		return sn.ScanLog(ctx, func(int64, []byte) error { return nil })
	}))
	b.Run("tables-read", onSnapshot(func(sn *activity.Snapshot) error {
		rows, err := sn.ReadTablesOnly(ctx)
		b.ReportMetric(float64(rows), "rows")
		return err
	}))
	b.Run("replay", onSnapshot(func(sn *activity.Snapshot) error { return sn.ReplayOnly(ctx) }))
	b.Run("check", func(b *testing.B) {
		for range b.N {
			rep, err := s.CheckTables(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if len(rep.Problems) > 0 {
				b.Fatalf("bench store: %+v", rep.Problems[0])
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/op")
	})
}

// TestTableCheckCatchesAlteredIndexes: an index rebuilt without one of
// its table's rows, its schema text put back (writable_schema), left
// every row and record intact, and readers that use it (the analysis,
// report, replay) missed the row while saying "verified". Every index of
// the projected tables is altered so in turn, and each is named.
func TestTableCheckCatchesAlteredIndexes(t *testing.T) {
	path, opts := everyTable(t)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	type index struct{ name, table, def string }
	var all []index
	rows, err := db.Query(`SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name <> 'audit_log'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var x index
		rows.Scan(&x.name, &x.table, &x.def)
		all = append(all, x)
	}
	rows.Close()
	db.Close()
	altered := 0
	for _, x := range all {
		copyPath := filepath.Join(t.TempDir(), "t.db")
		activitytest.CopyFile(t, path, copyPath)
		db, err := sql.Open("sqlite", copyPath)
		if err != nil {
			t.Fatal(err)
		}
		where, joiner := "1", " WHERE "
		if m := regexp.MustCompile(`(?is)\)\s*WHERE\s+(.+)$`).FindStringSubmatch(x.def); m != nil {
			where, joiner = m[1], " AND "
		}
		var rowid int64
		if err := db.QueryRow(fmt.Sprintf(`SELECT rowid FROM %q WHERE %s LIMIT 1`, x.table, where)).Scan(&rowid); err != nil {
			db.Close()
			continue // no row belongs in it: nothing to hide
		}
		for _, stmt := range []string{"DROP INDEX " + x.name, fmt.Sprintf("%s%srowid <> %d", x.def, joiner, rowid),
			"PRAGMA writable_schema = ON"} {
			if _, err := db.Exec(stmt); err != nil {
				t.Fatalf("%s: %s: %v", x.name, stmt, err)
			}
		}
		if _, err := db.Exec(`UPDATE sqlite_master SET sql = ? WHERE name = ?`, x.def, x.name); err != nil {
			t.Fatalf("%s: %v", x.name, err)
		}
		db.Exec("PRAGMA writable_schema = OFF")
		db.Close()
		s, err := activity.Open(ctx, copyPath, opts)
		if err != nil {
			t.Fatalf("%s: %v", x.name, err)
		}
		rep, err := s.CheckTables(ctx)
		s.Close()
		if err != nil {
			t.Fatalf("%s: %v", x.name, err)
		}
		found := false
		for _, p := range rep.Problems {
			found = found || p.Code == activity.ProblemIndex && p.Row == x.name
		}
		if !found {
			t.Errorf("index %s (%s) altered, not caught: %+v", x.name, x.table, rep.Problems)
		}
		altered++
	}
	if altered < 10 {
		t.Fatalf("only %d indexes altered: the sample holds too few rows", altered)
	}
	t.Logf("%d of %d indexes altered, each caught", altered, len(all))
}
