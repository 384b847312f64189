package importers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/internal/jsondepth"
)

func init() {
	formats["otlp"] = func(string) decoder { return &otlp{} }
}

// OTLP/JSON (the OTLP spec's JSON encoding; the collector's file exporter
// writes one TracesData per line). Ids are hex (base64 tolerated), enums
// are integers (their names tolerated), 64-bit integers are strings
// (numbers tolerated), unknown fields are ignored.
type otlpDoc struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []otlpKV `json:"attributes"`
		} `json:"resource"`
		ScopeSpans                  []otlpScope `json:"scopeSpans"`
		InstrumentationLibrarySpans []otlpScope `json:"instrumentationLibrarySpans"` // before OTLP 0.15
	} `json:"resourceSpans"`
}

type otlpScope struct {
	Spans []otlpSpan `json:"spans"`
}

type otlpSpan struct {
	TraceID      string          `json:"traceId"`
	SpanID       string          `json:"spanId"`
	ParentSpanID string          `json:"parentSpanId"`
	Name         string          `json:"name"`
	Kind         json.RawMessage `json:"kind"`
	Start        json.RawMessage `json:"startTimeUnixNano"`
	End          json.RawMessage `json:"endTimeUnixNano"`
	Attributes   []otlpKV        `json:"attributes"`
	Events       []struct {
		Name       string   `json:"name"`
		Attributes []otlpKV `json:"attributes"`
	} `json:"events"`
	Status struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	} `json:"status"`
}

type otlpKV struct {
	Key   string    `json:"key"`
	Value otlpValue `json:"value"`
}

type otlpValue struct {
	StringValue *string         `json:"stringValue"`
	BoolValue   *bool           `json:"boolValue"`
	IntValue    json.RawMessage `json:"intValue"`
	DoubleValue *float64        `json:"doubleValue"`
	BytesValue  *string         `json:"bytesValue"`
	ArrayValue  *struct {
		Values []otlpValue `json:"values"`
	} `json:"arrayValue"`
	KvlistValue *struct {
		Values []otlpKV `json:"values"`
	} `json:"kvlistValue"`
}

// text renders a value as a string: strings as is, arrays by their first
// element (HTTP header attributes are string arrays).
func (v otlpValue) text() string {
	switch {
	case v.StringValue != nil:
		return *v.StringValue
	case v.BoolValue != nil:
		return strconv.FormatBool(*v.BoolValue)
	case len(v.IntValue) > 0:
		return strings.Trim(string(v.IntValue), `"`)
	case v.DoubleValue != nil:
		return strconv.FormatFloat(*v.DoubleValue, 'g', -1, 64)
	case v.ArrayValue != nil && len(v.ArrayValue.Values) > 0:
		return v.ArrayValue.Values[0].text()
	case v.KvlistValue != nil:
		return string(v.json())
	}
	return ""
}

// json renders a value as JSON (for arguments recorded as a kvlist).
func (v otlpValue) json() []byte {
	var conv func(otlpValue) any
	conv = func(v otlpValue) any {
		switch {
		case v.KvlistValue != nil:
			m := map[string]any{}
			for _, kv := range v.KvlistValue.Values {
				m[kv.Key] = conv(kv.Value)
			}
			return m
		case v.ArrayValue != nil:
			a := []any{}
			for _, x := range v.ArrayValue.Values {
				a = append(a, conv(x))
			}
			return a
		case v.BoolValue != nil:
			return *v.BoolValue
		case len(v.IntValue) > 0:
			return json.Number(strings.Trim(string(v.IntValue), `"`))
		case v.DoubleValue != nil:
			return *v.DoubleValue
		case v.StringValue != nil:
			return *v.StringValue
		}
		return nil
	}
	b, _ := json.Marshal(conv(v))
	return b
}

// span is an OTLP span reduced to what the model needs.
type span struct {
	trace, id, parent string
	name              string
	kind              int // 1 internal, 2 server, 3 client
	start, end        time.Time
	attrs             map[string]otlpValue
	res               map[string]string // resource attributes
	statusErr         bool
	statusMsg         string
	exception         string // the exception event's type and message, if it has one
	line              int64
	// k is the sink of the file the span was read from: a trace that
	// continues across files imported together (ImportSet) is written
	// with each span's own provenance.
	k *sink
}

