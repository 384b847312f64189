package importers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/analyze"
)

// splitTrace is a trace the collector wrote in two files (group_by
// service.name): the gateway's spans and the agent's.
var splitTrace = []string{
	"../fixtures/corpus/otlp-group-by-service-attached/tool-gateway.jsonl",
	"../fixtures/corpus/otlp-group-by-service-attached/ops-agent.jsonl",
}

func setStore(t *testing.T) *activity.Store {
	t.Helper()
	dir := t.TempDir()
	s, err := activity.Open(context.Background(), filepath.Join(dir, "s.db"), activity.Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestImportFilesJoinsATrace: OTLP files given together are one stream:
// the agent's client span and the gateway's server span of one call are
// one call, whichever file holds which, each step keeping its own file
// and line; one by one they were two calls (an invented suspect).
func TestImportFilesJoinsATrace(t *testing.T) {
	ctx := context.Background()
	s := setStore(t)
	var reps []FileReport
	ImportFiles(ctx, s, splitTrace, Options{}, nil, func(rep FileReport, err error) {
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, rep)
	})
	if len(reps) != 2 || reps[0].Source == "" || reps[1].Source == "" || !strings.Contains(reps[1].Note, "Read as one stream") {
		t.Fatalf("reports: %+v", reps)
	}
	calls := reps[0].Calls + reps[1].Calls
	if calls != 2 {
		t.Fatalf("%d calls, want 2 (one per tools/call, each seen by agent and gateway)", calls)
	}
	// The delivery steps come from the agent's file, the dispatches from
	// the gateway's: both sources are named in the transitions.
	db, err := sql.Open("sqlite", "file:"+s.Path()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srcs := map[activity.SourceID]bool{}
	rows, err := db.Query(`SELECT DISTINCT source_id FROM transitions WHERE source_id IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		srcs[activity.SourceID(id)] = true
	}
	rows.Close()
	if !srcs[reps[0].Source] || !srcs[reps[1].Source] {
		t.Fatalf("transitions name sources %v, want both %s and %s", srcs, reps[0].Source, reps[1].Source)
	}
	if rep, err := s.CheckTables(ctx); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("tables: %v %+v", err, rep)
	}
}

// TestImportFilesFallsBackFileByFile: a bad file among OTLP files given
// together is refused alone; the others are imported (one by one).
func TestImportFilesFallsBackFileByFile(t *testing.T) {
	ctx := context.Background()
	s := setStore(t)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	good, err := os.ReadFile(splitTrace[0])
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bad, append(good, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}`+"\n")...), 0o600)
	var refused, imported []string
	ImportFiles(ctx, s, []string{splitTrace[1], bad}, Options{}, nil, func(rep FileReport, err error) {
		if err != nil {
			refused = append(refused, rep.File)
		} else {
			imported = append(imported, rep.File)
		}
	})
	if len(refused) != 1 || refused[0] != bad || len(imported) != 1 || imported[0] != splitTrace[1] {
		t.Fatalf("refused %v, imported %v", refused, imported)
	}
}

// TestImportFilesDryRun: a dry run of files given together writes nothing
// and reports each.
func TestImportFilesDryRun(t *testing.T) {
	ctx := context.Background()
	s := setStore(t)
	n := 0
	ImportFiles(ctx, s, splitTrace, Options{DryRun: true}, nil, func(rep FileReport, err error) {
		if err != nil || rep.Source != "" {
			t.Fatalf("dry run: %+v %v", rep, err)
		}
		n++
	})
	if size, err := s.LogSize(ctx); err != nil || size != 0 || n != 2 {
		t.Fatalf("a dry run wrote %d records (%v), reported %d files", size, err, n)
	}
}

