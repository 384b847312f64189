package importers

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/mcpdup/mcpdup/activity"
)

// fuzzImport decodes data as format into an in-memory recorder (memRecorder):
// it must never panic and must account for every line it read. The real
// store is left out of the loop: SQLite under the fuzzer's coverage
// instrumentation ran a few inputs a second (7 in 20 s), so the decoders,
// where the hostile input is parsed, were hardly fuzzed. The store's own
// checks of what decoders write are tested against the real store.
func fuzzImport(f *testing.F, format string) {
	// Large generated inputs beside the fixtures: deep nesting, a long
	// string, a long line of records.
	f.Add([]byte(strings.Repeat(`{"a":`, 50_000)+"1"+strings.Repeat("}", 50_000)+"\n"), false)
	f.Add([]byte(strings.Repeat("[", 200_000)+"\n"), true)
	f.Add([]byte(`{"resourceSpans":[{"x":"`+strings.Repeat("\\u00e9", 200_000)+`"}]}`+"\n"), false)
	f.Add([]byte(strings.Repeat(`{"seq":1,"tool":"x"}`+"\n", 20_000)), true)
	dir := f.TempDir()
	path := filepath.Join(dir, "input")
	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		in, err := openLines(path)
		if err != nil {
			return
		}
		defer in.Close()
		rep := FileReport{File: path, Format: format}
		w := newMemRecorder()
		err = decodeInto(ctx, w, formats[format](path), in, path, fileSums{stored: "sum", content: "content", size: int64(len(data))}, grownFrom{}, &Options{Format: format, SkipBad: skip}, &rep)
		if err == nil && (rep.Skipped > rep.Read || (!skip && rep.Skipped > 0)) {
			t.Fatalf("report does not add up: %+v", rep)
		}
	})
}

// memRecorder is the in-memory recorder of the fuzzers: it keeps
// executions and applies transitions with the model's own state machine.
type memRecorder struct {
	execs    map[activity.ExecutionID]activity.Execution
	runs     map[activity.RunID]bool
	appended int64
}

func newMemRecorder() *memRecorder {
	return &memRecorder{execs: map[activity.ExecutionID]activity.Execution{}, runs: map[activity.RunID]bool{}}
}

func (m *memRecorder) Now() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }
func (m *memRecorder) note() int64    { m.appended++; return m.appended }
func (m *memRecorder) AddSource(s activity.Source) (activity.Source, error) {
	m.note()
	return s, nil
}
func (m *memRecorder) StartRun(r activity.Run) (activity.Run, error) {
	if r.ID == "" {
		r.ID = activity.NewRunID(m.Now())
	}
	if r.Actor == "" || r.IdentifiedBy == "" {
		return r, errors.New("actor and identified_by are required")
	}
	m.runs[r.ID] = true
	m.note()
	return r, nil
}
func (m *memRecorder) EndRun(id activity.RunID, _ time.Time) error {
	if !m.runs[id] {
		return activity.ErrNotFound
	}
	m.note()
	return nil
}
func (m *memRecorder) AddGrant(activity.Grant) error { m.note(); return nil }
func (m *memRecorder) RecordCall(c activity.Call) (activity.Call, error) {
	if c.ID == "" {
		c.ID = activity.NewCallID(m.Now())
	}
	if c.Disposition == activity.DispositionAttached {
		if _, ok := m.execs[c.ExecutionID]; !ok {
			return c, activity.ErrNotFound
		}
	}
	m.note()
	return c, nil
}
func (m *memRecorder) Accept(e activity.Execution) (activity.Execution, error) {
	if e.ID == "" {
		e.ID = activity.NewExecutionID(m.Now())
	}
	if _, ok := m.execs[e.ID]; ok {
		return e, errors.New("execution accepted twice")
	}
	if e.Tool == "" || e.Actor == "" || e.Channel == "" {
		return e, errors.New("actor, tool and channel are required")
	}
	e.State = activity.StateAccepted
	m.execs[e.ID] = e
	m.note()
	return e, nil
}
func (m *memRecorder) Execution(id activity.ExecutionID) (activity.Execution, error) {
	e, ok := m.execs[id]
	if !ok {
		return e, activity.ErrNotFound
	}
	return e, nil
}
func (m *memRecorder) Transition(t activity.Transition) (activity.Execution, error) {
	e, ok := m.execs[t.ExecutionID]
	if !ok {
		return e, activity.ErrNotFound
	}
	if err := e.Apply(t); err != nil {
		return e, err
	}
	m.execs[e.ID] = e
	m.note()
	return e, nil
}
func (m *memRecorder) Resolve(r activity.Resolution) (activity.Execution, error) {
	return m.Transition(activity.Transition{ExecutionID: r.ExecutionID, To: r.Outcome.State()})
}
func (m *memRecorder) ImportVault(activity.VaultEvent) error  { m.note(); return nil }
func (m *memRecorder) ImportApproval(activity.Approval) error { m.note(); return nil }
func (m *memRecorder) Sync() error                            { return nil }
func (m *memRecorder) Appended() int64                        { return m.appended }
func (m *memRecorder) KnownCall(string, activity.Call, []string) (activity.SourceID, error) {
	return "", nil
}
func (m *memRecorder) ImportedFormat(string) (bool, error)                    { return false, nil }
func (m *memRecorder) ImportedHead(string) (activity.SourceID, string, error) { return "", "", nil }
func (m *memRecorder) AnyImportedRequestID() (bool, error)                    { return false, nil }
func (m *memRecorder) ImportedRequests(string, activity.SourceID) ([]activity.ImportedRequest, error) {
	return nil, nil
}
func (m *memRecorder) ImportedRun(string, activity.RunIdentification, string) (activity.RunID, error) {
	return "", nil
}

