package importers

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcpdup/mcpdup/activity"
)

// toolCallSpans are the spans of one tools/call: the server span (nil
// when only the agent's side was traced), the agent's client span and
// execute_tool span (each nil when not traced), and the dispatch spans
// under the server span, oldest first.
type toolCallSpans struct {
	srv, client, agent *span
	work               []*span
}

// base is the span that speaks for the call: the server's, else the
// agent's.
func (sp toolCallSpans) base() *span {
	for _, s := range []*span{sp.srv, sp.client, sp.agent} {
		if s != nil {
			return s
		}
	}
	return nil
}

// attr reads an attribute from the first of the call's spans that has it.
func (sp toolCallSpans) attr(keys ...string) string {
	for _, s := range []*span{sp.srv, sp.client, sp.agent} {
		if s != nil {
			if v := s.attr(keys...); v != "" {
				return v
			}
		}
	}
	return ""
}

// toolCall writes one tools/call.
func (d *otlp) toolCall(k *sink, sp toolCallSpans) error {
	base := sp.base()
	tool := sp.attr("gen_ai.tool.name", "mcp.tool.name")
	if tool == "" {
		// The span's name says it: "tools/call {tool}" (the conventions),
		// "execute_tool {tool}", "MCP send tools/call {tool}" (the Python
		// SDK's client span, which sets no tool attribute).
		for _, p := range []string{"tools/call ", "execute_tool "} {
			if _, rest, ok := strings.Cut(base.name, p); ok && !strings.ContainsAny(strings.TrimSpace(rest), " \t") {
				tool = strings.TrimSpace(rest)
				break
			}
		}
	}
	if tool == "" {
		return k.bad(base.line, "gen_ai.tool.name", fmt.Errorf("span %s is a tools/call with no tool name", base.id))
	}
	args, recorded, err := d.arguments(sp)
	if err != nil {
		return k.bad(base.line, "gen_ai.tool.call.arguments", err)
	}
	d.count(k).calls++
	actor := otlpActor(sp)
	run, err := d.run(k, sp, actor)
	if err != nil {
		return err
	}
	notRecorded := []activity.Fact{activity.FactAuthorization, activity.FactFingerprint}
	if sp.client == nil {
		notRecorded = append(notRecorded, activity.FactDelivery)
	}
	if run == "" {
		notRecorded = append(notRecorded, activity.FactRunIdentity)
	}
	if sp.srv == nil || len(sp.work) == 0 {
		notRecorded = append(notRecorded, activity.FactDispatch)
	}
	if !recorded {
		notRecorded = append(notRecorded, activity.FactArguments)
		k.notRecorded("arguments")
	}
	call := activity.Call{RunID: run, Actor: actor, Method: "tools/call", Tool: tool, ReceivedAt: base.start, Arguments: args,
		Disposition: activity.DispositionNewExecution, Source: spanAt(k, base)}
	if id := sp.attr("jsonrpc.request.id", "mcp.request.id"); id != "" {
		call.JSONRPCID = activity.Some(id)
	}
	if sid := sp.attr("mcp.session.id"); sid != "" {
		call.SessionID = activity.Some(sid)
	}
	if v := sp.attr("mcp.protocol.version"); v != "" {
		call.ProtocolVersion = activity.Some(v)
	}
	if known, err := k.known(call, sp.records()); err != nil {
		return err
	} else if known {
		// An earlier import holds this span (the same batch exported
		// again in another file): importing it again would be a second
		// call that never happened.
		k.repeated(int64(len(sp.work)) + spanCount(sp.srv, sp.client, sp.agent))
		return nil
	}
	ex := otlpExec{d: d, k: k, call: call, tool: tool, args: args, run: run, actor: actor, notRecorded: notRecorded, srv: sp.srv}
	key := firstOf(string(run), actor) + "\x00" + tool + "\x00" + string(args)
	vendorID, vendorAttached := "", false
	if sp.srv != nil {
		vendorID = sp.srv.attr(append(d.attrs.ExecutionID, "mcpdup.execution.id", "gateway.execution.id")...)
		vendorAttached = sp.srv.attr(append(d.attrs.Attached, "mcpdup.execution.attached", "gateway.execution.attached")...) == "true"
	}
	prior, sameByGateway := d.dispatched[key], false
	if id := d.execs[vendorID]; vendorID != "" && id != "" {
		prior, sameByGateway = id, true // the gateway names the execution it already had
	}
	switch {
	case sameByGateway || vendorAttached && prior != "":
		// The gateway's own record: this call is that execution again.
		if err := ex.attach(prior, base); err != nil {
			return err
		}
		ex.sameExecution = true
		for i, w := range sp.work { // the gateway's resend of it
			if err := ex.dispatch(w, i); err != nil {
				return err
			}
		}
	case sp.srv != nil && len(sp.work) == 0 && recorded && prior != "":
		// The gateway answered this call without sending anything: it
		// attached to the execution it had already dispatched.
		if err := ex.attach(prior, base); err != nil {
			return err
		}
	case len(sp.work) == 0:
		if err := ex.withoutDispatch(base); err != nil {
			return err
		}
	default:
		for i, w := range sp.work {
			if err := ex.dispatch(w, i); err != nil {
				return err
			}
		}
		d.dispatched[key] = ex.cur.ID
	}
	if vendorID != "" && ex.cur.ID != "" {
		d.execs[vendorID] = ex.cur.ID
	}
	if sp.client != nil {
		return ex.deliver(sp.client)
	}
	return nil
}