func (s *span) attr(keys ...string) string {
	for _, k := range keys {
		if v, ok := s.attrs[k]; ok {
			if t := v.text(); t != "" {
				return t
			}
		}
	}
	return ""
}

const (
	kindInternal = 1
	kindServer   = 2
	kindClient   = 3
)

// otlp imports OTLP/JSON traces of MCP tool calls: an MCP server span
// (mcp.method.name tools/call; aliases mcp.tool.call, execute_tool) is a
// call and its execution; the HTTP client spans under it are the
// dispatches, with their status codes, errors, resend counts and
// Idempotency-Key headers; process spans give exit codes; an MCP client
// span above it shows whether the agent got the result. Spans are grouped
// by trace; a trace is complete once no span of it has appeared for
// otlpLookback lines, or at the end of the file.
type otlp struct {
	traces  map[string]*otlpTrace
	runs    map[string]activity.RunID
	held    int64   // spans in open traces
	touched []touch // in line order: the open traces, with stale entries
	// per counts, for each file's note, what came from it: a trace
	// completed in a later file of a set counts with the file of its span.
	per   map[*sink]*otlpCounts
	attrs OTLPAttributes // a vendor's execution identity attributes (a mapping's)
	// execs maps a vendor's execution id to the execution it became.
	execs map[string]activity.ExecutionID
	// dispatched remembers, per agent run or actor, tool and arguments,
	// the latest execution that was dispatched: a later server span for
	// the same call with no dispatch under it attaches to it.
	dispatched map[string]activity.ExecutionID
	// seen holds a hash of every span read (its ids and content):
	// an exporter that retries a batch writes its spans again, and they
	// are the same records, not a second call.
	seen     map[uint64]struct{}
	seenSeed maphash.Seed
	// A set of files read as one stream (ImportSet): base is the lines of
	// the files before this one, so that traces are ordered across them
	// (touch.line and otlpTrace.last count from the first file's first
	// line); hold keeps the traces still open at the end of a file for the
	// next one.
	base int64
	hold bool
	last *sink // the file being read
	// set: reading a set of files (no lookback, a larger bound); shedInSet
	// counts the times that bound made it take traces for complete.
	set       bool
	shedInSet int
}

// otlpCounts are what a file's note counts.
type otlpCounts struct {
	spans, calls, noArgs int64
	noServer             int64 // client spans with no server span: the agent's view only
	agentOnly            int64 // execute_tool spans with no MCP span under them
	other                int64 // spans that are not part of a tool call
	// unserved: an MCP request's POSTs that got no answer and show no
	// server span under them, beside one that does: the server may have
	// got them and left nothing of it in the trace.
	unserved int64
}

// count is the counts of k's file.
func (d *otlp) count(k *sink) *otlpCounts {
	if d.per == nil {
		d.per = map[*sink]*otlpCounts{}
	}
	c := d.per[k]
	if c == nil {
		c = &otlpCounts{}
		d.per[k] = c
	}
	return c
}

type otlpTrace struct {
	id    string
	spans []*span
	last  int64 // the line of its latest span, counted across a set's files
}

// touch is a trace given spans at a line: the queue flush reads in line
// order (a trace touched again has a later entry; its earlier ones are
// stale).
type touch struct {
	t    *otlpTrace
	line int64
}

// otlpLookback is how many lines a trace may stay open after its last
// span: the collector's file exporter writes a batch per line, and each
// process exports on its own timer (the SDKs' batch delay: 5 s), so on a
// busy collector a trace's spans from the agent, the gateway and the MCP
// server land many lines apart. maxHeldSpans bounds what open traces
// hold, whatever the lines: past it the traces seen last longest ago are
// taken as complete.
const otlpLookback = 4096

// maxHeldSpans is a variable so a test can make it small.
var maxHeldSpans int64 = 1 << 13

func (d *otlp) note() string { return d.noteFor(d.last) }

