package importers

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
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
	// Detect lists keys a first line must all have for detection to pick
	// this mapping (presets only; operator-defined key names cannot be
	// recognised).
	Detect []string `toml:"detect"`
	// Match, if set, is a pointer that must be present and not empty for
	// a line to be a record; other lines are counted and skipped.
	Match string `toml:"match"`

	Time           Field `toml:"time"`        // when the request arrived (required)
	Duration       Field `toml:"duration_ms"` // how long it took
	Actor          Field `toml:"actor"`       // the client (address, consumer)
	Session        Field `toml:"session"`     // an MCP session id: a run
	RequestID      Field `toml:"request_id"`  // a JSON-RPC or proxy request id
	Tool           Field `toml:"tool"`        // the MCP tool, for MCP-aware gateways
	Method         Field `toml:"method"`      // HTTP method
	Host           Field `toml:"host"`        // the target's host
	Path           Field `toml:"path"`        // the target's path (query dropped)
	Arguments      Field `toml:"arguments"`   // the request's arguments, when logged
	Status         Field `toml:"status"`      // the status sent to the client
	Upstream       Field `toml:"upstream"`    // where the proxy sent it; empty: not sent
	UpstreamStatus Field `toml:"upstream_status"`
	Attempts       Field `toml:"attempts"` // how many times the proxy sent it
	IdempotencyKey Field `toml:"idempotency_key"`
	Flags          Field `toml:"flags"` // proxy condition codes (Envoy's response_flags)

	// Conditions, by flag or by status sent to the client.
	NotSent    Cond `toml:"not_sent"`    // the request never reached the target
	NoAnswer   Cond `toml:"no_answer"`   // sent, and no answer came back
	ClientGone Cond `toml:"client_gone"` // the client left before the answer
	Denied     Cond `toml:"denied"`      // refused by the proxy's authorization
}

// Cond matches a record by its flags or by the status sent to the client.
type Cond struct {
	Flags  []string `toml:"flags"`
	Status []int    `toml:"status"`
}

// Field is how one value is read.
type Field struct {
	From     []string          `toml:"from"`      // JSON Pointers, first present wins
	Const    string            `toml:"const"`     // a fixed value when From finds nothing
	Time     string            `toml:"time"`      // rfc3339, unix_s, unix_ms, unix_us, unix_ns, or a Go layout
	Unit     string            `toml:"unit"`      // for durations: ns, us, ms (default) or s
	Add      int               `toml:"add"`       // added to a number (RetryAttempts + 1 = attempts)
	Count    bool              `toml:"count"`     // the length of the array at the pointer
	DropPort bool              `toml:"drop_port"` // "10.0.4.12:52492" → "10.0.4.12"
	Unquote  bool              `toml:"unquote"`   // strip quotes (structured-field strings)
	Split    string            `toml:"split"`     // a list in one value ("a, b" for retries)
	Header   string            `toml:"header"`    // the pointer holds headers: pick this one (any case)
	Map      map[string]string `toml:"map"`       // replace values
	Prefix   string            `toml:"prefix"`
}

//go:embed presets/*.toml
var presetFS embed.FS

// presets are the shipped mappings by name.
var presets = map[string]*Mapping{}

func init() {
	entries, _ := presetFS.ReadDir("presets")
	for _, e := range entries {
		b, _ := presetFS.ReadFile("presets/" + e.Name())
		m, err := ParseMapping(b)
		if err != nil {
			panic(fmt.Sprintf("preset %s: %v", e.Name(), err))
		}
		presets[m.Name] = m
		formats[m.Name] = func(string) decoder { return &mapped{m: m} }
	}
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
	if len(m.Time.From) == 0 {
		return nil, errors.New("time.from is required: a record without a time cannot be placed")
	}
	if len(m.Method.From) == 0 && m.Method.Const == "" && len(m.Tool.From) == 0 {
		return nil, errors.New("method or tool is required")
	}
	return &m, nil
}

// LoadMapping reads a mapping file for --mapping.
func LoadMapping(file string) (*Mapping, error) {
	b, err := os.ReadFile(file)
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
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := presets[n]
		if len(m.Detect) == 0 {
			continue
		}
		all := true
		for _, k := range m.Detect {
			if _, ok := obj[k]; !ok {
				all = false
			}
		}
		if all {
			return n
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
func (f Field) values(doc any) []string {
	var raw any
	found := false
	for _, p := range f.From {
		v, ok := pointer(doc, p)
		if ok && v != nil && v != "" && v != "-" {
			raw, found = v, true
			break
		}
	}
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
	if f.Add != 0 {
		if x, err := strconv.Atoi(s); err == nil {
			s = strconv.Itoa(x + f.Add)
		}
	}
	if s == "" || s == "-" {
		return nil
	}
	parts := []string{s}
	if f.Split != "" {
		parts = strings.Split(s, f.Split)
	}
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
			if i := strings.LastIndexByte(p, ':'); i > 0 && !strings.Contains(p[i:], "]") {
				p = p[:i]
			}
		}
		if p != "" && p != "-" {
			out = append(out, f.Prefix+p)
		}
	}
	return out
}