// TestMemRecorderDecodesLikeTheStore: the fuzzers' recorder reads the
// fixtures to the same counts as the real store, so what is fuzzed is
// what is shipped.
func TestMemRecorderDecodesLikeTheStore(t *testing.T) {
	for format, file := range map[string]string{"otlp": "testdata/otlp/traces.jsonl", "sallyport": "testdata/sallyport/activity.jsonl",
		"har": "testdata/har/agent.har", "mcp-log": "testdata/mcp-log/sdk-client.log", "envoy": "testdata/mapping/envoy.jsonl"} {
		real, err := Import(ctx, newStore(t), file, Options{Format: format})
		if err != nil {
			t.Fatal(err)
		}
		in, err := openLines(file)
		if err != nil {
			t.Fatal(err)
		}
		rep := FileReport{File: file, Format: format}
		err = decodeInto(ctx, newMemRecorder(), formats[format](file), in, file, fileSums{}, grownFrom{}, &Options{Format: format}, &rep)
		in.Close()
		if err != nil || rep.Executions != real.Executions || rep.Calls != real.Calls || rep.Read != real.Read || rep.Noise != real.Noise {
			t.Errorf("%s: memory %+v (%v), store %+v", format, rep, err, real)
		}
	}
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
	addLines(f, "testdata/mapping/envoy-text.log")
	fuzzImport(f, "envoy")
}

// FuzzTextFormats: nginx's and Traefik's text lines, whatever their bytes
// (escapes, quotes, a request line cut anywhere), through the nginx
// mapping, which reads its JSON and its text alike.
func FuzzTextFormats(f *testing.F) {
	addLines(f, "testdata/mapping/nginx-text.log")
	addLines(f, "testdata/mapping/traefik-text.log")
	fuzzImport(f, "nginx")
}

// FuzzDetect: detection never panics and names only known formats.
func FuzzDetect(f *testing.F) {
	for _, p := range []string{"testdata/sallyport/activity.jsonl", "testdata/mcpdup/incident.jsonl", "testdata/otlp/traces.jsonl", "testdata/har/agent.har",
		"testdata/mcp-log/sdk-client.log", "testdata/mcp-log/mcp-server-tickets.log", "testdata/mapping/envoy-text.log",
		"testdata/mapping/nginx-text.log", "testdata/mapping/traefik-text.log"} {
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

// FuzzXEscapedJSON: undoing nginx's \xHH escapes never panics, and what
// it returns is valid JSON of valid UTF-8.
func FuzzXEscapedJSON(f *testing.F) {
	for _, s := range []string{`{"a":"\x22hi\x22"}`, `{"a":"\xC3\xA9\x5C"}`, `{"a":"\x2`, `{"\x22":"\x00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		out, ok := xEscapedJSON(line)
		if ok && (!json.Valid(out) || !utf8.Valid(out)) {
			t.Fatalf("%q read as %q", line, out)
		}
	})
}