// records are the provenance records its calls may carry: each call is
// recorded at the span that dispatched it, or at the base span.
func (sp toolCallSpans) records() []string {
	var out []string
	for _, s := range append([]*span{sp.srv, sp.client, sp.agent}, sp.work...) {
		if s != nil {
			out = append(out, "span "+s.id)
		}
	}
	return out
}

func spanCount(spans ...*span) int64 {
	n := int64(0)
	for _, s := range spans {
		if s != nil {
			n++
		}
	}
	return n
}

// spanAt is a span's provenance: its file and line, and the span id.
func spanAt(k *sink, s *span) activity.Provenance {
	if s.k != nil {
		k = s.k // a trace across a set's files: the span's own file
	}
	p := k.at(s.line)
	p.Record = "span " + s.id
	return p
}

// otlpExec builds the executions of one tools/call.
type otlpExec struct {
	d           *otlp
	k           *sink
	call        activity.Call
	tool, actor string
	args        json.RawMessage
	run         activity.RunID
	notRecorded []activity.Fact
	srv         *span
	cur         activity.Execution // the latest execution
	key         string             // its Idempotency-Key
	n           int                // executions so far
	// sameExecution: the gateway's own identity says this call is the
	// current execution again.
	sameExecution bool
}

// start records a call and a new execution for it, accepted when the
// tools/call arrived. The second and later executions of one call get a
// call record of their own, saying the server resent the action.
func (x *otlpExec) start(ch activity.Channel, target, method, key string, at *span) error {
	line := at.line
	c := x.call
	c.ID = ""
	id := activity.NewExecutionID(c.ReceivedAt)
	c.ExecutionID = id
	if x.n > 0 {
		c.Reason = fmt.Sprintf("sent again by %s within one tools/call (dispatch %d)", firstOf(x.srv.res["service.name"], "the server"), x.n+1)
	}
	c.Source = spanAt(x.k, at)
	c, err := x.k.call(c)
	if err != nil {
		return x.k.fail(line, err)
	}
	contract := httpContract(method, key)
	nr := x.notRecorded
	e := activity.Execution{ID: id, Action: activity.Action{Actor: x.actor, Tool: x.tool, Channel: ch, Target: target, Method: method, Arguments: x.args},
		RunID: x.run, Contract: contract, CreatedByCall: c.ID, Times: activity.Times{Accepted: activity.Some(c.ReceivedAt)}, Source: spanAt(x.k, at)}
	if key != "" {
		e.IdempotencyKey = activity.Some(key)
	} else if ch == activity.ChannelHTTP {
		nr = append(append([]activity.Fact(nil), nr...), activity.FactIdempotencyKey) // header attributes are opt-in
	}
	e.NotRecorded = nr
	if x.cur, err = x.k.accept(e); err != nil {
		return x.k.fail(line, err)
	}
	x.key = key
	x.n++
	return x.step(line, activity.Transition{To: activity.StateAuthorized, Implied: true})
}

