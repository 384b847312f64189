package importers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

func init() {
	formats["mcp-log"] = func(path string) decoder { return &mcpLog{file: filepath.Base(path)} }
	linePatterns["mcp-log"] = regexp.MustCompile(`^(\S+ ){0,2}(read|write): [\[{]|^\S+ \[[^\]]+\] (\[[^\]]+\] )?(Message from (client|server): |Initializing server|Server started)`)
}

var (
	// The Go SDK's LoggingTransport: "read: {json}", "write: {json}", with
	// an optional timestamp when its writer adds one (RFC 3339, or the log
	// package's "2006/01/02 15:04:05.000000").
	sdkLine = regexp.MustCompile(`^(?:(\d{4}-\d\d-\d\dT\S+|\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?) )?(read|write)(: | error: )(.*)$`)
	// Claude Desktop: "2026-05-09T15:57:42.410Z [server] [info] <message>",
	// or with the level first ("[info] [server]"), or with no server
	// (older mcp.log), each message maybe followed by " { metadata: … }".
	claudeLine = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT[\d:.]+Z) \[([^\]]+)\](?: \[([^\]]+)\])? (.*)$`)
	claudeMsg  = regexp.MustCompile(`^Message from (client|server): (.*)$`)
	claudeMeta = regexp.MustCompile(` \{ metadata: .*\}$`)
	// Newer Claude Desktop builds leave payloads out: `method="tools/call" id=6 params`,
	// `id=6 result(1 blocks)`, `id=9 error(code=-32603)`, `method="notifications/initialized"`.
	claudeRedacted = regexp.MustCompile(`^(?:method="([^"]+)")? ?(?:id=(\S+))?(?: (result|error)(?:\((?:code=(-?\d+))?[^)]*\))?)?(?: params)?$`)
	// The Go SDK writes a marshal failure without a newline: the next
	// message follows on the same line.
	sdkGlued = regexp.MustCompile(`(?:^|[^a-z])((?:read|write): [\[{].*)$`)
)

// logLevels are the levels Claude Desktop brackets.
var logLevels = map[string]bool{"info": true, "error": true, "warn": true, "warning": true, "debug": true}

// mcpLog imports raw MCP JSON-RPC message logs: the Go SDK's
// LoggingTransport lines and Claude Desktop's mcp*.log lines. Each log is
// one client's connections; requests and responses are paired by JSON-RPC
// id per connection (a server, for Claude). A tools/call with a result is
// done; with an error, a cancellation or no answer, its outcome is
// unknown. What the server did beyond its answer is not in such a log.
type mcpLog struct {
	file     string
	side     string // "client" or "server": whose messages the log calls "write"
	run      activity.RunID
	open     map[string]*mcpPending // connection + id → request
	order    []string
	calls    int64
	answered int64
	other    int64 // lines that are not MCP messages (server stderr, log noise)
	read     int64 // lines that are (a message, or Claude's own account)
	// failedCalls: tools/call writes the transport failed (the Go SDK's
	// "write error: … sending \"tools/call\" …"), which logs no payload;
	// firstFailed is the first one's line.
	failedCalls, firstFailed int64
	untimed                  bool
	redacted                 int64
	// contracts are what tools/list annotations say of each tool.
	contracts map[string]activity.Contract
}

type mcpPending struct {
	id       activity.ExecutionID
	line     int64
	at       time.Time
	cancel   string    // why the client cancelled it, if it did
	cancelAt time.Time // when
	// dir is the direction the request travelled: its answer travels the
	// other way. Each side numbers its own requests (the Go SDK from 1 on
	// each), so a server's ping with the same id is no answer to it.
	dir string
}

func (d *mcpLog) note() string {
	n := fmt.Sprintf("raw MCP log: %d tools/call requests, %d answered; %d other lines ignored (server stderr, log noise). "+
		"Seen from the %s side: authorization, dispatch to the target and the target's answer are not in such a log; "+
		"calls are one run per log file.", d.calls, d.answered, d.other, firstOf(d.side, "client"))
	if d.failedCalls > 0 {
		n += fmt.Sprintf(" %d tools/call writes failed in the transport (the first at line %d): the SDK logs no payload of a failed write, so which tool is not recorded, and the server may have got and acted on it.", d.failedCalls, d.firstFailed)
	}
	if d.redacted > 0 {
		n += fmt.Sprintf(" %d Claude Desktop lines carry no payload (newer builds redact it): their tool names and arguments are not recorded.", d.redacted)
	}
	if d.untimed {
		n += " The log has no timestamps: calls are placed at the import time in log order, so the analysis groups them as if they were close together."
	}
	return n
}

