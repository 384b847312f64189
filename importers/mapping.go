package importers

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/internal/tomlfile"
)

// A Mapping reads any JSON Lines log without code: each field of a
// request through a proxy or gateway is taken from JSON Pointers (RFC
// 6901; the first that is present and not empty wins) and transformed.
// Presets for Envoy, nginx, Traefik and Kong ship in presets/*.toml.
type Mapping struct {
	Name string `toml:"name"`
	Doc  string `toml:"doc"`
	// Format is "otlp" for a mapping that only names the attributes a
	// vendor's gateway records its execution identity under, for OTLP
	// traces; empty for a JSON Lines mapping.
	Format string `toml:"format"`
	// OTLP names those attributes.
	OTLP OTLPAttributes `toml:"otlp"`
	// Detect lists key sets: a first line that has every key of one set
	// is picked for this mapping (presets only; operator-defined key names
	// cannot be recognised). Several sets: the producer's alternatives.
	Detect [][]string `toml:"detect"`
	// Match, if set, is a pointer that must be present and not empty for
	// a line to be a record; other lines are counted and skipped.
	Match string `toml:"match"`
	// Text lists the producer's plain-text line formats; a line that is
	// not JSON is read through the first it matches (textline.go).
	Text []TextFormat `toml:"text"`
	// JSONEscapes "x": JSON lines may carry \xHH escapes in their strings
	// (nginx's default escaping, a JSON log_format without escape=json),
	// undone as they are read (xescaped.go). Empty: JSON as JSON is.
	JSONEscapes string `toml:"json_escapes"`

	Time Field `toml:"time"` // when the request arrived (required), or ended: TimeAt
	// TimeAt is what Time marks: "start" (the default) or "end" (nginx
	// writes a line as the request ends, and its $time_local,
	// $time_iso8601 and $msec are that moment: the start is Duration
	// before it).
	TimeAt         string `toml:"time_at"`
	Duration       Field  `toml:"duration_ms"` // how long it took
	Actor          Field  `toml:"actor"`       // the client (address, consumer)
	Session        Field  `toml:"session"`     // an MCP session id: a run
	RequestID      Field  `toml:"request_id"`  // a JSON-RPC or proxy request id
	Tool           Field  `toml:"tool"`        // the MCP tool, for MCP-aware gateways
	Method         Field  `toml:"method"`      // HTTP method
	Host           Field  `toml:"host"`        // the target's host
	Path           Field  `toml:"path"`        // the target's path (query dropped)
	Arguments      Field  `toml:"arguments"`   // the request's arguments, when logged
	Status         Field  `toml:"status"`      // the status sent to the client
	Upstream       Field  `toml:"upstream"`    // where the proxy sent it; empty: not sent
	UpstreamStatus Field  `toml:"upstream_status"`
	// Via names where in the path the proxy logged a line (Envoy's
	// upstream_cluster: outbound|… on the caller's sidecar, inbound|… on
	// the target's); without it, the upstream does. Two lines of one file
	// under one request id are one request at two hops only if they name
	// two (hops.go).
	Via            Field `toml:"via"`
	Attempts       Field `toml:"attempts"`        // how many times the proxy sent it
	IdempotencyKey Field `toml:"idempotency_key"` // a record that has the field but no value: none sent
	Flags          Field `toml:"flags"`           // proxy condition codes (Envoy's response_flags)
	Location       Field `toml:"location"`        // the answer's Location: what a 201 created
	Replayed       Field `toml:"replayed"`        // the answer's replay mark (Idempotent-Replayed)
	// MCP seen by a proxy: the 2026-07-28 Mcp-Method and Mcp-Name headers,
	// or what an MCP-aware proxy logs of the JSON-RPC message; Body is the
	// JSON-RPC request itself, when logged. A proxy's status for an MCP
	// POST opens or ends a stream: it is not the tool's result.
	MCPMethod Field `toml:"mcp_method"`
	MCPName   Field `toml:"mcp_name"`
	Body      Field `toml:"body"`
	// MCPOnly: every line is an MCP message (an MCP gateway's log): one
	// whose method is not recorded is counted, never read as an HTTP
	// request.
	MCPOnly bool `toml:"mcp_only"`
	// Error is the failure a line states in words (Teleport's error,
	// Cloudflare's Error), quoted in the reasons its transitions give.
	Error Field `toml:"error"`

	// UnsentRetryMethods are the methods the proxy retries only when the
	// try before never reached the upstream (Kong: "for non-idempotent
	// methods (POST, PATCH…) Kong Gateway only retries if the TCP
	// connection failed before the upstream received the request"): of
	// several tries of such a request, only the last was sent.
	// "*" is every method (Traefik's retry middleware retries nothing
	// whose headers reached the backend).
	UnsentRetryMethods []string `toml:"unsent_retry_methods"`

	// Conditions, by flag or by status sent to the client.
	NotSent    Cond `toml:"not_sent"`    // the request never reached the target
	NoAnswer   Cond `toml:"no_answer"`   // sent, and no answer came back
	ClientGone Cond `toml:"client_gone"` // the client left before the answer
	Denied     Cond `toml:"denied"`      // refused by the proxy's authorization
}

// OTLPAttributes are span attributes a vendor's gateway records its own
// execution identity under (on its MCP server span), added to the ones
// the importer knows (mcpdup.execution.id, gateway.execution.id,
// mcpdup.execution.attached, gateway.execution.attached).
type OTLPAttributes struct {
	// ExecutionID: two server spans with one value are one execution.
	ExecutionID []string `toml:"execution_id"`
	// Attached: "true" when the gateway attached the call to an execution
	// it already had instead of creating one.
	Attached []string `toml:"attached"`
}