func (x *otlpExec) step(line int64, t activity.Transition) error {
	t.ExecutionID = x.cur.ID
	e, err := x.k.w.Transition(t)
	if err != nil {
		return x.k.fail(line, err)
	}
	x.cur = e
	return nil
}

// dispatch records one HTTP or process span under the server span: a
// resend with the same Idempotency-Key after an unknown outcome continues
// the execution; anything else is another execution.
func (x *otlpExec) dispatch(w *span, i int) error {
	ch, target, method, key := otlpTarget(w)
	// A resend with the same Idempotency-Key after an unknown outcome, or
	// one the gateway says is the same execution, continues it, where its
	// contract allows a resend (a key the target honours, a lookup).
	resendable := x.cur.Contract == activity.ContractRepeatableWithKey || x.cur.Contract == activity.ContractRecoverableByLookup
	again := x.n > 0 && x.cur.State == activity.StateUnknown && resendable && (key != "" && key == x.key || x.sameExecution)
	if !again {
		if err := x.start(ch, target, method, key, w); err != nil {
			return err
		}
	}
	reason := ""
	if n := w.attr("http.request.resend_count"); n != "" && n != "0" {
		reason = "resend " + n + " of the HTTP client"
	}
	if err := x.step(w.line, activity.Transition{To: activity.StateDispatched, At: activity.Some(w.start), Reason: reason, Source: spanAt(x.k, w)}); err != nil {
		return err
	}
	t := otlpOutcome(w)
	t.Source = spanAt(x.k, w)
	return x.step(w.line, t)
}

// otlpOutcome reads what the target answered: a status code, an exit
// code, or an error without either (unknown: it may have acted).
func otlpOutcome(w *span) activity.Transition {
	t := activity.Transition{At: activity.Some(w.end)}
	if code := w.attr("process.exit.code"); code != "" && isProcess(w) {
		n, _ := strconv.Atoi(code)
		t.ExitCode = activity.Some(n)
		t.To = activity.StateSucceeded
		if n != 0 {
			t.To, t.Reason = activity.StateFailed, fmt.Sprintf("exit code %d", n)
		}
		return t
	}
	if code := w.attr("http.response.status_code", "http.status_code"); code != "" {
		n, err := strconv.Atoi(code)
		if err == nil {
			t.TargetStatus = activity.Some(n)
			t.To, t.Reason = activity.StateForHTTPStatus(n)
			if t.To == activity.StateSucceeded {
				t.Created = activity.CreatedInHTTP(n, w.attr("http.response.header.location"), "")
				t.Replayed = replayMark(func(h string) string {
					h = strings.ToLower(h)
					return w.attr("http.response.header."+h, "http.response.header."+strings.ReplaceAll(h, "-", "_"))
				})
			}
			return t
		}
	}
	t.To = activity.StateUnknown
	t.Reason = "no response recorded"
	if et := w.attr("error.type"); et != "" {
		t.Reason = "no response: " + et
	}
	if msg := firstOf(w.exception, w.statusMsg); msg != "" {
		t.Reason += " (" + msg + ")"
	}
	return t
}

// attach records a call the gateway answered from execution id, without
// a dispatch: its call attaches to it, as the gateway records a retry.
func (x *otlpExec) attach(id activity.ExecutionID, base *span) error {
	c := x.call
	c.Disposition, c.ExecutionID = activity.DispositionAttached, id
	c.Reason = "answered without a dispatch in the trace: the gateway did not send it again"
	if _, err := x.k.call(c); err != nil {
		return x.k.fail(base.line, err)
	}
	e, err := x.k.w.Execution(id)
	if err != nil {
		return x.k.fail(base.line, err)
	}
	x.cur, x.key, x.n = e, e.IdempotencyKey.V, 1
	return nil
}

