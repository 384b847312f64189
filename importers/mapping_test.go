package importers

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestUnescapedQuotesInUserAgent: Envoy writes a text field's quotes as
// they came (envoyproxy/envoy#4191), and Traefik did until v3.5
// (traefik/traefik#11722): a user agent holding a quote still reads, its
// request is no noise. A line no format reads is named in the note.
func TestUnescapedQuotesInUserAgent(t *testing.T) {
	for _, c := range []struct{ name, log string }{
		{"envoy", `[2026-11-28T13:00:10.000Z] "POST /v1/payments HTTP/1.1" 504 UT 212 24 15001 - "10.0.4.12" "python-requests/2.31.0" "0c3f4e3a-8a73-4a53-b0ad-42b1d7b0a9e1" "pay.example.com" "10.244.0.7:8443"
[2026-11-28T13:00:31.000Z] "POST /v1/payments HTTP/1.1" 200 - 212 97 842 840 "10.0.4.12" "Mozilla/5.0 "compatible"" "5d1e7e0b-6f2a-4a43-9a51-3b0f6a7f2c55" "pay.example.com" "10.244.0.7:8443"
`},
		{"traefik", `10.0.4.12 - - [28/Nov/2026:11:00:05 +0000] "POST /v1/tickets HTTP/1.1" 504 15 "-" "ops-agent/2.1" 41 "tickets@docker" "http://172.18.0.5:8080" 30001ms
10.0.4.12 - - [28/Nov/2026:11:00:36 +0000] "POST /v1/tickets HTTP/1.1" 201 87 "-" "Dalvik/2.1.0 (Linux; U; Android 5.1; Alba 10" Build/LMY47I)" 42 "tickets@docker" "http://172.18.0.5:8080" 120ms
`},
	} {
		rep, err := Import(ctx, newStore(t), writeFile(t, "access.log", []byte(c.log)), Options{Format: c.name})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if rep.Executions != 2 || rep.Noise != 0 {
			t.Errorf("%s: %d executions, %d noise lines; want 2 and none (%s)", c.name, rep.Executions, rep.Noise, rep.Note)
		}
	}
	rep, err := Import(ctx, newStore(t), writeFile(t, "access.log", []byte("10.0.4.12 - - [28/Nov/2026:11:00:05 +0000] \"POST /v1/tickets HTTP/1.1\" 201 15 \"-\" \"ops-agent/2.1\"\nnot a request at all\n")), Options{Format: "nginx"})
	if err != nil || !strings.Contains(rep.Note, "1 lines none of its line formats reads (passed over as no request; the first is line 2)") {
		t.Errorf("a line no format reads: %v, note %q", err, rep.Note)
	}
}

