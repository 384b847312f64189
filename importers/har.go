package importers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/canon"
)

func init() {
	formats["har"] = func(string) decoder { return &har{} }
}

// harEntry is one HAR 1.2 entry, as browsers (Chrome's _error on failed
// requests) and proxies (mitmproxy, Charles) write it.
type harEntry struct {
	StartedDateTime string  `json:"startedDateTime"`
	Time            float64 `json:"time"`
	Request         struct {
		Method   string      `json:"method"`
		URL      string      `json:"url"`
		Headers  []harHeader `json:"headers"`
		PostData *struct {
			MimeType string      `json:"mimeType"`
			Text     string      `json:"text"`
			Params   []harHeader `json:"params"` // HAR 1.2: a form's fields, instead of text
		} `json:"postData"`
	} `json:"request"`
	Response struct {
		Status  int         `json:"status"`
		Headers []harHeader `json:"headers"`
		Content struct {
			MimeType string `json:"mimeType"`
			Text     string `json:"text"`
			Encoding string `json:"encoding"`
		} `json:"content"`
		Error string `json:"_error"` // Chrome: net::ERR_CONNECTION_RESET
		// Chrome: the page's view of a request its service worker
		// answered; what the worker sent is an entry of its own.
		ViaServiceWorker bool `json:"_fetchedViaServiceWorker"`
	} `json:"response"`
	Connection string `json:"connection"`
	Comment    string `json:"comment"` // Charles puts errors here
	Error      string `json:"_error"`
}

type harHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func header(hs []harHeader, names ...string) string {
	for _, n := range names {
		for _, h := range hs {
			if strings.EqualFold(h.Name, n) {
				return h.Value
			}
		}
	}
	return ""
}

// har imports a HAR 1.2 archive, streamed entry by entry. An entry whose
// request is an MCP tools/call (JSON-RPC in the body; the answer as JSON
// or as SSE frames) is a call seen from the agent's side; any other entry
// is an HTTP request to a target, with its status, its error when the
// connection failed (status 0 with _error), and its Idempotency-Key
// (quoted or bare): a request that repeats an answered key attaches to
// the first execution, one that repeats a key whose outcome was unknown
// continues it.
type har struct {
	mcp, http  int64
	noResponse int64
	// transport: MCP messages that are no action (notifications, answers,
	// a session's DELETE); viaWorker: a service worker's answers to the
	// page, whose send is the worker's own entry.
	transport, viaWorker int64
	creator              string                       // log.creator.name: who captured it
	runs                 map[string]activity.RunID    // Mcp-Session-Id → run
	contracts            map[string]activity.Contract // tool → what tools/list annotations say
}

// browsers are the HAR creators that are the client itself: what they
// captured is what the client received. Anything else (mitmproxy,
// Charles, Fiddler) captured in between, and cannot say what reached the
// client.
var browsers = map[string]bool{"WebInspector": true, "Firefox": true, "Safari": true, "Web Inspector": true, "WebKit Web Inspector": true}

// apiClients are HAR creators whose archive is their own requests as
// written, not traffic: Insomnia's exportHar gives every entry the export's
// time, status 0 to requests never sent, and the request's name as comment.
var apiClients = map[string]bool{"Insomnia": true}

// atClient reports whether the archive was captured by the client.
func (d *har) atClient() bool { return browsers[d.creator] }

func (d *har) note() string {
	return fmt.Sprintf("har 1.2: %d MCP tools/call entries (seen from the client: what the server did beyond its answer is not in the archive), "+
		"%d HTTP requests to targets, %d without a response (status 0 or no body: outcome unknown). Not recorded: authorization, "+
		"which process sent each request (the archive names connections, not processes), delivery beyond the capture point. "+
		"Provenance lines are entry numbers.", d.mcp, d.http, d.noResponse) + d.noActionNote()
}

// noActionNote counts the entries that are no action, if any.
func (d *har) noActionNote() string {
	if d.transport+d.viaWorker == 0 {
		return ""
	}
	return fmt.Sprintf(" %d MCP transport messages (notifications, answers, a session's DELETE) and %d service-worker answers "+
		"(the worker's own request is an entry of its own) are no action.", d.transport, d.viaWorker)
}