// Cond matches a record by its flags or by the status sent to the client,
// and only where every Where pointer has its value (Kong's source).
type Cond struct {
	Flags  []string          `toml:"flags"`
	Status []int             `toml:"status"`
	Where  map[string]string `toml:"where"`
	// Set: pointers that must have a value (an error message, whatever
	// it says), beside Where's; Like: pointers whose value the regular
	// expression matches (Teleport's "access to app denied. …").
	Set  []string          `toml:"set"`
	Like map[string]string `toml:"like"`
	like map[string]*regexp.Regexp
	// NotLike: pointers whose value must not match (an absent one
	// passes): what a line holds when the request was sent, where the
	// field that would say so outright may have been dropped by the
	// operator (Traefik's ServiceURL beside its ServiceAddr).
	NotLike map[string]string `toml:"not_like"`
	notLike map[string]*regexp.Regexp
}

// compile reads the condition's regular expressions.
func (c *Cond) compile(name string) error {
	var err error
	if c.like, err = compileLike(name+".like", c.Like); err != nil {
		return err
	}
	c.notLike, err = compileLike(name+".not_like", c.NotLike)
	return err
}

func compileLike(name string, exprs map[string]string) (map[string]*regexp.Regexp, error) {
	var out map[string]*regexp.Regexp
	for p, expr := range exprs {
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", name, p, err)
		}
		if out == nil {
			out = map[string]*regexp.Regexp{}
		}
		out[p] = re
	}
	return out, nil
}

// Field is how one value is read.
type Field struct {
	From     []string          `toml:"from"`      // JSON Pointers, first present wins
	Const    string            `toml:"const"`     // a fixed value when From finds nothing
	Time     string            `toml:"time"`      // rfc3339, unix_s, unix_ms, unix_us, unix_ns, or a Go layout; "a | b": the first that reads
	Part     int               `toml:"part"`      // the value's nth word (1-based), when it has that many ("POST /x HTTP/1.1")
	Unit     string            `toml:"unit"`      // for durations: ns, us, ms (default) or s
	Add      int               `toml:"add"`       // added to a number (RetryAttempts + 1 = attempts)
	Count    bool              `toml:"count"`     // the length of the array at the pointer
	DropPort bool              `toml:"drop_port"` // "10.0.4.12:52492" → "10.0.4.12"
	Unquote  bool              `toml:"unquote"`   // strip quotes (structured-field strings)
	Split    Separators        `toml:"split"`     // a list in one value ("a, b" for retries): one separator or several
	First    bool              `toml:"first"`     // of a list, the first (X-Forwarded-For's client), not the last
	Header   string            `toml:"header"`    // the pointer holds headers: pick this one (any case)
	Map      map[string]string `toml:"map"`       // replace values
	Prefix   string            `toml:"prefix"`
	// AbsentIsEmpty: the producer always writes this field when it has a
	// value (Kong logs every try), so a record without it has none.
	AbsentIsEmpty bool `toml:"absent_is_empty"`
	// GroupNames: an upstream written without a port (nor unix:) is the
	// name of a server group no server of which could be picked, as nginx
	// writes $upstream_addr then: nothing was sent to it.
	GroupNames bool `toml:"group_names"`
}

// onlyGroupNames reports whether every upstream in ups is a group's name
// (GroupNames): no server was picked, so nothing was sent.
func (f Field) onlyGroupNames(ups []string) bool {
	if !f.GroupNames || len(ups) == 0 {
		return false
	}
	for _, u := range ups {
		if _, _, err := net.SplitHostPort(u); err == nil || strings.HasPrefix(u, "unix:") || u == "-" {
			return false
		}
	}
	return true
}

//go:embed presets/*.toml
var presetFS embed.FS

// presets are the shipped mappings by name; presetNames, sorted, is the
// order detection asks them in.
var (
	presets     = map[string]*Mapping{}
	presetNames []string
)

func init() {
	entries, _ := presetFS.ReadDir("presets")
	for _, e := range entries {
		b, _ := presetFS.ReadFile("presets/" + e.Name())
		m, err := ParseMapping(b)
		if err != nil {
			panic(fmt.Sprintf("preset %s: %v", e.Name(), err))
		}
		presets[m.Name] = m
		presetNames = append(presetNames, m.Name)
		formats[m.Name] = func(string) decoder { return &mapped{m: m} }
	}
	sort.Strings(presetNames)
}