// TestTimeAtEnd: a log that writes a line as its request ends (nginx)
// places the request duration_ms before that time; time_at names what
// the time marks, and nothing else.
func TestTimeAtEnd(t *testing.T) {
	base := "name = \"x\"\ntime = { from = [\"/t\"] }\nduration_ms = { from = [\"/d\"] }\nmethod = { from = [\"/m\"] }\npath = { from = [\"/p\"] }\nstatus = { from = [\"/s\"] }\n"
	if _, err := ParseMapping([]byte(base + "time_at = \"middle\"\n")); err == nil || !strings.Contains(err.Error(), "time_at") {
		t.Errorf("time_at = \"middle\": %v, want an error naming time_at", err)
	}
	for _, c := range []struct {
		at    string
		start string
	}{{"", "2026-11-28T11:00:07Z"}, {"start", "2026-11-28T11:00:07Z"}, {"end", "2026-11-28T11:00:04.5Z"}} {
		m, err := ParseMapping([]byte(base + "time_at = \"" + c.at + "\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		s := newStore(t)
		if _, err := Import(ctx, s, writeFile(t, "a.jsonl", []byte(`{"t":"2026-11-28T11:00:07Z","d":2500,"m":"POST","p":"/x","s":201}`+"\n")), Options{Mapping: m}); err != nil {
			t.Fatal(err)
		}
		ex, err := s.Executions(ctx, activity.ExecutionFilter{})
		if err != nil || len(ex) != 1 {
			t.Fatalf("time_at %q: %d executions, %v", c.at, len(ex), err)
		}
		if got := ex[0].Times.Accepted.V.UTC().Format(time.RFC3339Nano); got != c.start {
			t.Errorf("time_at %q: accepted at %s, want %s", c.at, got, c.start)
		}
	}
}

// TestIngressNginxUpstreamInfo: ingress-nginx's default text format lists
// every upstream tried (", "), or "-" when none was: each is a send.
func TestIngressNginxUpstreamInfo(t *testing.T) {
	log := `10.244.0.1 - - [28/Nov/2026:11:00:05 +0000] "POST /v1/tickets HTTP/1.1" 201 87 "-" "ops-agent/2.1" 512 5.102 [default-tickets-80] [] 10.244.1.5:8080, 10.244.1.6:8080 0, 87 5.000, 0.100 502, 201 6f3c1c1f0b4e4b3a9a5a2f4a3c2b1a02
10.244.0.1 - - [28/Nov/2026:11:01:06 +0000] "POST /v1/tickets HTTP/1.1" 503 190 "-" "ops-agent/2.1" 512 0.000 [default-tickets-80] [] - - - - 6f3c1c1f0b4e4b3a9a5a2f4a3c2b1a03
`
	s := newStore(t)
	rep, err := Import(ctx, s, writeFile(t, "access.log", []byte(log)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Format != "nginx" || rep.Executions != 3 || rep.Noise != 0 {
		t.Errorf("%s: %d executions, %d noise lines; want nginx, 3 (two sends, one never sent), none (%s)", rep.Format, rep.Executions, rep.Noise, rep.Note)
	}
	ex, err := s.Executions(ctx, activity.ExecutionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, e := range ex {
		states = append(states, string(e.State))
	}
	slices.Sort(states)
	if want := []string{"delivered", "failed_before_dispatch", "unknown"}; !slices.Equal(states, want) {
		t.Errorf("states %q, want %q (502 then 201 from the next server; one never sent)", states, want)
	}
}

// TestClientAddress: X-Forwarded-For's client is its first address (each
// proxy appends the one it got the request from); a port is dropped from
// IPv4 and bracketed IPv6 addresses, and a bare IPv6 address is kept
// whole, so two clients stay two.
func TestClientAddress(t *testing.T) {
	for in, want := range map[string]string{"10.0.4.12:52492": "10.0.4.12", "[2001:db8::5]:443": "2001:db8::5", "2001:db8::5": "2001:db8::5", "10.0.4.12": "10.0.4.12", "[2001:db8::6]": "2001:db8::6"} {
		if got := dropPort(in); got != want {
			t.Errorf("dropPort(%q) = %q, want %q", in, got, want)
		}
	}
	log := `{"start_time":"2026-11-28T13:00:10.000Z","method":"POST","path":"/v1/payments","response_code":201,":authority":"pay.example.com","upstream_host":"10.244.0.7:8443","duration":12,"x-forwarded-for":"198.51.100.7, 10.0.0.2"}
{"start_time":"2026-11-28T13:00:11.000Z","method":"POST","path":"/v1/payments","response_code":201,":authority":"pay.example.com","upstream_host":"10.244.0.7:8443","duration":12,"x-forwarded-for":"2001:db8::5"}
{"start_time":"2026-11-28T13:00:12.000Z","method":"POST","path":"/v1/payments","response_code":201,":authority":"pay.example.com","upstream_host":"10.244.0.7:8443","duration":12,"x-forwarded-for":"2001:db8::6"}
`
	s := newStore(t)
	if _, err := Import(ctx, s, writeFile(t, "access.log", []byte(log)), Options{Format: "envoy"}); err != nil {
		t.Fatal(err)
	}
	ex, err := s.Executions(ctx, activity.ExecutionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var actors []string
	for _, e := range ex {
		actors = append(actors, e.Actor)
	}
	slices.Sort(actors)
	if want := []string{"client:198.51.100.7", "client:2001:db8::5", "client:2001:db8::6"}; !slices.Equal(actors, want) {
		t.Errorf("actors %q, want %q", actors, want)
	}
}

// TestMappingAsUsersWriteThem: a user's mapping (README's example) and
// the log it reads. A match pointer that no record has is a refusal that
// names it, not an empty import; a JSON array is a list (two tries), and
// arguments that are an array are kept whole; a status written as a
// status line reads, one that is no status is a bad record naming its
// field.
func TestMappingAsUsersWriteThem(t *testing.T) {
	mapping := func(match, upstream, upstreamStatus string) *Mapping {
		m, err := ParseMapping([]byte(`name = "acme-gateway-audit"
match = "` + match + `"
time = { from = ["/timestamp"] }
duration_ms = { from = ["/elapsed_s"], unit = "s" }
actor = { from = ["/agent/process_id"], prefix = "acme:" }
tool = { from = ["/rpc/params/name"] }
arguments = { from = ["/rpc/params/arguments"] }
method = { const = "POST" }
host = { from = ["/upstream/host"] }
path = { from = ["/upstream/path"] }
status = { from = ["/upstream/status"] }
upstream = { from = ["` + upstream + `"] }
upstream_status = { from = ["` + upstreamStatus + `"] }
`))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	line := func(at, args, status string) string {
		return `{"timestamp":"` + at + `","elapsed_s":1.5,"agent":{"process_id":"agent-31337"},"rpc":{"params":{"name":"create_ticket","arguments":` + args + `}},"upstream":{"host":"api.example.test","path":"/v1/tickets","status":` + status + `,"hosts":["10.0.0.1:443","10.0.0.2:443"],"statuses":[504,201]}}` + "\n"
	}
	log := line("2026-11-25T10:00:01.020Z", `{"title":"disk full"}`, `"201 Created"`)
	imp := func(log string, m *Mapping) (FileReport, *activity.Store, error) {
		s := newStore(t)
		rep, err := Import(ctx, s, writeFile(t, "audit.jsonl", []byte(log)), Options{Mapping: m})
		return rep, s, err
	}
	if _, _, err := imp(log, mapping("/rpc/param/name", "/upstream/host", "/upstream/status")); err == nil || !strings.Contains(err.Error(), "none of its 1 records has /rpc/param/name") {
		t.Errorf("a mistyped match: %v", err)
	}
	rep, s, err := imp(log, mapping("/rpc/params/name", "/upstream/host", "/upstream/status"))
	if err != nil {
		t.Fatal(err)
	}
	if ex, _ := s.Executions(ctx, activity.ExecutionFilter{}); rep.Executions != 1 || len(ex) != 1 || !ex[0].TargetStatus.OK || ex[0].TargetStatus.V != 201 {
		t.Errorf("status \"201 Created\": %+v", ex)
	}
	if rep, _, _ := imp(log, mapping("/rpc/params/name", "/upstream/hosts", "/upstream/statuses")); rep.Executions != 2 {
		t.Errorf("tries as JSON arrays: %d executions, want 2 (%s)", rep.Executions, rep.Note)
	}
	arrays := line("2026-11-25T10:00:01.020Z", `[{"op":"refund","id":"ch_1"},{"op":"refund","id":"ch_2"}]`, `201`) + line("2026-11-25T10:00:09.020Z", `[{"op":"refund","id":"ch_1"},{"op":"refund","id":"ch_3"}]`, `201`)
	_, s, err = imp(arrays, mapping("/rpc/params/name", "/upstream/host", "/upstream/status"))
	if err != nil {
		t.Fatal(err)
	}
	ex, _ := s.Executions(ctx, activity.ExecutionFilter{})
	if len(ex) != 2 || !strings.Contains(string(ex[0].Arguments)+string(ex[1].Arguments), "ch_3") {
		t.Errorf("arguments that are arrays: %d executions, want both arrays whole", len(ex))
	}
	if _, _, err := imp(line("2026-11-25T10:00:01.020Z", `{}`, `"created"`), mapping("/rpc/params/name", "/upstream/host", "/upstream/status")); err == nil || !strings.Contains(err.Error(), "field status") {
		t.Errorf("a status that is none: %v", err)
	}
}

// TestProxyLineBounds: a line is one request, so its count of sends is
// bounded (an attempts field of 2,000,000,000 wrote executions until the
// disk filled); a count or a duration that does not read is a bad record
// naming its field, not a silent 0; and a user's mapping may give split
// several separators, as the nginx preset does for upstream groups.
func TestProxyLineBounds(t *testing.T) {
	envoy := func(extra string) string {
		return `{"start_time":"2026-11-28T15:00:00.000Z","method":"POST","authority":"deploy.example","path":"/v1/releases","response_code":201,"upstream_host":"10.0.9.7:443","duration":4120` + extra + "}\n"
	}
	for _, c := range []struct {
		name, format, log, field string
	}{
		{"attempts", "envoy", envoy(`,"attempts":"2000000000"`), "attempts"},
		{"attempts not a number", "envoy", envoy(`,"attempts":"two"`), "attempts"},
		{"negative attempts", "envoy", envoy(`,"upstream_request_attempt_count":-3`), "attempts"},
		{"a list of sends", "nginx", `{"time":"2026-11-28T09:00:20+00:00","method":"POST","host":"d.example","uri":"/v1/r","status":201,"upstream_addr":"10.0.9.7:8080","upstream_status":"` +
			strings.Repeat("502, ", 150) + `201","request_time":1}` + "\n", "upstream_status"},
		{"duration", "nginx", `{"time":"2026-11-28T09:00:20+00:00","method":"POST","host":"d.example","uri":"/v1/r","status":201,"upstream_addr":"10.0.9.7:8080","upstream_status":"201","request_time":"abc"}` + "\n", "duration_ms"},
	} {
		s := newStore(t)
		_, err := Import(ctx, s, writeFile(t, "access.log", []byte(c.log)), Options{Format: c.format})
		var le *LineError
		if !errors.As(err, &le) || le.Line != 1 || !strings.HasPrefix(le.Field, c.field) {
			t.Errorf("%s: %v, want a bad line 1 naming %s", c.name, err, c.field)
		}
		if n, _ := s.LogSize(ctx); n > 0 {
			t.Errorf("%s: %d records written from a refused file", c.name, n)
		}
	}
	// A batch (Kong's http-log posts its queue as one array) is named as
	// one, with the way out.
	batch := `[{"started_at":1764320400000,"request":{"method":"POST"}},{"started_at":1764320401000,"request":{"method":"POST"}}]` + "\n"
	_, err := Import(ctx, newStore(t), writeFile(t, "kong.log", []byte(batch)), Options{Format: "kong"})
	if err == nil || !strings.Contains(err.Error(), ":1: the line is a JSON array of 2 entries") || !strings.Contains(err.Error(), "jq -c") {
		t.Errorf("a batch line: %v", err)
	}
	m, err := ParseMapping([]byte(`name = "lists"
time = { from = ["/t"] }
method = { const = "POST" }
path = { from = ["/p"] }
upstream = { from = ["/ups"], split = [",", " : "] }
upstream_status = { from = ["/st"], split = [",", " : "] }
`))
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t)
	log := `{"t":"2026-11-28T09:00:20Z","p":"/v1/r","ups":"10.0.9.7:8080, 10.0.9.8:8080 : 10.0.9.9:8080","st":"502, 504 : 201"}` + "\n"
	rep, err := Import(ctx, s, writeFile(t, "a.jsonl", []byte(log)), Options{Mapping: m})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Executions != 3 {
		t.Errorf("%d executions from three tries in two groups, want 3", rep.Executions)
	}
}

// TestCredentialsInRequestPaths: a proxy's request line records what a
// service takes in its URL's path, a Telegram bot's token and a Slack
// webhook's secret among them: none reaches the database, and two bots
// stay two targets (the public id before the token is kept), so their
// sends are not taken for one effect.
func TestCredentialsInRequestPaths(t *testing.T) {
	const botA, botB, hook = "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", "AAFzzzzzYYYYYxxxxxWWWWWvvvvvUUUUU01", "XXXXXXXXXXXXXXXXXXXXXXXX"
	log := `10.0.0.5 - - [30/Nov/2026:10:00:00 +0000] "POST /bot123456789:` + botA + `/sendMessage HTTP/1.1" 504 0 "-" "python-httpx/0.27"
10.0.0.5 - - [30/Nov/2026:10:00:01 +0000] "POST /bot987654321:` + botB + `/sendMessage HTTP/1.1" 200 12 "-" "python-httpx/0.27"
10.0.0.5 - - [30/Nov/2026:10:00:02 +0000] "POST /services/T0AAAAAAA/B0BBBBBBB/` + hook + ` HTTP/1.1" 200 2 "-" "curl/8.5"
`
	dir := t.TempDir()
	s, err := activity.Open(ctx, filepath.Join(dir, "t.db"), activity.Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, s, writeFile(t, "access.log", []byte(log)), Options{Format: "nginx"}); err != nil {
		t.Fatal(err)
	}
	ex, err := s.Executions(ctx, activity.ExecutionFilter{})
	if err != nil || len(ex) != 3 {
		t.Fatalf("%d executions, %v", len(ex), err)
	}
	targets := map[string]bool{}
	for _, e := range ex {
		targets[e.Target] = true
	}
	for _, want := range []string{"/bot123456789:" + activity.RedactedPath + "/sendMessage", "/bot987654321:" + activity.RedactedPath + "/sendMessage",
		"/services/T0AAAAAAA/B0BBBBBBB/" + activity.RedactedPath} {
		if !targets[want] {
			t.Errorf("no execution targets %s: %v", want, targets)
		}
	}
	s.Close()
	for _, name := range []string{"t.db", "t.db-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, secret := range []string{botA, botB, hook} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds %s", name, secret)
			}
		}
	}
}