// TestImportFilesSetCounts: each file's report and note agree, and the
// reports' records add up to the log (each said the whole transaction's).
func TestImportFilesSetCounts(t *testing.T) {
	ctx := context.Background()
	s := setStore(t)
	var records, calls int64
	ImportFiles(ctx, s, splitTrace, Options{}, nil, func(rep FileReport, err error) {
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%d tool calls", rep.Calls); !strings.Contains(rep.Note, want) {
			t.Errorf("%s: report counts %d calls, its note says %q", rep.File, rep.Calls, rep.Note)
		}
		records, calls = records+rep.Records, calls+rep.Calls
	})
	size, err := s.LogSize(ctx)
	if err != nil || records != size || calls != 2 {
		t.Fatalf("reports count %d records and %d calls, the log holds %d (%v)", records, calls, size, err)
	}
}

// TestImportFilesSetNotSealed: a set that is written but cannot be sealed
// says so for every file of it (only the last one said so).
func TestImportFilesSetNotSealed(t *testing.T) {
	ctx := context.Background()
	s := setStore(t)
	if _, err := Import(ctx, s, "testdata/sallyport/activity.jsonl", Options{}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER IF EXISTS audit_log_no_update`, `UPDATE audit_log SET tree_hashes = CAST(zeroblob(length(tree_hashes)) AS BLOB)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	n := 0
	ImportFiles(ctx, s, splitTrace, Options{}, nil, func(rep FileReport, err error) {
		n++
		if !errors.Is(err, ErrNotSealed) || rep.NotSealed == "" || rep.Source == "" {
			t.Errorf("%s: %v, not sealed %q, source %q", rep.File, err, rep.NotSealed, rep.Source)
		}
	})
	if n != 2 {
		t.Fatalf("%d reports", n)
	}
}

// TestImportFilesSideBySide: files written side by side (group_by: each
// service's spans in its own file over the same hours) hold a trace's
// halves far apart in the stream; a set keeps traces open until it ends,
// where 4,200 lines of other spans in the first file had its half
// written before the second was read, and the call read as two.
func TestImportFilesSideBySide(t *testing.T) {
	ctx := context.Background()
	s := setStore(t)
	gw, err := os.ReadFile(splitTrace[0])
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.Write(gw)
	for i := range 4200 {
		fmt.Fprintf(&b, `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"tool-gateway"}}]},"scopeSpans":[{"spans":[{"traceId":"%032x","spanId":"%016x","name":"GET /healthz","kind":2,"startTimeUnixNano":"1795600900000000000","endTimeUnixNano":"1795600900001000000"}]}]}]}`+"\n", i+1, i+1)
	}
	big := filepath.Join(t.TempDir(), "tool-gateway.jsonl")
	if err := os.WriteFile(big, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ImportFiles(ctx, s, []string{big, splitTrace[1]}, Options{}, nil, func(rep FileReport, err error) {
		if err != nil {
			t.Fatal(err)
		}
	})
	res, err := analyze.Analyse(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Suspects) != 1 || res.Suspects[0].Verdict != analyze.VerdictAttached {
		var got []string
		for _, sus := range res.Suspects {
			got = append(got, string(sus.Verdict))
		}
		t.Fatalf("suspects %v, want one one_action_attached", got)
	}
}

// TestInnermostFirst: proxy files are read nearest the target first (an
// Istio sidecar's inbound lines before the ingress's), the others keep the
// order they were given in.
func TestInnermostFirst(t *testing.T) {
	dir := "../fixtures/corpus/envoy-gateway-over-istio-per-try-timeout/"
	outer, inner, other := dir+"envoy-gateway.log", dir+"istio-proxy.log", "testdata/sallyport/activity.jsonl"
	got, moved := innermostFirst([]string{other, outer, inner}, Options{})
	if want := []string{inner, other, outer}; !slices.Equal(got, want) || moved[inner] == "" || moved[outer] != "" {
		t.Fatalf("order %v (moved %v), want %v", got, moved, want)
	}
	if got, moved := innermostFirst([]string{other, splitTrace[0]}, Options{}); !slices.Equal(got, []string{other, splitTrace[0]}) || moved != nil {
		t.Fatalf("files with no hop moved: %v %v", got, moved)
	}
}