// noteFor is the note of k's file.
func (d *otlp) noteFor(k *sink) string {
	c := d.count(k)
	return fmt.Sprintf("otlp traces: %d spans, %d tool calls (%d seen only from the agent's side), %d spans not part of a tool call. "+
		"Authorization is not in the MCP semantic conventions: not recorded. Delivery is known only where an MCP client span of the same trace shows the agent's side. "+
		"%d calls have no recorded arguments (gen_ai.tool.call.arguments is opt-in): calls of one tool to one target are then taken for one effect.",
		c.spans, c.calls, c.noServer, c.other, c.noArgs) + c.unservedNote()
}

func (d *otlp) decode(ctx context.Context, in *lines, k *sink) error {
	if d.traces == nil { // the first file (of a set: ImportSet)
		d.traces, d.runs, d.dispatched = map[string]*otlpTrace{}, map[string]activity.RunID{}, map[string]activity.ExecutionID{}
		d.execs = map[string]activity.ExecutionID{}
		d.seen, d.seenSeed = map[uint64]struct{}{}, maphash.MakeSeed()
	}
	d.last = k
	spans := d.count(k).spans
	if first, _ := in.Peek(64); bytes.Equal(bytes.TrimSpace(firstLine(first)), []byte("{")) {
		return d.document(in, k)
	}
	// JSON Lines (the collector's file exporter): decoded ahead of the
	// writer on another goroutine, a few lines at a time (a line is a
	// batch of spans).
	err := decodeAhead(ctx, in, k, 2, func(line []byte) (*otlpDoc, error) {
		if notJSON(line) || !bytes.Contains(line, []byte(`esourceSpans"`)) {
			return nil, nil // noise between the exporter's lines, or another log's JSON (given --format otlp)
		}
		doc, err := decodeOTLPLine(line)
		if err != nil {
			return nil, fmt.Errorf("not an OTLP/JSON TracesData object: %w", err)
		}
		return doc, nil
	}, func(n int64, doc *otlpDoc, err error) error {
		if err != nil {
			return k.bad(n, "", err)
		}
		if doc == nil {
			k.noise(n)
			return nil
		}
		if err := d.add(k, n, doc); err != nil {
			return err
		}
		if !d.set {
			// A set's files may run side by side (group_by writes each
			// service's spans to its own file, over the same hours):
			// there a trace stays open until the set ends, within
			// setHeldSpans, whatever the lines between its halves.
			if err := d.flush(d.base + n - otlpLookback); err != nil {
				return err
			}
		}
		return d.shed()
	})
	if err != nil {
		return err
	}
	if d.count(k).spans == spans && k.rep.Noise > 0 && k.rep.Skipped == 0 && k.held == 0 {
		// Every line passed over: not an empty trace file, another
		// format (the file exporter's format: proto, or a log).
		return fmt.Errorf("%s: none of its %d lines is OTLP/JSON (the collector's file exporter writes one TracesData object per line with format: json; format: proto is not read)", k.file, k.rep.Noise)
	}
	// The reader is done with the file only now: a failed decode returns
	// while it may still be reading (and the set is abandoned then).
	d.base += in.Line()
	return d.end()
}

// end writes the traces still open at the end of a file, unless the next
// file of a set may continue them.
func (d *otlp) end() error {
	if d.hold {
		return nil
	}
	return d.flush(1 << 62)
}

// unservedNote counts the unanswered POSTs of MCP requests no server span
// is under, if any.
func (c *otlpCounts) unservedNote() string {
	if c.unserved == 0 {
		return ""
	}
	return fmt.Sprintf(" %d POSTs of an MCP request got no answer and show no server span under them: the server may have got them and acted, leaving nothing in the trace (a crash before it exported).", c.unserved)
}

// document imports one pretty-printed TracesData document.
func (d *otlp) document(in *lines, k *sink) error {
	data, err := in.Rest(maxLine)
	if err != nil {
		return k.fail(1, err)
	}
	var doc otlpDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return k.bad(1, "", fmt.Errorf("not an OTLP/JSON TracesData object: %w", err))
	}
	if err := d.add(k, 1, &doc); err != nil {
		return err
	}
	d.base++
	return d.end()
}