func (f Field) value(doc any) string {
	vs := f.values(doc)
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
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
	unix := func(div float64) (time.Time, error) {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is not a number", s)
		}
		sec := x / div
		return time.Unix(0, int64(sec*1e9)).UTC(), nil
	}
	switch f.Time {
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
	}
	t, err := time.Parse(f.Time, s)
	if err != nil {
		return t, fmt.Errorf("%q does not fit the layout %q", s, f.Time)
	}
	return t, nil
}

func (f Field) ms(doc any) (float64, bool) {
	s := f.value(doc)
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
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

func (c Cond) holds(flags []string, status int) bool {
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
	runs     map[string]activity.RunID
	keys     map[string]activity.ExecutionID
}

func (d *mapped) note() string {
	n := fmt.Sprintf("%s access log through its mapping: %d requests, %d lines not matched, %d sends counted by the proxy. ", d.m.Name, d.records, d.ignored, d.attempts)
	n += "Not recorded: authorization unless the proxy denied the request, which process sent it (only its address), what happened at the target beyond the status"
	if len(d.m.Arguments.From) == 0 {
		n += ", request arguments (requests to one method, host and path are taken for one effect)"
	}
	return n + "."
}

func (d *mapped) decode(ctx context.Context, in *lines, k *sink) error {
	d.runs, d.keys = map[string]activity.RunID{}, map[string]activity.ExecutionID{}
	return eachLine(ctx, in, k, func(n int64, line []byte) error {
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var doc any
		if err := dec.Decode(&doc); err != nil {
			return k.bad(n, "", fmt.Errorf("not a JSON object: %w", err))
		}
		if d.m.Match != "" {
			if v, ok := pointer(doc, d.m.Match); !ok || v == nil || v == "" {
				d.ignored++
				return nil
			}
		}
		if err := d.record(k, n, doc); err != nil {
			return err
		}
		k.count()
		return nil
	})
}

func (d *mapped) record(k *sink, n int64, doc any) error {
	m := d.m
	start, err := m.Time.time(doc)
	if err != nil {
		return k.bad(n, "time ("+strings.Join(m.Time.From, ", ")+")", err)
	}
	dur, _ := m.Duration.ms(doc)
	end := start.Add(time.Duration(dur * float64(time.Millisecond)))
	method := strings.ToUpper(m.Method.value(doc))
	host, p := m.Host.value(doc), m.Path.value(doc)
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	target := host + p
	if target == "" {
		return k.bad(n, "host/path", errors.New("no target: neither host nor path is present"))
	}
	tool := m.Tool.value(doc)
	if tool == "" {
		tool = "http " + method + " " + path.Clean("/" + target)[1:]
	}
	args := json.RawMessage("{}")
	if len(m.Arguments.From) > 0 {
		if v := m.Arguments.value(doc); v != "" {
			if args, err = bodyArgs(v); err != nil {
				return k.bad(n, "arguments", err)
			}
		}
	}
	status, _ := strconv.Atoi(m.Status.value(doc))
	flags := m.Flags.values(doc)
	if len(flags) == 1 && strings.Contains(flags[0], ",") {
		flags = strings.Split(flags[0], ",")
	}
	d.records++
	actor := firstOf(m.Actor.value(doc), "proxy-client:unknown")
	run, err := d.run(k, n, m.Session.value(doc), actor, start)
	if err != nil {
		return err
	}
	key := m.IdempotencyKey.value(doc)
	call := activity.Call{RunID: run, Actor: actor, Method: "http", Tool: tool, ReceivedAt: start, Arguments: args, Source: k.at(n)}
	if sid := m.Session.value(doc); sid != "" {
		call.SessionID = activity.Some(sid)
	}
	if rid := m.RequestID.value(doc); rid != "" {
		call.JSONRPCID = activity.Some(rid)
	}
	nr := []activity.Fact{activity.FactFingerprint}
	if run == "" {
		nr = append(nr, activity.FactRunIdentity)
	}
	if len(m.IdempotencyKey.From) == 0 {
		nr = append(nr, activity.FactIdempotencyKey)
	}
	contract := httpContract(method, key)
	if prior, ok := d.keys[key]; key != "" && ok {
		call.Disposition, call.ExecutionID, call.Reason = activity.DispositionAttached, prior, "the same Idempotency-Key as an earlier request"
		if _, err := k.call(call); err != nil {
			return k.fail(n, err)
		}
		return nil
	}
	ups, upStatus := m.Upstream.values(doc), m.UpstreamStatus.values(doc)
	attempts := len(upStatus)
	if a, _ := strconv.Atoi(m.Attempts.value(doc)); a > attempts {
		attempts = a
	}
	if attempts == 0 && (len(ups) > 0 || status != 0) {
		attempts = 1
	}
	d.attempts += int64(attempts)
	// Refused by the proxy, or never sent: one execution, no dispatch.
	if m.Denied.holds(flags, status) || m.NotSent.holds(flags, status) || len(ups) == 0 && len(m.Upstream.From) > 0 {
		id, err := d.start(k, n, call, actor, tool, target, method, args, contract, key, nr, start)
		if err != nil {
			return err
		}
		t := activity.Transition{To: activity.StateRejected, At: activity.Some(end), Reason: "refused by the proxy (" + condText(status, flags) + ")"}
		if !m.Denied.holds(flags, status) {
			if err := d.step(k, n, id, activity.Transition{To: activity.StateAuthorized}); err != nil {
				return err
			}
			t = activity.Transition{To: activity.StateFailedBefore, At: activity.Some(end), Reason: "not sent to the target (" + condText(status, flags) + ")"}
		}
		return d.step(k, n, id, t)
	}
	var id activity.ExecutionID
	// A log that names one upstream status for several sends gives the
	// last one's: the earlier sends' answers are not in it.
	offset := attempts - len(upStatus)
	for i := 0; i < attempts; i++ {
		last := i == attempts-1
		if i == 0 || key == "" {
			c := call
			if i > 0 {
				c.Reason = fmt.Sprintf("sent again by the proxy (attempt %d of %d)", i+1, attempts)
			}
			if id, err = d.start(k, n, c, actor, tool, target, method, args, contract, key, nr, start); err != nil {
				return err
			}
			if err := d.step(k, n, id, activity.Transition{To: activity.StateAuthorized}); err != nil {
				return err
			}
		}
		if err := d.step(k, n, id, activity.Transition{To: activity.StateDispatched, At: activity.Some(start)}); err != nil {
			return err
		}
		t := activity.Transition{To: activity.StateUnknown, At: activity.Some(end), Reason: "the proxy sent it again: this attempt's answer is not in the log"}
		if i >= offset && len(upStatus) > 0 {
			code, _ := strconv.Atoi(upStatus[i-offset])
			t = outcomeOf(code, flags, m, last, end)
		} else if last {
			t = outcomeOf(status, flags, m, true, end)
		}
		if err := d.step(k, n, id, t); err != nil {
			return err
		}
		if last && (t.To == activity.StateSucceeded || t.To == activity.StateFailed) {
			next := activity.Transition{To: activity.StateDelivered, At: activity.Some(end)}
			if m.ClientGone.holds(flags, status) {
				next.To, next.Reason = activity.StateDeliveryFailed, "the client went away ("+condText(status, flags)+")"
			}
			if err := d.step(k, n, id, next); err != nil {
				return err
			}
		}
	}
	if key != "" {
		d.keys[key] = id
	}
	return nil
}

func outcomeOf(code int, flags []string, m *Mapping, last bool, end time.Time) activity.Transition {
	t := activity.Transition{At: activity.Some(end)}
	if code == 0 || (last && m.NoAnswer.holds(flags, code)) {
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
func condText(status int, flags []string) string {
	s := "status " + strconv.Itoa(status)
	if len(flags) > 0 {
		s += " " + strings.Join(flags, ",")
	}
	return s
}

func (d *mapped) start(k *sink, n int64, c activity.Call, actor, tool, target, method string, args json.RawMessage,
	contract activity.Contract, key string, nr []activity.Fact, at time.Time) (activity.ExecutionID, error) {
	id := activity.NewExecutionID(at)
	c.ID, c.Disposition, c.ExecutionID = "", activity.DispositionNewExecution, id
	c, err := k.call(c)
	if err != nil {
		return "", k.fail(n, err)
	}
	e := activity.Execution{ID: id, Action: activity.Action{Actor: actor, Tool: tool, Channel: activity.ChannelHTTP, Target: target, Method: method, Arguments: args},
		RunID: c.RunID, Contract: contract, CreatedByCall: c.ID, NotRecorded: nr, Times: activity.Times{Accepted: activity.Some(at)}, Source: k.at(n)}
	if key != "" {
		e.IdempotencyKey = activity.Some(key)
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