// withoutDispatch records a call whose outbound work was not traced: the
// tool span's own status is all there is.
func (x *otlpExec) withoutDispatch(base *span) error {
	if err := x.start(activity.ChannelMCP, firstOf(base.attr("server.address"), base.res["service.name"]), "", "", base); err != nil {
		return err
	}
	if err := x.step(base.line, activity.Transition{To: activity.StateDispatched, Implied: true}); err != nil {
		return err
	}
	t := activity.Transition{To: activity.StateSucceeded, At: activity.Some(base.end),
		Reason: "the tool span ended without error; the target's own answer is not in the trace"}
	if et := base.attr("error.type"); et != "" || base.statusErr || base.exception != "" {
		t.To, t.Reason = activity.StateUnknown, "the tool span ended in error "+firstOf(et, base.statusMsg, base.exception)+"; the trace does not show whether the target acted"
	}
	return x.step(base.line, t)
}

// answeredError reports whether a client span's error is an answer that
// arrived: the tool's own error (error.type tool_error) or a JSON-RPC
// error code, as the MCP conventions set error.type; not a timeout or a
// dropped connection, after which the result never came. The SDKs raise
// -32001 (request timed out) and -32000 (connection closed) themselves,
// with no answer: those are not answers.
func answeredError(c *span) bool {
	et := c.attr("error.type")
	if et == "tool_error" {
		return true
	}
	n, err := strconv.Atoi(et)
	return err == nil && n < 0 && n != -32000 && n != -32001
}

// deliver records what the agent's client span shows: the result arrived,
// or the call failed on the agent's side after the action finished.
func (x *otlpExec) deliver(c *span) error {
	failedClient := (c.attr("error.type") != "" || c.statusErr) && !answeredError(c)
	switch x.cur.State {
	case activity.StateSucceeded, activity.StateFailed:
	case activity.StateDeliveryFailed, activity.StateNotDelivered:
		if failedClient {
			return nil
		}
		// A retry's client span received the stored result.
		return x.step(c.line, activity.Transition{To: activity.StateDelivered, At: activity.Some(c.end), Source: spanAt(x.k, c),
			Reason: "a retry received the result"})
	default:
		return nil // an unknown outcome is not delivered either way
	}
	t := activity.Transition{To: activity.StateDelivered, At: activity.Some(c.end), Source: spanAt(x.k, c)}
	if et := c.attr("error.type"); failedClient {
		t.To, t.Reason = activity.StateDeliveryFailed, "the agent's call failed: "+firstOf(et, c.statusMsg, "error")
		if done := x.cur.Times.Observed; done.OK && c.end.Before(done.V) {
			// The agent gave up before the target answered: the result was
			// never on its way.
			t.To, t.Reason = activity.StateNotDelivered, "the agent gave up ("+firstOf(et, c.statusMsg, "error")+") before the target answered"
		}
	}
	return x.step(c.line, t)
}

// arguments reads gen_ai.tool.call.arguments (a JSON string or a kvlist)
// from whichever span of the call recorded it. recorded is false when none
// did (the attribute is opt-in): the arguments are then null, so the call
// shares an effect only with others whose arguments are not known either.
func (d *otlp) arguments(sp toolCallSpans) (args json.RawMessage, recorded bool, err error) {
	var v otlpValue
	found := false
	for _, s := range []*span{sp.srv, sp.client, sp.agent} {
		if s == nil {
			continue
		}
		if v, found = s.attrs["gen_ai.tool.call.arguments"]; found {
			break
		}
	}
	if !found {
		d.count(sp.base().k).noArgs++
		return json.RawMessage("null"), false, nil
	}
	raw := []byte(v.text())
	if v.KvlistValue != nil {
		raw = v.json()
	}
	if !json.Valid(raw) {
		raw = mustJSON(map[string]string{"arguments": string(raw)})
	}
	out, err := canonArgs(raw)
	return out, true, err
}

