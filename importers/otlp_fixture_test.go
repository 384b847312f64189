package importers

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// The OTLP fixture is written the way the collector's file exporter
// writes traces: one TracesData per line, fields in proto order, hex ids,
// integer enums, 64-bit integers as strings. A few spans use what other
// exporters do (base64 ids, numbers for nanoseconds) to keep the
// tolerance honest.

type fxKV struct {
	Key   string         `json:"key"`
	Value map[string]any `json:"value"`
}

func str(k, v string) fxKV { return fxKV{k, map[string]any{"stringValue": v}} }
func num(k string, v int) fxKV {
	return fxKV{k, map[string]any{"intValue": strconv.Itoa(v)}}
}
func strs(k string, vs ...string) fxKV {
	var vals []map[string]any
	for _, v := range vs {
		vals = append(vals, map[string]any{"stringValue": v})
	}
	return fxKV{k, map[string]any{"arrayValue": map[string]any{"values": vals}}}
}

type fxSpan struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId,omitempty"`
	Name         string `json:"name"`
	Kind         int    `json:"kind"`
	Start        any    `json:"startTimeUnixNano"`
	End          any    `json:"endTimeUnixNano"`
	Attributes   []fxKV `json:"attributes,omitempty"`
	Status       any    `json:"status"`
}

type fxBatch struct {
	resource []fxKV
	scope    string
	spans    []fxSpan
}

func (b fxBatch) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"resourceSpans": []any{map[string]any{
		"resource":   map[string]any{"attributes": b.resource},
		"scopeSpans": []any{map[string]any{"scope": map[string]any{"name": b.scope, "version": "0.3.0"}, "spans": b.spans}},
	}}})
}

var (
	fxT0    = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	agentRe = []fxKV{str("service.name", "ops-agent"), str("service.instance.id", "agent-7f3a"), num("process.pid", 4121), str("host.name", "runner-3")}
	gwRes   = []fxKV{str("service.name", "tool-gateway"), str("service.instance.id", "gw-1"), num("process.pid", 881)}
)

func ns(d time.Duration) string { return strconv.FormatInt(fxT0.Add(d).UnixNano(), 10) }

func tid(n int) string { return fmt.Sprintf("4bf92f3577b34da6a3ce929d%08x", 0x0e0e4700+n) }
func sid(n int) string { return fmt.Sprintf("%016x", 0x00f067aa0ba90200+n) }

var ok = map[string]any{}
var errStatus = map[string]any{"code": 2, "message": "context deadline exceeded"}

// mcpCall is one tools/call as the agent and the gateway trace it.
func mcpCall(trace, n int, at time.Duration, tool, args, session string, rpcID int, clientErr string, clientEnd time.Duration) (fxSpan, fxSpan) {
	c := fxSpan{TraceID: tid(trace), SpanID: sid(n), Name: "tools/call " + tool, Kind: 3, Start: ns(at), End: ns(clientEnd),
		Attributes: []fxKV{str("mcp.method.name", "tools/call"), str("gen_ai.operation.name", "execute_tool"), str("gen_ai.tool.name", tool),
			str("jsonrpc.request.id", strconv.Itoa(rpcID)), str("mcp.session.id", session), str("server.address", "gateway.internal"), num("server.port", 8443)},
		Status: ok}
	if clientErr != "" {
		c.Attributes = append(c.Attributes, str("error.type", clientErr))
		c.Status = errStatus
	}
	s := fxSpan{TraceID: tid(trace), SpanID: sid(n + 1), ParentSpanID: sid(n), Name: "tools/call " + tool, Kind: 2, Start: ns(at + 2*time.Millisecond),
		Attributes: []fxKV{str("mcp.method.name", "tools/call"), str("gen_ai.tool.name", tool), str("jsonrpc.request.id", strconv.Itoa(rpcID)),
			str("mcp.session.id", session), str("mcp.protocol.version", "2025-06-18"), str("network.transport", "tcp"), str("client.address", "10.0.4.12"),
			str("gen_ai.tool.call.arguments", args)},
		Status: ok}
	return c, s
}

func httpSpan(trace, n, parent int, at, end time.Duration, method, url string, status int, errType, key string) fxSpan {
	sp := fxSpan{TraceID: tid(trace), SpanID: sid(n), ParentSpanID: sid(parent), Name: method, Kind: 3, Start: ns(at), End: ns(end),
		Attributes: []fxKV{str("http.request.method", method), str("url.full", url)}, Status: ok}
	if status > 0 {
		sp.Attributes = append(sp.Attributes, num("http.response.status_code", status))
	}
	if errType != "" {
		sp.Attributes = append(sp.Attributes, str("error.type", errType))
		sp.Status = map[string]any{"code": 2}
	}
	if key != "" {
		sp.Attributes = append(sp.Attributes, strs("http.request.header.idempotency-key", key))
	}
	return sp
}

