package importers

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/mcpdup/mcpdup/activity"
)

// fuzzImport runs a dry-run import of data as format into one store per
// fuzzing process: it must never panic, never write, and account for
// every line it read.
func fuzzImport(f *testing.F, format string) {
	dir, err := os.MkdirTemp("", "mcpdup-fuzz-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	s, err := activity.Open(ctx, filepath.Join(dir, "f.db"), activity.Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	path := filepath.Join(dir, "input")
	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		before, _ := s.LogSize(ctx)
		rep, err := Import(ctx, s, path, Options{Format: format, SkipBad: skip, DryRun: true})
		if after, _ := s.LogSize(ctx); after != before {
			t.Fatalf("a dry run wrote %d records", after-before)
		}
		if err == nil && (rep.Skipped > rep.Read || (!skip && rep.Skipped > 0)) {
			t.Fatalf("report does not add up: %+v", rep)
		}
	})
}

func addLines(f *testing.F, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, false)
	lines := strings.SplitAfter(string(b), "\n")
	for i := 0; i+3 <= len(lines); i += 3 {
		f.Add([]byte(strings.Join(lines[i:i+3], "")), true)
	}
}

func FuzzSallyport(f *testing.F) {
	addLines(f, "testdata/sallyport/activity.jsonl")
	fuzzImport(f, "sallyport")
}

func FuzzOwnExport(f *testing.F) {
	addLines(f, "testdata/mcpdup/incident.jsonl")
	fuzzImport(f, "mcpdup")
}

func FuzzOTLP(f *testing.F) {
	addLines(f, "testdata/otlp/traces.jsonl")
	fuzzImport(f, "otlp")
}

func FuzzHAR(f *testing.F) {
	b, err := os.ReadFile("testdata/har/agent.har")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, false)
	f.Add(b, true)
	f.Add([]byte(`{"log":{"entries":[{"startedDateTime":"2026-11-30T14:00:00Z","request":{"method":"POST","url":"http://a/b"},"response":{"status":0}}]}}`), false)
	fuzzImport(f, "har")
}

func FuzzMCPLog(f *testing.F) {
	addLines(f, "testdata/mcp-log/sdk-client.log")
	addLines(f, "testdata/mcp-log/mcp-server-tickets.log")
	fuzzImport(f, "mcp-log")
}

// FuzzMapping runs the presets over mutated access logs.
func FuzzMapping(f *testing.F) {
	for _, p := range []string{"envoy", "nginx", "traefik", "kong"} {
		addLines(f, "testdata/mapping/"+p+".jsonl")
	}
	fuzzImport(f, "envoy")
}

// FuzzDetect: detection never panics and names only known formats.
func FuzzDetect(f *testing.F) {
	for _, p := range []string{"testdata/sallyport/activity.jsonl", "testdata/mcpdup/incident.jsonl", "testdata/otlp/traces.jsonl", "testdata/har/agent.har",
		"testdata/mcp-log/sdk-client.log", "testdata/mcp-log/mcp-server-tickets.log"} {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte("read: {\"jsonrpc\":\"2.0\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name, err := Detect(data)
		if err == nil {
			if _, ok := formats[name]; !ok {
				t.Fatalf("Detect named %q, which is not a format", name)
			}
		}
	})
}

// FuzzOTLPLineDecoders: whatever segmentio's decoder accepts in an OTLP
// line, encoding/json accepts too, with the same result (what it refuses
// goes to encoding/json anyway).
func FuzzOTLPLineDecoders(f *testing.F) {
	files, _ := filepath.Glob("testdata/otlp/*.json*")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			f.Add(line)
		}
	}
	// Where JSON decoders are known to differ: key case, duplicate keys,
	// invalid UTF-8, escapes, raw numbers, nulls, and trailing data.
	for _, s := range []string{
		`{"RESOURCESPANS":[{"scopespans":[{"Spans":[{"TRACEID":"0af7651916cd43dd8448eb211c80319c","traceId":"x","name":"a\u00e9\ud83d\ude00"}]}]}]}`,
		"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"name\":\"\xff\xfe\",\"kind\":1.50e1,\"startTimeUnixNano\":\"1700000000000000000\"}]}]}]}",
		`{"resourceSpans":[],"resourceSpans":[{"resource":null,"scopeSpans":null}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":{"intValue":-0,"doubleValue":1e400}}]}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":{"kvlistValue":{"values":[{"key":"a","value":{"boolValue":true}}]}}}]}]}]}]} x`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"status":{"code":"STATUS_CODE_ERROR","message":"\/\b"}}]}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var fast, std otlpDoc
		if fastjson.Unmarshal(line, &fast) != nil {
			return
		}
		if err := json.Unmarshal(line, &std); err != nil {
			t.Fatalf("segmentio accepted what encoding/json refuses: %v", err)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("decoded differently:\nsegmentio %+v\nencoding/json %+v", fast, std)
		}
	})
}
