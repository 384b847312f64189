package importers

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
)

var ctx = context.Background()

func newStore(t testing.TB) *activity.Store {
	t.Helper()
	return newStoreWith(t, activity.Options{})
}

// newStoreWith opens a fresh database with opts (KeyDir set here).
func newStoreWith(t testing.TB, opts activity.Options) *activity.Store {
	t.Helper()
	dir := t.TempDir()
	opts.KeyDir = filepath.Join(dir, "keys")
	s, err := activity.Open(ctx, filepath.Join(dir, "t.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// pinned is Options.ExportKey pinning s's public key, as --key does.
func pinned(t testing.TB, s *activity.Store) func(string) (string, bool, error) {
	pub, err := s.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return func(string) (string, bool, error) { return pub, true, nil }
}

// export writes s's log to a file.
func export(t testing.TB, s *activity.Store, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Export(ctx, s, f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOwnExportRoundTrip: the scripted incident is exported, imported
// into a fresh database, and every run, call, execution (with its
// transitions and state), resolution and approval comes back the same;
// both logs verify; a second import of the file adds nothing.
func TestOwnExportRoundTrip(t *testing.T) {
	orig := newStore(t)
	ids, err := activitytest.Incident(ctx, orig)
	if err != nil {
		t.Fatal(err)
	}
	path := export(t, orig, "incident.jsonl")

	dst := newStore(t)
	rep, err := Import(ctx, dst, path, Options{ExportKey: pinned(t, orig)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Format != "mcpdup" || rep.AlreadyImported || rep.Skipped != 0 || rep.Executions != 8 || rep.Calls == 0 || rep.Runs != 2 {
		t.Fatalf("report: %+v", rep)
	}
	if !strings.Contains(rep.Note, "chain and tree verified") {
		t.Fatalf("note: %s", rep.Note)
	}
	sameModel(t, orig, dst)
	for _, id := range ids {
		e, _ := dst.Execution(ctx, id)
		if e.Source.Source != rep.Source || e.Source.Line < 2 {
			t.Fatalf("execution %s provenance %+v", id, e.Source)
		}
	}
	if vr, err := audit.VerifyStore(ctx, dst, audit.Options{}); err != nil || vr.Tampered {
		t.Fatalf("the importing database must verify: %v %+v", err, vr)
	}

	again, err := Import(ctx, dst, path, Options{})
	if err != nil || !again.AlreadyImported || again.Source != rep.Source {
		t.Fatalf("re-import: %+v %v", again, err)
	}
	// Imported into the database it came from, the ids collide: refused
	// whole, nothing written.
	before, _ := orig.LogSize(ctx)
	if _, err := Import(ctx, orig, path, Options{ExportKey: pinned(t, orig)}); err == nil || !strings.Contains(err.Error(), "line") {
		t.Fatalf("importing an export into its own database: %v", err)
	}
	if after, _ := orig.LogSize(ctx); after != before {
		t.Fatalf("a refused import wrote %d records", after-before)
	}
}

// sameModel compares what two stores hold, ignoring where rows came from
// and which log record wrote them.
func sameModel(t *testing.T, a, b *activity.Store) {
	t.Helper()
	ea, _ := a.Executions(ctx, activity.ExecutionFilter{})
	eb, _ := b.Executions(ctx, activity.ExecutionFilter{})
	if len(ea) != len(eb) || len(ea) == 0 {
		t.Fatalf("executions: %d vs %d", len(ea), len(eb))
	}
	for i := range ea {
		x, y := ea[i], eb[i]
		x.Source, y.Source = activity.Provenance{}, activity.Provenance{}
		x.Seq, y.Seq = 0, 0 // log positions of two databases
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("execution %s differs:\n%s\n%s", x.ID, js(x), js(y))
		}
		tma, _ := a.TransitionsOf(ctx, []activity.ExecutionID{x.ID})
		tmb, _ := b.TransitionsOf(ctx, []activity.ExecutionID{x.ID})
		ta, tb := tma[x.ID], tmb[x.ID]
		if len(ta) != len(tb) {
			t.Fatalf("execution %s: %d vs %d transitions", x.ID, len(ta), len(tb))
		}
		for j := range ta {
			ta[j].Seq, tb[j].Seq = 0, 0
			if tb[j].From != "" && tb[j].Source.IsZero() { // (an acceptance is the execution's own record)
				t.Fatalf("imported transition %d of %s names no line: %s", j, x.ID, js(tb[j]))
			}
			ta[j].Source, tb[j].Source = activity.Provenance{}, activity.Provenance{} // each points at its own log
			if !reflect.DeepEqual(ta[j], tb[j]) {
				t.Fatalf("transition differs:\n%s\n%s", js(ta[j]), js(tb[j]))
			}
		}
		ra, _ := a.Resolutions(ctx, x.ID)
		rb, _ := b.Resolutions(ctx, x.ID)
		for j := range ra {
			ra[j].Seq, rb[j].Seq = 0, 0
		}
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("resolutions differ: %+v %+v", ra, rb)
		}
		ca, _ := a.CallsOf(ctx, x.ID)
		cb, _ := b.CallsOf(ctx, x.ID)
		if len(ca) != len(cb) {
			t.Fatalf("calls of %s: %d vs %d", x.ID, len(ca), len(cb))
		}
		for j := range ca {
			ca[j].Seq, cb[j].Seq = 0, 0
			ca[j].Source, cb[j].Source = activity.Provenance{}, activity.Provenance{}
			if !reflect.DeepEqual(ca[j], cb[j]) {
				t.Fatalf("call differs:\n%s\n%s", js(ca[j]), js(cb[j]))
			}
		}
	}
	runsA, _ := a.Runs(ctx, 0)
	runsB, _ := b.Runs(ctx, 0)
	if len(runsA) != len(runsB) {
		t.Fatalf("runs: %d vs %d", len(runsA), len(runsB))
	}
	apA, _ := a.Approvals(ctx, false)
	apB, _ := b.Approvals(ctx, false)
	if !reflect.DeepEqual(apA, apB) {
		t.Fatalf("approvals differ:\n%s\n%s", js(apA), js(apB))
	}
}

func js(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

// TestOwnExportGzipAndTamper: a gzipped export imports the same; an
// export with one byte changed is refused and nothing is written.
func TestOwnExportGzipAndTamper(t *testing.T) {
	orig := newStore(t)
	if _, err := activitytest.Incident(ctx, orig); err != nil {
		t.Fatal(err)
	}
	path := export(t, orig, "incident.jsonl")
	raw, _ := os.ReadFile(path)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	gzPath := filepath.Join(t.TempDir(), "incident.jsonl.gz")
	os.WriteFile(gzPath, gz.Bytes(), 0o600)
	dst := newStore(t)
	rep, err := Import(ctx, dst, gzPath, Options{ExportKey: pinned(t, orig)})
	if err != nil || rep.Executions != 8 {
		t.Fatalf("gzip import: %+v %v", rep, err)
	}

	bad := bytes.Replace(raw, []byte(`"agent:deployer"`), []byte(`"agent:deployeR"`), 1)
	badPath := filepath.Join(t.TempDir(), "tampered.jsonl")
	os.WriteFile(badPath, bad, 0o600)
	other := newStore(t)
	before, _ := other.LogSize(ctx)
	if _, err := Import(ctx, other, badPath, Options{SkipBad: true}); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("a tampered export must be refused, even with --skip-bad: %v", err)
	}
	if after, _ := other.LogSize(ctx); after != before {
		t.Fatal("a refused import wrote records")
	}

	// Verification runs beside the import: an edit the state machine also
	// refuses is still reported as what it is, an export that does not
	// verify.
	impossible := bytes.Replace(raw, []byte(`"to":"dispatched"`), []byte(`"to":"delivered"`), 1)
	if bytes.Equal(impossible, raw) {
		t.Fatal("fixture has no dispatched transition to alter")
	}
	os.WriteFile(badPath, impossible, 0o600)
	if _, err := Import(ctx, other, badPath, Options{}); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("an altered transition: %v, want the export refused as not verifying", err)
	}
	if after, _ := other.LogSize(ctx); after != before {
		t.Fatal("a refused import wrote records")
	}
}

// TestOwnExportFixture keeps testdata/mcpdup/incident.jsonl (an export of
// the scripted incident, the fuzzers' seed) importable and verified.
func TestOwnExportFixture(t *testing.T) {
	path := filepath.Join("testdata", "mcpdup", "incident.jsonl")
	if *update {
		orig := newStore(t)
		if _, err := activitytest.Incident(ctx, orig); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(export(t, orig, "incident.jsonl"))
		os.WriteFile(path, b, 0o644)
	}
	// Its key is not kept: without one nothing in it is signed, so it is
	// imported only as unsigned.
	if _, err := Import(ctx, newStore(t), path, Options{}); err == nil || !strings.Contains(err.Error(), "--allow-unsealed") {
		t.Fatalf("an export whose signatures cannot be checked was imported: %v", err)
	}
	dst := newStore(t)
	rep, err := Import(ctx, dst, path, Options{AllowUnsealed: true})
	if err != nil || rep.Executions != 8 || !strings.Contains(rep.Note, "marked unsigned") {
		t.Fatalf("%+v %v", rep, err)
	}
	execs, _ := dst.Executions(ctx, activity.ExecutionFilter{})
	for _, e := range execs {
		if !slices.Contains(e.NotRecorded, activity.FactSignature) {
			t.Errorf("%s imported unsigned but not marked so: %v", e.ID, e.NotRecorded)
		}
	}
	res, err := analyze.Analyse(ctx, dst, analyze.Options{})
	if err != nil || len(res.Suspects) == 0 {
		t.Fatalf("analysis: %v", err)
	}
	for _, sus := range res.Suspects {
		if !strings.Contains(sus.Summary, "no verified checkpoint signs") {
			t.Errorf("suspect %s does not say its records are unsigned: %s", sus.ID, sus.Summary)
		}
	}
}

// TestOwnExportUnsealedTail: records after an export's last checkpoint
// are refused, or with AllowUnsealed imported and only they marked.
func TestOwnExportUnsealedTail(t *testing.T) {
	orig := newStore(t)
	if _, err := activitytest.Incident(ctx, orig); err != nil {
		t.Fatal(err)
	}
	if _, err := orig.Seal(ctx, activity.SealManual); err != nil {
		t.Fatal(err)
	}
	if err := activitytest.Fill(ctx, orig, 12, 6); err != nil { // after the seal: unsigned
		t.Fatal(err)
	}
	path := export(t, orig, "tail.jsonl")
	if _, err := Import(ctx, newStore(t), path, Options{ExportKey: pinned(t, orig)}); err == nil || !strings.Contains(err.Error(), "signed by no checkpoint") {
		t.Fatalf("an unsealed tail was imported: %v", err)
	}
	dst := newStore(t)
	rep, err := Import(ctx, dst, path, Options{ExportKey: pinned(t, orig), AllowUnsealed: true})
	if err != nil {
		t.Fatal(err)
	}
	execs, _ := dst.Executions(ctx, activity.ExecutionFilter{})
	unsigned := 0
	for _, e := range execs {
		if slices.Contains(e.NotRecorded, activity.FactSignature) {
			unsigned++
		}
	}
	if unsigned != 2 || rep.Executions != 10 {
		t.Fatalf("%d of %d executions marked unsigned, want the tail's 2", unsigned, rep.Executions)
	}
}

// TestRefusedRowNamesItsLine: rows are written in batches behind the
// decoder, so a row the store refuses is reported with the line it came
// from, not the line being read when the batch was written.
func TestRefusedRowNamesItsLine(t *testing.T) {
	k := &sink{file: "calls.jsonl"}
	err := k.fail(900, fmt.Errorf("flush: %w", &activity.RowError{Row: "call c_1", Line: 870, Err: errors.New("UNIQUE constraint failed: calls.id")}))
	if got := err.Error(); got != "import calls.jsonl line 870: flush: call c_1: UNIQUE constraint failed: calls.id" {
		t.Fatalf("got %q", got)
	}
	if got := k.fail(900, errors.New("no such state")).Error(); got != "import calls.jsonl line 900: no such state" {
		t.Fatalf("got %q", got)
	}
}

// TestImportedRunsAuthoriseNothing: a run imported from another log is
// not the live run an agent continues, so its grants let nothing through.
func TestImportedRunsAuthoriseNothing(t *testing.T) {
	orig := newStore(t)
	if _, err := activitytest.Incident(ctx, orig); err != nil {
		t.Fatal(err)
	}
	runs, err := orig.Runs(ctx, 10)
	if err != nil || len(runs) == 0 {
		t.Fatalf("runs: %v", err)
	}
	dst := newStore(t)
	if _, err := Import(ctx, dst, export(t, orig, "runs.jsonl"), Options{ExportKey: pinned(t, orig)}); err != nil {
		t.Fatal(err)
	}
	_, err = dst.Write(ctx, func(w *activity.Tx) error {
		for _, r := range runs {
			found, err := w.FindRun(r.Actor, r.IdentifiedBy, r.Evidence)
			if err != nil {
				return err
			}
			if found != nil {
				t.Errorf("imported run %s (%s) found as a live run to continue", r.ID, r.Evidence)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnsignedStepOfASignedExecution: an outcome appended after the
// export's last checkpoint is as unsigned as a new execution would be:
// imported with AllowUnsealed, the analysis of its suspect says so,
// though the execution itself is signed, and says nothing of the others.
func TestUnsignedStepOfASignedExecution(t *testing.T) {
	t.Run("outcome", func(t *testing.T) { testUnsignedStep(t, false) })
	t.Run("attached call", func(t *testing.T) { testUnsignedStep(t, true) })
}

func testUnsignedStep(t *testing.T, call bool) {
	orig := newStore(t)
	if _, err := activitytest.Incident(ctx, orig); err != nil {
		t.Fatal(err)
	}
	// Two dispatches of one charge, signed while their outcome is open.
	var ids []activity.ExecutionID
	if _, err := orig.Write(ctx, func(w *activity.Tx) error {
		for range 2 {
			args := json.RawMessage(`{"amount":100,"card":"tok_1"}`)
			e, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:c", Tool: "charge", Channel: activity.ChannelHTTP,
				Target: "https://pay.example/v1/charges", Method: "POST", Arguments: args}})
			if err != nil {
				return err
			}
			if _, err := w.RecordCall(activity.Call{Actor: "agent:c", Method: "tools/call", Tool: "charge", Arguments: args,
				Disposition: activity.DispositionNewExecution, ExecutionID: e.ID}); err != nil {
				return err
			}
			for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched} {
				if _, err := w.Transition(activity.Transition{ExecutionID: e.ID, To: to}); err != nil {
					return err
				}
			}
			ids = append(ids, e.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := orig.Seal(ctx, activity.SealManual); err != nil {
		t.Fatal(err)
	}
	// Then an outcome nothing signs, or a retry's call nothing signs.
	target, to := ids[1], activity.StateUnknown
	if call {
		target, to = ids[0], activity.StateDispatched
	}
	if _, err := orig.Write(ctx, func(w *activity.Tx) error {
		if call {
			_, err := w.RecordCall(activity.Call{Actor: "agent:c", Method: "tools/call", Tool: "charge", Arguments: json.RawMessage(`{"amount":100,"card":"tok_1"}`),
				Disposition: activity.DispositionAttached, ExecutionID: target, Reason: "says nobody"})
			return err
		}
		_, err := w.Transition(activity.Transition{ExecutionID: target, To: to, Reason: "says nobody"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	path := export(t, orig, "step.jsonl")
	dst := newStore(t)
	rep, err := Import(ctx, dst, path, Options{ExportKey: pinned(t, orig), AllowUnsealed: true})
	if err != nil {
		t.Fatal(err)
	}
	srcs, _ := dst.Sources(ctx)
	if last := srcs[len(srcs)-1]; last.ID != rep.Source || last.UnsignedFrom == 0 {
		t.Fatalf("the import's source records no unsigned line: %+v", last)
	}
	e, _ := dst.Execution(ctx, target)
	if slices.Contains(e.NotRecorded, activity.FactSignature) || e.State != to {
		t.Fatalf("the execution itself is signed and now %s: %s %v", to, e.State, e.NotRecorded)
	}
	res, err := analyze.Analyse(ctx, dst, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sus := range res.Suspects {
		has := slices.ContainsFunc(sus.Executions, func(x analyze.ExecutionSummary) bool { return x.ID == target })
		says := strings.Contains(sus.Summary, "no verified checkpoint signs")
		if has != says {
			t.Errorf("suspect %s (holds the resolved execution: %v) says its records are unsigned: %v\n%s", sus.ID, has, says, sus.Summary)
		}
		found = found || has
	}
	if !found {
		t.Fatal("no suspect holds the resolved execution")
	}
}

// TestLongerExportContinuesTheImport: a gateway exported again later
// holds the records an earlier import of its log took: they are
// recognised by their seq and the chain (the record where that import
// ended stands for every one before it) and passed over, the rest is
// imported, and the verdicts are those of one import of the longer
// export. A log that differs at that record is refused.
func TestLongerExportContinuesTheImport(t *testing.T) {
	orig := newStore(t)
	if _, err := activitytest.Incident(ctx, orig); err != nil {
		t.Fatal(err)
	}
	first := export(t, orig, "first.jsonl")
	if err := activitytest.FillMixed(ctx, orig, 120, 40, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := orig.Seal(ctx, activity.SealManual); err != nil {
		t.Fatal(err)
	}
	longer := export(t, orig, "longer.jsonl")
	key := pinned(t, orig)

	dst := newStore(t)
	a, err := Import(ctx, dst, first, Options{ExportKey: key})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Import(ctx, dst, longer, Options{ExportKey: key})
	if err != nil {
		t.Fatalf("the longer export: %v", err)
	}
	if b.Repeated != a.Read || len(b.RepeatedFrom) != 1 || b.RepeatedFrom[0] != a.Source || b.Executions == 0 {
		t.Fatalf("longer export: %d repeated (want %d, from %s), from %v, %d executions", b.Repeated, a.Read, a.Source, b.RepeatedFrom, b.Executions)
	}
	once := newStore(t)
	if _, err := Import(ctx, once, longer, Options{ExportKey: key}); err != nil {
		t.Fatal(err)
	}
	if got, want := verdicts(t, dst), verdicts(t, once); got != want {
		t.Fatalf("two imports:\n%s\none import of the longer export:\n%s", got, want)
	}
	if vr, err := audit.VerifyStore(ctx, dst, audit.Options{}); err != nil || vr.Tampered {
		t.Fatalf("the importing database must verify: %v %+v", err, vr)
	}

	// The earlier import says it ended at another record: refused.
	forked := newStore(t)
	if _, err := Import(ctx, forked, first, Options{ExportKey: key}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", forked.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE sources SET head = substr(head, 1, instr(head, ':')) || '` + strings.Repeat("0", 64) + `' WHERE origin IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, forked, longer, Options{ExportKey: key}); err == nil || !strings.Contains(err.Error(), "rewritten or forked") {
		t.Fatalf("a log that differs where the earlier import ended: %v", err)
	}
}
