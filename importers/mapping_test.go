package importers

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/analyze"
)

// TestCustomMapping reads a log no preset knows through a mapping file:
// lines that do not match are counted, the header lookup finds the key in
// any case, and the repeat with the same key attaches.
func TestCustomMapping(t *testing.T) {
	m, err := LoadMapping("testdata/mapping/acme.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t)
	rep, err := Import(ctx, s, "testdata/mapping/acme.jsonl", Options{Mapping: m})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Format != "mapping:acme-gateway-audit" || rep.Calls != 2 || rep.Executions != 2 || !strings.Contains(rep.Note, "1 lines not matched") {
		t.Fatalf("report: %+v", rep)
	}
	var calls []activity.CallRow
	s.ScanCalls(ctx, func(c *activity.CallRow) error { calls = append(calls, *c); return nil })
	if len(calls) != 2 || calls[0].Actor != "acme:agent-31337" || calls[1].ExecutionID == calls[0].ExecutionID {
		t.Fatalf("calls: %+v", calls)
	}
	// Each request is an execution of its own; the second carried the
	// first one's key (the header name's case does not matter), so the
	// target answers it from the first: one action, by key.
	res, err := analyze.Analyse(ctx, s, analyze.Options{})
	if err != nil || len(res.Suspects) != 1 {
		t.Fatalf("analysis: %v %+v", err, res)
	}
	sus := res.Suspects[0]
	if sus.Verdict != analyze.VerdictAttached || sus.Questions[4].Finding != "same_key" {
		t.Fatalf("same key: %s, Q5 %+v", sus.Verdict, sus.Questions[4])
	}
}

// TestMappingErrors: a mapping file is checked when it is read.
func TestMappingErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`name = "x"
time = { from = ["/t"] }
method = { from = ["/m"] }
colour = "blue"`, "unknown field"},
		{`name = "x"
method = { from = ["/m"] }`, "time.from is required"},
		{`time = { from = ["/t"] }`, "name is required"},
		{`name = "x"
time = { from = ["/t"], frm = ["/u"] }
method = { from = ["/m"] }`, "unknown field"},
	} {
		if _, err := ParseMapping([]byte(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
}

func TestPointer(t *testing.T) {
	var doc any
	json.Unmarshal([]byte(`{"a/b":{"c~d":[10,20]},"x":{"":1}}`), &doc)
	for ptr, want := range map[string]any{"/a~1b/c~0d/1": 20.0, "/x/": 1.0} {
		if got, ok := pointer(doc, ptr); !ok || got != want {
			t.Errorf("%s = %v %v", ptr, got, ok)
		}
	}
	for _, ptr := range []string{"/a~1b/c~0d/2", "/nope", "a", "/a~1b/c~0d/x"} {
		if _, ok := pointer(doc, ptr); ok {
			t.Errorf("%s resolved", ptr)
		}
	}
}

// TestREADMEMapping: the mapping file shown in README.md parses and
// imports the example line it describes.
func TestREADMEMapping(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```toml\nname = \"acme-gateway-audit\"")
	if !ok {
		t.Fatal("README.md has no acme-gateway-audit mapping")
	}
	body, _, _ := strings.Cut(rest, "```")
	m, err := ParseMapping([]byte(`name = "acme-gateway-audit"` + body))
	if err != nil {
		t.Fatalf("README mapping: %v", err)
	}
	rep, err := Import(ctx, newStore(t), "testdata/mapping/acme.jsonl", Options{Mapping: m})
	if err != nil || rep.Calls != 2 {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestOTLPVendorExecutionIdentity: a mapping with format = "otlp" names
// the attributes a vendor's gateway records its execution identity under;
// with it, the retry the gateway resent under its first execution is that
// execution again; without it, a second execution.
func TestOTLPVendorExecutionIdentity(t *testing.T) {
	const file = "../fixtures/corpus/otlp-vendor-execution-identity/traces.jsonl"
	m, err := LoadMapping("../fixtures/corpus/otlp-vendor-execution-identity/vendor.toml")
	if err != nil {
		t.Fatal(err)
	}
	with, err := Import(ctx, newStore(t), file, Options{Mapping: m})
	if err != nil {
		t.Fatal(err)
	}
	without, err := Import(ctx, newStore(t), file, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if with.Format != "otlp" || with.Calls != 2 || with.Executions != 1 || without.Executions != 2 {
		t.Fatalf("with the mapping %+v\nwithout %+v", with, without)
	}
	if _, err := ParseMapping([]byte("name = \"x\"\nformat = \"otlp\"\n")); err == nil || !strings.Contains(err.Error(), "otlp.execution_id") {
		t.Fatalf("an otlp mapping that names nothing: %v", err)
	}
}
