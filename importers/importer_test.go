package importers

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/analyze"
)

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadInput: a malformed record refuses the whole file and the error
// names the file, the line and the field; --skip-bad imports the rest and
// counts what it skipped, listing the first as file:line: reason.
func TestBadInput(t *testing.T) {
	good, err := os.ReadFile("testdata/sallyport/activity.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	cases := []struct {
		name, field string
		line        int
		edit        func([]string) []string
	}{
		{"not json", "", 5, func(l []string) []string { l[4] = "{\"seq\":5,\"ts\":\n"; return l }},
		{"bad time", "ts", 3, func(l []string) []string {
			l[2] = strings.Replace(l[2], `"ts":"2026-11-30T09:00:00.352Z"`, `"ts":"yesterday"`, 1)
			return l
		}},
		{"missing tool", "tool", 7, func(l []string) []string {
			l[6] = strings.Replace(l[6], `"tool":"http.request"`, `"tool":""`, 1)
			return l
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "activity.jsonl", []byte(strings.Join(c.edit(append([]string(nil), lines...)), "")))
			s := newStore(t)
			before, _ := s.LogSize(ctx)
			_, err := Import(ctx, s, path, Options{})
			var le *LineError
			if !errors.As(err, &le) || le.Line != int64(c.line) || le.Field != c.field || le.File != path {
				t.Fatalf("error %v (%+v), want line %d field %q", err, le, c.line, c.field)
			}
			if !strings.Contains(err.Error(), path+":") {
				t.Fatalf("the message must name the file: %v", err)
			}
			if after, _ := s.LogSize(ctx); after != before {
				t.Fatalf("a refused file wrote %d records", after-before)
			}
			rep, err := Import(ctx, s, path, Options{SkipBad: true})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Skipped != 1 || len(rep.Errors) != 1 || !strings.HasPrefix(rep.Errors[0], path+":") || rep.Executions == 0 {
				t.Fatalf("skip: %+v", rep)
			}
			src, _ := s.SourceBySHA256(ctx, rep.SHA256, "")
			if src.Skipped != 1 {
				t.Fatalf("the source row must count the skipped record: %+v", src)
			}
		})
	}
}

// TestSallyportChainBreak: a row removed from the middle breaks the
// prev_hash links, which refuses the file.
func TestSallyportChainBreak(t *testing.T) {
	good, _ := os.ReadFile("testdata/sallyport/activity.jsonl")
	lines := strings.SplitAfter(string(good), "\n")
	cut := append(append([]string(nil), lines[:7]...), lines[8:]...)
	path := writeFile(t, "activity.jsonl", []byte(strings.Join(cut, "")))
	_, err := Import(ctx, newStore(t), path, Options{})
	var le *LineError
	if !errors.As(err, &le) || le.Field != "prev_hash" || le.Line != 8 {
		t.Fatalf("a removed row: %v", err)
	}
}