// add reads a line's spans into their traces.
func (d *otlp) add(k *sink, n int64, doc *otlpDoc) error {
	for _, rs := range doc.ResourceSpans {
		res := map[string]string{}
		for _, kv := range rs.Resource.Attributes {
			res[kv.Key] = kv.Value.text()
		}
		for _, sc := range append(rs.ScopeSpans, rs.InstrumentationLibrarySpans...) {
			for i := range sc.Spans {
				sp, field, err := readSpan(&sc.Spans[i], res, n)
				if err != nil {
					if err := k.bad(n, field, err); err != nil {
						return err
					}
					continue
				}
				d.count(k).spans++
				k.count()
				if d.again(sp) {
					k.repeated(1)
					continue
				}
				sp.k = k
				t := d.traces[sp.trace]
				if t == nil {
					t = &otlpTrace{id: sp.trace}
					d.traces[sp.trace] = t
				}
				if at := d.base + n; t.last != at {
					d.touched = append(d.touched, touch{t, at})
					t.last = at
				}
				t.spans = append(t.spans, sp)
				d.held++
			}
		}
	}
	return nil
}

// again reports whether this file already held the span: the same ids and
// the same content (times, kind, parent, status, every attribute). A span
// that reuses ids for other content is another record, and is kept.
func (d *otlp) again(sp *span) bool {
	var h maphash.Hash
	h.SetSeed(d.seenSeed)
	for _, s := range []string{sp.trace, sp.id, sp.parent, sp.name, strconv.FormatInt(sp.start.UnixNano(), 10),
		strconv.FormatInt(sp.end.UnixNano(), 10), strconv.Itoa(sp.kind), strconv.FormatBool(sp.statusErr), sp.statusMsg, sp.exception} {
		h.WriteString(s)
		h.WriteByte(0)
	}
	keys := make([]string, 0, len(sp.attrs))
	for k := range sp.attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(sp.attrs[k].text())
		h.WriteByte(0)
	}
	key := h.Sum64()
	if _, ok := d.seen[key]; ok {
		return true
	}
	d.seen[key] = struct{}{}
	return false
}

func readSpan(raw *otlpSpan, res map[string]string, n int64) (*span, string, error) {
	sp := &span{name: raw.Name, res: res, line: n, attrs: make(map[string]otlpValue, len(raw.Attributes)), statusMsg: raw.Status.Message}
	var err error
	if sp.trace, err = otlpID(raw.TraceID, 16); err != nil {
		return nil, "traceId", err
	}
	if sp.id, err = otlpID(raw.SpanID, 8); err != nil {
		return nil, "spanId", err
	}
	if raw.ParentSpanID != "" {
		if sp.parent, err = otlpID(raw.ParentSpanID, 8); err != nil {
			return nil, "parentSpanId", err
		}
	}
	if sp.kind, err = otlpEnum(raw.Kind, "SPAN_KIND_", []string{"UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"}); err != nil {
		return nil, "kind", err
	}
	code, err := otlpEnum(raw.Status.Code, "STATUS_CODE_", []string{"UNSET", "OK", "ERROR"})
	if err != nil {
		return nil, "status.code", err
	}
	sp.statusErr = code == 2
	if sp.start, err = otlpTime(raw.Start); err != nil {
		return nil, "startTimeUnixNano", err
	}
	if sp.end, err = otlpTime(raw.End); err != nil {
		return nil, "endTimeUnixNano", err
	}
	for _, kv := range raw.Attributes {
		sp.attrs[kv.Key] = kv.Value
	}
	for _, ev := range raw.Events {
		if ev.Name != "exception" {
			continue
		}
		var typ, msg string
		for _, kv := range ev.Attributes {
			switch kv.Key {
			case "exception.type":
				typ = kv.Value.text()
			case "exception.message":
				msg = kv.Value.text()
			}
		}
		sp.exception = strings.TrimSpace(typ + ": " + msg)
	}
	return sp, "", nil
}