func (d *har) decode(ctx context.Context, in *lines, k *sink) error {
	d.runs, d.contracts = map[string]activity.RunID{}, map[string]activity.Contract{}
	dec := json.NewDecoder(in.r)
	seen := func(key string, v json.RawMessage) {
		if key == "creator" {
			var c struct{ Name, Version string }
			json.Unmarshal(v, &c)
			d.creator = c.Name
		}
	}
	if err := harSeek(dec, seen, "log", "entries"); err != nil {
		return &LineError{File: k.file, Line: 1, Field: "log.entries", Err: err}
	}
	if apiClients[d.creator] {
		return &LineError{File: k.file, Line: 1, Field: "log.creator.name", Err: fmt.Errorf("an export of %s's requests as they are written, not of traffic "+
			"(its entries carry the export's time and status 0 for requests never sent): capture the traffic instead (a browser's DevTools, mitmproxy)", d.creator)}
	}
	n := int64(1)
	for ; dec.More(); n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var e harEntry
		if err := dec.Decode(&e); err != nil {
			return &LineError{File: k.file, Line: n, Field: fmt.Sprintf("log.entries[%d]", n-1), Err: err}
		}
		if err := d.entry(k, n, &e); err != nil {
			return err
		}
		k.count()
		k.tick()
	}
	in.line = n - 1 // entries, for the report: a HAR is one document
	return nil
}

// harSeek walks the decoder into the array at path (object keys), skipping
// every other value, so entries can be decoded one at a time.
func harSeek(dec *json.Decoder, seen func(key string, v json.RawMessage), path ...string) error {
	for i, want := range path {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return fmt.Errorf("not a HAR document: expected an object around %q", want)
		}
		for {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			if tok == json.Delim('}') {
				return fmt.Errorf("no %q in the document", want)
			}
			if tok == want {
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			if key, ok := tok.(string); ok && seen != nil {
				seen(key, skip)
			}
		}
		if i == len(path)-1 {
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				return fmt.Errorf("%q is not an array", want)
			}
		}
	}
	return nil
}