// TestDetect names each fixture's format from its content and refuses to
// guess for anything else.
func TestDetect(t *testing.T) {
	for path, want := range map[string]string{
		"testdata/sallyport/activity.jsonl":       "sallyport",
		"testdata/otlp/traces.jsonl":              "otlp",
		"testdata/mcpdup/incident.jsonl":          "mcpdup",
		"testdata/har/agent.har":                  "har",
		"testdata/mcp-log/sdk-client.log":         "mcp-log",
		"testdata/mcp-log/mcp-server-tickets.log": "mcp-log",
		"testdata/mapping/envoy.jsonl":            "envoy",
		"testdata/mapping/nginx.jsonl":            "nginx",
		"testdata/mapping/traefik.jsonl":          "traefik",
		"testdata/mapping/kong.jsonl":             "kong",
		"testdata/mapping/envoy-text.log":         "envoy",
		"testdata/mapping/nginx-text.log":         "nginx",
		"testdata/mapping/traefik-text.log":       "traefik",
	} {
		h, err := head(path, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Detect(h); got != want || err != nil {
			t.Errorf("%s: %q %v, want %s", path, got, err, want)
		}
	}
	for _, bad := range []string{"", "\n\n", "hello world\n", `{"a":1}` + "\n", "[1,2]\n"} {
		if got, err := Detect([]byte(bad)); err == nil {
			t.Errorf("Detect(%q) = %s, want an error", bad, got)
		}
	}
	if _, err := Import(ctx, newStore(t), writeFile(t, "x.log", []byte("hello\n")), Options{}); err == nil || !strings.Contains(err.Error(), "--format") {
		t.Errorf("an unknown file must say how to name its format: %v", err)
	}
}

// TestOTLPBadInput: a span with a malformed id or time names the field;
// a pretty-printed single document imports like JSON Lines.
func TestOTLPBadInput(t *testing.T) {
	good, _ := os.ReadFile("testdata/otlp/traces.jsonl")
	for _, c := range []struct{ from, to, field string }{
		{`"spanId":"00f067aa0ba9020c"`, `"spanId":"not-an-id"`, "spanId"},
		{`"kind":2,"startTimeUnixNano":"`, `"kind":"SPAN_KIND_BOGUS","startTimeUnixNano":"`, "kind"},
		{`"endTimeUnixNano":"1796032831000000000"`, `"endTimeUnixNano":"soon"`, "endTimeUnixNano"},
	} {
		bad := strings.Replace(string(good), c.from, c.to, 1)
		if bad == string(good) {
			t.Fatalf("fixture has no %s", c.from)
		}
		_, err := Import(ctx, newStore(t), writeFile(t, "traces.jsonl", []byte(bad)), Options{})
		var le *LineError
		if !errors.As(err, &le) || le.Field != c.field || le.Line != 1 {
			t.Errorf("%s: %v", c.field, err)
		}
	}
	// One document, indented, as an OTLP/HTTP JSON body saved to a file.
	var doc map[string]any
	first, _, _ := strings.Cut(string(good), "\n")
	if err := json.Unmarshal([]byte(first), &doc); err != nil {
		t.Fatal(err)
	}
	pretty, _ := json.MarshalIndent(doc, "", "  ")
	rep, err := Import(ctx, newStore(t), writeFile(t, "body.json", pretty), Options{})
	if err != nil || rep.Format != "otlp" || rep.Calls == 0 {
		t.Fatalf("a single document: %+v %v", rep, err)
	}
}

// TestHARBadInput: a bad entry names its path in the document; a file
// that is not a HAR says so.
func TestHARBadInput(t *testing.T) {
	good, _ := os.ReadFile("testdata/har/agent.har")
	bad := strings.Replace(string(good), `"startedDateTime": "2026-11-30T14:01:40.000000+00:00"`, `"startedDateTime": "Monday"`, 1)
	if bad == string(good) {
		t.Fatal("fixture changed")
	}
	_, err := Import(ctx, newStore(t), writeFile(t, "x.har", []byte(bad)), Options{Format: "har"})
	var le *LineError
	if !errors.As(err, &le) || le.Field != "log.entries[6].startedDateTime" || le.Line != 7 {
		t.Fatalf("bad entry: %v", err)
	}
	rep, err := Import(ctx, newStore(t), writeFile(t, "x.har", []byte(bad)), Options{Format: "har", SkipBad: true})
	if err != nil || rep.Skipped != 1 || rep.Lines != 10 {
		t.Fatalf("skip: %+v %v", rep, err)
	}
	if _, err := Import(ctx, newStore(t), writeFile(t, "y.har", []byte(`{"log":{"version":"1.2"}}`)), Options{Format: "har"}); err == nil || !strings.Contains(err.Error(), `no "entries"`) {
		t.Fatalf("no entries: %v", err)
	}
}

// TestMCPLogBadInput: a logged message that is not JSON names its line;
// log lines of other kinds are counted, not errors.
func TestMCPLogBadInput(t *testing.T) {
	good, _ := os.ReadFile("testdata/mcp-log/sdk-client.log")
	bad := strings.Replace(string(good), `write: {"jsonrpc":"2.0","id":5,`, `write: {"jsonrpc":"2.0","id":5,,`, 1)
	_, err := Import(ctx, newStore(t), writeFile(t, "c.log", []byte(bad)), Options{})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 11 {
		t.Fatalf("bad message: %v", err)
	}
	noisy := "starting up\n" + string(good) + "shutting down\n"
	rep, err := Import(ctx, newStore(t), writeFile(t, "n.log", []byte(noisy)), Options{})
	if err != nil || rep.Calls != 4 || !strings.Contains(rep.Note, "2 other lines ignored") {
		t.Fatalf("noise: %+v %v", rep, err)
	}
}

// TestNoiseIsCountedNotRefused: a line between a JSON Lines file's
// records that is not JSON at all (a container runtime's or the server's
// own output) is counted as noise; the file imports whole, as it would
// without it.
func TestNoiseIsCountedNotRefused(t *testing.T) {
	for _, file := range []string{"testdata/sallyport/activity.jsonl", "testdata/otlp/traces.jsonl", "testdata/mapping/nginx.jsonl",
		"testdata/mapping/envoy.jsonl", "testdata/mcp-log/sdk-client.log", "testdata/mapping/envoy-text.log", "testdata/mapping/nginx-text.log"} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			clean, err := Import(ctx, newStore(t), file, Options{})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(file)
			lines := strings.SplitAfter(string(b), "\n")
			noisy := append(append(append([]string(nil), lines[:2]...), "2026/11/30 09:00:00 [notice] 1#1: signal process started\n",
				"  at Object.<anonymous> (/app/server.js:12:3)\n"), lines[2:]...)
			path := writeFile(t, filepath.Base(file), []byte(strings.Join(noisy, "")))
			rep, err := Import(ctx, newStore(t), path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Noise != clean.Noise+2 || rep.Calls != clean.Calls || rep.Executions != clean.Executions || rep.Skipped != 0 {
				t.Fatalf("noisy %+v\nclean %+v", rep, clean)
			}
		})
	}
}

