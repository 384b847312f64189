package activity

import (
	"strconv"
	"time"

	"github.com/mcpdup/mcpdup/activity/canon"
)

// canonicalAppender is implemented by the record types frequent enough to
// write their canonical JSON directly, rather than through encoding/json
// and a re-sorting pass. ok is false when the value needs the general path
// (a time encoding/json refuses, say), which then reports the error.
// TestCanonicalAppenders holds each to canon.Marshal's bytes.
type canonicalAppender interface {
	appendCanonical(dst []byte) (b []byte, ok bool)
}

// appendCanonical writes a transition's members in canonical (sorted)
// order with the same omissions as its json tags.
func (t Transition) appendCanonical(dst []byte) ([]byte, bool) {
	dst = append(dst, '{')
	if t.At.OK {
		var ok bool
		if dst, ok = appendTime(append(dst, `"at":`...), t.At.V); !ok {
			return nil, false
		}
		dst = append(dst, ',')
	}
	if t.CallID != "" {
		dst = canon.AppendString(append(dst, `"call_id":`...), string(t.CallID))
		dst = append(dst, ',')
	}
	dst = canon.AppendString(append(dst, `"execution_id":`...), string(t.ExecutionID))
	if t.ExitCode.OK {
		dst = strconv.AppendInt(append(dst, `,"exit_code":`...), int64(t.ExitCode.V), 10)
	}
	if t.From != "" {
		dst = canon.AppendString(append(dst, `,"from":`...), string(t.From))
	}
	if t.Reason != "" {
		dst = canon.AppendString(append(dst, `,"reason":`...), t.Reason)
	}
	if t.ResultRef != "" {
		dst = canon.AppendString(append(dst, `,"result_ref":`...), t.ResultRef)
	}
	if t.TargetStatus.OK {
		dst = strconv.AppendInt(append(dst, `,"target_status":`...), int64(t.TargetStatus.V), 10)
	}
	dst = canon.AppendString(append(dst, `,"to":`...), string(t.To))
	return append(dst, '}'), true
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