// ParseMapping reads a mapping file; unknown keys are errors.
func ParseMapping(b []byte) (*Mapping, error) {
	var m Mapping
	if err := tomlfile.Decode(b, &m); err != nil {
		return nil, err
	}
	if m.Name == "" {
		return nil, errors.New("name is required")
	}
	switch m.Format {
	case "otlp":
		if len(m.OTLP.ExecutionID) == 0 && len(m.OTLP.Attached) == 0 {
			return nil, errors.New("otlp.execution_id or otlp.attached is required in a format = \"otlp\" mapping")
		}
		return &m, nil
	case "":
	default:
		return nil, fmt.Errorf("format %q: a mapping is for JSON Lines (no format) or \"otlp\"", m.Format)
	}
	if len(m.Time.From) == 0 {
		return nil, errors.New("time.from is required: a record without a time cannot be placed")
	}
	if m.JSONEscapes != "" && m.JSONEscapes != "x" {
		return nil, fmt.Errorf("json_escapes = %q: it is \"x\" (nginx's \\xHH escaping inside JSON strings) or absent", m.JSONEscapes)
	}
	if m.TimeAt != "" && m.TimeAt != "start" && m.TimeAt != "end" {
		return nil, fmt.Errorf("time_at = %q: it is \"start\" or \"end\", what the time field marks", m.TimeAt)
	}
	if len(m.Method.From) == 0 && m.Method.Const == "" && len(m.Tool.From) == 0 {
		return nil, errors.New("method or tool is required")
	}
	for i := range m.Text {
		if err := m.Text[i].compile(); err != nil {
			return nil, err
		}
	}
	for name, c := range map[string]*Cond{"denied": &m.Denied, "not_sent": &m.NotSent, "no_answer": &m.NoAnswer, "client_gone": &m.ClientGone} {
		if err := c.compile(name); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

// LoadMapping reads a mapping file for --mapping.
func LoadMapping(file string) (*Mapping, error) {
	b, err := tomlfile.ReadFile(file)
	if err != nil {
		return nil, err
	}
	m, err := ParseMapping(b)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", file, err)
	}
	return m, nil
}

// detectPreset names a preset whose detect keys the first line has.
func detectPreset(obj map[string]json.RawMessage) string {
	for _, n := range presetNames {
		m := presets[n]
		for _, set := range m.Detect {
			all := len(set) > 0
			for _, k := range set {
				if _, ok := obj[k]; !ok {
					all = false
				}
			}
			if all {
				return n
			}
		}
	}
	return ""
}

// detectText names a preset one of whose detected text formats the line
// is in.
func detectText(line []byte) string {
	if len(line) == 0 {
		return ""
	}
	for _, n := range presetNames {
		for i := range presets[n].Text {
			if t := &presets[n].Text[i]; t.Detect && t.re.MatchString(string(line)) {
				return n
			}
		}
	}
	return ""
}

// pointer resolves an RFC 6901 JSON Pointer in a decoded document.
func pointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			x, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = x
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// values reads a field as strings (several when split).
// find is the value at the first of From present with one ("", "-" and
// null are none).
func (f Field) find(doc any) (any, bool) {
	for _, p := range f.From {
		if v, ok := pointer(doc, p); ok && v != nil && v != "" && v != "-" {
			return v, true
		}
	}
	return nil, false
}

// Separators split one value into a list: split = "," or, where a
// producer writes two, split = [",", " : "] (nginx between upstream
// groups).
type Separators []string

// UnmarshalText reads the one-separator form.
func (s *Separators) UnmarshalText(b []byte) error {
	*s = Separators{string(b)}
	return nil
}

// apply splits v at every one of the separators.
func (s Separators) apply(v string) []string {
	parts := []string{v}
	for _, sep := range s {
		if sep == "" {
			continue
		}
		var next []string
		for _, p := range parts {
			next = append(next, strings.Split(p, sep)...)
		}
		parts = next
	}
	return parts
}

func (f Field) values(doc any) []string { return f.entries(doc, false) }

// entries is values, keeping in a list of two or more the entries "-"
// stands for when keepNone: nginx writes "503, -" for a second try that
// got no status, which is a send all the same.
func (f Field) entries(doc any, keepNone bool) []string {
	raw, found := f.find(doc)
	if found && f.Header != "" {
		raw, found = headerValue(raw, f.Header)
	}
	s := ""
	switch {
	case !found:
		s = f.Const
	case f.Count:
		a, _ := raw.([]any)
		s = strconv.Itoa(len(a))
	default:
		s = scalar(raw)
	}
	if words := strings.Fields(s); f.Part > 0 && len(words) >= f.Part {
		s = words[f.Part-1]
	}
	if f.Add != 0 {
		if x, err := strconv.Atoi(s); err == nil {
			s = strconv.Itoa(x + f.Add)
		}
	}
	if s == "" || s == "-" {
		return nil
	}
	parts := []string{s}
	if a, ok := raw.([]any); ok && found && !f.Count && f.Header == "" && f.Part == 0 {
		// A JSON array is a list as a split string is ("statuses":
		// [504, 201]: two tries), not its first element.
		parts = parts[:0]
		for _, e := range a {
			parts = append(parts, scalar(e))
		}
	} else if len(f.Split) > 0 {
		parts = f.Split.apply(s)
	}
	keepNone = keepNone && len(parts) > 1
	out := parts[:0]
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if f.Unquote {
			p = strings.Trim(p, `"`)
		}
		if m, ok := f.Map[p]; ok {
			p = m
		}
		if f.DropPort {
			p = dropPort(p)
		}
		if p != "" && (p != "-" || keepNone) {
			out = append(out, f.Prefix+p)
		}
	}
	return out
}

// present reports whether the record has the field at all: a key with no
// value ("", "-", null) is present (the proxy says: none), a missing key
// is not recorded.
func (f Field) present(doc any) bool {
	if f.AbsentIsEmpty {
		return true
	}
	for _, p := range f.From {
		if _, ok := pointer(doc, p); ok {
			return true
		}
	}
	return false
}

func (f Field) value(doc any) string {
	vs := f.values(doc)
	switch {
	case len(vs) == 0:
		return ""
	case f.First:
		return vs[0]
	}
	return vs[len(vs)-1]
}

// dropPort is an address's host: "10.0.4.12:52492" and "[2001:db8::5]:443"
// lose their port, a bare IPv6 address ("2001:db8::5") has none to lose.
func dropPort(p string) string {
	if host, _, err := net.SplitHostPort(p); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(p, "["), "]")
}