func otlpFixture() []fxBatch {
	const sess = "9d2e41c0a1b24f3c"
	var agent, gw []fxSpan
	add := func(c, s fxSpan, work ...fxSpan) {
		agent = append(agent, c)
		gw = append(gw, append([]fxSpan{s}, work...)...)
	}
	// 1. A ticket created; the agent's call timed out after the target
	// answered; the agent asked again and the gateway sent it again.
	c, s := mcpCall(1, 10, 0, "create_ticket", `{"title":"disk full on db-3","priority":"p2"}`, sess, 17, "timeout", 30*time.Second)
	s.End = ns(31 * time.Second)
	// Each 201 names its ticket (the Location response header attribute,
	// opt-in): two tickets.
	h := httpSpan(1, 12, 11, 5*time.Millisecond, 31*time.Second, "POST", "https://api.tracker.example/v1/tickets", 201, "", "")
	h.Attributes = append(h.Attributes, strs("http.response.header.location", "/v1/tickets/TCK-881"))
	add(c, s, h)
	c, s = mcpCall(2, 20, 35*time.Second, "create_ticket", `{"priority":"p2","title":"disk full on db-3"}`, sess, 18, "", 36*time.Second)
	s.End = ns(36 * time.Second)
	h = httpSpan(2, 22, 21, 35*time.Second+5*time.Millisecond, 35*time.Second+900*time.Millisecond, "POST", "https://api.tracker.example/v1/tickets", 201, "", "")
	h.Attributes = append(h.Attributes, strs("http.response.header.location", "/v1/tickets/TCK-882"))
	add(c, s, h)
	// 2. A read, twice.
	for i, at := range []time.Duration{40 * time.Second, 41 * time.Second} {
		c, s = mcpCall(3+i, 30+10*i, at, "get_weather", `{"city":"Lyon"}`, sess, 19+i, "", at+300*time.Millisecond)
		s.End = ns(at + 290*time.Millisecond)
		add(c, s, httpSpan(3+i, 32+10*i, 31+10*i, at+5*time.Millisecond, at+280*time.Millisecond, "GET", "https://weather.example/v2/current?city=Lyon", 200, "", ""))
	}
	// 3. A deploy whose answer never came (the connection was reset), then
	// sent again by the agent: the first may have acted.
	c, s = mcpCall(5, 50, 60*time.Second, "deploy_release", `{"service":"catalog","version":"2026.11.30"}`, sess, 21, "", 62*time.Second)
	s.End, s.Status = ns(61*time.Second), errStatus
	s.Attributes = append(s.Attributes, str("error.type", "tool_error"))
	add(c, s, httpSpan(5, 52, 51, 60*time.Second+5*time.Millisecond, 61*time.Second, "POST", "https://deploy.example/v1/releases", 0, "connection_reset", ""))
	c, s = mcpCall(6, 60, 70*time.Second, "deploy_release", `{"service":"catalog","version":"2026.11.30"}`, sess, 22, "", 73*time.Second)
	s.End = ns(72 * time.Second)
	add(c, s, httpSpan(6, 62, 61, 70*time.Second+5*time.Millisecond, 72*time.Second, "POST", "https://deploy.example/v1/releases", 202, "", ""))
	// 4. A payment the gateway resent itself with the same Idempotency-Key
	// after a 502: one execution, the processor replayed.
	c, s = mcpCall(7, 70, 80*time.Second, "charge_card", `{"amount_cents":5000,"customer":"cus_42"}`, sess, 23, "", 83*time.Second)
	s.End = ns(82 * time.Second)
	h1 := httpSpan(7, 72, 71, 80*time.Second+5*time.Millisecond, 81*time.Second, "POST", "https://pay.example/v1/charges", 502, "", `"act_01JD8XK7Q2"`)
	h2 := httpSpan(7, 73, 71, 81*time.Second+200*time.Millisecond, 82*time.Second, "POST", "https://pay.example/v1/charges", 200, "", `"act_01JD8XK7Q2"`)
	h2.Attributes = append(h2.Attributes, num("http.request.resend_count", 1))
	add(c, s, h1, h2)
	// 5. A command over SSH, traced as a process span, from an exporter
	// that writes base64 ids and numbers for times.
	c, s = mcpCall(8, 80, 90*time.Second, "run_migration", `{"name":"2026_11_add_index"}`, sess, 24, "", 99*time.Second)
	s.End = ns(98 * time.Second)
	p := fxSpan{TraceID: tid(8), SpanID: sid(82), ParentSpanID: sid(81), Name: "ssh migrate", Kind: 1, Start: ns(90*time.Second + 5*time.Millisecond), End: ns(98 * time.Second),
		Attributes: []fxKV{num("process.exit.code", 0), str("process.executable.name", "migrate"), str("server.address", "db-3.internal")}, Status: ok}
	add(c, s, p)
	// base64 ids and numeric times for trace 8's gateway spans.
	for i := range gw {
		if gw[i].TraceID == tid(8) {
			gw[i].TraceID = b64(gw[i].TraceID)
			gw[i].SpanID = b64(gw[i].SpanID)
			gw[i].ParentSpanID = b64(gw[i].ParentSpanID)
			gw[i].Start, _ = strconv.ParseInt(gw[i].Start.(string), 10, 64)
			gw[i].End, _ = strconv.ParseInt(gw[i].End.(string), 10, 64)
		}
	}
	// A span unrelated to tools: a health check.
	gw = append(gw, fxSpan{TraceID: tid(99), SpanID: sid(990), Name: "GET /healthz", Kind: 2, Start: ns(95 * time.Second), End: ns(95*time.Second + time.Millisecond),
		Attributes: []fxKV{str("http.request.method", "GET"), num("http.response.status_code", 200)}, Status: ok})
	// The exporter batches by time: gateway and agent spans interleave.
	return []fxBatch{
		{gwRes, "mcpgw", gw[:3]}, {agentRe, "mcp-client", agent[:2]}, {gwRes, "mcpgw", gw[3:8]},
		{agentRe, "mcp-client", agent[2:5]}, {gwRes, "mcpgw", gw[8:]}, {agentRe, "mcp-client", agent[5:]},
	}
}

