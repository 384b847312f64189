package importers

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
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

// TestTextFormats: a plain-text line is read through the format it
// matches, the producer's escaping undone; a duration that names its
// unit says it; a file none of whose lines is a record of the format is
// an error, not an empty import.
func TestTextFormats(t *testing.T) {
	nginx := presets["nginx"]
	doc, ok := nginx.textRecord([]byte(`203.0.113.9 - - [02/Mar/2026:10:16:00 +0000] "GET /files/a\x22b\x5C.txt HTTP/1.1" 404 153 "-" "curl \xE2\x82\xAC \xFF"`))
	if !ok || doc["request"] != `GET /files/a"b\.txt HTTP/1.1` || doc["http_user_agent"] != "curl € \uFFFD" || doc["status"] != "404" {
		t.Fatalf("nginx line: %v %q", ok, doc)
	}
	if _, ok := nginx.textRecord([]byte(`198.51.100.4 - - [02/Mar/2026:10:16:02 +0000] "\x16\x03\x01" 400 157 "-" "-"`)); ok {
		t.Error("a request line that is not a request (a TLS handshake) was read as one")
	}
	traefik := presets["traefik"]
	doc, ok = traefik.textRecord([]byte(`10.0.0.1 - - [10/Nov/2009:23:00:00 +0000] "GET / HTTP/1.1" 200 0 "-" "foo \" bar" 1 "test@file" "http://127.0.0.1:8080" 1500ms`))
	if !ok || doc["RequestUserAgent"] != `foo " bar` || doc["ServiceURL"] != "http://127.0.0.1:8080" {
		t.Fatalf("traefik line: %v %q", ok, doc)
	}
	if ms, ok := traefik.Duration.ms(doc); !ok || ms != 1500 {
		t.Errorf("Traefik's 1500ms read as %v ms (%v)", ms, ok)
	}
	// Traefik's JSON keeps its nanoseconds.
	if ms, ok := traefik.Duration.ms(map[string]any{"Duration": json.Number("2000000")}); !ok || ms != 2 {
		t.Errorf("Traefik's JSON Duration 2000000 ns read as %v ms (%v)", ms, ok)
	}
	// A text log in an operator's own format reads no record: refused.
	path := writeFile(t, "custom.log", []byte("2026-03-02 10:15:04 POST /v1/payments 504\n2026-03-02 10:15:21 POST /v1/payments 201\n"))
	_, err := Import(ctx, newStore(t), path, Options{Format: "nginx"})
	if err == nil || !strings.Contains(err.Error(), "none of its 2 lines is a nginx record") || !strings.Contains(err.Error(), "--mapping") {
		t.Fatalf("a file of no nginx line: %v", err)
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
		{`name = "x"
time = { from = ["/t"] }
method = { from = ["/m"] }
[[text]]
name = "t"
pattern = '(?P<t>\S+'`, `text format "t": pattern`},
		{`name = "x"
time = { from = ["/t"] }
method = { from = ["/m"] }
[[text]]
name = "t"
pattern = '^\S+$'`, "names no group"},
		{`name = "x"
time = { from = ["/t"] }
method = { from = ["/m"] }
[[text]]
name = "t"
escapes = "percent"
pattern = '^(?P<t>\S+)$'`, `escapes "percent"`},
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

// TestRequestSeenAtTwoHopsIsOneSend: Istio logs a request on both sides
// (the caller's sidecar, then the target's, under one x-request-id, the
// second within the first's time): one send. A resend under the same id
// after the first ended, or a short JSON-RPC id that other sessions use
// too, are sends of their own.
func TestRequestSeenAtTwoHopsIsOneSend(t *testing.T) {
	// istio.io content/en/docs/tasks/observability/logs/access-log: the
	// sleep pod's sidecar, then httpbin's.
	mesh := `[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 4 4 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "10.44.1.27:80" outbound|8000||httpbin.foo.svc.cluster.local 10.44.1.23:37652 10.0.45.184:8000 10.44.1.23:46520 - default
[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 3 1 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "127.0.0.1:80" inbound|8000|| 127.0.0.1:41854 10.44.1.27:80 10.44.1.23:37652 outbound_.8000_._.httpbin.foo.svc.cluster.local default
`
	resend := `[2026-03-02T10:15:04.512Z] "POST /v1/payments HTTP/1.1" 504 UT 312 24 15001 - "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "pay.example.com" "10.0.4.12:8080"
[2026-03-02T10:15:21.020Z] "POST /v1/payments HTTP/1.1" 201 - 312 95 180 178 "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "pay.example.com" "10.0.4.12:8080"
`
	// The target's sidecar started 1 ms later and took as long, each
	// logged in whole milliseconds: its line ends 1 ms after the first's.
	rounded := `[2026-03-02T10:15:04.409Z] "POST /v1/payments HTTP/1.1" 201 - via_upstream - "-" 312 135 40 39 "-" "agent/1.0" "84961386-6d84-929d-98bd-c5aee93b5c88" "payments:8000" "10.44.1.27:80" outbound|8000||payments.foo.svc.cluster.local 10.44.1.23:37652 10.0.45.184:8000 10.44.1.23:46520 - default
[2026-03-02T10:15:04.410Z] "POST /v1/payments HTTP/1.1" 201 - via_upstream - "-" 312 135 40 39 "-" "agent/1.0" "84961386-6d84-929d-98bd-c5aee93b5c88" "payments:8000" "127.0.0.1:80" inbound|8000|| 127.0.0.1:41854 10.44.1.27:80 10.44.1.23:37652 outbound_.8000_._.payments.foo.svc.cluster.local default
`
	shortIDs := `{"start_time":"2026-03-02T10:15:04.000Z","method":"POST","x-envoy-origin-path":"/mcp","response_code":200,":authority":"mcp.example","upstream_host":"10.0.4.12:8080","duration":900,"jsonrpc.request.id":"3","mcp.method.name":"tools/call","mcp.tool.name":"create_ticket"}
{"start_time":"2026-03-02T10:15:04.100Z","method":"POST","x-envoy-origin-path":"/mcp","response_code":200,":authority":"mcp.example","upstream_host":"10.0.4.12:8080","duration":300,"jsonrpc.request.id":"3","mcp.method.name":"tools/call","mcp.tool.name":"create_ticket"}
`
	for _, c := range []struct {
		name, log string
		sends     int64
	}{{"two hops", mesh, 1}, {"two hops, each line rounded to the ms", rounded, 1}, {"a resend after the first ended", resend, 2}, {"JSON-RPC ids of two sessions", shortIDs, 2}} {
		rep, err := Import(ctx, newStore(t), writeFile(t, "access.log", []byte(c.log)), Options{Format: "envoy"})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Executions != c.sends {
			t.Errorf("%s: %d executions, want %d (%s)", c.name, rep.Executions, c.sends, rep.Note)
		}
		if hop := strings.Contains(rep.Note, "logged again by another proxy"); hop != (c.sends == 1) {
			t.Errorf("%s: the note says %q", c.name, rep.Note)
		}
	}
}

// TestRequestLoggedInTwoFilesIsOneSend: each sidecar writes its own log,
// so a request's two lines are in two files, imported together or apart,
// in either order: one send. A resend under the same id in another file
// stays a send; a longer copy of a log imported before adds only its new
// lines.
func TestRequestLoggedInTwoFilesIsOneSend(t *testing.T) {
	// istio.io's pair again: the sleep pod's sidecar, then httpbin's.
	client := `[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 4 4 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "10.44.1.27:80" outbound|8000||httpbin.foo.svc.cluster.local 10.44.1.23:37652 10.0.45.184:8000 10.44.1.23:46520 - default
`
	server := `[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 3 1 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "127.0.0.1:80" inbound|8000|| 127.0.0.1:41854 10.44.1.27:80 10.44.1.23:37652 outbound_.8000_._.httpbin.foo.svc.cluster.local default
`
	first := `[2026-03-02T10:15:04.512Z] "POST /v1/payments HTTP/1.1" 504 UT 312 24 15001 - "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "pay.example.com" "10.0.4.12:8080"
`
	resend := `[2026-03-02T10:15:21.020Z] "POST /v1/payments HTTP/1.1" 201 - 312 95 180 178 "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "pay.example.com" "10.0.4.12:8080"
`
	for _, c := range []struct {
		name  string
		files []string
		sends int64
		note  string // in the last file's note
	}{
		{"client's sidecar, then the server's", []string{client, server}, 1, "logged again by another proxy"},
		{"server's sidecar, then the client's", []string{server, client}, 1, "logged again by another proxy"},
		{"a resend in another file", []string{first, resend}, 2, ""},
		{"a longer copy of a log", []string{first, first + resend}, 2, "a shorter copy of this log"},
		{"exports of a log that overlap", []string{client + first, first + resend}, 3, "1 lines a file imported before holds already"},
	} {
		s := newStore(t)
		var sends int64
		var note string
		for i, f := range c.files {
			rep, err := Import(ctx, s, writeFile(t, fmt.Sprintf("access-%d.log", i), []byte(f)), Options{Format: "envoy"})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			sends, note = sends+rep.Executions, rep.Note
		}
		if sends != c.sends {
			t.Errorf("%s: %d executions, want %d (%s)", c.name, sends, c.sends, note)
		}
		if c.note == "" && strings.Contains(note, "imported before") || c.note != "" && !strings.Contains(note, c.note) {
			t.Errorf("%s: the note says %q", c.name, note)
		}
	}
}

// TestContainerLogWrappers: an access log as a node or kubectl hands it
// over (CRI lines, one split by the runtime into a partial and a full
// one; kubectl's --timestamps; Docker's json-file, one entry split too)
// is detected and imported as the bare log is; a wrapped log of another
// kind says how to take the wrapper off.
func TestContainerLogWrappers(t *testing.T) {
	for _, bare := range []string{"testdata/mapping/envoy-text.log", "testdata/mapping/nginx-text.log", "testdata/mapping/kong.jsonl"} {
		b, err := os.ReadFile(bare)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Import(ctx, newStore(t), bare, Options{})
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		const ts = "2026-03-02T10:15:04.512345678Z"
		wrap := map[string]func(i int, l string) string{
			"cri": func(i int, l string) string {
				if i == 1 && len(l) > 10 { // split, as the runtime splits a long line
					return ts + " stdout P " + l[:10] + "\n" + ts + " stdout F " + l[10:]
				}
				return ts + " stdout F " + l
			},
			"kubectl": func(_ int, l string) string { return ts + " " + l },
			"docker": func(i int, l string) string {
				entry := func(s string) string {
					j, _ := json.Marshal(map[string]string{"log": s, "stream": "stdout", "time": ts})
					return string(j)
				}
				if i == 1 && len(l) > 10 {
					return entry(l[:10]) + "\n" + entry(l[10:]+"\n")
				}
				return entry(l + "\n")
			},
		}
		for name, w := range wrap {
			var out strings.Builder
			for i, l := range lines {
				out.WriteString(w(i, l) + "\n")
			}
			path := writeFile(t, name+".log", []byte(out.String()))
			got, err := Import(ctx, newStore(t), path, Options{})
			if err != nil {
				t.Fatalf("%s around %s: %v", name, bare, err)
			}
			if got.Format != want.Format || got.Calls != want.Calls || got.Executions != want.Executions || got.Noise != want.Noise || got.Skipped != 0 {
				t.Errorf("%s around %s: %+v\nbare: %+v", name, bare, got, want)
			}
		}
	}
	b, _ := os.ReadFile("testdata/sallyport/activity.jsonl")
	var out strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		out.WriteString("2026-03-02T10:15:04Z stdout F " + l + "\n")
	}
	if _, err := Import(ctx, newStore(t), writeFile(t, "sp.log", []byte(out.String())), Options{}); err == nil || !strings.Contains(err.Error(), "take them out first") {
		t.Errorf("a wrapped sallyport log: %v", err)
	}
}

// TestGrownLogImportsOnlyItsNewLines: an access log imported, then again
// once it has grown, is the longer file's requests once each, whether the
// first copy ended at a line end or mid-line, gzipped or not; a grown log
// of a format that pairs lines across the cut is refused, not doubled.
func TestGrownLogImportsOnlyItsNewLines(t *testing.T) {
	full, err := os.ReadFile("testdata/mapping/nginx-text.log")
	if err != nil {
		t.Fatal(err)
	}
	alone, err := Import(ctx, newStore(t), writeFile(t, "access.log", full), Options{})
	if err != nil {
		t.Fatal(err)
	}
	third := bytes.IndexByte(full[bytes.IndexByte(full, '\n')+1:], '\n') + bytes.IndexByte(full, '\n') + 1 // the second line's end
	for _, c := range []struct {
		name    string
		first   []byte
		held    int64
		gzipped bool
	}{
		{"cut at a line end", full[:third+1], 2, false},
		{"cut mid-line", full[:third+10], 2, false},
		{"grown and gzipped", full[:third+1], 2, true},
	} {
		s := newStore(t)
		first, err := Import(ctx, s, writeFile(t, "access.log", c.first), Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		grown := full
		if c.gzipped {
			var b bytes.Buffer
			z := gzip.NewWriter(&b)
			z.Write(full)
			z.Close()
			grown = b.Bytes()
		}
		rep, err := Import(ctx, s, writeFile(t, "access.log.gz", grown), Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := first.Executions + rep.Executions; got != alone.Executions || rep.Held != c.held || rep.HeldIn != first.Source {
			t.Errorf("%s: %d + %d executions (%d lines held in %s), want %d as the whole log imported once (%d lines held in %s)",
				c.name, first.Executions, rep.Executions, rep.Held, rep.HeldIn, alone.Executions, c.held, first.Source)
		}
		if !strings.Contains(rep.Note, "a shorter copy of this log") {
			t.Errorf("%s: the note says %q", c.name, rep.Note)
		}
	}
	// Another log that happens to start alike is not the first one grown.
	s := newStore(t)
	if _, err := Import(ctx, s, writeFile(t, "access.log", full[:third+1]), Options{}); err != nil {
		t.Fatal(err)
	}
	other := append(bytes.Replace(full[:third+1], []byte("/coffee"), []byte("/cocoa"), 1), full[third+1:]...)
	if rep, err := Import(ctx, s, writeFile(t, "other.log", other), Options{}); err != nil || rep.Held != 0 {
		t.Errorf("a log that is not the first one grown: %d lines held, %v", rep.Held, err)
	}
	// A Claude Desktop log, grown: refused, with the way out.
	mcp, err := os.ReadFile("testdata/mcp-log/mcp-server-tickets.log")
	if err != nil {
		t.Fatal(err)
	}
	s = newStore(t)
	half := mcp[:bytes.LastIndexByte(mcp[:len(mcp)/2], '\n')+1]
	if _, err := Import(ctx, s, writeFile(t, "mcp-server-deploy.log", half), Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, s, writeFile(t, "mcp-server-deploy.log", mcp), Options{}); err == nil || !strings.Contains(err.Error(), "a shorter copy of this log") || !strings.Contains(err.Error(), "--db") {
		t.Errorf("a grown MCP log: %v", err)
	}
}