// mcpMsg is a JSON-RPC message.
type mcpMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		RequestID json.RawMessage `json:"requestId"` // notifications/cancelled
		Reason    string          `json:"reason"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (d *mcpLog) decode(ctx context.Context, in *lines, k *sink) error {
	d.open, d.contracts = map[string]*mcpPending{}, map[string]activity.Contract{}
	err := eachLine(ctx, in, k, func(n int64, line []byte) error {
		if err := d.line(k, n, string(line)); err != nil {
			return err
		}
		k.count()
		return nil
	})
	if err != nil {
		return err
	}
	if d.read == 0 && d.other > 0 {
		// Not a quiet MCP log: no line of it is one (a service's own log,
		// given --format mcp-log).
		return fmt.Errorf("%s: none of its %d lines is an MCP message (the Go SDK's LoggingTransport read:/write: lines, or a Claude Desktop mcp*.log)", k.file, d.other)
	}
	// Requests still open at the end: the log shows no answer, which is
	// not the same as showing none came (it may simply end here).
	for _, key := range d.order {
		if p, ok := d.open[key]; ok {
			t := activity.Transition{To: activity.StateUnknown, Implied: true, Reason: "no answer in the log: the server may have acted"}
			if p.cancel != "" {
				t.At, t.Reason = optTime(p.cancelAt), "cancelled by the client ("+p.cancel+") and never answered: the server may have acted"
			}
			if err := d.close(k, p.line, p, t); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *mcpLog) line(k *sink, n int64, s string) error {
	if m := claudeLine.FindStringSubmatch(s); m != nil {
		d.read++
		return d.claude(k, n, m)
	}
	if strings.HasPrefix(s, "LoggingTransport: ") {
		if g := sdkGlued.FindStringSubmatch(s); g != nil {
			s = g[1] // the message the failure message was glued to
		}
	}
	m := sdkLine.FindStringSubmatch(s)
	if m == nil {
		d.other++ // slog lines, a server's own output
		k.noise(n)
		return nil
	}
	d.read++
	var at time.Time
	if m[1] != "" {
		var err error
		if at, err = parseLogTime(m[1]); err != nil {
			return k.bad(n, "time", err)
		}
	} else {
		d.untimed = true
	}
	if m[3] == " error: " {
		if m[2] == "write" && strings.Contains(m[4], `"tools/call"`) {
			// The SDK logs a failed write's error, never its payload: a
			// tools/call whose POST failed may have reached the server.
			d.failedCalls++
			if d.firstFailed == 0 {
				d.firstFailed = n
			}
		}
		return d.closeOpen(k, n, at, "", "the connection failed ("+m[4]+")")
	}
	return d.payload(k, n, at, "", m[2], m[4])
}

// claude reads one Claude Desktop line: a message between Claude and a
// server, or Claude's own account of the connection (noise, except that a
// closed transport leaves the open requests unanswered).
func (d *mcpLog) claude(k *sink, n int64, m []string) error {
	at, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		return k.bad(n, "time", fmt.Errorf("%q is not an RFC 3339 time", m[1]))
	}
	server, text := m[2], m[4]
	switch {
	case m[3] != "" && logLevels[strings.ToLower(m[2])]:
		server = m[3] // "[info] [server]"
	case m[3] == "" && logLevels[strings.ToLower(m[2])]:
		server = "" // an older mcp.log line: "[info] message"
	}
	text = claudeMeta.ReplaceAllString(text, "")
	msg := claudeMsg.FindStringSubmatch(text)
	if msg == nil {
		d.other++
		k.noise(n)
		if strings.HasPrefix(text, "Server transport closed") || strings.HasPrefix(text, "Client transport closed") {
			return d.closeOpen(k, n, at, server, "the connection to the server closed")
		}
		return nil
	}
	// Messages from the client are what Claude sent: the client side.
	d.side = "client"
	return d.payload(k, n, at, server, map[string]string{"client": "write", "server": "read"}[msg[1]], msg[2])
}

func parseLogTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006/01/02 15:04:05.999999", "2006/01/02 15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time", s)
}

// payload reads one logged message (or batch) sent in direction dir
// ("write": by the side that logs) on connection conn.
func (d *mcpLog) payload(k *sink, n int64, at time.Time, conn, dir, payload string) error {
	payload = strings.TrimSpace(payload)
	if r := claudeRedacted.FindStringSubmatch(payload); r != nil && (strings.HasPrefix(payload, "method=") || strings.HasPrefix(payload, "id=")) {
		d.redacted++
		msg := mcpMsg{ID: json.RawMessage(r[2]), Method: r[1]}
		switch r[3] {
		case "result":
			msg.Result = json.RawMessage(`{}`)
		case "error":
			code, _ := strconv.Atoi(r[4])
			msg.Error = &struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}{Code: code, Message: "(message not recorded)"}
		}
		return d.message(k, n, at, conn, dir, msg, true)
	}
	var msgs []mcpMsg
	if strings.HasPrefix(payload, "[") {
		if err := json.Unmarshal([]byte(payload), &msgs); err != nil {
			return k.bad(n, "", fmt.Errorf("not a JSON-RPC batch: %w", err))
		}
	} else {
		var m mcpMsg
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			return k.bad(n, "", fmt.Errorf("not a JSON-RPC message: %w", err))
		}
		msgs = []mcpMsg{m}
	}
	for _, m := range msgs {
		if err := d.message(k, n, at, conn, dir, m, false); err != nil {
			return err
		}
	}
	return nil
}

func (d *mcpLog) message(k *sink, n int64, at time.Time, conn, dir string, m mcpMsg, redacted bool) error {
	id := string(bytes.TrimSpace(m.ID))
	switch {
	case m.Method == "tools/call" && id != "":
		if d.side == "" {
			d.side = map[string]string{"write": "client", "read": "server"}[dir]
		}
		return d.request(k, n, at, conn, dir, id, m, redacted)
	case m.Method == "notifications/cancelled":
		// A cancellation may cross the answer: the request stays open, and
		// an answer that still comes shows the server acted.
		key := conn + "\x00" + string(bytes.TrimSpace(m.Params.RequestID))
		if p, ok := d.open[key]; ok {
			p.cancel, p.cancelAt = firstOf(m.Params.Reason, "no reason given"), at
		}
	case m.Method == "" && id != "" && len(m.Result) > 0 && d.toolList(m.Result):
		return nil // a tools/list answer: its annotations give contracts
	case m.Method == "" && id != "":
		p, ok := d.open[conn+"\x00"+id]
		if !ok || p.dir == dir && dir != "" {
			return nil // the answer to something other than a tools/call (the other side's request of that id)
		}
		d.answered++
		var r struct {
			IsError bool `json:"isError"`
		}
		json.Unmarshal(m.Result, &r)
		switch {
		case m.Error != nil:
			return d.close(k, n, p, activity.Transition{To: activity.StateUnknown, At: optTime(at), Source: k.atRecord(n, "jsonrpc id "+id+" response"),
				Reason: fmt.Sprintf("JSON-RPC error %d %s: the server may have acted", m.Error.Code, m.Error.Message)})
		case r.IsError:
			t := activity.Transition{At: optTime(at), Source: k.atRecord(n, "jsonrpc id "+id+" response")}
			if t.To, t.Reason = activity.ToolErrorState(m.Result); t.To == activity.StateUnknown {
				return d.close(k, n, p, t) // no outcome to deliver
			}
			return d.answer(k, n, at, p, t)
		default:
			return d.answer(k, n, at, p, activity.Transition{To: activity.StateSucceeded, At: optTime(at), Source: k.atRecord(n, "jsonrpc id "+id+" response"),
				Created: activity.CreatedInToolResult(m.Result), Shows: activity.ListedInToolResult(m.Result),
				Reason: "the tool answered; the target's own answer is not in the log"})
		}
	}
	return nil
}

// answer records a tool's answer to p, and whether it reached the client:
// a client-side log shows it arrived, unless the client had cancelled the
// request first; a server-side log cannot say.
func (d *mcpLog) answer(k *sink, n int64, at time.Time, p *mcpPending, t activity.Transition) error {
	if err := d.close(k, n, p, t); err != nil {
		return err
	}
	next := activity.Transition{ExecutionID: p.id, To: activity.StateDelivered, At: optTime(at), Source: t.Source}
	switch {
	case p.cancel != "":
		next.To, next.Reason = activity.StateNotDelivered, "the client had cancelled the request ("+p.cancel+") before this answer"
	case d.side != "client":
		return nil
	}
	if _, err := k.w.Transition(next); err != nil {
		return k.fail(n, err)
	}
	return nil
}

// toolList reads a tools/list result, keeping each tool's contract as its
// annotations give it; it reports whether result was one.
func (d *mcpLog) toolList(result json.RawMessage) bool {
	var r struct {
		Tools []toolDef `json:"tools"`
	}
	if json.Unmarshal(result, &r) != nil || len(r.Tools) == 0 {
		return false
	}
	for _, t := range r.Tools {
		if c, ok := t.contract(); ok {
			d.contracts[t.Name] = c
		}
	}
	return true
}

func optTime(t time.Time) activity.Opt[time.Time] {
	if t.IsZero() {
		return activity.Opt[time.Time]{}
	}
	return activity.Some(t)
}

// request records a tools/call request.
func (d *mcpLog) request(k *sink, n int64, at time.Time, conn, dir, id string, m mcpMsg, redacted bool) error {
	if d.run == "" {
		r, err := k.run(activity.Run{Actor: "mcp-log:" + d.file, IdentifiedBy: activity.RunBySourceSpan,
			Evidence: "one log file: " + d.file, StartedAt: at, Source: k.atRecord(n, "jsonrpc id "+id+" request")})
		if err != nil {
			return k.fail(n, err)
		}
		d.run = r.ID
	}
	tool := firstOf(m.Params.Name, "(not recorded)")
	args, err := canonArgs(m.Params.Arguments)
	if err != nil {
		return k.bad(n, "params.arguments", err)
	}
	if redacted {
		// Nothing says two redacted calls asked for the same thing: the
		// request id keeps each one its own effect.
		args = mustJSON(map[string]string{"not_recorded": "payload redacted by the client's log", "jsonrpc_id": id})
	}
	d.calls++
	target := firstOf(conn, "mcp-server")
	nr := []activity.Fact{activity.FactAuthorization, activity.FactDispatch, activity.FactIdempotencyKey, activity.FactFingerprint}
	if d.side == "server" {
		nr = append(nr, activity.FactDelivery)
	}
	eid := activity.NewExecutionID(firstTime(at, k.w.Now()))
	actor := "mcp-log:" + d.file
	prov := k.atRecord(n, "jsonrpc id "+id+" request")
	call := activity.Call{RunID: d.run, Actor: actor, Method: "tools/call", Tool: tool, ReceivedAt: at, Arguments: args,
		Disposition: activity.DispositionNewExecution, ExecutionID: eid, JSONRPCID: activity.Some(id), Source: prov}
	c, err := k.call(call)
	if err != nil {
		return k.fail(n, err)
	}
	contract, ok := d.contracts[tool]
	if !ok {
		contract = activity.ContractBlockedAfterUnknown
	}
	if redacted {
		nr = append(nr, activity.FactArguments)
		k.notRecorded("arguments")
	}
	if _, err := k.accept(activity.Execution{ID: eid, Action: activity.Action{Actor: actor, Tool: tool, Channel: activity.ChannelMCP,
		Target: target, Method: "tools/call", Arguments: args}, RunID: d.run, Contract: contract,
		CreatedByCall: c.ID, NotRecorded: nr, Times: activity.Times{Accepted: optTime(at)}, Source: prov}); err != nil {
		return k.fail(n, err)
	}
	// The log shows the request leaving the client, not the server's
	// authorization or dispatch: both are implied by any answer.
	for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched} {
		if _, err := k.w.Transition(activity.Transition{ExecutionID: eid, To: to, Implied: true}); err != nil {
			return k.fail(n, err)
		}
	}
	key := conn + "\x00" + id
	if prev, ok := d.open[key]; ok {
		// The same id again on one connection: the earlier one was never
		// answered (a re-sent request after a reconnect, 2025 era).
		if err := d.close(k, n, prev, activity.Transition{To: activity.StateUnknown, Reason: "its id was used again before an answer: the server may have acted"}); err != nil {
			return err
		}
	}
	d.open[key] = &mcpPending{id: eid, line: n, at: at, dir: dir}
	d.order = append(d.order, key)
	return nil
}

func firstTime(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// close ends a pending request with t and forgets it.
func (d *mcpLog) close(k *sink, n int64, p *mcpPending, t activity.Transition) error {
	for key, q := range d.open {
		if q == p {
			delete(d.open, key)
		}
	}
	t.ExecutionID = p.id
	if t.Source.IsZero() {
		t.Source = k.at(n)
	}
	if _, err := k.w.Transition(t); err != nil {
		return k.fail(n, err)
	}
	return nil
}

// closeOpen marks the open requests of connection conn as unknown: the
// connection ended under them.
func (d *mcpLog) closeOpen(k *sink, n int64, at time.Time, conn, why string) error {
	keys := make([]string, 0, len(d.open))
	for key := range d.open {
		if c, _, _ := strings.Cut(key, "\x00"); c == conn {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		if err := d.close(k, n, d.open[key], activity.Transition{To: activity.StateUnknown, At: optTime(at),
			Reason: why + " before an answer: the server may have acted"}); err != nil {
			return err
		}
	}
	return nil
}
