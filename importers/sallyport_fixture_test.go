package importers

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/analyze"
)

var update = flag.Bool("update", false, "rewrite the generated fixtures and golden files")

// spRow is a Sallyport AuditEvent as its Activity export writes it: every
// field present, empty or zero when unset.
type spRow struct {
	ts                                                   string
	session, channel, tool, target, args, decision, rule string
	isError                                              bool
	duration                                             int64
	origin                                               map[string]any
}

var (
	claude = map[string]any{"app": "Claude", "chain": "Claude → login → sp", "name": "sp", "path": "/Applications/Sallyport.app/Contents/Helpers/sp",
		"pid": 4121, "signed": true, "signedBy": "Developer ID Application: Anthropic PBC (Q6L2SF6YDW)"}
	cursor = map[string]any{"app": "Cursor", "chain": "Cursor → zsh → sp", "name": "sp", "path": "/Applications/Sallyport.app/Contents/Helpers/sp",
		"pid": 5230, "signed": true, "signedBy": "Developer ID Application: Anysphere Inc (VDXQ22DGB9)"}
	noOrigin = map[string]any{"app": "", "chain": "", "name": "", "path": "", "pid": 0, "signed": false, "signedBy": ""}
)

const (
	sessA = "4121:2026-11-30T08:58:41.118Z:7d1c"
	sessB = "5230:2026-11-30T09:02:10.402Z:a93f"
)

// sallyportScenario is the incident the fixture records, row by row.
var sallyportScenario = []spRow{
	{"2026-11-30T08:59:02.001Z", "", "vault", "vault.unlocked", "", "unlocked with Touch ID", "", "", false, 0, noOrigin},
	// A read-only check, twice.
	{"2026-11-30T09:00:00.100Z", sessA, "http", "http.request", "status.example.com", "GET https://status.example.com/health", "session-allow.start", "session.approved", false, 0, claude},
	{"2026-11-30T09:00:00.352Z", sessA, "http", "http.request", "status.example.com", "GET https://status.example.com/health", "session-allow", "session.approved", false, 251, claude},
	{"2026-11-30T09:00:05.100Z", sessA, "http", "http.request", "status.example.com", "GET https://status.example.com/health", "session-allow.start", "session.approved", false, 0, claude},
	{"2026-11-30T09:00:05.311Z", sessA, "http", "http.request", "status.example.com", "GET https://status.example.com/health", "session-allow", "session.approved", false, 210, claude},
	// A charge, answered, then sent again: the processor charged twice.
	{"2026-11-30T09:00:10.000Z", sessA, "http", "http.request", "api.stripe.com", "POST https://api.stripe.com/v1/charges {amount: 5000, currency: usd, customer: cus_…}", "session-allow.start", "session.approved", false, 0, claude},
	{"2026-11-30T09:00:11.420Z", sessA, "http", "http.request", "api.stripe.com", "POST https://api.stripe.com/v1/charges {amount: 5000, currency: usd, customer: cus_…}", "session-allow", "session.approved", false, 1419, claude},
	{"2026-11-30T09:00:31.002Z", sessA, "http", "http.request", "api.stripe.com", "POST https://api.stripe.com/v1/charges {amount: 5000, currency: usd, customer: cus_…}", "session-allow.start", "session.approved", false, 0, claude},
	{"2026-11-30T09:00:32.118Z", sessA, "http", "http.request", "api.stripe.com", "POST https://api.stripe.com/v1/charges {amount: 5000, currency: usd, customer: cus_…}", "session-allow", "session.approved", false, 1115, claude},
	// A restart whose result row was never written; the process died.
	{"2026-11-30T09:01:00.000Z", sessA, "ssh", "ssh.exec", "deploy@prod-1", "cmd=systemctl restart api timeout_s=60", "session-allow.start", "session.approved", false, 0, claude},
	{"2026-11-30T09:02:09.870Z", sessA, "session", "session.orphaned", "", "Claude: 4 calls, no clean end", "", "", false, 0, claude},
	// Another agent process does the same restart.
	{"2026-11-30T09:02:12.500Z", sessB, "ssh", "ssh.exec", "deploy@prod-1", "cmd=systemctl restart api timeout_s=60", "allowlist-allow.start", "session.allowlist:ops-agents", false, 0, cursor},
	{"2026-11-30T09:02:19.731Z", sessB, "ssh", "ssh.exec", "deploy@prod-1", "cmd=systemctl restart api timeout_s=60", "allowlist-allow", "session.allowlist:ops-agents", false, 7230, cursor},
	// A release whose result said is_error, then sent again.
	{"2026-11-30T09:03:00.000Z", sessB, "http", "http.request", "deploy.example.com", "POST https://deploy.example.com/v1/releases {service: catalog, version: 2026.11.30}", "allowlist-allow.start", "session.allowlist:ops-agents", false, 0, cursor},
	{"2026-11-30T09:03:30.004Z", sessB, "http", "http.request", "deploy.example.com", "POST https://deploy.example.com/v1/releases {service: catalog, version: 2026.11.30}", "allowlist-allow", "session.allowlist:ops-agents", true, 30003, cursor},
	{"2026-11-30T09:03:40.000Z", sessB, "http", "http.request", "deploy.example.com", "POST https://deploy.example.com/v1/releases {service: catalog, version: 2026.11.30}", "allowlist-allow.start", "session.allowlist:ops-agents", false, 0, cursor},
	{"2026-11-30T09:03:42.650Z", sessB, "http", "http.request", "deploy.example.com", "POST https://deploy.example.com/v1/releases {service: catalog, version: 2026.11.30}", "allowlist-allow", "session.allowlist:ops-agents", false, 2649, cursor},
	// A per-call approval that timed out, then was given.
	{"2026-11-30T09:05:00.000Z", sessB, "http", "http.request", "api.example.com", "DELETE https://api.example.com/v1/users/42", "ask→timeout", "key.per-call", false, 120000, cursor},
	{"2026-11-30T09:05:30.000Z", sessB, "http", "http.request", "api.example.com", "DELETE https://api.example.com/v1/users/42", "call-approved.start", "key.per-call", false, 0, cursor},
	{"2026-11-30T09:05:30.210Z", sessB, "http", "http.request", "api.example.com", "DELETE https://api.example.com/v1/users/42", "call-approved", "key.per-call", false, 209, cursor},
	{"2026-11-30T09:06:00.000Z", sessB, "session", "session.ended", "", "Cursor: 6 calls, process exited", "", "", false, 229598, cursor},
	{"2026-11-30T09:10:00.000Z", "", "vault", "vault.locked", "", "auto-lock after screen lock", "vault.locked", "", false, 0, noOrigin},
}

