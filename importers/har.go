package importers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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
			MimeType string `json:"mimeType"`
			Text     string `json:"text"`
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
	keys       map[string]activity.ExecutionID // Idempotency-Key → execution
}

func (d *har) note() string {
	return fmt.Sprintf("har 1.2: %d MCP tools/call entries (seen from the client: what the server did beyond its answer is not in the archive), "+
		"%d HTTP requests to targets, %d without a response (status 0 or no body: outcome unknown). Not recorded: authorization, "+
		"which process sent each request (the archive names connections, not processes), delivery beyond the capture point. "+
		"Provenance lines are entry numbers.", d.mcp, d.http, d.noResponse)
}

func (d *har) decode(ctx context.Context, in *lines, k *sink) error {
	d.keys = map[string]activity.ExecutionID{}
	dec := json.NewDecoder(in.r)
	if err := harSeek(dec, "log", "entries"); err != nil {
		return &LineError{File: k.file, Line: 1, Field: "log.entries", Err: err}
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
func harSeek(dec *json.Decoder, path ...string) error {
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
	if e.Request.PostData != nil {
		if msg, ok := jsonRPCCall(e.Request.PostData.Text); ok {
			d.mcp++
			return d.toolCall(k, n, e, msg, u, start, end)
		}
	}
	d.http++
	return d.request(k, n, e, u, start, end)
}

// rpcCall is a JSON-RPC tools/call request.
type rpcCall struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
}

func jsonRPCCall(body string) (rpcCall, bool) {
	var m rpcCall
	if json.Unmarshal([]byte(body), &m) != nil || m.Method != "tools/call" || m.Params.Name == "" {
		return m, false
	}
	return m, true
}

// rpcAnswer finds the JSON-RPC response to id in a body: one JSON message,
// or SSE frames whose data lines carry messages.
func rpcAnswer(body string, id json.RawMessage) (result json.RawMessage, rpcErr string, found bool) {
	try := func(b []byte) bool {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &m) != nil || !bytes.Equal(bytes.TrimSpace(m.ID), bytes.TrimSpace(id)) {
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

// toolCall records an MCP tools/call seen in the archive: the client's
// side of it.
func (d *har) toolCall(k *sink, n int64, e *harEntry, msg rpcCall, u *url.URL, start, end time.Time) error {
	args, err := canonArgs(msg.Params.Arguments)
	if err != nil {
		return k.bad(n, fmt.Sprintf("log.entries[%d].request.postData.text", n-1), err)
	}
	actor := harActor(e)
	call := activity.Call{Actor: actor, Method: "tools/call", Tool: msg.Params.Name, ReceivedAt: start, Arguments: args,
		Disposition: activity.DispositionNewExecution, Source: k.at(n), JSONRPCID: activity.Some(string(msg.ID))}
	if sid := header(e.Request.Headers, "Mcp-Session-Id"); sid != "" {
		call.SessionID = activity.Some(sid)
	}
	if v := header(e.Request.Headers, "MCP-Protocol-Version"); v != "" {
		call.ProtocolVersion = activity.Some(v)
	}
	id := activity.NewExecutionID(start)
	call.ExecutionID = id
	c, err := k.call(call)
	if err != nil {
		return k.fail(n, err)
	}
	if _, err := k.accept(activity.Execution{ID: id, Action: activity.Action{Actor: actor, Tool: msg.Params.Name, Channel: activity.ChannelMCP,
		Target: u.Host + u.Path, Method: "tools/call", Arguments: args}, CreatedByCall: c.ID, Contract: activity.ContractBlockedAfterUnknown,
		NotRecorded: []activity.Fact{activity.FactAuthorization, activity.FactDispatch, activity.FactIdempotencyKey, activity.FactRunIdentity, activity.FactFingerprint},
		Times:       activity.Times{Accepted: activity.Some(start)}, Source: k.at(n)}); err != nil {
		return k.fail(n, err)
	}
	steps := []activity.Transition{{To: activity.StateAuthorized}, {To: activity.StateDispatched}}
	result, rpcErr, found := rpcAnswer(e.Response.Content.Text, msg.ID)
	failure := firstOf(e.Response.Error, e.Error)
	switch {
	case e.Response.Status == 0 || !found:
		d.noResponse++
		steps = append(steps, activity.Transition{To: activity.StateUnknown, At: activity.Some(end),
			Reason: "no answer in the archive" + suffix(failure) + ": the server may have acted"})
	case rpcErr != "":
		steps = append(steps, activity.Transition{To: activity.StateUnknown, At: activity.Some(end), Reason: rpcErr + ": the server may have acted"})
	default:
		to := activity.StateSucceeded
		reason := "the tool answered; the target's own answer is not in the archive"
		var r struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(result, &r) == nil && r.IsError {
			to, reason = activity.StateUnknown, "the tool answered isError; the archive does not show whether the target acted"
		}
		steps = append(steps, activity.Transition{To: to, At: activity.Some(end), Reason: reason})
		if to == activity.StateSucceeded {
			steps = append(steps, activity.Transition{To: activity.StateDelivered, At: activity.Some(end)})
		}
	}
	return d.steps(k, n, id, steps)
}

func (d *har) steps(k *sink, n int64, id activity.ExecutionID, steps []activity.Transition) error {
	for _, t := range steps {
		t.ExecutionID = id
		if _, err := k.w.Transition(t); err != nil {
			return k.fail(n, err)
		}
	}
	return nil
}

// request records an HTTP request to a target.
func (d *har) request(k *sink, n int64, e *harEntry, u *url.URL, start, end time.Time) error {
	method := strings.ToUpper(e.Request.Method)
	body := ""
	if e.Request.PostData != nil {
		body = e.Request.PostData.Text
	}
	args, err := bodyArgs(body)
	if err != nil {
		return k.bad(n, fmt.Sprintf("log.entries[%d].request.postData.text", n-1), err)
	}
	key := strings.Trim(header(e.Request.Headers, "Idempotency-Key", "X-Idempotency-Key"), `" `)
	actor := harActor(e)
	target := u.Host + u.Path
	tool := "http " + method + " " + target
	outcome := harOutcome(e, end)
	call := activity.Call{Actor: actor, Method: "http", Tool: tool, ReceivedAt: start, Arguments: args, Source: k.at(n)}
	if prior, ok := d.keys[key]; key != "" && ok {
		e0, err := k.w.Execution(prior)
		if err != nil {
			return k.fail(n, err)
		}
		if e0.State == activity.StateUnknown {
			// The key's first request got no answer: this one continues it.
			call.Disposition, call.ExecutionID, call.Reason = activity.DispositionAttached, prior, "sent again with the same Idempotency-Key after an unknown outcome"
			if _, err := k.call(call); err != nil {
				return k.fail(n, err)
			}
			return d.steps(k, n, prior, []activity.Transition{{To: activity.StateDispatched, At: activity.Some(start), Reason: "resent with Idempotency-Key " + key}, outcome})
		}
		call.Disposition, call.ExecutionID, call.Reason = activity.DispositionAttached, prior, "repeated Idempotency-Key "+key+" of an answered request: the target answers from its record"
		if _, err := k.call(call); err != nil {
			return k.fail(n, err)
		}
		return nil
	}
	id := activity.NewExecutionID(start)
	call.Disposition, call.ExecutionID = activity.DispositionNewExecution, id
	c, err := k.call(call)
	if err != nil {
		return k.fail(n, err)
	}
	contract := httpContract(method, key)
	nr := []activity.Fact{activity.FactAuthorization, activity.FactDelivery, activity.FactRunIdentity, activity.FactFingerprint}
	ex := activity.Execution{ID: id, Action: activity.Action{Actor: actor, Tool: tool, Channel: activity.ChannelHTTP, Target: target, Method: method, Arguments: args},
		CreatedByCall: c.ID, Times: activity.Times{Accepted: activity.Some(start)}, Source: k.at(n)}
	if contract == activity.ContractRepeatableWithKey {
		ex.IdempotencyKey = activity.Some(key)
		d.keys[key] = id
	}
	ex.Contract, ex.NotRecorded = contract, nr
	if _, err := k.accept(ex); err != nil {
		return k.fail(n, err)
	}
	return d.steps(k, n, id, []activity.Transition{{To: activity.StateAuthorized}, {To: activity.StateDispatched, At: activity.Some(start)}, outcome})
}

// harOutcome reads a response: its status under the shared rule, a
// replayed answer, or no response at all.
func harOutcome(e *harEntry, end time.Time) activity.Transition {
	t := activity.Transition{At: activity.Some(end)}
	st := e.Response.Status
	if st == 0 {
		t.To = activity.StateUnknown
		t.Reason = "no response" + suffix(firstOf(e.Response.Error, e.Error, e.Comment)) + ": the target may have acted"
		return t
	}
	t.TargetStatus = activity.Some(st)
	t.To, t.Reason = activity.StateForHTTPStatus(st)
	switch {
	case st == 409 && strings.Contains(strings.ToLower(e.Response.Content.Text), "idempotency"):
		t.To, t.Reason = activity.StateUnknown, "the target reports this Idempotency-Key is still being processed (409)"
	case t.To == activity.StateSucceeded && strings.EqualFold(header(e.Response.Headers, "Idempotent-Replayed", "X-Idempotency-Replayed"), "true"):
		t.Reason = "the target replayed its stored answer for this Idempotency-Key"
	}
	return t
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
	return json.RawMessage(out), err
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
