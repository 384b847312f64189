package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/demo"
	"github.com/mcpdup/mcpdup/fixtures"
	"github.com/mcpdup/mcpdup/report"
)

// mcpdup runs the command line in-process and returns its exit code and
// output.
func mcpdup(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func fixture(name string) string { return filepath.Join("..", "..", "fixtures", name) }

func TestVerifyShippedFixture(t *testing.T) {
	code, out, errs := mcpdup(t, "audit", "verify", "--export", fixture(fixtures.AuditSampleExport), "--key", fixture(fixtures.AuditSampleKey))
	if code != 0 || !strings.Contains(out, "result: OK") || !strings.Contains(out, "pinned by --key") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	// Any byte of a record line changed: exit 1.
	data, err := os.ReadFile(fixture(fixtures.AuditSampleExport))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(`{"v":1,"seq":40,`))
	data[i+30] ^= 0x04
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, data, 0o600)
	code, out, _ = mcpdup(t, "audit", "verify", "--export", bad, "--key", fixture(fixtures.AuditSampleKey), "-o", "json")
	var rep struct {
		Result   string `json:"result"`
		Tampered bool   `json:"tampered"`
		Problems []struct {
			Code string `json:"code"`
			Seq  int64  `json:"seq"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	if code != 1 || !rep.Tampered || rep.Result != "tampered" || len(rep.Problems) == 0 {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
}

func TestVerifyExitCodes(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"audit", "verify", "--db", filepath.Join(t.TempDir(), "missing.db")}, 2, "no database at"},
		{[]string{"analyze", "--db", t.TempDir()}, 2, "is not a database file (a directory)"},
		{[]string{"audit", "verify", "--export", "no-such-file"}, 2, "no-such-file"},
		{[]string{"audit", "verify", "--export", fixture(fixtures.AuditSampleExport), "--key", "not-a-key"}, 2, "not-a-key"},
		{[]string{"audit", "verify", "--bogus"}, 2, "unknown flag --bogus"},
		{[]string{"audit", "verify", "-o", "yaml"}, 2, "must be one of"},
		{[]string{"resolve", "act_1", "--note", "x"}, 2, "exactly one of --verified or --rejected"},
		{[]string{"resolve", "act_1", "--verified", "--rejected", "--note", "x"}, 2, "exactly one of --verified or --rejected"},
		{[]string{"frobnicate"}, 2, "unexpected argument frobnicate"},
	}
	for _, c := range cases {
		code, _, errs := mcpdup(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("mcpdup %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(c.args, " "), code, errs, c.code, c.want)
		}
	}
}

func TestHelpHasExamples(t *testing.T) {
	for _, cmd := range [][]string{{"init"}, {"status"}, {"resolve"}, {"export"}, {"audit", "verify"}, {"audit", "checkpoint"}, {"audit", "key"}, {"completion"},
		{"gateway"}, {"lock"}, {"unlock"}, {"approvals"}, {"approve"}, {"deny"}, {"analyze"}, {"history"}, {"replay"}, {"report"}} {
		code, out, _ := mcpdup(t, append(cmd, "--help")...)
		if code != 0 || !strings.Contains(out, "Example") {
			t.Errorf("mcpdup %s --help: exit %d, no example:\n%s", strings.Join(cmd, " "), code, out)
		}
	}
	code, out, _ := mcpdup(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "mcpdup ") {
		t.Errorf("--version: %d %q", code, out)
	}
}

// TestOperatorFlow walks what an on-call engineer does: status, resolve a
// pending execution, pin the key, export, verify both, keep a checkpoint
// elsewhere and detect a rollback with it.
func TestOperatorFlow(t *testing.T) { onEngines(t, testOperatorFlow) }

func testOperatorFlow(t *testing.T, eng activitytest.Engine) {
	dir := t.TempDir()
	db, keys := eng.DB(t), filepath.Join(dir, "keys")
	t.Setenv("MCPDUP_KEY_DIR", keys)
	t.Setenv("MCPDUP_DB", db)
	s, err := activity.Open(context.Background(), db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := activitytest.Incident(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	code, out, _ := mcpdup(t, "status", "-o", "json")
	var st statusOutput
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Pending) != 1 || st.Pending[0].ID != ids["ticket"] {
		t.Fatalf("status: %d %s", code, out)
	}

	// The tail a narrow screen shows is enough to name it.
	tail := string(ids["ticket"])[len(ids["ticket"])-6:]
	code, out, errs := mcpdup(t, "resolve", tail, "--rejected", "--note", "no ticket exists in the tracker", "--operator", "bob")
	if code != 0 || !strings.Contains(out, "rejected_by_operator") || !strings.Contains(out, "sealed by checkpoint") {
		t.Fatalf("resolve: %d %s %s", code, out, errs)
	}
	code, _, errs = mcpdup(t, "resolve", string(ids["ticket"]), "--verified", "--note", "again", "--operator", "bob")
	if code != 1 || !strings.Contains(errs, "not unknown") {
		t.Fatalf("second resolve: %d %s", code, errs)
	}

	code, pub, _ := mcpdup(t, "audit", "key")
	if code != 0 {
		t.Fatal("audit key failed")
	}
	pubFile := filepath.Join(dir, "pinned.pub")
	os.WriteFile(pubFile, []byte(pub), 0o644)
	anchor := filepath.Join(dir, "ticket.checkpoint")
	if code, _, errs := mcpdup(t, "audit", "checkpoint", "-f", anchor); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	if code, _, errs := mcpdup(t, "audit", "checkpoint", "-f", anchor); code != 2 || !strings.Contains(errs, "exists (use --force to overwrite)") {
		t.Fatalf("checkpoint over an existing file: %d %s", code, errs)
	}
	// A directory, or a file in a directory that does not exist, is named
	// as such, with or without --force (they read "exists (use --force)",
	// then a temporary file's rename error).
	for _, c := range []struct{ path, want string }{{dir, "is a directory"}, {filepath.Join(dir, "no", "x"), "does not exist"}} {
		if code, _, errs := mcpdup(t, "audit", "checkpoint", "--force", "-f", c.path); code != 2 || !strings.Contains(errs, c.want) || strings.Contains(errs, ".mcpdup-") {
			t.Fatalf("checkpoint -f %s: %d %s", c.path, code, errs)
		}
	}
	if code, out, _ := mcpdup(t, "audit", "checkpoint", "-o", "json"); code != 0 || !strings.Contains(out, `"root_hash"`) {
		t.Fatalf("checkpoint -o json: %d %s", code, out)
	}
	if code, out, _ := mcpdup(t, "audit", "verify", "--key", pubFile, "--trusted-checkpoint", anchor); code != 0 {
		t.Fatalf("verify db: %d\n%s", code, out)
	}
	export := filepath.Join(dir, "ops.jsonl")
	if code, _, errs := mcpdup(t, "export", "-f", export); code != 0 {
		t.Fatalf("export: %s", errs)
	}
	if code, _, errs := mcpdup(t, "export", "-f", export); code != 2 || !strings.Contains(errs, "exists (use --force to overwrite)") {
		t.Fatalf("export over an existing file: %d %s", code, errs)
	}
	if code, _, errs := mcpdup(t, "export", "-f", export, "--force"); code != 0 {
		t.Fatalf("export --force: %d %s", code, errs)
	}
	if code, _, errs := mcpdup(t, "export", "-o", export); code != 2 || !strings.Contains(errs, "jsonl") {
		t.Fatalf("-o is a format, not a file: %d %s", code, errs)
	}
	data, _ := os.ReadFile(export)
	if bytes.Contains(data, []byte("PRIVATE+KEY")) {
		t.Fatal("export contains the private key")
	}
	if code, out, _ := mcpdup(t, "audit", "verify", "--export", export, "--key", pubFile, "--trusted-checkpoint", anchor); code != 0 {
		t.Fatalf("verify export: %d\n%s", code, out)
	}
	// Roll back: keep the export only up to its first checkpoint, with a
	// consistent header. Alone it is a valid shorter log; against the
	// checkpoint kept elsewhere it is a rollback.
	lines := strings.SplitAfter(string(data), "\n")
	cut := 1
	for !strings.HasPrefix(lines[cut], `{"checkpoint":`) {
		cut++
	}
	var hdr map[string]any
	json.Unmarshal([]byte(lines[0]), &hdr)
	hdr["records"], hdr["checkpoints"] = cut-1, 1
	h, _ := json.Marshal(hdr)
	short := filepath.Join(dir, "short.jsonl")
	os.WriteFile(short, []byte(string(h)+"\n"+strings.Join(lines[1:cut+1], "")), 0o600)
	if code, out, _ := mcpdup(t, "audit", "verify", "--export", short, "--key", pubFile); code != 0 {
		t.Fatalf("a shorter, consistent log should verify without an anchor: %d\n%s", code, out)
	}
	code, out, _ = mcpdup(t, "audit", "verify", "--export", short, "--key", pubFile, "--trusted-checkpoint", anchor)
	if code != 1 || !strings.Contains(out, "truncated or rolled back") {
		t.Fatalf("rolled-back export: exit %d\n%s", code, out)
	}
}

// TestShellCompletion drives the runtime half of completion the way bash
// does (`complete -C mcpdup mcpdup` sets COMP_LINE and runs the binary).
func TestShellCompletion(t *testing.T) {
	t.Setenv("COMP_LINE", "mcpdup audit ve")
	t.Setenv("COMP_POINT", "15")
	code, out, _ := mcpdup(t)
	if code != 0 || strings.TrimSpace(out) != "verify" {
		t.Fatalf("completion of 'mcpdup audit ve': exit %d, %q", code, out)
	}
	os.Unsetenv("COMP_LINE")
	code, out, _ = mcpdup(t, "completion", "bash")
	if code != 0 || !strings.HasPrefix(out, "complete -C ") || !strings.HasSuffix(out, " mcpdup\n") {
		t.Fatalf("completion bash: %d %q", code, out)
	}
}

func TestAnalyzeCommand(t *testing.T) { onEngines(t, testAnalyzeCommand) }

// onEngines runs a command-line test on a SQLite file and on PostgreSQL.
func onEngines(t *testing.T, fn func(t *testing.T, eng activitytest.Engine)) {
	for _, eng := range activitytest.Engines {
		t.Run(string(eng), func(t *testing.T) { fn(t, eng) })
	}
}

func testAnalyzeCommand(t *testing.T, eng activitytest.Engine) {
	dir, _ := demoDBOn(t, eng)

	code, out, errs := mcpdup(t, "analyze", "-o", "json")
	var res struct {
		Total  int            `json:"total"`
		Counts map[string]int `json:"counts"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Total != len(demo.Scenarios) || res.Counts["duplicate"] != 1 {
		t.Fatalf("analyze -o json: exit %d, %+v\n%s", code, res, errs)
	}
	code, out, _ = mcpdup(t, "analyze", "-q")
	if code != 0 || !strings.Contains(out, "✗  duplicate") || !strings.Contains(out, "Q3 unknown") || !strings.Contains(out, "10 suspects") {
		t.Fatalf("analyze table:\n%s", out)
	}
	code, out, _ = mcpdup(t, "analyze", "-o", "markdown")
	if code != 0 || !strings.Contains(out, "# Suspected duplicate actions") || !strings.Contains(out, "**Recommended fix:**") {
		t.Fatalf("analyze markdown:\n%s", out)
	}
	var full struct {
		Suspects []struct {
			ID      string    `json:"id"`
			Tool    string    `json:"tool"`
			FirstAt time.Time `json:"first_at"`
		} `json:"suspects"`
	}
	_, out, _ = mcpdup(t, "analyze", "-o", "json")
	json.Unmarshal([]byte(out), &full)
	// A window of one instant holds the suspect that starts then.
	at := full.Suspects[len(full.Suspects)/2].FirstAt.Format(time.RFC3339Nano)
	code, out, errs = mcpdup(t, "analyze", "-o", "json", "--from", at, "--to", at)
	var window struct {
		Total    int `json:"total"`
		Suspects []struct {
			ID string `json:"id"`
		} `json:"suspects"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &window) != nil || window.Total != 1 || window.Suspects[0].ID != full.Suspects[len(full.Suspects)/2].ID {
		t.Fatalf("analyze --from %s --to %s: exit %d, %+v\n%s", at, at, code, window, errs)
	}
	if code, _, errs := mcpdup(t, "analyze", "--from", "2026-11-30T09:00:00Z", "--to", "2026-11-30T08:00:00Z"); code != 2 || !strings.Contains(errs, "is before --from") {
		t.Fatalf("analyze with a reversed window: %d %s", code, errs)
	}
	var transfer string
	for _, sus := range full.Suspects {
		if sus.Tool == "pt_transfer_funds" {
			transfer = sus.ID
		}
	}
	cfg := filepath.Join(dir, "whatif.toml")
	// A what-if configuration needs only the tools: no [[actor]].
	os.WriteFile(cfg, []byte(`[[tool]]
name = "pt_transfer_funds"
url = "http://127.0.0.1:1/x"
contract = "blocked_after_unknown"
`), 0o600)
	code, out, errs = mcpdup(t, "replay", transfer, "--what-if", cfg)
	if code != 0 || !strings.Contains(out, "dispatch") || !strings.Contains(out, "✕ no answer") || !strings.Contains(out, "→ blocked: pending verification") {
		t.Fatalf("replay --what-if: %d\n%s%s", code, out, errs)
	}
	code, out, _ = mcpdup(t, "replay", "--from", "2000-01-01T00:00:00Z", "-o", "json")
	if code != 0 || !strings.Contains(out, `"frames"`) || strings.Count(out, `"seq"`) < 50 {
		t.Fatalf("replay a range: %d\n%.400s", code, out)
	}
	if code, _, errs := mcpdup(t, "replay"); code != 2 || !strings.Contains(errs, "give a suspect id, or --from TIME") || !strings.Contains(errs, "run 'mcpdup replay --help'") {
		t.Fatalf("replay with nothing: %d %s", code, errs)
	}
	// A range that ends before it starts, and a negative window, are
	// usage errors: they printed nothing and exited 0 (a CI gate passed).
	for _, args := range [][]string{
		{"replay", "--from", "2026-12-06T02:05:38Z", "--to", "2026-12-06T02:05:30Z"},
		{"analyze", "--window=-5m", "--fail-on", "duplicate"},
		{"report", "--window=-1h", "sus_x"},
	} {
		if code, _, errs := mcpdup(t, args...); code != 2 || !strings.Contains(errs, "run 'mcpdup "+args[0]+" --help'") {
			t.Fatalf("%v: exit %d, want 2\n%s", args, code, errs)
		}
	}
	page := filepath.Join(dir, "report.html")
	code, _, errs = mcpdup(t, "report", transfer, "-o", "html", "-f", page, "--what-if", cfg)
	if code, _, errs := mcpdup(t, "report", transfer, "-f", page); code != 2 || !strings.Contains(errs, "exists (use --force to overwrite)") {
		t.Fatalf("report over an existing file: %d %s", code, errs)
	}
	b, _ := os.ReadFile(page)
	if code != 0 || !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "duplicate risk") || strings.Contains(string(b), "<script") ||
		strings.Contains(string(b), "http://") && !strings.Contains(string(b), "http://www.w3.org/2000/svg") {
		t.Fatalf("report html: %d %s\n%.300s", code, errs, b)
	}
	code, out, _ = mcpdup(t, "report", report.ShortID(transfer))
	if code != 0 || !strings.Contains(out, "# Post-incident report") || !strings.Contains(out, "## Timeline") {
		t.Fatalf("report md:\n%s", out)
	}
	if code, _, errs := mcpdup(t, "report", "sus_nope"); code != 1 || !strings.Contains(errs, "no suspect sus_nope") {
		t.Fatalf("report of a missing suspect: %d %s", code, errs)
	}
	code, out, errs = mcpdup(t, "history", "--check")
	if code != 1 || !regexp.MustCompile(`duplicated\s+3\s`).MatchString(out) || !strings.Contains(errs, "3 duplicated effect(s), 0 lost invocation(s)") ||
		!strings.Contains(out, "scale_service") || !strings.Contains(out, "TARGET") {
		t.Fatalf("history --check: exit %d (want 1: duplicated effects)\n%s\n%s", code, out, errs)
	}
	code, out, _ = mcpdup(t, "history", "--check", "-o", "json")
	var chk struct {
		Duplicates []struct {
			Tool, Target string
			Executions   []string
		}
	}
	if code != 1 || json.Unmarshal([]byte(out), &chk) != nil || len(chk.Duplicates) != 3 || chk.Duplicates[0].Tool == "" || len(chk.Duplicates[0].Executions) < 2 {
		t.Fatalf("history --check -o json: %d\n%s", code, out)
	}
	code, out, _ = mcpdup(t, "history")
	if code != 0 || !strings.Contains(out, `"type":"invoke"`) || strings.Count(out, "\n") < 20 {
		t.Fatalf("history:\n%s", out)
	}
	// -o json is one document, as every other command's (it was JSON lines).
	code, out, _ = mcpdup(t, "history", "-o", "json")
	var doc struct {
		Operations []struct {
			Type string `json:"type"`
		} `json:"operations"`
		Integrity struct {
			State string `json:"state"`
		} `json:"integrity"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(doc.Operations) < 20 || doc.Operations[0].Type != "invoke" || doc.Integrity.State == "" {
		t.Fatalf("history -o json: exit %d, %v\n%.500s", code, err, out)
	}
	code, out, _ = mcpdup(t, "history", "-o", "table")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || !strings.HasPrefix(lines[0], "INDEX") || strings.Contains(out, "{") || len(lines) < 20 {
		t.Fatalf("history -o table:\n%s", out)
	}
	for flag, want := range map[string]int{"none": 0, "duplicate": 1, "risk": 1, "unknown": 1} {
		if code, _, _ := mcpdup(t, "analyze", "--fail-on", flag); code != want {
			t.Errorf("--fail-on %s: exit %d, want %d", flag, code, want)
		}
	}
}

// TestImportCommand imports the Sallyport and OTLP fixtures through the
// command line: the table, -o json, a second import that adds nothing, a
// bad file that exits 1 naming its line, and --dry-run.
func TestImportCommand(t *testing.T) { onEngines(t, testImportCommand) }

func testImportCommand(t *testing.T, eng activitytest.Engine) {
	dir := t.TempDir()
	db, keys := eng.DB(t), filepath.Join(dir, "keys")
	sally, otlp := "../../importers/testdata/sallyport/activity.jsonl", "../../importers/testdata/otlp/traces.jsonl"
	var out, errb strings.Builder
	if code := run([]string{"import", "--db", db, "--key-dir", keys, sally, otlp}, &out, &errb); code != 0 {
		t.Fatalf("import exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "sallyport  imported") || !strings.Contains(out.String(), "otlp       imported") ||
		!strings.Contains(out.String(), "paired by session + tool + args_preview") {
		t.Fatalf("import table:\n%s", out.String())
	}
	// A SQLite database the import created has the larger pages; init's
	// default (a gateway's) the smaller ones. PostgreSQL has its own.
	other := eng.DB(t)
	if code := run([]string{"init", "--db", other, "--key-dir", keys, "-o", "json"}, &out, &errb); code != 0 {
		t.Fatalf("init exit %d: %s", code, errb.String())
	}
	pages := map[string]float64{db: activity.ImportPageSize, other: activity.DefaultPageSize}
	if eng == activitytest.Postgres {
		pages = map[string]float64{db: 8192, other: 8192}
	}
	for path, want := range pages {
		out.Reset()
		var st struct{ Stats map[string]any }
		if code := run([]string{"status", "--db", path, "--key-dir", keys, "-o", "json"}, &out, &errb); code != 0 || json.Unmarshal([]byte(out.String()), &st) != nil {
			t.Fatalf("status %s: exit %d\n%s", path, code, out.String())
		}
		if st.Stats["page_size"] != want {
			t.Errorf("%s: stats.page_size %v, want %v", path, st.Stats["page_size"], want)
		}
	}
	out.Reset()
	if code := run([]string{"import", "--db", db, "--key-dir", keys, sally, "-o", "json"}, &out, &errb); code != 0 {
		t.Fatalf("re-import exit %d", code)
	}
	var reps []map[string]any
	if err := json.Unmarshal([]byte(out.String()), &reps); err != nil || len(reps) != 1 || reps[0]["already_imported"] != true {
		t.Fatalf("re-import json: %v\n%s", err, out.String())
	}
	out.Reset()
	if code := run([]string{"analyze", "--db", db, "--key-dir", keys, "-o", "json"}, &out, &errb); code != 0 || !strings.Contains(out.String(), `"verdict": "duplicate"`) {
		t.Fatalf("analysis of the imports: %d\n%s", code, out.String())
	}
	bad := filepath.Join(dir, "bad.jsonl")
	b, _ := os.ReadFile(sally)
	os.WriteFile(bad, []byte(strings.Replace(string(b), `"tool":"ssh.exec"`, `"tool":""`, 1)), 0o600)
	errb.Reset()
	if code := run([]string{"import", "--db", db, "--key-dir", keys, bad}, &out, &errb); code != 1 || !strings.Contains(errb.String(), bad+":10: field tool: missing") {
		t.Fatalf("bad file: exit %d, %s", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"import", "--db", db, "--key-dir", keys, "--skip-bad", "--dry-run", bad}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "dry run: would import") || !strings.Contains(out.String(), "skipped "+bad+":10") {
		t.Fatalf("dry run with skip: %d\n%s", code, out.String())
	}
}

// TestTamperedTablesEveryCommand: a row edited behind the store's back
// (the log untouched) makes audit verify exit 1 naming the table and the
// row, and analyze, replay and report say so and fail too.
func TestTamperedTablesEveryCommand(t *testing.T) {
	_, db := demoDB(t)
	code, out, _ := mcpdup(t, "analyze", "-o", "json")
	var res struct {
		Suspects []struct {
			ID string `json:"id"`
		} `json:"suspects"`
		Integrity struct {
			State string `json:"state"`
		} `json:"integrity"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Suspects) == 0 || res.Integrity.State != "verified" {
		t.Fatalf("untouched: exit %d, %+v", code, res.Integrity)
	}
	code, out, _ = mcpdup(t, "report", res.Suspects[0].ID)
	if code != 0 || !strings.Contains(out, "Integrity: verified: log and tables through record") {
		t.Fatalf("report on an untouched database: exit %d\n%s", code, out)
	}
	_, out, _ = mcpdup(t, "history", "--check", "-o", "json")
	if json.Unmarshal([]byte(out), &res) != nil || res.Integrity.State != "verified" || !strings.Contains(out, `"duplicated"`) {
		t.Fatalf("history --check on an untouched database: %+v\n%s", res.Integrity, out)
	}

	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if err := raw.QueryRow(`SELECT id FROM executions WHERE state = 'delivered' LIMIT 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE executions SET state = 'failed_before_dispatch' WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	code, out, _ = mcpdup(t, "audit", "verify")
	if code != 1 || !strings.Contains(out, "executions row \""+id+"\"") || !strings.Contains(out, "state is \"failed_before_dispatch\", the log says \"delivered\"") {
		t.Fatalf("audit verify: exit %d\n%s", code, out)
	}
	code, out, errs := mcpdup(t, "analyze")
	if code != 1 || !strings.Contains(out, "integrity: TAMPERED") || !strings.Contains(errs, "does not prove") {
		t.Fatalf("analyze: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = mcpdup(t, "report", res.Suspects[0].ID)
	if code != 1 || !strings.Contains(out, "**Integrity: TAMPERED") {
		t.Fatalf("report: exit %d\n%s", code, out)
	}
	code, out, _ = mcpdup(t, "replay", res.Suspects[0].ID)
	if code != 1 || !strings.Contains(out, "integrity: TAMPERED") {
		t.Fatalf("replay: exit %d\n%s", code, out)
	}
	// history, ops and checker alike (the demo's duplicates exit 1 too:
	// the stderr line says which).
	code, out, errs = mcpdup(t, "history", "--check")
	if code != 1 || !strings.Contains(out, "integrity: TAMPERED") || !strings.Contains(errs, "does not prove") {
		t.Fatalf("history --check: exit %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = mcpdup(t, "history")
	if code != 1 || !strings.Contains(errs, "does not prove") {
		t.Fatalf("history: exit %d\n%s", code, errs)
	}
	code, out, _ = mcpdup(t, "analyze", "--no-verify")
	if code != 0 || !strings.Contains(out, "integrity: not checked") {
		t.Fatalf("analyze --no-verify: exit %d\n%s", code, out)
	}
}

// TestHostileTextNeverReachesTheTerminal: a tool name and arguments
// carrying an OSC title write, a screen clear and a BiDi override are
// shown escaped in every text output, and exact in JSON.
func TestHostileTextNeverReachesTheTerminal(t *testing.T) {
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "hostile.db"), filepath.Join(dir, "keys")
	s, err := activity.Open(context.Background(), db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	tool := "deploy\x1b]0;pwned\x07\x1b[2J\u202egnp"
	args := json.RawMessage(`{"note":"\u001b[31mred\u202e"}`)
	_, err = s.Write(context.Background(), func(w *activity.Tx) error {
		src, err := w.AddSource(activity.Source{Format: "test", File: "hostile.log"})
		if err != nil {
			return err
		}
		for i := range 2 {
			at := time.Date(2026, 11, 30, 9, 0, i, 0, time.UTC)
			id := activity.NewExecutionID(at)
			c, err := w.RecordCall(activity.Call{Actor: "agent:x", Method: "tools/call", Tool: tool, ReceivedAt: at, Arguments: args,
				Disposition: activity.DispositionNewExecution, ExecutionID: id, Source: activity.Provenance{Source: src.ID, Line: int64(i + 1)}})
			if err != nil {
				return err
			}
			e, err := w.Accept(activity.Execution{ID: id, Action: activity.Action{Actor: "agent:x", Tool: tool, Channel: activity.ChannelHTTP,
				Target: "https://api.example/v1", Method: "POST", Arguments: args}, Contract: activity.ContractBlockedAfterUnknown,
				CreatedByCall: c.ID, Times: activity.Times{Accepted: activity.Some(at)},
				Source: activity.Provenance{Source: src.ID, Line: int64(i + 1)}})
			if err != nil {
				return err
			}
			for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded} {
				if _, err := w.Transition(activity.Transition{ExecutionID: e.ID, To: to}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Setenv("MCPDUP_DB", db)
	t.Setenv("MCPDUP_KEY_DIR", keys)
	for _, args := range [][]string{{"analyze", "-q"}, {"analyze", "-o", "markdown"}, {"history"}} {
		_, out, errs := mcpdup(t, args...)
		if strings.ContainsAny(out+errs, "\x1b\x07\u202e") {
			t.Errorf("%v printed a raw control character:\n%q", args, out+errs)
		}
		if args[0] == "analyze" && !strings.Contains(out, `\x1b]0;pwned\x07`) {
			t.Errorf("%v does not show the escaped name:\n%s", args, out)
		}
	}
	_, out, _ := mcpdup(t, "analyze", "-o", "json")
	var res struct {
		Suspects []struct {
			Tool string `json:"tool"`
		} `json:"suspects"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Suspects) == 0 || res.Suspects[0].Tool != tool {
		t.Fatalf("JSON must keep the name exact: %v %+v", err, res)
	}
}

// demoDB fills a database with the demo's incidents and points the
// commands at it (MCPDUP_DB, MCPDUP_KEY_DIR).
func demoDB(t *testing.T) (dir, db string) {
	t.Helper()
	return demoDBOn(t, activitytest.SQLite)
}

// demoDBOn builds the demo's database on eng and points MCPDUP_DB at it.
func demoDBOn(t *testing.T, eng activitytest.Engine) (dir, db string) {
	t.Helper()
	dir = t.TempDir()
	db, keys := eng.DB(t), filepath.Join(dir, "keys")
	s, err := activity.Open(context.Background(), db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.Run(context.Background(), s, keys); err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Setenv("MCPDUP_DB", db)
	t.Setenv("MCPDUP_KEY_DIR", keys)
	return dir, db
}

// TestStatusShowsTheVault: while the vault is locked the gateway refuses
// every call; status says so, with who locked it and why (it said nothing:
// only the meta table showed it).
func TestStatusShowsTheVault(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPDUP_KEY_DIR", filepath.Join(dir, "keys"))
	t.Setenv("MCPDUP_DB", filepath.Join(dir, "ops.db"))
	if code, _, errs := mcpdup(t, "init"); code != 0 {
		t.Fatalf("init: %d %s", code, errs)
	}
	if code, out, _ := mcpdup(t, "status"); code != 0 || !strings.Contains(out, "vault") || strings.Contains(out, "LOCKED") {
		t.Fatalf("status of an unlocked vault: %d\n%s", code, out)
	}
	if code, _, errs := mcpdup(t, "lock", "--operator", "dana", "--reason", "incident 4711"); code != 0 {
		t.Fatalf("lock: %d %s", code, errs)
	}
	code, out, _ := mcpdup(t, "status")
	if code != 0 || !strings.Contains(out, "LOCKED: the gateway refuses every call") || !strings.Contains(out, "incident 4711") {
		t.Fatalf("status of a locked vault: %d\n%s", code, out)
	}
	code, out, _ = mcpdup(t, "status", "-o", "json")
	var st struct {
		Vault struct {
			Locked bool   `json:"locked"`
			Note   string `json:"note"`
		} `json:"vault"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || !st.Vault.Locked || !strings.Contains(st.Vault.Note, "dana") {
		t.Fatalf("status -o json of a locked vault: %d %+v\n%s", code, st, out)
	}
}

// Without $USER (a kubectl exec shell, cron) the operator comes from
// $LOGNAME, then the OS account, as git finds an author.
func TestOperatorWithoutUSER(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPDUP_KEY_DIR", filepath.Join(dir, "keys"))
	t.Setenv("MCPDUP_DB", filepath.Join(dir, "ops.db"))
	if code, _, errs := mcpdup(t, "init"); code != 0 {
		t.Fatalf("init: %d %s", code, errs)
	}
	t.Setenv("USER", "")
	t.Setenv("LOGNAME", "carol")
	if code, out, errs := mcpdup(t, "lock", "--reason", "drill"); code != 0 || !strings.Contains(out, "carol") {
		t.Fatalf("lock with $LOGNAME only: %d %s %s", code, out, errs)
	}
	t.Setenv("LOGNAME", "")
	code, out, errs := mcpdup(t, "unlock", "--reason", "drill over")
	if u, err := user.Current(); err == nil && u.Username != "" {
		if code != 0 || !strings.Contains(out, u.Username) {
			t.Fatalf("unlock with neither: %d %s %s (want the OS account %q)", code, out, errs, u.Username)
		}
	} else if code != 2 || !strings.Contains(errs, "who is acting? give --operator NAME") {
		// An account with no name: the command must say how to name oneself.
		t.Fatalf("unlock with no name anywhere: %d %s", code, errs)
	}
}

// TestImportNotSealedSaysSo: a file imported whole whose seal then fails
// (here the stored Merkle nodes the last checkpoint's root is made of were
// altered) is reported as imported but not sealed, exit 1: its records are
// in the log, unsigned. It said "sealing failed" and the table still read
// "imported".
func TestImportNotSealedSaysSo(t *testing.T) {
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "a.db"), filepath.Join(dir, "keys")
	sally, otlp := "../../importers/testdata/sallyport/activity.jsonl", "../../importers/testdata/otlp/traces.jsonl"
	if code, _, errs := mcpdup(t, "import", "--db", db, "--key-dir", keys, sally); code != 0 {
		t.Fatalf("first import: %d %s", code, errs)
	}
	s, err := activity.Open(context.Background(), db, activity.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.LogSize(context.Background())
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER IF EXISTS audit_log_no_update`, `UPDATE audit_log SET tree_hashes = CAST(zeroblob(length(tree_hashes)) AS BLOB)`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	code, out, errs := mcpdup(t, "import", "--db", db, "--key-dir", keys, otlp)
	if code != 1 || !strings.Contains(out, "imported, not sealed") || !strings.Contains(errs, "imported, but not sealed") || !strings.Contains(errs, "refusing to sign") {
		t.Fatalf("import over an altered tree cache: exit %d, want 1 and 'imported, not sealed'\n%s%s", code, out, errs)
	}
	s, err = activity.Open(context.Background(), db, activity.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if after, err := s.LogSize(context.Background()); err != nil || after <= before {
		t.Fatalf("log size %d after, %d before (%v): the imported records should be there", after, before, err)
	}
}

// TestImportOfNothingCreatesNothing: an import whose files cannot be read
// (a typo) creates no database and no key: the empty database it left made
// the next analyze say "verified: empty log" instead of "no database".
func TestImportOfNothingCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "new.db"), filepath.Join(dir, "keys")
	code, _, errs := mcpdup(t, "import", "--db", db, "--key-dir", keys, filepath.Join(dir, "typo.log"), dir)
	if code != 1 || !strings.Contains(errs, "typo.log") {
		t.Fatalf("import of nothing: exit %d, want 1 naming the file\n%s", code, errs)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("an import of nothing created %v", entries)
	}
}

// import --dry-run writes nothing: no database, no key, and an existing
// database's files are byte for byte unchanged; a re-import is still
// recognised.
func TestImportDryRunWritesNothing(t *testing.T) {
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "new.db"), filepath.Join(dir, "keys")
	sally := "../../importers/testdata/sallyport/activity.jsonl"
	code, out, errs := mcpdup(t, "import", "--db", db, "--key-dir", keys, "--dry-run", sally)
	if code != 0 || !strings.Contains(out, "dry run: would import") {
		t.Fatalf("dry run into nothing: %d %s %s", code, out, errs)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a dry run created %v", entries)
	}
	if code, _, errs := mcpdup(t, "import", "--db", db, "--key-dir", keys, sally); code != 0 {
		t.Fatalf("real import: %d %s", code, errs)
	}
	snapshot := func() map[string]string {
		m := map[string]string{}
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				// SQLite's own index and an empty WAL appear for any reader
				// of a WAL database (analyze makes them too): not data.
				if strings.HasSuffix(p, "-shm") || (strings.HasSuffix(p, "-wal") && len(b) == 0) {
					return nil
				}
				m[p] = fmt.Sprintf("%x", sha256.Sum256(b))
			}
			return nil
		})
		return m
	}
	before := snapshot()
	otlp := "../../importers/testdata/otlp/traces.jsonl"
	code, out, errs = mcpdup(t, "import", "--db", db, "--key-dir", keys, "--dry-run", "-o", "json", sally, otlp)
	var reps []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &reps) != nil || len(reps) != 2 || reps[0]["already_imported"] != true || reps[1]["already_imported"] == true {
		t.Fatalf("dry run beside an existing database: %d %s %s", code, out, errs)
	}
	if after := snapshot(); !maps.Equal(before, after) {
		t.Fatalf("a dry run changed the files:\nbefore %v\nafter  %v", before, after)
	}
}

// Bare mcpdup shows the commands and where to start; --version says more
// than "dev".
func TestFirstRun(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPDUP_DB", filepath.Join(dir, "none.db"))
	code, out, errs := mcpdup(t)
	if code != 0 || !strings.Contains(out, "No database yet at") || !strings.Contains(out, "mcpdup demo") || !strings.Contains(out, "mcpdup import FILE") || !strings.Contains(out, "console") {
		t.Fatalf("bare mcpdup: %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "none.db")); err == nil {
		t.Fatal("bare mcpdup created a database")
	}
	code, out, _ = mcpdup(t, "--version")
	if code != 0 || strings.TrimSpace(out) == "mcpdup dev" || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: %q", out)
	}
}

// analyze lists the most severe suspect first (as the console does),
// --sort time keeps the order found, and -q keeps every column aligned.
func TestAnalyzeTriageOrder(t *testing.T) {
	dir, db := demoDB(t)
	keys := filepath.Join(dir, "keys")
	rows := func(out string) [][]string {
		var rs [][]string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "sus_") {
				rs = append(rs, strings.Fields(l))
			}
		}
		return rs
	}
	rank := map[string]int{"critical": 4, "high": 3, "medium": 2, "low": 1, "none": 0}
	code, out, _ := mcpdup(t, "analyze", "--db", db, "--key-dir", keys)
	rs := rows(out)
	if code != 0 || len(rs) < 3 {
		t.Fatalf("analyze: %d\n%s", code, out)
	}
	for i := 1; i < len(rs); i++ {
		if rank[rs[i][2]] > rank[rs[i-1][2]] {
			t.Fatalf("row %d (%s) is more severe than the row above it:\n%s", i+1, rs[i][2], out)
		}
	}
	if rs[0][2] != "critical" {
		t.Fatalf("the first row is %s, want the critical duplicate:\n%s", rs[0][2], out)
	}
	_, out, _ = mcpdup(t, "analyze", "--db", db, "--key-dir", keys, "--sort", "time")
	ts := rows(out)
	for i := 1; i < len(ts); i++ {
		if ts[i][6] < ts[i-1][6] {
			t.Fatalf("--sort time: row %d is older than the row above it:\n%s", i+1, out)
		}
	}
	// -o json, written from a spool on disk: valid, complete, in the same
	// order, every suspect the analysis found.
	_, out, _ = mcpdup(t, "analyze", "--db", db, "--key-dir", keys, "-o", "json")
	var doc struct {
		Total    int
		Suspects []struct{ ID, Severity string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Total != len(rs) || len(doc.Suspects) != len(rs) {
		t.Fatalf("-o json: %v, total %d, %d suspects, want %d\n%.400s", err, doc.Total, len(doc.Suspects), len(rs), out)
	}
	for i, sus := range doc.Suspects {
		if !strings.HasPrefix(rs[i][len(rs[i])-1], "sus_") || sus.ID != rs[i][len(rs[i])-1] {
			t.Fatalf("-o json row %d is %s, the table's is %v", i, sus.ID, rs[i])
		}
	}
	_, out, _ = mcpdup(t, "analyze", "--db", db, "--key-dir", keys, "-q")
	col, sus := -1, -1
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "sus_"); i >= 0 {
			i = utf8.RuneCountInString(l[:i]) // the glyphs are wider in bytes than on screen
			if sus >= 0 && i != sus {
				t.Fatalf("-q: the SUSPECT column moved (%d, then %d):\n%s", sus, i, out)
			}
			sus = i
		}
		if strings.HasPrefix(l, "    Q") {
			i := strings.IndexAny(l[6:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") + 6
			if col >= 0 && i != col {
				t.Fatalf("-q: explanations start at %d and then %d:\n%s", col, i, out)
			}
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("-q printed no answers:\n%s", out)
	}
}

// Approvals (who approved, when, with what note) are in the report, the
// replay and the timeline: no unexplained gap between accepted and
// authorized.
func TestApprovalsInReportsAndReplay(t *testing.T) {
	demoDB(t)
	_, out, _ := mcpdup(t, "analyze", "-o", "json")
	var res struct {
		Suspects []struct{ ID, Tool string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	var id string
	for _, s := range res.Suspects {
		if s.Tool == "charge_card" {
			id = s.ID
		}
	}
	if id == "" {
		t.Fatalf("no charge_card suspect:\n%s", out)
	}
	for _, args := range [][]string{{"report", id}, {"report", id, "-o", "html"}, {"replay", id}} {
		code, out, errs := mcpdup(t, args...)
		if code != 0 || !strings.Contains(out, "per_use approval apv_") || !strings.Contains(out, "approved by alice: charge for cus_481 matches order o-2291") {
			t.Fatalf("mcpdup %s: %d %s\n%s", strings.Join(args, " "), code, errs, out)
		}
	}
}

// jsonSuspect is what the tests read of a suspect in analyze -o json.
type jsonSuspect struct {
	ID         string `json:"id"`
	Executions []struct {
		ID  string `json:"id"`
		Seq int64  `json:"seq"`
	} `json:"executions"`
}

// listSuspects is what analyze -o json lists (at least one).
func listSuspects(t *testing.T) []jsonSuspect {
	t.Helper()
	code, out, _ := mcpdup(t, "analyze", "-o", "json", "--no-verify")
	var res struct {
		Suspects []jsonSuspect `json:"suspects"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Suspects) == 0 {
		t.Fatalf("analyze: exit %d", code)
	}
	return res.Suspects
}

// TestVerifyRecordsProvesWhatIsShown: report and replay --verify-records
// prove only the records a suspect rests on: verified on an untouched
// database, TAMPERED (exit 1) when a row of one of its executions was
// edited, and blind to a row that is not the suspect's (audit verify's).
func TestVerifyRecordsProvesWhatIsShown(t *testing.T) {
	_, db := demoDB(t)
	suspects := listSuspects(t)
	sus := suspects[0]
	for _, cmd := range [][]string{{"report", "--verify-records", sus.ID}, {"replay", "--verify-records", sus.ID}} {
		code, out, _ := mcpdup(t, cmd...)
		if code != 0 || !strings.Contains(out, "records this rests on are in the signed log and its rows match them") {
			t.Fatalf("%v on an untouched database: exit %d\n%s", cmd, code, out)
		}
	}
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// An execution no suspect shows: --verify-records does not look.
	shown := map[string]bool{}
	for _, s := range suspects {
		for _, e := range s.Executions {
			shown[e.ID] = true
		}
	}
	var other string
	rows, _ := raw.Query(`SELECT id FROM executions`)
	for rows.Next() {
		var id string
		rows.Scan(&id)
		if !shown[id] && other == "" {
			other = id
		}
	}
	rows.Close()
	if other != "" {
		raw.Exec(`DROP TRIGGER IF EXISTS transitions_no_update`)
		if _, err := raw.Exec(`UPDATE executions SET tool = 'forged' WHERE id = ?`, other); err != nil {
			t.Fatal(err)
		}
		if code, out, _ := mcpdup(t, "report", "--verify-records", sus.ID); code != 0 {
			t.Fatalf("a row no suspect shows changed the proof of this one: exit %d\n%s", code, out)
		}
	}
	// A transition of one of its executions, rewritten.
	if _, err := raw.Exec(`DROP TRIGGER IF EXISTS transitions_no_update`); err != nil {
		t.Fatal(err)
	}
	r, err := raw.Exec(`UPDATE transitions SET target_status = 599 WHERE execution_id = ? AND target_status IS NOT NULL`, sus.Executions[0].ID)
	if n, _ := r.RowsAffected(); err != nil || n == 0 {
		t.Fatalf("no transition with a status to forge: %v", err)
	}
	for _, cmd := range [][]string{{"report", "--verify-records", sus.ID}, {"replay", "--verify-records", sus.ID}} {
		code, out, _ := mcpdup(t, cmd...)
		if code != 1 || !strings.Contains(out, "TAMPERED") || !strings.Contains(out, "differs from its record") {
			t.Fatalf("%v over a forged transition: exit %d\n%s", cmd, code, out)
		}
	}
	// A field only the execution row holds, which a verdict reads: its
	// records, replayed, imply another.
	_, db2 := demoDB(t)
	sus = listSuspects(t)[0]
	raw2, err := sql.Open("sqlite", db2)
	if err != nil {
		t.Fatal(err)
	}
	defer raw2.Close()
	if _, err := raw2.Exec(`UPDATE executions SET idempotency_key = 'shared-key' WHERE id = ?`, sus.Executions[0].ID); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := mcpdup(t, "report", "--verify-records", sus.ID); code != 1 || !strings.Contains(out, "idempotency key differs from what its records imply") {
		t.Fatalf("a forged idempotency key: exit %d\n%s", code, out)
	}
}

// TestVerifyRecordsNamesDeletedTransitions: an execution whose transitions
// rows were deleted is reported as such, by the record that accepted it;
// it was "record 0 is not an acceptance", record 0 being whatever the log
// began with.
func TestVerifyRecordsNamesDeletedTransitions(t *testing.T) {
	_, db := demoDB(t)
	sus := listSuspects(t)[0]
	x := sus.Executions[len(sus.Executions)-1]
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`DROP TRIGGER IF EXISTS transitions_no_delete`); err != nil {
		t.Fatal(err)
	}
	if r, err := raw.Exec(`DELETE FROM transitions WHERE execution_id = ?`, x.ID); err != nil {
		t.Fatal(err)
	} else if n, _ := r.RowsAffected(); n == 0 {
		t.Fatalf("execution %s has no transitions rows", x.ID)
	}
	code, out, errs := mcpdup(t, "replay", "--verify-records", sus.ID)
	want := fmt.Sprintf("execution %s: the transitions table has no row for its acceptance (record %d) nor any of its steps", x.ID, x.Seq)
	if code != 1 || !strings.Contains(out+errs, want) || strings.Contains(out+errs, "is not an acceptance") {
		t.Fatalf("replay --verify-records with %s's transitions deleted: exit %d, want 1 and %q\n%s%s", x.ID, code, want, out, errs)
	}
}

// TestApproveCommand: approvals lists what waits; approve and deny answer
// it, on either engine.
func TestApproveCommand(t *testing.T) { onEngines(t, testApproveCommand) }

func testApproveCommand(t *testing.T, eng activitytest.Engine) {
	dir := t.TempDir()
	db, keys := eng.DB(t), filepath.Join(dir, "keys")
	t.Setenv("MCPDUP_DB", db)
	t.Setenv("MCPDUP_KEY_DIR", keys)
	s, err := activity.Open(context.Background(), db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	if _, err := s.Write(context.Background(), func(w *activity.Tx) error {
		for _, who := range []string{"agent:a", "agent:b"} {
			run, err := w.StartRun(activity.Run{Actor: who, IdentifiedBy: activity.RunByMetaID, Evidence: "run-" + who})
			if err != nil {
				return err
			}
			a, err := w.RequestApproval(activity.Approval{Kind: activity.ApprovalSession, RunID: run.ID, Actor: who, Summary: "new run of " + who})
			if err != nil {
				return err
			}
			ids = append(ids, a.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	code, out, errs := mcpdup(t, "approvals", "-o", "json")
	if code != 0 || !strings.Contains(out, ids[0]) || !strings.Contains(out, ids[1]) {
		t.Fatalf("approvals: %d %s %s", code, out, errs)
	}
	if code, _, errs := mcpdup(t, "approve", ids[0], "--note", "known agent", "--operator", "bob"); code != 0 {
		t.Fatalf("approve: %d %s", code, errs)
	}
	if code, _, errs := mcpdup(t, "deny", ids[1], "--note", "unknown agent", "--operator", "bob"); code != 0 {
		t.Fatalf("deny: %d %s", code, errs)
	}
	if code, out, _ := mcpdup(t, "approvals", "-o", "json"); code != 0 || strings.Contains(out, ids[0]) || strings.Contains(out, ids[1]) {
		t.Fatalf("answered approvals still pending: %s", out)
	}
	s, err = activity.Open(context.Background(), db, activity.Options{ReadOnly: true, KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.Approvals(context.Background(), false)
	if err != nil || len(all) != 2 || all[0].State != activity.ApprovalApproved || all[1].State != activity.ApprovalDenied || all[0].Operator != "bob" {
		t.Fatalf("answers stored: %v %+v", err, all)
	}
}

// A missing file, a directory and a file of no format are each refused
// alone, naming themselves; the others are imported; exit 1. A format
// name no importer has is a usage error (exit 2), before anything is read.
func TestImportRefusesFilesAlone(t *testing.T) {
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "t.db"), filepath.Join(dir, "keys")
	sally := "../../importers/testdata/sallyport/activity.jsonl"
	code, out, errs := mcpdup(t, "import", "--db", db, "--key-dir", keys, "-o", "json", filepath.Join(dir, "missing.log"), dir, sally)
	var reps []struct {
		File    string `json:"file"`
		Refused string `json:"refused"`
		Calls   int    `json:"calls"`
	}
	if err := json.Unmarshal([]byte(out), &reps); err != nil || code != 1 || len(reps) != 3 {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	if !strings.Contains(reps[0].Refused, "no such file") || !strings.Contains(reps[1].Refused, "a directory: give the files in it") ||
		reps[2].Refused != "" || reps[2].Calls == 0 {
		t.Errorf("reports: %+v", reps)
	}
	if code, _, errs := mcpdup(t, "import", "--db", db, "--key-dir", keys, "--format", "nginz", sally); code != 2 || !strings.Contains(errs, "--format") {
		t.Errorf("an unknown format: exit %d %s", code, errs)
	}
}

// TestStatusSaysRecordsWereRemoved: status reads what the database says;
// with the log cut below its newest checkpoint it said "-2 unsealed".
func TestStatusSaysRecordsWereRemoved(t *testing.T) {
	_, db := demoDB(t)
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER audit_log_no_delete`, `DELETE FROM audit_log WHERE seq >= (SELECT MAX(seq) - 1 FROM audit_log)`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	_, out, _ := mcpdup(t, "status")
	if !strings.Contains(out, "records were removed from the end") || strings.Contains(out, "-2 unsealed") {
		t.Fatalf("status on a cut log:\n%s", out)
	}
	_, out, _ = mcpdup(t, "status", "-o", "json")
	if strings.Contains(out, `"unsealed": -`) {
		t.Fatalf("status -o json on a cut log: %s", out)
	}
}

// TestReplacedPublicKeyFile: a .pub in the key directory that is not the
// public half of its signing key was trusted by audit verify (every
// checkpoint "not signed by the pinned key", though none was pinned)
// while analyze verified with the signing key: both now verify with the
// signing key, and verify says the .pub was replaced.
func TestReplacedPublicKeyFile(t *testing.T) {
	dir, _ := demoDB(t)
	pubs, _ := filepath.Glob(filepath.Join(dir, "keys", "*.pub"))
	if len(pubs) != 1 {
		t.Fatalf("key files: %v", pubs)
	}
	other, err := activity.Open(context.Background(), filepath.Join(t.TempDir(), "other.db"), activity.Options{KeyDir: filepath.Join(t.TempDir(), "k")})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := other.PublicKey()
	other.Close()
	if err := os.WriteFile(pubs[0], []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := mcpdup(t, "audit", "verify")
	if code != 0 || !strings.Contains(errs, "it was replaced") || strings.Contains(out, "pinned key") {
		t.Fatalf("audit verify: exit %d\n%s\n%s", code, out, errs)
	}
}