// whole is the field's value whole: an array or object as its JSON, for
// values read as a document (arguments, a JSON-RPC body or batch).
func (f Field) whole(doc any) string {
	v, ok := f.find(doc)
	if !ok {
		return f.Const
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// httpStatus reads a status as logs write it: 201, "201", or a status
// line's "201 Created"; empty is none recorded.
func httpStatus(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	word, _, _ := strings.Cut(strings.TrimSpace(v), " ")
	code, err := strconv.Atoi(word)
	if err != nil || code < 100 || code > 999 {
		if err == nil && code == 0 {
			return 0, nil // Envoy's 0: no response
		}
		return 0, fmt.Errorf("%q is not an HTTP status", v)
	}
	return code, nil
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case []any:
		if len(x) > 0 {
			return scalar(x[0])
		}
		return ""
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// headerValue picks a header (any case) from an object or a [{name,value}] list.
func headerValue(v any, name string) (any, bool) {
	switch h := v.(type) {
	case map[string]any:
		for k, x := range h {
			if strings.EqualFold(k, name) {
				return x, true
			}
		}
	case []any:
		for _, e := range h {
			if m, ok := e.(map[string]any); ok && strings.EqualFold(scalar(m["name"]), name) {
				return m["value"], true
			}
		}
	}
	return nil, false
}

func (f Field) time(doc any) (time.Time, error) {
	s := f.value(doc)
	if s == "" {
		return time.Time{}, errors.New("missing")
	}
	var err error
	for _, layout := range strings.Split(f.Time, "|") {
		var t time.Time
		if t, err = parseTimeAs(s, strings.TrimSpace(layout)); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}

// parseTimeAs reads s in one of the layouts a mapping names.
func parseTimeAs(s, layout string) (time.Time, error) {
	unix := func(div float64) (time.Time, error) {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is not a number", s)
		}
		sec := x / div
		return time.Unix(0, int64(sec*1e9)).UTC(), nil
	}
	switch layout {
	case "", "rfc3339":
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return t, fmt.Errorf("%q is not an RFC 3339 time", s)
		}
		return t, nil
	case "unix_s":
		return unix(1)
	case "unix_ms":
		return unix(1e3)
	case "unix_us":
		return unix(1e6)
	case "unix_ns":
		return unix(1e9)
	case "unix":
		// Seconds, ms, µs or ns, told by magnitude (Logpush writes unix
		// or unixnano, as the job says): a time after 1973 in seconds is
		// above 1e8, and no unit's value reaches the next's range before
		// the year 5138.
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is not a number", s)
		}
		for _, div := range []float64{1, 1e3, 1e6, 1e9} {
			if x/div < 1e11 {
				return unix(div)
			}
		}
		return unix(1e9)
	}
	t, err := time.Parse(layout, s)
	if err != nil {
		return t, fmt.Errorf("%q does not fit the layout %q", s, layout)
	}
	return t, nil
}

func (f Field) ms(doc any) (float64, bool) {
	s := f.value(doc)
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// A value that names its unit says it ("123ms": Traefik's text).
		d, derr := time.ParseDuration(s)
		if derr != nil {
			return 0, false
		}
		return float64(d) / float64(time.Millisecond), true
	}
	switch f.Unit {
	case "ns":
		x /= 1e6
	case "us":
		x /= 1e3
	case "s":
		x *= 1e3
	}
	return x, true
}

// flagged reports whether one of the condition's flags is among flags.
func (c Cond) flagged(flags []string) bool {
	for _, f := range c.Flags {
		if slices.Contains(flags, f) {
			return true
		}
	}
	return false
}

// contradicted reports whether doc holds a value one of the not_like
// expressions matches: the line shows what the condition rules out.
func (c Cond) contradicted(doc any) bool {
	for p, re := range c.notLike {
		if v, ok := pointer(doc, p); ok && v != nil && re.MatchString(scalar(v)) {
			return true
		}
	}
	return false
}

func (c Cond) holds(doc any, flags []string, status int) bool {
	for p, want := range c.Where {
		v, ok := pointer(doc, p)
		if got := ""; ok && v != nil {
			got = scalar(v)
			if got != want {
				return false
			}
		} else if want != "" { // "" matches a pointer with no value, or none
			return false
		}
	}
	for _, p := range c.Set {
		if v, ok := pointer(doc, p); !ok || v == nil || scalar(v) == "" {
			return false
		}
	}
	for p, re := range c.like {
		if v, ok := pointer(doc, p); !ok || v == nil || !re.MatchString(scalar(v)) {
			return false
		}
	}
	if c.contradicted(doc) {
		return false
	}
	if len(c.Where)+len(c.Set)+len(c.Like)+len(c.NotLike) > 0 && len(c.Flags) == 0 && len(c.Status) == 0 {
		return true
	}
	for _, f := range c.Flags {
		for _, g := range flags {
			if f == g {
				return true
			}
		}
	}
	for _, s := range c.Status {
		if s == status && status != 0 {
			return true
		}
	}
	return false
}

// mapped imports JSON Lines through a mapping: each record is a request
// through a proxy or gateway.
type mapped struct {
	m        *Mapping
	records  int64
	ignored  int64
	attempts int64
	mcpOther int64 // MCP messages through the proxy that are not tool calls
	// MCP messages whose JSON-RPC method the log does not show, and how
	// many of them got no answer: any may have been a tool call.
	mcpUnknown, mcpUnknownNoAnswer int64
	hops                           hopIndex
	hopLines                       int64 // a request seen again by another proxy it crossed
	againLines                     int64 // lines an earlier import holds already (overlapping exports of one log)
	repeatLines                    int64 // lines this file holds twice (a shipper's second delivery)
	mcpCalls                       int64 // MCP tool calls through the proxy
	noise, firstNoise              int64 // text lines no line format reads, and the first's number
	withArgs                       int64 // records whose arguments the log holds
	xEscaped                       int64 // JSON lines read with nginx's \xHH escapes undone
	runs                           map[string]activity.RunID
}