func b64(h string) string {
	b, _ := hex.DecodeString(h)
	return base64.StdEncoding.EncodeToString(b)
}

// TestGenerateOTLPFixture keeps testdata/otlp/traces.jsonl what
// otlpFixture makes.
func TestGenerateOTLPFixture(t *testing.T) {
	var want bytes.Buffer
	for _, b := range otlpFixture() {
		line, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		want.Write(line)
		want.WriteByte('\n')
	}
	path := filepath.Join("testdata", "otlp", "traces.jsonl")
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, want.Bytes(), 0o644)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("testdata/otlp/traces.jsonl is stale: go test ./importer -run TestGenerate -update")
	}
}

// TestOTLPTracesAsCollectorsWriteThem: a call relayed by an MCP gateway
// (agent client, gateway server, gateway client, MCP server: one trace,
// one tool) is one call and one execution; a trace whose spans the
// collector's file exporter wrote 70 lines apart (each process exports
// on its own timer) is one trace; and a bound on what open traces hold
// loses nothing.
func TestOTLPTracesAsCollectorsWriteThem(t *testing.T) {
	imp := func(name string) FileReport {
		t.Helper()
		rep, err := Import(ctx, newStore(t), "testdata/otlp/"+name, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return rep
	}
	if rep := imp("gateway-chain.jsonl"); rep.Calls != 1 || rep.Executions != 1 {
		t.Errorf("a call through an MCP gateway: %d calls, %d executions, want 1 and 1 (%s)", rep.Calls, rep.Executions, rep.Note)
	}
	if rep := imp("trace-70-lines-apart.jsonl"); rep.Calls != 1 {
		t.Errorf("one trace 70 lines apart: %d calls, want 1 (%s)", rep.Calls, rep.Note)
	}
	apart, together := imp("retry-lines-apart.jsonl"), imp("retry-together.jsonl")
	if apart.Calls != together.Calls || apart.Executions != together.Executions {
		t.Errorf("a timeout and its retry, lines apart: %d calls, %d executions; together: %d, %d", apart.Calls, apart.Executions, together.Calls, together.Executions)
	}
	defer func(n int64) { maxHeldSpans = n }(maxHeldSpans)
	maxHeldSpans = 2
	if rep := imp("retry-lines-apart.jsonl"); rep.Read != apart.Read || rep.Calls < together.Calls {
		t.Errorf("with at most 2 spans held: %d spans read, %d calls; want %d and at least %d", rep.Read, rep.Calls, apart.Read, together.Calls)
	}
}

// TestOTLPHeaderNamesOfEarlierConventions: semantic conventions before
// 1.2x named a captured header lowercase with "-" replaced by "_"
// (http.request.header.idempotency_key); such a trace's keys were "not
// recorded", now read as the newer spelling's.
func TestOTLPHeaderNamesOfEarlierConventions(t *testing.T) {
	b, err := os.ReadFile("../fixtures/corpus/otlp-gateway-timeout-new-key/traces.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	keys := func(data []byte) []string {
		s := newStore(t)
		if _, err := Import(ctx, s, writeFile(t, "traces.jsonl", data), Options{Format: "otlp"}); err != nil {
			t.Fatal(err)
		}
		ex, err := s.Executions(ctx, activity.ExecutionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ex {
			if e.IdempotencyKey.OK {
				out = append(out, e.IdempotencyKey.V)
			}
		}
		slices.Sort(out)
		return out
	}
	now, before := keys(b), keys(bytes.ReplaceAll(b, []byte("http.request.header.idempotency-key"), []byte("http.request.header.idempotency_key")))
	if len(now) == 0 || !slices.Equal(now, before) {
		t.Fatalf("keys %v with the dash, %v with the underscore", now, before)
	}
}