// otlpActor names the agent: its service when its spans are in the
// trace, else the address the server saw.
func otlpActor(sp toolCallSpans) string {
	if a := agentSpan(sp); a != nil {
		s := "otel:" + firstOf(a.res["service.name"], "unknown_service")
		if inst := a.res["service.instance.id"]; inst != "" {
			s += "/" + inst
		}
		return s
	}
	if addr := sp.srv.attr("client.address"); addr != "" {
		return "client:" + addr
	}
	return "otel:unknown-client"
}

// agentSpan is a span of the agent's own process, if the trace has one.
func agentSpan(sp toolCallSpans) *span {
	if sp.client != nil {
		return sp.client
	}
	return sp.agent
}

// run identifies the agent run by the strongest evidence the trace has:
// the agent process's own resource attributes (service.instance.id,
// process.pid), else the MCP session id, the weakest hint; none when
// neither is in the trace.
func (d *otlp) run(k *sink, sp toolCallSpans, actor string) (activity.RunID, error) {
	key, by, evidence := "", activity.RunIdentification(""), ""
	base := sp.base()
	if a := agentSpan(sp); a != nil && (a.res["service.instance.id"] != "" || a.res["process.pid"] != "") {
		r := a.res
		key, by = "proc:"+r["service.name"]+"/"+r["host.name"]+"/"+r["service.instance.id"]+"/"+r["process.pid"], activity.RunByPeer
		var parts []string
		for _, p := range [][2]string{{"service", r["service.name"]}, {"instance", r["service.instance.id"]}, {"pid", r["process.pid"]}, {"host", r["host.name"]}} {
			if p[1] != "" {
				parts = append(parts, p[0]+" "+p[1])
			}
		}
		evidence = strings.Join(parts, " ")
	} else if sid := sp.attr("mcp.session.id"); sid != "" {
		key, by, evidence = "session:"+sid, activity.RunBySession, "mcp.session.id "+sid+" (a transport session: a reconnect would start another)"
	}
	if key == "" {
		return "", nil
	}
	if id, ok := d.runs[key]; ok {
		return id, nil
	}
	// The same process in a file imported before (the file exporter
	// rotates files, and writes each service's spans to its own).
	if id, err := k.w.ImportedRun(actor, by, evidence); err != nil || id != "" {
		d.runs[key] = id
		return id, err
	}
	r, err := k.run(activity.Run{Actor: actor, IdentifiedBy: by, Evidence: evidence, StartedAt: base.start, Source: spanAt(k, base)})
	if err != nil {
		return "", k.fail(base.line, err)
	}
	d.runs[key] = r.ID
	return r.ID, nil
}

// otlpTarget reads where a dispatch span went: the URL without scheme and
// query (as the gateway records targets), or the command's host.
func otlpTarget(w *span) (ch activity.Channel, target, method, key string) {
	if isProcess(w) {
		return activity.ChannelSSH, firstOf(w.attr("server.address"), w.res["host.name"]) + " " + w.attr("process.executable.name", "process.command"), "", ""
	}
	method = strings.ToUpper(w.attr("http.request.method", "http.method"))
	target = w.attr("server.address")
	if raw := w.attr("url.full", "http.url"); raw != "" {
		if u, err := url.Parse(raw); err == nil {
			target = u.Host + u.Path
		}
	}
	// The header's name as semantic conventions before 1.2x normalised it
	// too: lowercase, "-" replaced by "_" (http.request.header.content_type).
	key = strings.Trim(w.attr("http.request.header.idempotency-key", "http.request.header.x-idempotency-key",
		"http.request.header.idempotency_key", "http.request.header.x_idempotency_key"), `" `)
	return activity.ChannelHTTP, target, method, key
}
