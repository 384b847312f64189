package importers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
)

func TestXEscapedJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":"\x22hi\x22"}`, `{"a":"\"hi\""}`},
		{`{"a":"C:\x5Ctmp"}`, `{"a":"C:\\tmp"}`},
		{`{"a":"line\x0Anext\x7F"}`, `{"a":"line\u000Anext\u007F"}`},
		{`{"a":"rembours\xC3\xA9"}`, `{"a":"remboursé"}`},
		{`{"a":"\xFF"}`, "{\"a\":\"\uFFFD\"}"},                         // not UTF-8: replaced
		{`{"a":"\x22", "b":1, "c":"-"}`, `{"a":"\"", "b":1, "c":"-"}`}, // numbers and "-" as they are
	} {
		got, ok := xEscapedJSON([]byte(c.in))
		if !ok || string(got) != c.want {
			t.Errorf("%s: %s %v, want %s", c.in, got, ok, c.want)
		}
	}
	for _, bad := range []string{
		`{"a":"no escapes"}`,      // JSON as it is: nothing to undo
		`{"a":"\x22\n"}`,          // another backslash: not this escaping
		`{"a":"\xZZ"}`,            // not hex
		`{"a":"\x2`,               // cut short
		`{"a":"\x22"`,             // not JSON once undone
		`["\x22"] trailing {"\x"`, // garbage
	} {
		if got, ok := xEscapedJSON([]byte(bad)); ok {
			t.Errorf("%s: read as %s", bad, got)
		}
	}
}

// nginxDefault writes a flat escape=json line as nginx writes the same
// log_format without escape=json: strings escaped as \xHH, an empty
// variable as "-".
func nginxDefault(t *testing.T, line string) string {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", line)
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; dec.More(); i++ {
		k, _ := dec.Token()
		v, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", k)
		s, isString := v.(string)
		if !isString {
			fmt.Fprint(&b, v)
			continue
		}
		if s == "" {
			s = "-"
		}
		b.WriteByte('"')
		for _, c := range []byte(s) {
			if c == '"' || c == '\\' || c < 0x20 || c > 0x7e {
				fmt.Fprintf(&b, `\x%02X`, c)
			} else {
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
	}
	return b.String() + "}"
}

// TestNginxDefaultEscaping: nginx lines written without escape=json read
// as the escape=json lines of the same requests do (the same actions,
// fingerprints, states and statuses), and the note says how they were
// read. Before, the import refused the file at its first line.
func TestNginxDefaultEscaping(t *testing.T) {
	src, err := os.ReadFile("testdata/mapping/nginx.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// An MCP tools/call whose logged body has quotes, a backslash and
	// UTF-8: all \xHH in nginx's default escaping.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call",
		"params": map[string]any{"name": "create_refund", "arguments": map[string]any{"order": "A-1042", "note": `remboursé "geste" C:\x`}}})
	mcp := fmt.Sprintf(`{"time":"2026-11-30T17:09:00+00:00","req_id":"f1e2d3c4b5a6978812345678abcdef01","remote_addr":"10.0.4.12","host":"mcp.example","method":"POST","uri":"/mcp","status":504,"upstream_addr":"10.0.9.9:3000","upstream_status":"504","upstream_time":"60.001","request_time":60.002,"idem_key":"","mcp_session":"191c4850af6c49e0","request_body":%q}`, body)
	jsonLines := strings.TrimSpace(string(src)) + "\n" + mcp + "\n"
	var def strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(jsonLines), "\n") {
		def.WriteString(nginxDefault(t, l) + "\n")
	}
	if !strings.Contains(def.String(), `\x22`) || !strings.Contains(def.String(), `\xC3\xA9`) {
		t.Fatalf("the default-escaped lines escape nothing:\n%s", def.String())
	}
	if h := []byte(def.String()); true {
		if name, err := Detect(h); name != "nginx" || err != nil {
			t.Fatalf("Detect: %q %v, want nginx", name, err)
		}
	}
	read := func(name, content string) ([]string, FileReport) {
		st := newStore(t)
		rep, err := Import(ctx, st, writeFile(t, name, []byte(content)), Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		execs, err := st.Executions(ctx, activity.ExecutionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range execs {
			b, _ := json.Marshal(struct {
				activity.Action
				Fingerprint, State string
				Status             activity.Opt[int]
				Key                activity.Opt[string]
				NotRecorded        []activity.Fact
			}{e.Action, e.Fingerprint, string(e.State), e.TargetStatus, e.IdempotencyKey, e.NotRecorded})
			got = append(got, string(b))
		}
		return got, rep
	}
	want, _ := read("json.log", jsonLines)
	got, rep := read("default.log", def.String())
	if len(want) < 6 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("default escaping read otherwise:\n%s\nwant (escape=json):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !bytes.Contains([]byte(strings.Join(got, "")), []byte(`remboursé \"geste\" C:\\x`)) {
		t.Errorf("the body's arguments were not read back whole: %s", strings.Join(got, "\n"))
	}
	if !strings.Contains(rep.Note, "1 JSON lines with nginx's \\xHH escapes") {
		t.Errorf("the note does not say how the lines were read: %s", rep.Note)
	}
}

// TestXEscapedNeedsTheMapping: a mapping that does not say its producer
// writes \xHH escapes refuses such a line, saying what it is.
func TestXEscapedNeedsTheMapping(t *testing.T) {
	m, err := ParseMapping([]byte("name = \"own\"\ntime = { from = [\"/t\"] }\nmethod = { from = [\"/m\"] }\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Import(ctx, newStore(t), writeFile(t, "own.log", []byte(`{"t":"2026-11-30T17:00:00Z","m":"POST","ua":"\x22x\x22"}`+"\n")), Options{Mapping: m})
	if err == nil || !strings.Contains(err.Error(), "own.log:1") || !strings.Contains(err.Error(), `json_escapes = "x"`) {
		t.Errorf("want the line named and the key that reads it: %v", err)
	}
	if _, err := ParseMapping([]byte("name = \"own\"\njson_escapes = \"u\"\ntime = { from = [\"/t\"] }\nmethod = { from = [\"/m\"] }\n")); err == nil || !strings.Contains(err.Error(), "json_escapes") {
		t.Errorf("a bad json_escapes: %v", err)
	}
}