// TestSameLogRepackagedIsNotImportedTwice: a log gzipped, saved with CRLF
// line ends or with a final newline added is the same content: its second
// import adds nothing, so the verdicts cannot change.
func TestSameLogRepackagedIsNotImportedTwice(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "otlp", "traces.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(src)
	zw.Close()
	zst, err := zstd.NewWriter(nil) // the collector's file exporter: compression: zstd
	if err != nil {
		t.Fatal(err)
	}
	// And as the file exporter writes it with compression set: each
	// message a 4-byte big-endian length, then its own zstd frame.
	var framed []byte
	for _, line := range bytes.SplitAfter(src, []byte("\n")) {
		if line = bytes.TrimSuffix(line, []byte("\n")); len(line) > 0 {
			msg := zst.EncodeAll(line, nil)
			framed = append(binary.BigEndian.AppendUint32(framed, uint32(len(msg))), msg...)
		}
	}
	var zl bytes.Buffer // mitmproxy's .zhar is zlib
	zlw := zlib.NewWriter(&zl)
	zlw.Write(src)
	zlw.Close()
	variants := map[string][]byte{
		"zlib.jsonl.z":      zl.Bytes(),
		"gzipped.jsonl.gz":  gz.Bytes(),
		"zstd.jsonl.zst":    zst.EncodeAll(src, nil),
		"framed.zst":        framed,
		"crlf.jsonl":        bytes.ReplaceAll(src, []byte("\n"), []byte("\r\n")),
		"final-blank.jsonl": append(append([]byte(nil), src...), "\n\n"...),
		"no-final-nl.jsonl": bytes.TrimRight(src, "\n"),
	}
	s := newStore(t)
	first := filepath.Join(dir, "original.jsonl")
	os.WriteFile(first, src, 0o600)
	rep, err := Import(ctx, s, first, Options{})
	if err != nil || rep.AlreadyImported || rep.Executions == 0 {
		t.Fatalf("first import: %+v %v", rep, err)
	}
	before, _ := s.LogSize(ctx)
	for name, b := range variants {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o600)
		again, err := Import(ctx, s, p, Options{})
		if err != nil || !again.AlreadyImported || again.Source != rep.Source {
			t.Errorf("%s: %+v %v", name, again, err)
		}
	}
	if after, _ := s.LogSize(ctx); after != before {
		t.Fatalf("re-imports appended %d records", after-before)
	}
	// One changed byte is another log: it is not taken for this one.
	p := filepath.Join(dir, "changed.jsonl")
	os.WriteFile(p, bytes.Replace(src, []byte(`"span`), []byte(`"Span`), 1), 0o600)
	if sums, err := fileSum(p); err != nil || sums.stored == rep.SHA256 {
		t.Fatalf("a changed file has the original's identity: %v", err)
	}
	if sums, _ := fileSum(p); sums.content == contentOf(t, first) {
		t.Fatal("a changed log has the original's content identity")
	}
}