// decodeOTLPLine decodes one line of the collector's file exporter with
// segmentio/encoding/json (already in the build through the MCP SDK): a
// drop-in for encoding/json that made a 100k-span import 25–35% faster.
// A line it refuses is decoded again by encoding/json, so the error a user
// reads is the standard library's. FuzzOTLPLineDecoders holds the two to
// the same result.
func decodeOTLPLine(line []byte) (*otlpDoc, error) {
	if err := jsondepth.Check(line, jsondepth.Max); err != nil {
		return nil, err // segmentio's decoder would recurse until the stack overflows
	}
	doc := new(otlpDoc)
	if err := fastjson.Unmarshal(line, doc); err == nil {
		return doc, nil
	}
	doc = new(otlpDoc)
	if err := json.Unmarshal(line, doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// otlpID reads a trace or span id: hex as the spec says, or base64 as some
// exporters write it; returned as lower-case hex.
func otlpID(s string, size int) (string, error) {
	if len(s) == 2*size {
		if b, err := hex.DecodeString(s); err == nil {
			return hex.EncodeToString(b), nil
		}
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == size {
		return hex.EncodeToString(b), nil
	}
	return "", fmt.Errorf("%q is not a %d-byte id in hex (or base64)", s, size)
}

// otlpEnum reads an enum: an integer, or its name with or without prefix.
func otlpEnum(raw json.RawMessage, prefix string, names []string) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s is neither a number nor a name", raw)
	}
	for i, name := range names {
		if s == name || s == prefix+name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown value %q", s)
}

// otlpTime reads nanoseconds since the epoch, as a string or a number.
func otlpTime(raw json.RawMessage) (time.Time, error) {
	s := strings.Trim(string(raw), `"`)
	if s == "" || s == "0" {
		return time.Time{}, errors.New("missing")
	}
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s is not nanoseconds since the epoch", raw)
	}
	return time.Unix(0, ns).UTC(), nil
}

// flush writes every trace whose last span came at or before line upTo
// (counted across a set's files), oldest first.
func (d *otlp) flush(upTo int64) error {
	var done []*otlpTrace
	i := 0
	for ; i < len(d.touched) && d.touched[i].line <= upTo; i++ {
		t := d.touched[i].t
		if !d.current(d.touched[i]) {
			continue
		}
		done = append(done, t)
		delete(d.traces, t.id)
		d.held -= int64(len(t.spans))
	}
	d.touched = d.touched[i:] // append moves the rest when it must grow
	sort.Slice(done, func(i, j int) bool { return earliest(done[i]).Before(earliest(done[j])) })
	for _, t := range done {
		if err := d.trace(t); err != nil {
			return err
		}
	}
	return nil
}

// current reports whether a queue entry is its trace's latest and the
// trace still open (not touched again later, nor flushed already).
func (d *otlp) current(e touch) bool {
	return e.t.last == e.line && d.traces[e.t.id] == e.t
}

// shed takes the open traces seen last longest ago for complete until
// they hold at most half of maxHeldSpans, once they hold more.
func (d *otlp) shed() error {
	limit := maxHeldSpans
	if d.set {
		limit = setHeldSpans
	}
	if d.held <= limit {
		return nil
	}
	held, upTo := d.held, int64(0)
	for _, e := range d.touched { // in line order
		if !d.current(e) {
			continue
		}
		if held <= limit/2 && e.line > upTo {
			break
		}
		held, upTo = held-int64(len(e.t.spans)), e.line
	}
	if d.set {
		d.shedInSet++
	}
	return d.flush(upTo)
}

// setHeldSpans bounds the spans a set of files holds open (ImportSet):
// more than one file's lookback allows, so that a trace whose halves are
// far apart in two files read one after the other is still one.
var setHeldSpans = maxHeldSpans * 8

func earliest(t *otlpTrace) time.Time {
	min := t.spans[0].start
	for _, s := range t.spans {
		if s.start.Before(min) {
			min = s.start
		}
	}
	return min
}

// The sides of a tool call in a trace. The MCP server span is the
// gateway's (or MCP server's) side: it receives the call and dispatches
// it. The MCP client span and the GenAI execute_tool span are the agent's
// side: one execute_tool is one tool call the model asked for, however
// many times its client sent it. Docker's MCP gateway names its span
// mcp.tool.call.
func isToolServer(s *span) bool {
	if s.name == "mcp.tool.call" {
		return true
	}
	return s.kind == kindServer && (s.attr("mcp.method.name") == "tools/call" ||
		s.attr("mcp.method.name") == "" && s.attr("gen_ai.operation.name") == "execute_tool")
}

func isToolClient(s *span) bool {
	if s.attr("mcp.method.name") != "tools/call" {
		return false
	}
	// Or the agent's GenAI tool span (kind INTERNAL) the MCP
	// instrumentation added its attributes to, as the conventions ask
	// when an outer instrumentation already traces the tool's execution
	// (semantic-conventions gen-ai/mcp.md, client spans).
	return s.kind == kindClient || s.kind != kindServer && s.attr("gen_ai.operation.name") == "execute_tool"
}

// isAgentTool is the agent's GenAI execute_tool span (kind INTERNAL): the
// model's one request to use a tool.
func isAgentTool(s *span) bool {
	return s.kind != kindServer && s.kind != kindClient && s.attr("gen_ai.operation.name") == "execute_tool" && s.attr("mcp.method.name") == ""
}

func isHTTPClient(s *span) bool {
	return s.kind == kindClient && s.attr("http.request.method", "http.method") != ""
}

func isProcess(s *span) bool {
	_, ok := s.attrs["process.exit.code"]
	return ok
}

// trace turns one trace's spans into calls and executions: each MCP
// server span is a call; its HTTP and process spans are the dispatches.
// A server span with no dispatch under it, for a call the gateway already
// dispatched (same agent tool call, or same tool and arguments), was
// answered without acting: it attaches to that execution.
// transportSpans learns which HTTP spans carry an MCP
// client span's request (a relay's POST to /mcp, whose 200 only opens the
// stream) to a far side the trace shows: not an action at a target, the
// far side's own spans are. A POST is transport when a server span lies
// under it (the HTTP instrumentation propagated the context), or when
// its client's server spans, propagated through params._meta, are as many
// as its POSTs; any other POST (one that timed out with nothing of the
// server's under it) stays a send. Computed once per trace: a walk up
// from each span, not a scan of the trace for each.
func transportSpans(spans []*span, byID map[string]*span, toolClient func(*span) bool) transports {
	up := func(s *span, stop func(*span) bool) *span {
		for p, hops := byID[s.parent], 0; p != nil && hops < 64; p, hops = byID[p.parent], hops+1 {
			if stop(p) {
				return p
			}
		}
		return nil
	}
	below := map[*span]bool{}   // a tool server span is under it
	direct := map[*span]int{}   // server spans right under a client span, no HTTP span between
	posts := map[*span]int{}    // HTTP spans whose nearest MCP span is this client span
	client := map[*span]*span{} // an HTTP span's nearest client span
	for _, s := range spans {
		switch {
		case isToolServer(s):
			for p, hops := byID[s.parent], 0; p != nil && hops < 64; p, hops = byID[p.parent], hops+1 {
				below[p] = true
			}
			if p := up(s, func(p *span) bool { return isHTTPClient(p) || toolClient(p) }); p != nil && toolClient(p) {
				direct[p]++
			}
		case isHTTPClient(s):
			if p := up(s, func(p *span) bool { return toolClient(p) || isToolServer(p) }); p != nil && toolClient(p) {
				client[s] = p
				if !nestedHTTP(s, byID) {
					posts[p]++ // one request, however many instrumentations traced it
				}
			}
		}
	}
	return transports{client: client, below: below, direct: direct, posts: posts}
}

// transports is what transportSpans learnt of a trace's HTTP spans.
type transports struct {
	client        map[*span]*span
	below         map[*span]bool
	direct, posts map[*span]int
}

// carries reports whether HTTP span s is transport to a traced far side.
func (t transports) carries(s *span) bool {
	c := t.client[s]
	return c != nil && (t.below[s] || t.direct[c] > 0 && t.direct[c] >= t.posts[c])
}

// ofClient reports whether HTTP span s carries an MCP client's request.
func (t transports) ofClient(s *span) bool { return t.client[s] != nil }

// toolOf is the tool a span names in its attributes.
func toolOf(s *span) string { return s.attr("gen_ai.tool.name", "mcp.tool.name") }

// nestedHTTP reports whether an HTTP client span is under another: one
// request two instrumentations traced (requests and urllib3, httpx and
// httpcore), not a second send.
func nestedHTTP(s *span, byID map[string]*span) bool {
	p := byID[s.parent]
	return p != nil && isHTTPClient(p)
}

// relayed marks the tool server spans that relay an outer one's call (an
// MCP gateway's server span, then its client span to the MCP server, then
// that server's span: one trace, the same tool), and the client spans
// that relay it: the outer server span is the call, and what any of
// them dispatched is its dispatch. A server span for another tool under
// it is a call of its own (a tool that calls a tool).
func relayed(spans []*span, under func(s, anc *span) bool, used map[*span]bool) {
	for _, outer := range spans {
		if !isToolServer(outer) || used[outer] {
			continue
		}
		for _, s := range spans {
			if s != outer && isToolServer(s) && toolOf(s) == toolOf(outer) && under(s, outer) {
				used[s] = true
				for _, c := range spans {
					if isToolClient(c) && under(c, outer) && under(s, c) {
						used[c] = true
					}
				}
			}
		}
	}
}

// trace writes one trace's tool calls, each through the sink of the file
// its main span came from.
func (d *otlp) trace(t *otlpTrace) error {
	byID := map[string]*span{}
	for _, s := range t.spans {
		byID[s.id] = s
	}
	// under reports whether s descends from anc.
	under := func(s, anc *span) bool {
		for p, hops := byID[s.parent], 0; p != nil && hops < 64; p, hops = byID[p.parent], hops+1 {
			if p == anc {
				return true
			}
		}
		return false
	}
	// An INTERNAL execute_tool span with the MCP attributes is the
	// agent's client span unless the MCP SDK traced its own CLIENT span
	// under it: then it is the agent's tool span, and the CLIENT span the
	// call (else one call would be two).
	demoted := map[*span]bool{}
	for _, m := range t.spans {
		if m.kind != kindClient && isToolClient(m) {
			for _, c := range t.spans {
				if c.kind == kindClient && isToolClient(c) && under(c, m) {
					demoted[m] = true
				}
			}
		}
	}
	toolClient := func(s *span) bool { return isToolClient(s) && !demoted[s] }
	agentTool := func(s *span) bool { return isAgentTool(s) || demoted[s] }
	transport := transportSpans(t.spans, byID, toolClient)
	sort.SliceStable(t.spans, func(i, j int) bool { return t.spans[i].start.Before(t.spans[j].start) })
	used := map[*span]bool{}
	relayed(t.spans, under, used)
	for _, srv := range t.spans {
		if !isToolServer(srv) || used[srv] {
			continue
		}
		used[srv] = true
		var client, agent *span
		var work []*span
		for _, s := range t.spans {
			switch {
			case toolClient(s) && under(srv, s):
				client = s
				used[s] = true
			case agentTool(s) && under(srv, s):
				agent = s
				used[s] = true
			case toolClient(s) && under(s, srv) && toolOf(s) == toolOf(srv):
				used[s] = true // the relay's call onward, whose far side is not in the trace
			case isHTTPClient(s) && nestedHTTP(s, byID):
				used[s] = true // the outer span is the send
			case isHTTPClient(s) && transport.carries(s):
				used[s] = true
			case (isHTTPClient(s) || isProcess(s)) && under(s, srv):
				work = append(work, s)
				used[s] = true
			}
		}
		if err := d.toolCall(srv.k, toolCallSpans{srv: srv, client: client, agent: agent, work: work}); err != nil {
			return err
		}
	}
	for _, s := range t.spans {
		switch {
		case used[s]:
		case toolClient(s):
			d.count(s.k).noServer++
			var agent *span
			if p := byID[s.parent]; p != nil && agentTool(p) {
				agent = p
				used[p] = true
			}
			if err := d.toolCall(s.k, toolCallSpans{client: s, agent: agent}); err != nil {
				return err
			}
		case agentTool(s):
			d.count(s.k).agentOnly++ // the model asked for a tool; nothing of its call was traced
		default:
			d.count(s.k).other++
			if isHTTPClient(s) && s.attr("http.response.status_code", "http.status_code") == "" && transport.ofClient(s) {
				d.count(s.k).unserved++ // an MCP request's POST that got no answer and shows no server under it
			}
		}
	}
	return nil
}
