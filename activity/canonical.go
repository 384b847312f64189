package activity

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/mcpdup/mcpdup/activity/canon"
)

// canonicalAppender is implemented by the record types frequent enough to
// write their canonical JSON directly, rather than through encoding/json
// and a re-sorting pass. ok is false when the value needs the general path
// (a time encoding/json refuses, invalid arguments), which then reports
// the error. TestCanonicalAppenders holds each to canon.Marshal's bytes.
type canonicalAppender interface {
	appendCanonical(dst []byte) (b []byte, ok bool)
}

// object writes a canonical JSON object. Members must be added in
// canonical order (sorted by name; every name here is ASCII), with the
// omissions their json tags make.
type object struct {
	b  []byte
	n  int
	ok bool
}

func newObject(dst []byte) object { return object{b: append(dst, '{'), ok: true} }

func (o *object) key(k string) {
	if o.n > 0 {
		o.b = append(o.b, ',')
	}
	o.n++
	o.b = append(append(append(o.b, '"'), k...), '"', ':')
}

func (o *object) str(k, v string) {
	o.key(k)
	o.b = canon.AppendString(o.b, v)
}

// strOmit is a string field tagged omitempty.
func (o *object) strOmit(k, v string) {
	if v != "" {
		o.str(k, v)
	}
}

func (o *object) optStr(k string, v Opt[string]) {
	if v.OK {
		o.str(k, v.V)
	}
}

func (o *object) optInt(k string, v Opt[int]) {
	if v.OK {
		o.key(k)
		o.b = strconv.AppendInt(o.b, int64(v.V), 10)
	}
}

func (o *object) time(k string, t time.Time) {
	o.key(k)
	var ok bool
	if o.b, ok = appendTime(o.b, t); !ok {
		o.ok = false
	}
}

func (o *object) optTime(k string, t Opt[time.Time]) {
	if t.OK && o.ok {
		o.time(k, t.V)
	}
}

// raw writes embedded JSON in canonical form.
func (o *object) raw(k string, v json.RawMessage) {
	o.key(k)
	b, err := canon.AppendTransform(o.b, v)
	if err != nil {
		o.ok = false
		return
	}
	o.b = b
}

func (o *object) source(p Provenance) {
	if p.IsZero() {
		return
	}
	o.key("source")
	s := newObject(o.b)
	if p.Line != 0 {
		s.key("line")
		s.b = strconv.AppendInt(s.b, p.Line, 10)
	}
	s.strOmit("record", p.Record)
	s.str("source", string(p.Source))
	o.b = s.end()
}

// stringList writes a list of strings tagged omitempty.
func stringList[S ~string](o *object, k string, list []S) {
	if len(list) == 0 {
		return
	}
	o.key(k)
	o.b = append(o.b, '[')
	for i, v := range list {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = canon.AppendString(o.b, string(v))
	}
	o.b = append(o.b, ']')
}

func (o *object) end() []byte { return append(o.b, '}') }

// done returns the object, or ok false if a member needed the general path.
func (o *object) done() ([]byte, bool) {
	if !o.ok {
		return nil, false
	}
	return o.end(), true
}

func (t Transition) appendCanonical(dst []byte) ([]byte, bool) {
	o := newObject(dst)
	o.optTime("at", t.At)
	o.strOmit("call_id", string(t.CallID))
	o.strOmit("created", t.Created)
	o.str("execution_id", string(t.ExecutionID))
	o.optInt("exit_code", t.ExitCode)
	o.strOmit("from", string(t.From))
	if t.Implied {
		o.key("implied")
		o.b = append(o.b, "true"...)
	}
	o.strOmit("reason", t.Reason)
	o.strOmit("replayed", t.Replayed)
	o.strOmit("replica", t.Replica)
	o.strOmit("result_ref", t.ResultRef)
	stringList(&o, "shows", t.Shows)
	o.source(t.Source)
	o.optInt("target_status", t.TargetStatus)
	o.str("to", string(t.To))
	return o.done()
}

func (c Call) appendCanonical(dst []byte) ([]byte, bool) {
	o := newObject(dst)
	o.str("actor", c.Actor)
	if len(c.Arguments) > 0 {
		o.raw("arguments", c.Arguments)
	}
	o.str("disposition", string(c.Disposition))
	o.optStr("event_id", c.EventID)
	o.strOmit("execution_id", string(c.ExecutionID))
	o.str("id", string(c.ID))
	o.optStr("jsonrpc_id", c.JSONRPCID)
	o.str("method", c.Method)
	o.optStr("protocol_version", c.ProtocolVersion)
	o.strOmit("reason", c.Reason)
	o.time("received_at", c.ReceivedAt)
	o.strOmit("run_id", string(c.RunID))
	o.optStr("session_id", c.SessionID)
	o.source(c.Source)
	o.optStr("stream_id", c.StreamID)
	o.strOmit("tool", c.Tool)
	return o.done()
}

func (e Execution) appendCanonical(dst []byte) ([]byte, bool) {
	o := newObject(dst)
	o.str("actor", e.Actor)
	if e.Arguments == nil {
		o.key("arguments")
		o.b = append(o.b, "null"...)
	} else {
		o.raw("arguments", e.Arguments)
	}
	if e.Window.OK {
		o.key("attach_window")
		o.b = strconv.AppendInt(o.b, int64(e.Window.V), 10)
	}
	stringList(&o, "attached", e.Attached)
	o.str("channel", string(e.Channel))
	o.str("contract", string(e.Contract))
	o.strOmit("created", e.Created)
	o.strOmit("created_by_call", string(e.CreatedByCall))
	o.str("credential_ref", e.CredentialRef)
	o.strOmit("error", e.Error)
	o.optInt("exit_code", e.ExitCode)
	o.strOmit("fingerprint", e.Fingerprint)
	o.strOmit("fingerprint_key_id", e.FingerprintKeyID)
	o.str("id", string(e.ID))
	o.optStr("idempotency_key", e.IdempotencyKey)
	o.str("intent_scope", e.IntentScope)
	o.str("method", e.Method)
	stringList(&o, "not_recorded", e.NotRecorded)
	o.strOmit("outcome", string(e.Outcome))
	o.strOmit("replayed", e.Replayed)
	o.strOmit("replica", e.Replica)
	o.strOmit("result_ref", e.ResultRef)
	o.strOmit("run_id", string(e.RunID))
	o.source(e.Source)
	o.str("state", string(e.State))
	o.str("target", e.Target)
	o.optInt("target_status", e.TargetStatus)
	o.key("times")
	t := newObject(o.b)
	t.optTime("accepted", e.Times.Accepted)
	t.optTime("authorized", e.Times.Authorized)
	t.optTime("delivered", e.Times.Delivered)
	t.optTime("dispatched", e.Times.Dispatched)
	t.optTime("observed", e.Times.Observed)
	t.optTime("rejected", e.Times.Rejected)
	t.optTime("resolved", e.Times.Resolved)
	if !t.ok {
		return nil, false
	}
	o.b = t.end()
	o.str("tool", e.Tool)
	return o.done()
}

// appendTime writes t as encoding/json does (RFC 3339 with nanoseconds,
// quoted); ok is false for a time it refuses (a year outside 0–9999).
func appendTime(dst []byte, t time.Time) ([]byte, bool) {
	if t.Location() != time.UTC {
		b, err := t.MarshalJSON()
		return append(dst, b...), err == nil
	}
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, false
	}
	dst = append(dst, '"')
	return append(t.AppendFormat(dst, time.RFC3339Nano), '"'), true
}