// TestSameRecordsInAnotherFileAreNotImportedTwice: spans exported again,
// in a file of other bytes (an exporter that retries every batch, a
// collector's second file), are recognised by their ids and facts: the
// verdicts stay those of one import. A span that reuses an id for other
// facts is another record, and is imported.
func TestSameRecordsInAnotherFileAreNotImportedTwice(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "otlp", "traces.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var doubled []byte // every batch written twice
	for _, line := range bytes.SplitAfter(src, []byte("\n")) {
		doubled = append(append(doubled, line...), line...)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	once := newStore(t)
	first, err := Import(ctx, once, write("traces.jsonl", src), Options{})
	if err != nil || first.Executions == 0 || first.Repeated != 0 {
		t.Fatalf("first import: %+v %v", first, err)
	}
	want := verdicts(t, once)

	// Within one file: the second copy of each batch is the same spans.
	fresh := newStore(t)
	rep, err := Import(ctx, fresh, write("doubled.jsonl", doubled), Options{})
	if err != nil || rep.AlreadyImported {
		t.Fatalf("doubled file: %+v %v", rep, err)
	}
	if rep.Executions != first.Executions || rep.Calls != first.Calls || rep.Repeated != first.Read {
		t.Errorf("doubled file: %d executions, %d calls, %d repeated; want %d, %d, %d", rep.Executions, rep.Calls, rep.Repeated,
			first.Executions, first.Calls, first.Read)
	}
	if got := verdicts(t, fresh); got != want {
		t.Errorf("doubled file's verdicts:\n%s\nwant\n%s", got, want)
	}

	// Across files: the doubled file after the original adds nothing.
	again, err := Import(ctx, once, write("doubled-again.jsonl", doubled), Options{})
	if err != nil || again.AlreadyImported {
		t.Fatalf("re-export: %+v %v", again, err)
	}
	// Every span is repeated: within the file, or (once per tool call's
	// spans) from the first import; spans of no tool call were never
	// imported, so they repeat only within the file.
	if again.Executions != 0 || again.Calls != 0 || again.Repeated <= again.Read/2 || len(again.RepeatedFrom) != 1 || again.RepeatedFrom[0] != first.Source {
		t.Errorf("re-export imported %d executions, %d calls; %d of %d repeated, from %v (want none imported, from %s)", again.Executions, again.Calls,
			again.Repeated, again.Read, again.RepeatedFrom, first.Source)
	}
	if got := verdicts(t, once); got != want {
		t.Errorf("verdicts after a re-export:\n%s\nwant\n%s", got, want)
	}

	// Within one file too: the original and a copy that reuses its span
	// ids for other arguments hold one more call than the original.
	mixed := append(append([]byte(nil), src...), bytes.Replace(src, []byte(`disk full on db-3`), []byte(`disk full on db-4`), 1)...)
	both, err := Import(ctx, newStore(t), write("mixed.jsonl", mixed), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if both.Calls <= first.Calls {
		t.Errorf("a reused span id with other arguments in the same file was dropped: %d calls, the original has %d", both.Calls, first.Calls)
	}

	// The same span id with other arguments is not the same record.
	forged := bytes.Replace(src, []byte(`disk full on db-3`), []byte(`disk full on db-4`), 1)
	other, err := Import(ctx, once, write("forged.jsonl", forged), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if other.Calls != 1 || other.Executions == 0 || other.Repeated == 0 || other.Repeated >= other.Read {
		t.Errorf("a reused span id with other arguments: %d calls imported, %d of %d spans repeated", other.Calls, other.Repeated, other.Read)
	}
}

// verdicts is the analysis of a store in a comparable form: each
// suspect's verdict and the tools it names, in order.
func verdicts(t *testing.T, s *activity.Store) string {
	t.Helper()
	res, err := analyze.Analyse(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, sus := range res.Suspects {
		fmt.Fprintf(&b, "%s %s %d\n", sus.Verdict, sus.Tool, len(sus.Executions))
	}
	return b.String()
}

func contentOf(t *testing.T, path string) string {
	t.Helper()
	sums, err := fileSum(path)
	if err != nil {
		t.Fatal(err)
	}
	return sums.content
}

// TestHostileNestingIsAnError: a few megabytes of nesting in any format
// is a clear error naming the file and line, not a stack overflow (it
// killed the process through segmentio's decoder, which has no depth
// limit of its own).
func TestHostileNestingIsAnError(t *testing.T) {
	deep := strings.Repeat("[", 3_000_000) + strings.Repeat("]", 3_000_000)
	dir := t.TempDir()
	cases := map[string]string{
		"otlp":      `{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"arrayValue":{"values":` + deep + `}}}]},"scopeSpans":[]}]}`,
		"mcpdup":    `{"format":"mcpdup-export/v1","origin":"x","records":1,"checkpoints":0,"exported_at":"2026-01-01T00:00:00.000000000Z"}` + "\n" + `{"v":1,"seq":0,"prev":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","t":"2026-01-01T00:00:00.000000000Z","kind":"call","data":{"actor":` + deep + `}}`,
		"har":       `{"log":{"version":"1.2","entries":` + deep + `}}`,
		"sallyport": `{"seq":1,"ts":"2026-01-01T00:00:00Z","channel":"http","tool":"x","args_preview":` + deep + `}`,
		"envoy":     `{"start_time":"2026-01-01T00:00:00Z","x":` + deep + `}`,
		"mcp-log":   `write: {"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + deep + `}`,
	}
	for format, body := range cases {
		path := filepath.Join(dir, format+".log")
		os.WriteFile(path, []byte(body+"\n"), 0o600)
		_, err := Import(ctx, newStore(t), path, Options{Format: format})
		if err == nil {
			t.Errorf("%s: a hostile document was imported", format)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), path) {
			t.Errorf("%s: the error does not name the file: %v", format, err)
		}
	}
}

// TestContentHashHoldsLittle: a long run of blank space (a gzip of
// spaces is tiny) is not held whole: what waits to be hashed stays under
// a bound, so the content identity costs linear time and flat memory.
func TestContentHashHoldsLittle(t *testing.T) {
	c := &contentHash{h: sha256.New()}
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	c.Write([]byte("x"))
	for range 64 {
		c.Write(chunk)
		if len(c.held) > maxHeldBlank+len(chunk) {
			t.Fatalf("holding %d bytes of blank space", len(c.held))
		}
	}
	// CRLF split across writes is still one line end.
	ha, hb := sha256.New(), sha256.New()
	a, b := &contentHash{h: ha}, &contentHash{h: hb}
	a.Write([]byte("one\r"))
	a.Write([]byte("\ntwo\r\n"))
	b.Write([]byte("one\ntwo"))
	if !bytes.Equal(ha.Sum(nil), hb.Sum(nil)) || a.n != b.n {
		t.Fatal("a CRLF cut between writes changed the content identity")
	}
}

// TestDetectLongFirstLine: a first line longer than what detection reads
// (a logged request body, a long query) still tells its format.
func TestDetectLongFirstLine(t *testing.T) {
	body := strings.Repeat("x", 3<<20)
	for format, line := range map[string]string{
		"nginx": `{"time":"2026-11-28T09:00:10+00:00","req_id":"r0","remote_addr":"10.0.4.12","host":"files.example","method":"POST","uri":"/v1/upload","status":504,"upstream_addr":"10.0.9.7:8080","upstream_status":"504","upstream_time":"60.000","request_time":60.001,"request_body":"` + body + `"}`,
		"envoy": `[2026-11-28T13:00:10.000Z] "POST /v1/payments?q=` + body[:400<<10] + ` HTTP/1.1" 201 - 212 97 842 840 "10.0.4.12" "ops-agent/2.1" "0c3f4e3a-8a73-4a53-b0ad-42b1d7b0a9e1" "pay.example.com" "10.244.0.7:8443"`,
	} {
		rep, err := Import(ctx, newStore(t), writeFile(t, "access.log", []byte(line+"\n")), Options{})
		if err != nil || rep.Format != format || rep.Executions != 1 {
			t.Errorf("%s with a long first line: %v, format %q, %d executions", format, err, rep.Format, rep.Executions)
		}
	}
}

// TestCompressedAndForeignFiles: a zstd file cut short says so, as a
// gzip one does; a file given --format otlp, mcp-log or sallyport that
// holds nothing of that format (the file exporter's format: proto, a
// service's own log) is refused, not imported as nothing with exit 0.
func TestCompressedAndForeignFiles(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "otlp", "traces.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	zst, _ := zstd.NewWriter(nil)
	whole := zst.EncodeAll(src, nil)
	s := newStore(t)
	_, err = Import(ctx, s, writeFile(t, "cut.jsonl.zst", whole[:len(whole)/2]), Options{Format: "otlp"})
	if err == nil || !strings.Contains(err.Error(), "zstd data ends early") {
		t.Errorf("a zstd file cut short: %v", err)
	}
	proto := []byte{0x0a, 0xd2, 0x01, 0x0a, 0x1f, 0x0a, 0x0c, 's', 'e', 'r', 'v', 'i', 'c', 'e', '\n', 0x12, 0x0f}
	service := []byte("2026-11-28 19:00:00 INFO started\n2026-11-28 19:00:01 INFO tools/call create_ticket\n")
	for _, c := range []struct {
		name, format string
		b            []byte
	}{{"proto.bin", "otlp", proto}, {"service.log", "otlp", service},
		{"traefik.json", "otlp", []byte(`{"ClientHost":"10.0.4.12","DownstreamStatus":201,"RequestMethod":"POST","RequestPath":"/v1/r","StartUTC":"2026-11-28T17:00:00Z"}` + "\n{}\n")}, {"service.log", "mcp-log", service}, {"service.log", "sallyport", service}} {
		_, err := Import(ctx, s, writeFile(t, c.name, c.b), Options{Format: c.format})
		if err == nil || !strings.Contains(err.Error(), "none of its") {
			t.Errorf("%s as %s: %v, want a refusal", c.name, c.format, err)
		}
	}
	if n, _ := s.LogSize(ctx); n != 0 {
		t.Errorf("%d records written from refused files", n)
	}
}

// A tools/call write the Go SDK's transport failed (it logs the error,
// never the payload) may have reached the server: the note says so, with
// its line, rather than import the log as if nothing was tried.
func TestMCPLogFailedWrite(t *testing.T) {
	log := `2026-11-25T15:00:00.000Z write: {"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}
2026-11-25T15:00:00.050Z read: {"jsonrpc":"2.0","id":1,"result":{}}
2026-11-25T15:00:01.000Z write error: rejected by transport: sending "tools/call": Gateway Timeout
2026-11-25T15:00:05.000Z write: {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_invoice","arguments":{"customer":"cus_7"}}}
2026-11-25T15:00:05.400Z read: {"jsonrpc":"2.0","id":3,"result":{"content":[]}}
`
	rep, err := Import(ctx, newStore(t), writeFile(t, "client.log", []byte(log)), Options{Format: "mcp-log"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Note, "1 tools/call writes failed in the transport (the first at line 3)") {
		t.Errorf("the note does not name the failed write: %s", rep.Note)
	}
}
