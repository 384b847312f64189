package importers

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/analyze"
)

// TestGoldenFormats imports each format's fixture into a fresh database
// and compares what the model holds and what the analysis concludes with
// testdata/<format>/golden.txt (regenerate with -update after checking
// the difference by eye).
func TestGoldenFormats(t *testing.T) {
	for _, c := range []struct{ format, file string }{ // golden: testdata/<dir>/<file>.golden
		{"sallyport", "testdata/sallyport/activity.jsonl"},
		{"otlp", "testdata/otlp/traces.jsonl"},
		{"har", "testdata/har/agent.har"},
		{"mcp-log", "testdata/mcp-log/sdk-client.log"},
		{"mcp-log", "testdata/mcp-log/mcp-server-tickets.log"},
		{"envoy", "testdata/mapping/envoy.jsonl"},
		{"nginx", "testdata/mapping/nginx.jsonl"},
		{"traefik", "testdata/mapping/traefik.jsonl"},
		{"kong", "testdata/mapping/kong.jsonl"},
		// MCP-aware gateways (reconstructed from each product's documented
		// fields: the preset's comment names where).
		{"tyk", "testdata/mapping/tyk.jsonl"},
		{"teleport", "testdata/mapping/teleport.jsonl"},
		{"cloudflare-mcp", "testdata/mapping/cloudflare-mcp.jsonl"},
		{"azure-apim-mcp", "testdata/mapping/azure-apim-mcp.jsonl"},
		// The producers' default text formats (testdata/mapping/text-sources.md).
		{"envoy", "testdata/mapping/envoy-text.log"},
		{"nginx", "testdata/mapping/nginx-text.log"},
		{"traefik", "testdata/mapping/traefik-text.log"},
	} {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			// A fixed clock: logs without timestamps place calls at the
			// import time.
			dir := t.TempDir()
			s, err := activity.Open(ctx, filepath.Join(dir, "g.db"), activity.Options{KeyDir: filepath.Join(dir, "keys"), Now: activitytest.NewClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			rep, err := Import(ctx, s, c.file, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Format != c.format || rep.Skipped != 0 {
				t.Fatalf("report: %+v", rep)
			}
			got := describe(t, s, rep)
			path := strings.TrimSuffix(c.file, filepath.Ext(c.file)) + ".golden"
			if *update {
				os.WriteFile(path, []byte(got), 0o644)
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("%s differs from the import (-update to accept):\n%s", path, got)
			}
		})
	}
}

// describe renders the imported model and the analysis in a stable text:
// ids are numbered in order of appearance.
func describe(t *testing.T, s *activity.Store, rep FileReport) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "format %s: %d lines, %d runs, %d calls, %d executions, %d skipped, %d noise, not recorded %v\nnote: %s\n",
		rep.Format, rep.Lines, rep.Runs, rep.Calls, rep.Executions, rep.Skipped, rep.Noise, rep.NotRecorded, rep.Note)
	runs, err := s.Runs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("\nruns\n")
	for i := len(runs) - 1; i >= 0; i-- { // oldest first
		r := runs[i]
		end := "running"
		if r.EndedAt.OK {
			end = "ended " + tm(r.EndedAt.V)
		}
		fmt.Fprintf(&b, "  %s %s by %s: %s; started %s, %s; line %d\n", r.ID, r.Actor, r.IdentifiedBy, r.Evidence, tm(r.StartedAt), end, r.Source.Line)
	}
	execs, err := s.Executions(ctx, activity.ExecutionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("\nexecutions\n")
	for _, e := range execs {
		fmt.Fprintf(&b, "  %s %s %s %s %s %s contract=%s state=%s outcome=%s run=%s line=%d%s not_recorded=%v\n    args=%s\n",
			e.ID, e.Actor, e.Tool, e.Channel, e.Method, e.Target, e.Contract, e.State, e.Outcome, e.RunID, e.Source.Line, recordText(e.Source), e.NotRecorded, e.Arguments)
		tr, _ := s.TransitionsOf(ctx, []activity.ExecutionID{e.ID})
		for _, x := range tr[e.ID] {
			at := "time not recorded"
			if x.At.OK {
				at = tm(x.At.V)
			}
			status := ""
			if x.TargetStatus.OK {
				status = fmt.Sprintf(" status=%d", x.TargetStatus.V)
			}
			if x.ExitCode.OK {
				status += fmt.Sprintf(" exit=%d", x.ExitCode.V)
			}
			if x.Created != "" {
				status += " created=" + x.Created
			}
			if x.Replayed != "" {
				status += " replayed=" + x.Replayed
			}
			if x.Implied {
				status += " (implied)"
			}
			if x.Source.Record != "" {
				status += " [" + x.Source.Record + "]"
			}
			fmt.Fprintf(&b, "    → %s at %s%s %s\n", x.To, at, status, x.Reason)
		}
	}
	sus, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("\nsuspects\n")
	for _, x := range sus {
		var ans []string
		for _, q := range x.Questions {
			ans = append(ans, string(q.Answer))
		}
		fmt.Fprintf(&b, "  %s %s (%s): %s\n", x.Verdict, x.Tool, x.Severity, strings.Join(ans, " "))
		for _, q := range x.Questions {
			if q.Answer == analyze.Unknown && q.Missing != "" {
				fmt.Fprintf(&b, "    q%d unknown: %s\n", q.N, q.Missing)
			}
		}
	}
	return numberIDs(b.String())
}

func recordText(p activity.Provenance) string {
	if p.Record == "" {
		return ""
	}
	return " (" + p.Record + ")"
}

func tm(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// numberIDs replaces each id by its kind and order of first appearance.
func numberIDs(s string) string {
	seen := map[string]string{}
	count := map[string]int{}
	return regexp.MustCompile(`\b(act|call|run|src|sus)_[0-9A-Z]{26}\b`).ReplaceAllStringFunc(s, func(id string) string {
		if n, ok := seen[id]; ok {
			return n
		}
		kind := id[:strings.IndexByte(id, '_')]
		count[kind]++
		seen[id] = fmt.Sprintf("%s#%d", kind, count[kind])
		return seen[id]
	})
}