// jsonLine decodes a JSON line, numbers kept as written; one in \xHH
// escaping with them undone, if the mapping says its producer writes them.
func (d *mapped) jsonLine(line []byte) (any, error) {
	var doc any
	err := decodeNumbers(line, &doc)
	if err != nil && d.m.JSONEscapes == "x" {
		if fixed, ok := xEscapedJSON(line); ok && decodeNumbers(fixed, &doc) == nil {
			d.xEscaped++
			return doc, nil
		}
	}
	if err != nil {
		if _, ok := xEscapedJSON(line); ok {
			return nil, fmt.Errorf("not a JSON object: its strings hold \\xHH escapes (nginx's default escaping: the log_format lacks escape=json), which the %s mapping does not read (json_escapes = \"x\" does)", d.m.Name)
		}
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	return doc, nil
}

func decodeNumbers(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	return dec.Decode(v)
}

func (d *mapped) note() string {
	n := fmt.Sprintf("%s access log through its mapping: %d requests, %d lines not matched, %d sends counted by the proxy", d.m.Name, d.records, d.ignored, d.attempts)
	if d.mcpOther > 0 {
		n += fmt.Sprintf(", %d MCP messages that are not tool calls", d.mcpOther)
	}
	if d.hopLines > 0 {
		n += fmt.Sprintf(", %d lines of a request already read (here or in a file imported before), logged again by another proxy it crossed (the same request id, within the first line's time): one send", d.hopLines)
	}
	if d.xEscaped > 0 {
		n += fmt.Sprintf(", %d JSON lines with nginx's \\xHH escapes (its default escaping: the log_format lacks escape=json), read with them undone", d.xEscaped)
	}
	if d.noise > 0 {
		n += fmt.Sprintf(", %d lines none of its line formats reads (passed over as no request; the first is line %d)", d.noise, d.firstNoise)
	}
	if d.againLines > 0 {
		n += fmt.Sprintf(", %d lines a file imported before holds already (the same request id, target and times), not imported again", d.againLines)
	}
	if d.repeatLines > 0 {
		n += fmt.Sprintf(", %d lines repeat an earlier line of this file byte for byte under its request id (a log shipper's second delivery), not imported again", d.repeatLines)
	}
	if d.mcpUnknown > 0 {
		n += fmt.Sprintf(", %d MCP messages whose method the log does not show (not imported: a tool call cannot be told from initialize or tools/list; log the Mcp-Method header or the request body to see them", d.mcpUnknown)
		if d.mcpUnknownNoAnswer > 0 {
			n += fmt.Sprintf("; %d of them got no answer from the MCP server, and any of those that was a tool call may have acted", d.mcpUnknownNoAnswer)
		}
		n += ")"
	}
	n += ". Not recorded: authorization unless the proxy denied the request, which process sent it (only its address), what happened at the target beyond the status"
	if d.withArgs == 0 {
		n += ", request arguments (requests to one method, host and path are taken for one effect)"
	}
	if d.mcpCalls > 0 {
		n += fmt.Sprintf("; for the %d MCP tool calls,", d.mcpCalls) + " the tool's result (the proxy's status opens or ends the stream) and what the MCP server dispatched"
	}
	return n + "."
}

func (d *mapped) decode(ctx context.Context, in *lines, k *sink) error {
	d.runs = map[string]activity.RunID{}
	wrapper := unwrapper{bare: d.m.reads}
	err := eachLine(ctx, in, k, func(n int64, line []byte) error {
		line, whole, err := wrapper.line(line)
		if err != nil {
			return k.bad(n, "", err)
		}
		if !whole || n <= k.held { // held: an earlier import read the line, joined, whole
			return nil
		}
		var doc any
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '{' && len(d.m.Text) > 0 {
			text, ok := d.m.textRecord(l)
			if !ok {
				if d.noise++; d.firstNoise == 0 {
					d.firstNoise = n
				}
				k.noise(n)
				return nil
			}
			doc = text
		} else if notJSON(line) {
			k.noise(n)
			return nil
		} else {
			var err error
			if doc, err = d.jsonLine(line); err != nil {
				return k.bad(n, "", err)
			}
			if _, batch := doc.([]any); batch {
				return k.bad(n, "", errors.New(batchWhy(line)))
			}
		}
		if d.m.Match != "" {
			if v, ok := pointer(doc, d.m.Match); !ok || v == nil || v == "" {
				d.ignored++
				return nil
			}
		}
		if err := d.record(k, n, doc, lineSum(line)); err != nil {
			return err
		}
		k.count()
		return nil
	})
	if err == nil && d.records == 0 && d.mcpOther == 0 && d.mcpUnknown == 0 && d.hopLines == 0 && d.againLines == 0 && d.repeatLines == 0 && k.held == 0 && d.ignored == 0 && k.rep.Skipped == 0 && k.rep.Noise > 0 {
		// Every line passed over: another format, or a log_format of the
		// operator's own, not an empty log.
		read := "JSON with this mapping's keys"
		if len(d.m.Text) > 0 {
			read += " or text in " + d.m.textFormatNames()
		}
		return fmt.Errorf("%s: none of its %d lines is a %s record (%s); give the right --format, or --mapping FILE for a log format of your own", k.file, k.rep.Noise, d.m.Name, read)
	}
	if err == nil && d.records == 0 && d.ignored > 0 && d.mcpOther == 0 && d.mcpUnknown == 0 && d.hopLines == 0 && d.againLines == 0 && d.repeatLines == 0 && k.held == 0 && k.rep.Skipped == 0 {
		// Every record lacks what match names: a pointer mistyped
		// (/rpc/param/name), not a log without a call.
		return fmt.Errorf("%s: none of its %d records has %s, which the mapping's match requires; check the pointer against a line of the file (a log with no such record has nothing to import)", k.file, d.ignored, d.m.Match)
	}
	return err
}

// splitFlags reads Envoy's "UF,URX" as two flags.
func splitFlags(flags []string) []string {
	if len(flags) == 1 && strings.Contains(flags[0], ",") {
		return strings.Split(flags[0], ",")
	}
	return flags
}

// mcpPath reports whether a path is an MCP endpoint.
func mcpPath(p string) bool {
	return p == "/mcp" || strings.HasSuffix(p, "/mcp") || strings.HasSuffix(p, "/mcp/")
}

// request is one record read through the mapping.
type request struct {
	start, end           time.Time
	method, target, tool string
	args                 json.RawMessage
	status               int
	flags                []string
	actor                string
	run                  activity.RunID
	key                  string
	nr                   []activity.Fact
	call                 activity.Call
	mcp                  bool // a tools/call seen by a proxy
	location, replayed   string
	errText              string // the error the line logs (Error)
}

func (d *mapped) record(k *sink, n int64, doc any, line uint64) error {
	m := d.m
	r := request{}
	var err error
	if r.start, err = m.Time.time(doc); err != nil {
		return k.bad(n, "time ("+strings.Join(m.Time.From, ", ")+")", err)
	}
	dur, ok := m.Duration.ms(doc)
	if s := m.Duration.value(doc); !ok && s != "" {
		return k.bad(n, "duration_ms ("+strings.Join(m.Duration.From, ", ")+")", fmt.Errorf("%q is not a duration", s))
	}
	took, logged := time.Duration(dur*float64(time.Millisecond)), r.start
	if r.end = r.start.Add(took); m.TimeAt == "end" {
		r.start, r.end = r.start.Add(-took), r.start
	}
	r.method = strings.ToUpper(m.Method.value(doc))
	host, p := m.Host.value(doc), m.Path.value(doc)
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	r.nr = []activity.Fact{activity.FactFingerprint}
	if host == "" {
		k.notRecorded("host") // e.g. a request authorization refused before routing
	}
	r.target = host + p
	if r.target == "" {
		k.notRecorded("target")
		r.target = "(not recorded)"
		r.nr = append(r.nr, activity.FactArguments)
	}
	if r.status, err = httpStatus(m.Status.value(doc)); err != nil {
		return k.bad(n, "status ("+strings.Join(m.Status.From, ", ")+")", err)
	}
	r.flags = splitFlags(m.Flags.values(doc))
	r.errText = clip([]byte(activity.RedactText(m.Error.value(doc))), 200)
	mcpMethod, mcpName := m.MCPMethod.value(doc), m.MCPName.value(doc)
	r.args = json.RawMessage("{}")
	if body := m.Body.whole(doc); body != "" {
		if req, ok := jsonRPCRequest(body); ok {
			mcpMethod, mcpName = req.Method, firstOf(req.Params.Name, mcpName)
			if r.args, err = canonArgs(req.Params.Arguments); err != nil {
				return k.bad(n, "body", err)
			}
			d.withArgs++
		}
	}
	if m.MCPOnly && mcpMethod == "" && mcpName != "" {
		mcpMethod = "tools/call" // a gateway that logs a tool's name logs it for its calls only
	}
	if mcpMethod != "" || m.MCPOnly || len(m.MCPMethod.From) > 0 && mcpPath(p) {
		if mcpMethod == "" {
			d.mcpUnknown++
			if r.status == 0 || m.NoAnswer.holds(doc, r.flags, r.status) {
				d.mcpUnknownNoAnswer++
			}
			k.notRecorded("mcp method")
			return nil
		}
		if mcpMethod != "tools/call" {
			d.mcpOther++ // initialize, tools/list, notifications
			return nil
		}
		r.mcp, r.tool = true, firstOf(mcpName, "(not recorded)")
		d.mcpCalls++
		r.nr = append(r.nr, activity.FactDispatch, activity.FactOutcome, activity.FactIdempotencyKey)
		if len(m.Body.From) == 0 || m.Body.whole(doc) == "" {
			r.args = json.RawMessage("null")
			r.nr = append(r.nr, activity.FactArguments)
			k.notRecorded("arguments")
		}
	} else {
		r.tool = m.Tool.value(doc)
		if r.tool == "" {
			r.tool = "http " + r.method + " " + strings.TrimPrefix(path.Clean("/"+r.target), "/")
			if host == "" {
				r.tool = "http " + r.method + " " + path.Clean("/"+r.target)
			}
		}
		if len(m.Arguments.From) > 0 {
			if v := m.Arguments.whole(doc); v != "" {
				if r.args, err = bodyArgs(v); err != nil {
					return k.bad(n, "arguments", err)
				}
				d.withArgs++
			}
		}
	}
	rid, h := m.RequestID.value(doc), hop{start: r.start, end: r.end, method: r.method, path: p, status: r.status, line: line}
	if len(rid) >= activity.MinRequestID { // only such ids are matched across hops
		h.via, h.upstream, h.coarse = m.Via.value(doc), strings.Join(m.Upstream.values(doc), ","), coarseTime(m.Time.value(doc), logged)
	}
	seen, repeat := d.hops.seenAt(rid, h)
	again := false
	if repeat {
		d.repeatLines++
		return nil
	}
	if !seen {
		if seen, again, err = k.importedHop(rid, r.target, h); err != nil {
			return err
		}
	}
	switch {
	case again:
		d.againLines++
		return nil
	case seen:
		d.hopLines++
		return nil
	}
	d.records++
	r.actor = firstOf(m.Actor.value(doc), "proxy-client:unknown")
	session := m.Session.value(doc)
	if r.run, err = d.run(k, n, session, r.actor, r.start); err != nil {
		return err
	}
	if r.run == "" {
		r.nr = append(r.nr, activity.FactRunIdentity)
	}
	// A record with the key's field but no value: none was sent.
	if r.key = m.IdempotencyKey.value(doc); !r.mcp && !m.IdempotencyKey.present(doc) {
		r.nr = append(r.nr, activity.FactIdempotencyKey)
	}
	r.location, r.replayed = m.Location.value(doc), m.Replayed.value(doc)
	r.call = activity.Call{RunID: r.run, Actor: r.actor, Method: "http", Tool: r.tool, ReceivedAt: r.start, Arguments: r.args, Source: k.at(n)}
	if r.mcp {
		r.call.Method = "tools/call"
	}
	if session != "" {
		r.call.SessionID = activity.Some(session)
	}
	if rid != "" {
		r.call.JSONRPCID = activity.Some(rid)
	}
	return d.sends(k, n, doc, &r)
}

// sends records a request's sends: refused by the proxy, never sent, or
// one execution per send (the proxy's retries are sends of their own,
// with the same headers, so the same key).
func (d *mapped) sends(k *sink, n int64, doc any, r *request) error {
	m := d.m
	ups, upStatus := m.Upstream.entries(doc, true), m.UpstreamStatus.entries(doc, true)
	sentRecorded := len(m.Upstream.From) == 0 || m.Upstream.present(doc)
	if !sentRecorded {
		r.nr = append(r.nr, activity.FactDispatch)
	}
	attempts := max(len(upStatus), len(ups))
	if attempts > maxSends {
		return k.bad(n, "upstream_status ("+strings.Join(slices.Concat(m.UpstreamStatus.From, m.Upstream.From), ", ")+")",
			fmt.Errorf("a list of %d sends in one line: more than the %d this importer reads", attempts, maxSends))
	}
	if s := m.Attempts.value(doc); s != "" {
		a, err := strconv.Atoi(s)
		switch {
		case err != nil || a < 0:
			return k.bad(n, "attempts ("+strings.Join(m.Attempts.From, ", ")+")", fmt.Errorf("%q is not a count of sends", s))
		case a > maxSends:
			return k.bad(n, "attempts ("+strings.Join(m.Attempts.From, ", ")+")", fmt.Errorf("%d sends in one line: more than the %d this importer reads", a, maxSends))
		}
		attempts = max(attempts, a)
	}
	if attempts == 0 && (len(ups) > 0 || r.status != 0) {
		attempts = 1
	}
	d.attempts += int64(attempts)
	denied := m.Denied.holds(doc, r.flags, r.status)
	// Flags describe the last attempt: one that says it was not sent,
	// beside one that says a send got no answer (Envoy's UC,UO) or that
	// retries ran out (URX), leaves the sends unknown, not unsent.
	// An upstream absent_is_empty says an absent one means nothing was
	// sent, unless the line shows a send otherwise: an upstream's status,
	// or what not_sent's not_like names (the operator dropped the field).
	unrouted := sentRecorded && len(ups) == 0 && len(m.Upstream.From) > 0 && len(upStatus) == 0 && !m.NotSent.contradicted(doc)
	notSent := m.NotSent.holds(doc, r.flags, r.status) && !m.NoAnswer.flagged(r.flags) || unrouted || m.Upstream.onlyGroupNames(ups)
	switch {
	case denied:
		id, err := d.start(k, n, r, r.call)
		if err != nil {
			return err
		}
		return d.step(k, n, id, activity.Transition{To: activity.StateRejected, At: activity.Some(r.end), Reason: "refused by the proxy (" + r.cond() + ")"})
	case notSent:
		// The attempts before a last one that was not sent were, and
		// their answers are not in the line.
		for i := 0; i < attempts-1; i++ {
			if err := d.unansweredAttempt(k, n, r, i, attempts); err != nil {
				return err
			}
		}
		id, err := d.startAttempt(k, n, r, max(attempts-1, 0), attempts)
		if err != nil {
			return err
		}
		return d.step(k, n, id, activity.Transition{To: activity.StateFailedBefore, At: activity.Some(r.end), Reason: "not sent to the target (" + r.cond() + ")"})
	}
	// A log that names one upstream status for several sends gives the
	// last one's: the earlier sends' answers are not in it.
	offset := attempts - len(upStatus)
	for i := 0; i < attempts; i++ {
		last := i == attempts-1
		id, err := d.startAttempt(k, n, r, i, attempts)
		if err != nil {
			return err
		}
		if len(ups) == attempts && m.Upstream.onlyGroupNames(ups[i:i+1]) {
			// This try found no server in the group (nginx wrote the
			// group's name): nothing was sent on it.
			if err := d.step(k, n, id, activity.Transition{To: activity.StateFailedBefore, At: activity.Some(r.end),
				Reason: "no server of " + ups[i] + " could be picked: not sent"}); err != nil {
				return err
			}
			continue
		}
		if !last && slices.ContainsFunc(m.UnsentRetryMethods, func(v string) bool { return v == "*" || strings.EqualFold(v, r.method) }) {
			// The proxy tried again: for this method it does so only when
			// the try never reached the upstream.
			if err := d.step(k, n, id, activity.Transition{To: activity.StateFailedBefore, At: activity.Some(r.end),
				Reason: fmt.Sprintf("%s retries a %s only when the try never reached the upstream: not sent", m.Name, r.method)}); err != nil {
				return err
			}
			continue
		}
		if err := d.step(k, n, id, activity.Transition{To: activity.StateDispatched, At: activity.Some(r.start), Implied: r.mcp || !sentRecorded}); err != nil {
			return err
		}
		if r.mcp {
			// The proxy forwarded the tool call; the MCP server's answer
			// travels in the stream the proxy's status only opened.
			if m.NoAnswer.holds(doc, r.flags, r.status) {
				if err := d.step(k, n, id, activity.Transition{To: activity.StateUnknown, At: activity.Some(r.end),
					Reason: "the stream to the MCP server failed (" + r.cond() + "): it may have acted"}); err != nil {
					return err
				}
			}
			continue
		}
		t := activity.Transition{To: activity.StateUnknown, At: activity.Some(r.end), Implied: true, Reason: "the proxy sent it again: this attempt's answer is not in the log"}
		if i >= offset && len(upStatus) > 0 && upStatus[i-offset] == "-" {
			t.Reason = "this send got no status in the log (-): it may have acted"
		} else if i >= offset && len(upStatus) > 0 {
			code, err := httpStatus(upStatus[i-offset])
			if err != nil {
				return k.bad(n, "upstream_status ("+strings.Join(m.UpstreamStatus.From, ", ")+")", err)
			}
			t = outcomeOf(doc, code, r.flags, m, last, r.end)
			if slices.Contains(m.ClientGone.Status, code) {
				// A proxy's own status taken down as the upstream's
				// (Traefik's OriginStatus 499): the client left, not
				// the target's answer.
				t = activity.Transition{To: activity.StateUnknown, At: activity.Some(r.end),
					Reason: "the client went away (" + condText(code, r.flags) + ") before the target's answer: it may have acted"}
			}
		} else if last && slices.Contains(m.ClientGone.Status, r.status) {
			// The proxy's own status (nginx's 499): the client left first,
			// the proxy gave up on the target, and the target's answer,
			// if any, is not in the log.
			t = activity.Transition{To: activity.StateUnknown, At: activity.Some(r.end),
				Reason: "the client went away (" + r.cond() + ") before the target's answer: it may have acted"}
		} else if last {
			t = outcomeOf(doc, r.status, r.flags, m, true, r.end)
		}
		if last && t.To == activity.StateSucceeded {
			t.Created = activity.CreatedInHTTP(t.TargetStatus.V, r.location, "")
			if strings.EqualFold(r.replayed, "true") {
				t.Replayed = "Idempotent-Replayed: true"
			}
		}
		if err := d.step(k, n, id, t); err != nil {
			return err
		}
		if last && (t.To == activity.StateSucceeded || t.To == activity.StateFailed) {
			next := activity.Transition{To: activity.StateDelivered, At: activity.Some(r.end), Reason: "the proxy sent the answer to the client"}
			if m.ClientGone.holds(doc, r.flags, r.status) {
				next.To, next.Reason = activity.StateDeliveryFailed, "the client went away ("+r.cond()+")"
			}
			if err := d.step(k, n, id, next); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxSends bounds the sends one line may count: a line is one request,
// which no proxy sends a hundred times; "attempts":"2000000000" wrote
// executions until the disk filled.
const maxSends = 100

// startAttempt records the ith send (0-based) of attempts as a call and
// an execution of its own, authorized as far as the proxy shows.
func (d *mapped) startAttempt(k *sink, n int64, r *request, i, attempts int) (activity.ExecutionID, error) {
	c := r.call
	if i > 0 {
		c.Reason = fmt.Sprintf("sent again by the proxy (attempt %d of %d)", i+1, attempts)
	}
	id, err := d.start(k, n, r, c)
	if err != nil {
		return "", err
	}
	return id, d.step(k, n, id, activity.Transition{To: activity.StateAuthorized, Implied: true})
}

// unansweredAttempt records the ith send (0-based) of attempts, sent and
// not answered in the line: the proxy logs the last attempt's answer.
func (d *mapped) unansweredAttempt(k *sink, n int64, r *request, i, attempts int) error {
	id, err := d.startAttempt(k, n, r, i, attempts)
	if err != nil {
		return err
	}
	for _, t := range []activity.Transition{{To: activity.StateDispatched, At: activity.Some(r.start), Implied: true},
		{To: activity.StateUnknown, At: activity.Some(r.end), Implied: true,
			Reason: "an earlier attempt: the log shows the last one's end, not this one's answer"}} {
		if err := d.step(k, n, id, t); err != nil {
			return err
		}
	}
	return nil
}

func outcomeOf(doc any, code int, flags []string, m *Mapping, last bool, end time.Time) activity.Transition {
	t := activity.Transition{At: activity.Some(end)}
	if code == 0 || (last && m.NoAnswer.holds(doc, flags, code)) {
		t.To, t.Reason = activity.StateUnknown, "no answer from the target: it may have acted"
		if len(flags) > 0 {
			t.Reason = "no answer from the target (" + strings.Join(flags, ",") + "): it may have acted"
		}
		if code != 0 {
			t.TargetStatus = activity.Some(code)
		}
		return t
	}
	t.TargetStatus = activity.Some(code)
	t.To, t.Reason = activity.StateForHTTPStatus(code)
	return t
}

// condText says what a record shows: the status sent to the client and
// the proxy's flags.
// cond is what the line says of the request's end, for a transition's
// reason: its status and flags, and the error it logs.
func (r *request) cond() string {
	if r.status == 0 && len(r.flags) == 0 {
		return firstOf(r.errText, "as its log records it")
	}
	if s := condText(r.status, r.flags); r.errText != "" {
		return s + ": " + r.errText
	} else {
		return s
	}
}

func condText(status int, flags []string) string {
	s := "status " + strconv.Itoa(status)
	if len(flags) > 0 {
		s += " " + strings.Join(flags, ",")
	}
	return s
}

func (d *mapped) start(k *sink, n int64, r *request, c activity.Call) (activity.ExecutionID, error) {
	id := activity.NewExecutionID(r.start)
	c.ID, c.Disposition, c.ExecutionID = "", activity.DispositionNewExecution, id
	c, err := k.call(c)
	if err != nil {
		return "", k.fail(n, err)
	}
	ch, contract := activity.ChannelHTTP, httpContract(r.method, r.key)
	if r.mcp {
		ch, contract = activity.ChannelMCP, activity.ContractBlockedAfterUnknown
	}
	e := activity.Execution{ID: id, Action: activity.Action{Actor: r.actor, Tool: r.tool, Channel: ch, Target: r.target, Method: r.method, Arguments: r.args},
		RunID: c.RunID, Contract: contract, CreatedByCall: c.ID, NotRecorded: r.nr, Times: activity.Times{Accepted: activity.Some(r.start)}, Source: k.at(n)}
	if !slices.Contains(r.nr, activity.FactIdempotencyKey) {
		e.IdempotencyKey = activity.Some(r.key)
	}
	if _, err := k.accept(e); err != nil {
		return "", k.fail(n, err)
	}
	return id, nil
}

func (d *mapped) step(k *sink, n int64, id activity.ExecutionID, t activity.Transition) error {
	t.ExecutionID = id
	if _, err := k.w.Transition(t); err != nil {
		return k.fail(n, err)
	}
	return nil
}

// run is the MCP session's run, when the log has a session column.
func (d *mapped) run(k *sink, n int64, session, actor string, at time.Time) (activity.RunID, error) {
	if session == "" {
		return "", nil
	}
	if id, ok := d.runs[session]; ok {
		return id, nil
	}
	r, err := k.run(activity.Run{Actor: actor, IdentifiedBy: activity.RunBySession, Evidence: "mcp session " + session, StartedAt: at, Source: k.at(n)})
	if err != nil {
		return "", k.fail(n, err)
	}
	d.runs[session] = r.ID
	return r.ID, nil
}