// writeSallyport encodes rows as Sallyport's export does: Swift's
// JSONEncoder with sorted keys (compact, "/" escaped as "\/", UTF-8 as
// is), hashes chained from the genesis hash.
func writeSallyport(rows []spRow) []byte {
	var out bytes.Buffer
	prev := strings.Repeat("0", 64)
	for i, r := range rows {
		sum := sha256.Sum256([]byte(prev + r.ts + r.args + r.decision))
		this := hex.EncodeToString(sum[:])
		ev := map[string]any{
			"seq": i + 1, "ts": r.ts, "identity": identityOf(r), "session": r.session, "channel": r.channel, "tool": r.tool,
			"target": r.target, "args_preview": r.args, "decision": r.decision, "rule": r.rule, "policy_hash": "9f2c41d0", "grant_id": "",
			"is_error": r.isError, "bytes_out": 0, "duration_ms": r.duration, "dlp_redactions": 0, "recording": "", "host_key_fp": hostKey(r),
			"origin": r.origin, "prev_hash": prev, "this_hash": this,
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(ev)
		out.Write(bytes.ReplaceAll(b.Bytes(), []byte("/"), []byte(`\/`)))
		prev = this
	}
	return out.Bytes()
}

func identityOf(r spRow) string {
	if r.session == "" {
		return ""
	}
	return "agent://mac.mcp"
}

func hostKey(r spRow) string {
	if r.channel == "ssh" {
		return "SHA256:Jd6c1qJ0dKxQn1sPZ0bq3e8fN3y8Jm0y4k1wM4Yq2hA"
	}
	return ""
}

// TestGenerateSallyportFixture keeps testdata/sallyport/activity.jsonl
// what writeSallyport makes of the scenario.
func TestGenerateSallyportFixture(t *testing.T) {
	path := filepath.Join("testdata", "sallyport", "activity.jsonl")
	want := writeSallyport(sallyportScenario)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("testdata/sallyport/activity.jsonl is stale: go test ./importer -run TestGenerate -update")
	}
	_ = time.Now
}

// A chain that breaks (a row removed: Sallyport's feed keeps its newest
// rows) refuses the file; with --skip-bad the row after the gap, whole
// itself, is imported (it may be a suspect's second send) and the note
// says where the chain breaks. And previews lose their secrets.
func TestSallyportChainGapAndSecrets(t *testing.T) {
	gap := filepath.Join("testdata", "sallyport", "chain-gap.jsonl")
	if _, err := Import(ctx, newStore(t), gap, Options{}); err == nil || !strings.Contains(err.Error(), "prev_hash") {
		t.Fatalf("a broken chain: %v", err)
	}
	s := newStore(t)
	rep, err := Import(ctx, s, gap, Options{SkipBad: true})
	if err != nil || rep.Skipped != 0 || !strings.Contains(rep.Note, "The hash chain breaks 1 times, first before line 3") {
		t.Fatalf("--skip-bad: %v %+v", err, rep)
	}
	sus, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil || len(sus) != 1 {
		t.Fatalf("the row after the gap made no suspect: %d, %v", len(sus), err)
	}
	dir := t.TempDir()
	s2, err := activity.Open(ctx, filepath.Join(dir, "s.db"), activity.Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, s2, filepath.Join("testdata", "sallyport", "secret-previews.jsonl"), Options{}); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	for _, f := range []string{"s.db", "s.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		for _, secret := range []string{"Hunter2Secret", "sk_live_abcdef123456"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds %s", f, secret)
			}
		}
	}
}