func (d *har) entry(k *sink, n int64, e *harEntry) error {
	field := func(f string) string { return fmt.Sprintf("log.entries[%d].%s", n-1, f) }
	start, err := time.Parse(time.RFC3339Nano, e.StartedDateTime)
	if err != nil {
		return k.bad(n, field("startedDateTime"), fmt.Errorf("%q is not an ISO 8601 time", e.StartedDateTime))
	}
	u, err := url.Parse(e.Request.URL)
	if err != nil || u.Host == "" || e.Request.Method == "" {
		return k.bad(n, field("request.url"), fmt.Errorf("%q %q is not a request", e.Request.Method, e.Request.URL))
	}
	end := start.Add(time.Duration(e.Time * float64(time.Millisecond)))
	if strings.EqualFold(e.Response.Content.Encoding, "base64") {
		// HAR 1.2: encoding names how text is encoded (mitmproxy and
		// Chrome store some bodies so): the answer is what it decodes to.
		b, err := base64.StdEncoding.DecodeString(e.Response.Content.Text)
		if err != nil {
			return k.bad(n, field("response.content.text"), fmt.Errorf("encoding is base64, and the text is not: %w", err))
		}
		e.Response.Content.Text, e.Response.Content.Encoding = string(b), ""
	}
	if e.Response.ViaServiceWorker {
		d.viaWorker++
		return nil
	}
	if e.Request.PostData != nil {
		if msgs, ok := jsonRPCBody(e.Request.PostData.Text); ok {
			for _, msg := range msgs {
				if len(msg.ID) == 0 || msg.Method == "" {
					d.transport++ // a notification, or the client's answer to the server
					continue
				}
				if err := d.mcpMessage(k, n, e, msg, u, start, end); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if e.Request.Method == "DELETE" && header(e.Request.Headers, "Mcp-Session-Id") != "" && mcpPath(u.Path) {
		d.transport++ // the client ends its MCP session
		return nil
	}
	d.http++
	return d.request(k, n, e, u, start, end)
}

// jsonRPCBody reads a body that is JSON-RPC: one message or a batch (the
// 2025-03-26 revision allowed them). ok is false for any other body.
func jsonRPCBody(body string) ([]rpcRequest, bool) {
	b := bytes.TrimSpace([]byte(body))
	if len(b) > 0 && b[0] == '[' {
		var raw []json.RawMessage
		if json.Unmarshal(b, &raw) != nil || len(raw) == 0 {
			return nil, false
		}
		var out []rpcRequest
		for _, r := range raw {
			m, ok := jsonRPCMessage(r)
			if !ok {
				return nil, false
			}
			out = append(out, m)
		}
		return out, true
	}
	m, ok := jsonRPCMessage(b)
	return []rpcRequest{m}, ok
}

// jsonRPCMessage reads one JSON-RPC 2.0 message: a request, a
// notification or an answer.
func jsonRPCMessage(b []byte) (rpcRequest, bool) {
	var m struct {
		rpcRequest
		Version string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &m) != nil {
		return rpcRequest{}, false
	}
	rpc := m.Version == "2.0" || m.Method != "" && len(m.ID) > 0
	answer := m.Method == "" && len(m.ID) > 0 && (len(m.Result) > 0 || len(m.Error) > 0)
	return m.rpcRequest, rpc && (m.Method != "" || answer)
}

// rpcRequest is a JSON-RPC request.
type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
}

// jsonRPCRequest reads a body that is one JSON-RPC request.
func jsonRPCRequest(body string) (rpcRequest, bool) {
	m, ok := jsonRPCMessage([]byte(body))
	return m, ok && m.Method != "" && len(m.ID) > 0
}

// rpcAnswer finds the JSON-RPC response to id in a body: one JSON message,
// or SSE frames whose data lines carry messages.
func rpcAnswer(body string, id json.RawMessage) (result json.RawMessage, rpcErr string, found bool) {
	try := func(b []byte) bool {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		// Only an answer: a request the server sends in the stream (an
		// elicitation, a ping) may carry the same id, the server's own.
		if json.Unmarshal(b, &m) != nil || m.Method != "" || len(m.Result) == 0 && m.Error == nil ||
			!bytes.Equal(bytes.TrimSpace(m.ID), bytes.TrimSpace(id)) {
			return false
		}
		result = m.Result
		if m.Error != nil {
			rpcErr = fmt.Sprintf("JSON-RPC error %d: %s", m.Error.Code, m.Error.Message)
		}
		return true
	}
	if try([]byte(body)) {
		return result, rpcErr, true
	}
	var batch []json.RawMessage // the answers to a batch
	if json.Unmarshal([]byte(body), &batch) == nil {
		for _, b := range batch {
			if try(b) {
				return result, rpcErr, true
			}
		}
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		case line == "":
			if len(data) > 0 && try(data) {
				return result, rpcErr, true
			}
			data = data[:0]
		}
	}
	if len(data) > 0 && try(data) {
		return result, rpcErr, true
	}
	return nil, "", false
}

// mcpMessage reads an MCP request and its answer: a tools/call is a call
// seen from the client's side; a tools/list answer gives contracts; an
// initialize answer names the session.
func (d *har) mcpMessage(k *sink, n int64, e *harEntry, msg rpcRequest, u *url.URL, start, end time.Time) error {
	session := firstOf(header(e.Request.Headers, "Mcp-Session-Id"), header(e.Response.Headers, "Mcp-Session-Id"))
	switch msg.Method {
	case "tools/call":
		if msg.Params.Name == "" {
			return k.bad(n, fmt.Sprintf("log.entries[%d].request.postData.text", n-1), errors.New("tools/call without params.name"))
		}
		d.mcp++
		return d.toolCall(k, n, e, msg, u, session, start, end)
	case "tools/list":
		if result, _, ok := rpcAnswer(e.Response.Content.Text, msg.ID); ok {
			var r struct {
				Tools []toolDef `json:"tools"`
			}
			json.Unmarshal(result, &r)
			for _, t := range r.Tools {
				if c, ok := t.contract(); ok {
					d.contracts[t.Name] = c
				}
			}
		}
	}
	return nil
}

// run is the run of an MCP session: the weakest identity (a reconnect
// gets a new session), the only one a capture of HTTP traffic has.
func (d *har) run(k *sink, n int64, session, actor string, at time.Time) (activity.RunID, error) {
	if session == "" {
		return "", nil
	}
	if id, ok := d.runs[session]; ok {
		return id, nil
	}
	r, err := k.run(activity.Run{Actor: actor, IdentifiedBy: activity.RunBySession, StartedAt: at, Source: k.at(n),
		Evidence: "Mcp-Session-Id " + session + " (a transport session: a reconnect would start another)"})
	if err != nil {
		return "", k.fail(n, err)
	}
	d.runs[session] = r.ID
	return r.ID, nil
}

// toolCall records an MCP tools/call seen in the archive: the client's
// side of it. What the server did beyond its answer is not in it.
func (d *har) toolCall(k *sink, n int64, e *harEntry, msg rpcRequest, u *url.URL, session string, start, end time.Time) error {
	args, err := canonArgs(msg.Params.Arguments)
	if err != nil {
		return k.bad(n, fmt.Sprintf("log.entries[%d].request.postData.text", n-1), err)
	}
	actor := harActor(e)
	run, err := d.run(k, n, session, actor, start)
	if err != nil {
		return err
	}
	prov := d.at(k, n)
	call := activity.Call{RunID: run, Actor: actor, Method: "tools/call", Tool: msg.Params.Name, ReceivedAt: start, Arguments: args,
		Disposition: activity.DispositionNewExecution, Source: prov, JSONRPCID: activity.Some(string(msg.ID))}
	if session != "" {
		call.SessionID = activity.Some(session)
	}
	if v := firstOf(header(e.Request.Headers, "MCP-Protocol-Version"), protocolFromMeta(e.Request.PostData.Text)); v != "" {
		call.ProtocolVersion = activity.Some(v)
	}
	id := activity.NewExecutionID(start)
	call.ExecutionID = id
	c, err := k.call(call)
	if err != nil {
		return k.fail(n, err)
	}
	contract, ok := d.contracts[msg.Params.Name]
	if !ok {
		contract = activity.ContractBlockedAfterUnknown
	}
	nr := []activity.Fact{activity.FactAuthorization, activity.FactDispatch, activity.FactIdempotencyKey, activity.FactFingerprint}
	if run == "" {
		nr = append(nr, activity.FactRunIdentity)
	}
	if !d.atClient() {
		nr = append(nr, activity.FactDelivery)
	}
	if _, err := k.accept(activity.Execution{ID: id, Action: activity.Action{Actor: actor, Tool: msg.Params.Name, Channel: activity.ChannelMCP,
		Target: u.Host + u.Path, Method: "tools/call", Arguments: args}, RunID: run, CreatedByCall: c.ID, Contract: contract,
		NotRecorded: nr, Times: activity.Times{Accepted: activity.Some(start)}, Source: prov}); err != nil {
		return k.fail(n, err)
	}
	// The archive shows the request leave and the server's answer, not the
	// server's authorization or dispatch.
	steps := []activity.Transition{{To: activity.StateAuthorized, Implied: true}, {To: activity.StateDispatched, Implied: true}}
	result, rpcErr, found := rpcAnswer(e.Response.Content.Text, msg.ID)
	failure := firstOf(e.Response.Error, e.Error)
	var r struct {
		IsError bool `json:"isError"`
	}
	switch {
	case e.Response.Status == 0 || !found:
		d.noResponse++
		steps = append(steps, activity.Transition{To: activity.StateUnknown, At: activity.Some(end),
			Reason: "no answer in the archive" + suffix(failure) + ": the server may have acted"})
	case rpcErr != "":
		steps = append(steps, activity.Transition{To: activity.StateUnknown, At: activity.Some(end), Reason: rpcErr + ": the server may have acted"})
	case json.Unmarshal(result, &r) == nil && r.IsError:
		t := activity.Transition{At: activity.Some(end)}
		t.To, t.Reason = activity.ToolErrorState(result)
		steps = append(steps, t)
	default:
		steps = append(steps, activity.Transition{To: activity.StateSucceeded, At: activity.Some(end), Created: activity.CreatedInToolResult(result), Shows: activity.ListedInToolResult(result),
			Reason: "the tool answered; the target's own answer is not in the archive"})
	}
	if last := steps[len(steps)-1].To; d.atClient() && (last == activity.StateSucceeded || last == activity.StateFailed) {
		steps = append(steps, activity.Transition{To: activity.StateDelivered, At: activity.Some(end), Reason: "the client's capture holds the answer"})
	}
	return d.steps(k, n, id, prov, steps)
}

// protocolFromMeta reads the 2026-07-28 protocol version a request names
// in its _meta.
func protocolFromMeta(body string) string {
	var m struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	json.Unmarshal([]byte(body), &m)
	var v string
	json.Unmarshal(m.Params.Meta["io.modelcontextprotocol/protocolVersion"], &v)
	return v
}

// at is an entry's provenance: its number, and its path in the archive.
func (d *har) at(k *sink, n int64) activity.Provenance {
	p := k.at(n)
	p.Record = fmt.Sprintf("log.entries[%d]", n-1)
	return p
}

func (d *har) steps(k *sink, n int64, id activity.ExecutionID, prov activity.Provenance, steps []activity.Transition) error {
	for _, t := range steps {
		t.ExecutionID, t.Source = id, prov
		if _, err := k.w.Transition(t); err != nil {
			return k.fail(n, err)
		}
	}
	return nil
}

// request records an HTTP request to a target. Each request is an
// execution of its own; one that carries an earlier request's
// Idempotency-Key is answered from the first by the target, and the
// analysis reads it so.
func (d *har) request(k *sink, n int64, e *harEntry, u *url.URL, start, end time.Time) error {
	method := strings.ToUpper(e.Request.Method)
	body, mime := "", ""
	if p := e.Request.PostData; p != nil {
		body, mime = p.Text, p.MimeType
		if body == "" && len(p.Params) > 0 {
			// HAR 1.2: text and params are mutually exclusive; a form
			// may come as its fields alone.
			form := url.Values{}
			for _, f := range p.Params {
				form.Add(f.Name, f.Value)
			}
			body, mime = form.Encode(), "application/x-www-form-urlencoded"
		}
	}
	args, err := requestArgs(body, firstOf(mime, header(e.Request.Headers, "Content-Type")))
	if err != nil {
		return k.bad(n, fmt.Sprintf("log.entries[%d].request.postData.text", n-1), err)
	}
	actor := harActor(e)
	target := u.Host + u.Path
	tool := "http " + method + " " + target
	prov := d.at(k, n)
	id := activity.NewExecutionID(start)
	c, err := k.call(activity.Call{Actor: actor, Method: "http", Tool: tool, ReceivedAt: start, Arguments: args, Source: prov,
		Disposition: activity.DispositionNewExecution, ExecutionID: id})
	if err != nil {
		return k.fail(n, err)
	}
	key := strings.Trim(header(e.Request.Headers, "Idempotency-Key", "X-Idempotency-Key"), `" `)
	nr := []activity.Fact{activity.FactAuthorization, activity.FactRunIdentity, activity.FactFingerprint}
	if !d.atClient() {
		nr = append(nr, activity.FactDelivery)
	}
	ex := activity.Execution{ID: id, Action: activity.Action{Actor: actor, Tool: tool, Channel: activity.ChannelHTTP, Target: target, Method: method, Arguments: args},
		CreatedByCall: c.ID, Contract: httpContract(method, key), NotRecorded: nr, Times: activity.Times{Accepted: activity.Some(start)}, Source: prov}
	if len(e.Request.Headers) > 0 {
		ex.IdempotencyKey = activity.Some(key) // every header is in the archive: "" is none sent
	} else {
		ex.NotRecorded = append(ex.NotRecorded, activity.FactIdempotencyKey)
	}
	if _, err := k.accept(ex); err != nil {
		return k.fail(n, err)
	}
	steps := []activity.Transition{{To: activity.StateAuthorized, Implied: true}, {To: activity.StateDispatched, At: activity.Some(start)}, harOutcome(e, end)}
	if last := steps[2].To; d.atClient() && (last == activity.StateSucceeded || last == activity.StateFailed) {
		steps = append(steps, activity.Transition{To: activity.StateDelivered, At: activity.Some(end), Reason: "the client's capture holds the answer"})
	}
	return d.steps(k, n, id, prov, steps)
}

// harOutcome reads a response: its status under the shared rule, what it
// says it created, a replayed answer, or no response at all.
func harOutcome(e *harEntry, end time.Time) activity.Transition {
	t := activity.Transition{At: activity.Some(end)}
	st := e.Response.Status
	if st == 0 {
		why := firstOf(e.Response.Error, e.Error, e.Comment)
		if neverSent(why) {
			t.To, t.Reason = activity.StateFailedBefore, "not sent: the browser could not reach the target ("+why+")"
			return t
		}
		t.To = activity.StateUnknown
		t.Reason = "no response" + suffix(why) + ": the target may have acted"
		return t
	}
	t.TargetStatus = activity.Some(st)
	t.To, t.Reason = activity.StateForHTTPAnswer(st, e.Response.Content.Text)
	switch {
	case st == 409 && strings.Contains(strings.ToLower(e.Response.Content.Text), "idempotency"):
		t.To, t.Reason = activity.StateFailed, "the target answered 409: a request with this Idempotency-Key is still in progress, so this one did nothing"
	case t.To == activity.StateSucceeded:
		if activity.SafeMethod(e.Request.Method) { // a read creates nothing; it may list what others did
			t.Shows = activity.ListedInHTTP(st, e.Response.Content.Text)
		} else {
			t.Created = activity.CreatedInHTTP(st, header(e.Response.Headers, "Location"), e.Response.Content.Text)
		}
		t.Replayed = replayMark(func(name string) string { return header(e.Response.Headers, name) })
		if t.Replayed != "" {
			t.Reason = "the target replayed its stored answer (" + t.Replayed + ")"
		}
	}
	return t
}

// neverSentErrors are Chromium's network errors (net/base/net_error_list.h)
// raised before a connection to the target existed: no byte of the
// request reached it. A reset, a timeout or an empty response after the
// request went out (ERR_CONNECTION_RESET, ERR_TIMED_OUT,
// ERR_EMPTY_RESPONSE) are not among them: the target may have acted.
// ERR_CERT_ names the certificate errors (-200 to -299), raised while the
// TLS handshake checks the server's certificate, before any HTTP byte; of
// the other TLS errors only those of the handshake itself are here
// (ERR_SSL_PROTOCOL_ERROR may come later in a connection: not here).
var neverSentErrors = []string{"ERR_CONNECTION_REFUSED", "ERR_NAME_NOT_RESOLVED", "ERR_ADDRESS_UNREACHABLE",
	"ERR_INTERNET_DISCONNECTED", "ERR_CONNECTION_TIMED_OUT", "ERR_NAME_RESOLUTION_FAILED", "ERR_BLOCKED_BY_CLIENT",
	"ERR_PROXY_CONNECTION_FAILED", "ERR_ADDRESS_INVALID", "ERR_CERT_", "ERR_SSL_VERSION_OR_CIPHER_MISMATCH",
	"ERR_SSL_PINNED_KEY_NOT_IN_CERT_CHAIN", "ERR_BAD_SSL_CLIENT_AUTH_CERT", "ERR_SSL_CLIENT_AUTH_CERT_NEEDED"}

// neverSent reports whether a HAR entry's error says the request never
// left the browser.
func neverSent(why string) bool {
	for _, e := range neverSentErrors {
		if strings.Contains(why, "net::"+e) {
			return true
		}
	}
	return false
}

// replayMark reads the headers targets mark a replayed answer with:
// Idempotent-Replayed: true (Stripe and others), X-Idempotency-Replayed,
// and Original-Request naming an earlier request than this one's.
func replayMark(get func(string) string) string {
	for _, h := range []string{"Idempotent-Replayed", "X-Idempotency-Replayed", "X-Idempotent-Replayed"} {
		if strings.EqualFold(strings.TrimSpace(get(h)), "true") {
			mark := h + ": true"
			if o := get("Original-Request"); o != "" {
				mark += ", Original-Request: " + o
			}
			return mark
		}
	}
	if o, id := get("Original-Request"), get("Request-Id"); o != "" && id != "" && o != id {
		return "Original-Request: " + o + " (this request: " + id + ")"
	}
	return ""
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// harActor names the client as far as an archive can: its User-Agent.
func harActor(e *harEntry) string {
	ua := header(e.Request.Headers, "User-Agent")
	if ua == "" {
		return "har:unknown-client"
	}
	product, _, _ := strings.Cut(ua, " ")
	return "har:" + product
}

// canonArgs canonicalises tool arguments (absent: an empty object).
func canonArgs(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return json.RawMessage("{}"), nil
	}
	out, err := canon.Transform(raw)
	if err != nil {
		return nil, err
	}
	if red, ok := activity.RedactSecretFields(out); ok {
		// Canonical again: the redaction is re-encoded.
		if out, err = canon.Transform(red); err != nil {
			return nil, err
		}
	}
	return json.RawMessage(out), nil
}

// requestArgs turns a request body into arguments: a form (the way Stripe
// and others take parameters) as its fields, JSON as is, anything else as
// text.
func requestArgs(body, mime string) (json.RawMessage, error) {
	if strings.HasPrefix(strings.ToLower(mime), "application/x-www-form-urlencoded") {
		if q, err := url.ParseQuery(body); err == nil {
			fields := map[string]any{}
			for k, vs := range q {
				if len(vs) == 1 {
					fields[k] = vs[0]
				} else {
					fields[k] = vs
				}
			}
			return canonArgs(mustJSON(fields))
		}
	}
	return bodyArgs(body)
}

// bodyArgs turns a request body into arguments: JSON as is, anything else
// as text.
func bodyArgs(body string) (json.RawMessage, error) {
	if strings.TrimSpace(body) == "" {
		return json.RawMessage("{}"), nil
	}
	if json.Valid([]byte(body)) {
		return canonArgs(json.RawMessage(body))
	}
	return canonArgs(mustJSON(map[string]string{"body": body}))
}
