package activity

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	fastjson "github.com/segmentio/encoding/json"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mcpdup/mcpdup/activity/canon"
	"github.com/mcpdup/mcpdup/internal/jsondepth"
)

// Kind names what a log record holds.
type Kind string

const (
	KindSource     Kind = "source"     // an import marker, or the gateway announcing itself
	KindRun        Kind = "run"        // Sessions log: an agent run began
	KindRunEnd     Kind = "run_end"    // Sessions log: it ended
	KindGrant      Kind = "grant"      // Sessions log: a grant was given to a run
	KindCall       Kind = "call"       // a protocol call was received
	KindExecution  Kind = "execution"  // an execution was accepted (its identity)
	KindTransition Kind = "transition" // an execution moved to another state
	KindResolution Kind = "resolution" // an operator resolved an unknown outcome
	KindVault      Kind = "vault"      // Sessions log: the vault was locked or unlocked
	KindApproval   Kind = "approval"   // an approval was requested or decided
)

// Record is one entry of the append-only log. Bytes are the canonical
// record exactly as stored and hashed; they are written once and never
// re-encoded. Hash is both the chain link (the next record's Prev) and the
// RFC 6962 Merkle leaf: tlog.RecordHash(Bytes) = SHA-256(0x00 || Bytes).
//
// The byte layout is fixed so verification can read seq and prev without a
// JSON decoder:
//
//	{"v":1,"seq":<n>,"prev":"<base64 of 32 bytes>","t":"<UTC time>","kind":"<kind>","data":<canonical JSON>}
type Record struct {
	Seq   int64
	Prev  tlog.Hash
	Time  time.Time
	Kind  Kind
	Data  json.RawMessage
	Bytes []byte
	Hash  tlog.Hash
}

// TimeFormat is how the model writes times: UTC, fixed width, so that text
// order is time order in SQLite and in exports.
const TimeFormat = "2006-01-02T15:04:05.000000000Z"

// FormatTime renders t in TimeFormat.
func FormatTime(t time.Time) string {
	var b [len(TimeFormat)]byte
	return string(appendModelTime(b[:0], t))
}

// appendModelTime appends t in TimeFormat. Written out by hand: records carry
// several times each, and time.Format's layout interpreter was 4% of an
// import's CPU. Years TimeFormat cannot hold in four digits go through it.
func appendModelTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimeFormat)
	}
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond(), 9)
	return append(b, 'Z')
}

// appendDigits appends v, zero-padded to width digits (v < 10^width).
func appendDigits(b []byte, v, width int) []byte {
	b = append(b, make([]byte, width)...)
	for i := len(b) - 1; i >= len(b)-width; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

// GenesisHash is the Prev of record 0: it ties a chain to one log origin so
// two logs cannot be spliced together.
func GenesisHash(origin string) tlog.Hash {
	return tlog.Hash(sha256.Sum256([]byte("mcpdup/audit/v1\n" + origin)))
}

const recordPrefix = `{"v":1,"seq":`

// b64Len is the length of prev, a SHA-256 hash in padded base64.
const b64Len = 44

// EncodeRecord builds the canonical bytes of a record.
func EncodeRecord(seq int64, prev tlog.Hash, t time.Time, kind Kind, data any) (Record, error) {
	payload, ok := []byte(nil), false
	if ca, is := data.(canonicalAppender); is {
		payload, ok = ca.appendCanonical(make([]byte, 0, 256))
	}
	if !ok {
		var err error
		if payload, err = canon.Marshal(data); err != nil {
			return Record{}, fmt.Errorf("encode %s record %d: %w", kind, seq, err)
		}
	}
	b := make([]byte, 0, len(payload)+128)
	b = append(b, recordPrefix...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"prev":"`...)
	b = base64.StdEncoding.AppendEncode(b, prev[:]) // as tlog.Hash.String
	b = append(b, `","t":"`...)
	b = appendModelTime(b, t)
	b = append(b, `","kind":"`...)
	b = append(b, kind...)
	b = append(b, `","data":`...)
	b = append(b, payload...)
	b = append(b, '}')
	rec := Record{Seq: seq, Prev: prev, Time: t.UTC(), Kind: kind, Data: payload, Bytes: b}
	rec.Hash = tlog.RecordHash(rec.Bytes)
	return rec, nil
}

// ParseHead reads seq and prev from the fixed prefix of canonical record
// bytes. It is strict: any other spelling is an error, because a verifier
// that tolerated variants would let one record have two encodings.
func ParseHead(b []byte) (seq int64, prev tlog.Hash, err error) {
	seq, prev, _, err = parseHead(b)
	return seq, prev, err
}

// parseHead is ParseHead that also returns what follows prev's closing
// quote.
func parseHead(b []byte) (seq int64, prev tlog.Hash, after []byte, err error) {
	rest, ok := bytes.CutPrefix(b, []byte(recordPrefix))
	if !ok {
		return 0, prev, nil, errors.New(`record does not start with {"v":1,"seq":`)
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i > 18 || (i > 1 && rest[0] == '0') {
		return 0, prev, nil, errors.New("record seq is not a canonical decimal")
	}
	seq, err = strconv.ParseInt(string(rest[:i]), 10, 64)
	if err != nil {
		return 0, prev, nil, fmt.Errorf("record seq: %w", err)
	}
	rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"prev":"`))
	if !ok || len(rest) < b64Len+1 || rest[b64Len] != '"' {
		return seq, prev, nil, errors.New("record prev is missing or malformed")
	}
	var buf [b64Len / 4 * 3]byte
	n, err := base64.StdEncoding.Strict().Decode(buf[:], rest[:b64Len])
	if err != nil || n != len(prev) {
		return seq, prev, nil, errors.New("record prev is not base64 of 32 bytes")
	}
	copy(prev[:], buf[:n])
	if b[len(b)-1] != '}' {
		return seq, prev, nil, errors.New("record does not end with }")
	}
	return seq, prev, rest[b64Len+1:], nil
}

// DecisionRecord reports whether canonical is an operator's decision (a
// resolution, the vault, an approval answered), which the store seals as
// it writes it (Tx.sealable), and of which kind. It reads the kind where
// the layout puts it, just after the time, so a scan of every record
// pays a few bytes each.
func DecisionRecord(canonical []byte) (Kind, bool) {
	_, _, after, err := parseHead(canonical)
	if err != nil {
		return "", false
	}
	head := after[:min(len(after), 80)]
	i := bytes.Index(head, []byte(`"kind":"`))
	if i < 0 {
		return "", false
	}
	rest := head[i+len(`"kind":"`):]
	switch {
	case bytes.HasPrefix(rest, []byte(KindResolution+`"`)):
		return KindResolution, true
	case bytes.HasPrefix(rest, []byte(KindVault+`"`)):
		return KindVault, true
	case bytes.HasPrefix(rest, []byte(KindApproval+`"`)):
		rec, err := ParseRecord(canonical)
		if err != nil {
			return "", false
		}
		var a struct {
			State ApprovalState `json:"state"`
		}
		return KindApproval, json.Unmarshal(rec.Data, &a) == nil && a.State != ApprovalPending
	}
	return "", false
}

// ParseRecord reads a record's envelope without checking that its bytes
// are canonical: for records whose bytes were already verified against
// the chain (an export being imported). Bytes and Hash are not set.
func ParseRecord(b []byte) (Record, error) {
	if r, ok := parseLayout(b); ok {
		return r, nil
	}
	return parseJSON(b)
}

// parseJSON reads a record's envelope by decoding it as JSON.
func parseJSON(b []byte) (Record, error) {
	var env struct {
		V    int             `json:"v"`
		Seq  int64           `json:"seq"`
		T    string          `json:"t"`
		Kind Kind            `json:"kind"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return Record{}, err
	}
	t, err := parseTime(env.T)
	if err != nil {
		return Record{}, fmt.Errorf("record %d: field t: %w", env.Seq, err)
	}
	if env.Kind == "" || len(env.Data) == 0 {
		return Record{}, fmt.Errorf("record %d: kind and data are required", env.Seq)
	}
	return Record{Seq: env.Seq, Time: t, Kind: env.Kind, Data: env.Data}, nil
}

// parseLayout reads the envelope of bytes laid out as EncodeRecord writes
// them by position instead of decoding JSON: an import reads a million of
// them, and the data is decoded (and so checked) on its own afterwards.
// Anything else is left to the JSON decoder (ok false).
func parseLayout(b []byte) (Record, bool) {
	seq, _, after, err := parseHead(b)
	if err != nil {
		return Record{}, false
	}
	rest, ok := bytes.CutPrefix(after, []byte(`,"t":"`))
	if !ok || len(rest) < len(TimeFormat) {
		return Record{}, false
	}
	t, err := parseTime(string(rest[:len(TimeFormat)]))
	if err != nil {
		return Record{}, false
	}
	rest, ok = bytes.CutPrefix(rest[len(TimeFormat):], []byte(`","kind":"`))
	end := bytes.IndexByte(rest, '"')
	if !ok || end <= 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return Record{}, false
	}
	kind := Kind(rest[:end])
	data, ok := bytes.CutPrefix(rest[end:], []byte(`","data":`))
	if !ok || len(data) < 2 {
		return Record{}, false
	}
	return Record{Seq: seq, Time: t, Kind: kind, Data: data[:len(data)-1]}, true
}

// recordPayload reads seq, kind and data of bytes laid out as EncodeRecord
// writes them, skipping prev and t, which a replay of the tables does not
// need (the verifier checks them). ok false: leave it to ParseRecord.
func recordPayload(b []byte) (seq int64, kind Kind, data []byte, ok bool) {
	rest, ok := bytes.CutPrefix(b, []byte(recordPrefix))
	i := 0
	for ok && i < len(rest) && i < 19 && rest[i] >= '0' && rest[i] <= '9' {
		seq = seq*10 + int64(rest[i]-'0')
		i++
	}
	const afterSeq = len(`,"prev":"`) + b64Len + len(`","t":"`) + len(TimeFormat) + len(`","kind":"`)
	if !ok || i == 0 || i > 18 || len(rest) < i+afterSeq {
		return 0, "", nil, false
	}
	rest = rest[i+afterSeq:]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return 0, "", nil, false
	}
	data, ok = bytes.CutPrefix(rest[end:], []byte(`","data":`))
	if !ok || len(data) < 2 || data[len(data)-1] != '}' {
		return 0, "", nil, false
	}
	return seq, Kind(rest[:end]), data[:len(data)-1], true
}

// DecodeRecord parses canonical record bytes fully. It checks the bytes are
// exactly what EncodeRecord would write for the decoded values, so a
// record has one encoding.
func DecodeRecord(b []byte) (Record, error) {
	seq, prev, err := ParseHead(b)
	if err != nil {
		return Record{}, err
	}
	var env struct {
		V    int             `json:"v"`
		Seq  int64           `json:"seq"`
		Prev string          `json:"prev"`
		T    string          `json:"t"`
		Kind Kind            `json:"kind"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return Record{}, fmt.Errorf("record %d: %w", seq, err)
	}
	t, err := parseTime(env.T)
	if err != nil {
		return Record{}, fmt.Errorf("record %d: field t: %w", seq, err)
	}
	var data any
	if err := json.Unmarshal(env.Data, &data); err != nil {
		return Record{}, fmt.Errorf("record %d: field data: %w", seq, err)
	}
	rec, err := EncodeRecord(seq, prev, t, env.Kind, json.RawMessage(env.Data))
	if err != nil {
		return Record{}, err
	}
	if !bytes.Equal(rec.Bytes, b) {
		return Record{}, fmt.Errorf("record %d: not in canonical form", seq)
	}
	return rec, nil
}

// Event decodes the record's data into its typed payload: *Source, *Run,
// *RunEnd, *Grant, *Call, *Execution, *Transition or *Resolution.
func (r Record) Event() (any, error) { return r.event(false) }

// eventOfProvenLog is Event for the bytes of a log the same pass checks
// by chain and signatures (the table check's replay): segmentio's reading
// is taken without writing it back. A record it reads leniently is not
// one the writer wrote (the writer writes canonical bytes only), so it
// can only be a forged record, which the signatures report where a key
// pins them; without a key nothing in the log is proven anyway. The
// write-back check was a third of the replay's decoding.
func (r Record) eventOfProvenLog() (any, error) { return r.event(true) }

func (r Record) event(proven bool) (any, error) {
	if r.Kind == KindTransition {
		if t, ok := decodeTransition(r.Data); ok {
			return t, nil
		}
	}
	// segmentio/encoding/json for the other frequent kinds (in the build
	// through the MCP SDK): it decodes them in about half the time, but it
	// reads some malformed values (a time with '>' for ':') that
	// encoding/json refuses. So its result is used only when the direct
	// encoder writes it back to exactly these bytes: then it is the value
	// these bytes mean. Anything else, and every rare kind, is decoded by
	// encoding/json, whose error the user reads. FuzzEventDecoders holds
	// the paths to the same result.
	if (r.Kind == KindCall || r.Kind == KindExecution) && jsondepth.Check(r.Data, jsondepth.Max) == nil {
		v, _ := newEvent(r.Kind)
		if rest, err := fastjson.Parse(r.Data, v, fastjson.DisallowUnknownFields); err == nil && len(rest) == 0 {
			if proven {
				return v, nil
			}
			if again, ok := v.(canonicalAppender).appendCanonical(nil); ok && bytes.Equal(again, r.Data) {
				return v, nil
			}
		}
	}
	return r.eventStd()
}

// eventStd decodes the record's data with encoding/json.
func (r Record) eventStd() (any, error) {
	v, err := newEvent(r.Kind)
	if err != nil {
		return nil, fmt.Errorf("record %d: %w", r.Seq, err)
	}
	dec := json.NewDecoder(bytes.NewReader(r.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, fmt.Errorf("record %d (%s): %w", r.Seq, r.Kind, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("record %d (%s): data is followed by more than one JSON value", r.Seq, r.Kind)
	}
	return v, nil
}

// newEvent returns a new payload of the type kind holds.
func newEvent(kind Kind) (any, error) {
	switch kind {
	case KindSource:
		return new(Source), nil
	case KindRun:
		return new(Run), nil
	case KindRunEnd:
		return new(RunEnd), nil
	case KindGrant:
		return new(Grant), nil
	case KindCall:
		return new(Call), nil
	case KindExecution:
		return new(Execution), nil
	case KindTransition:
		return new(Transition), nil
	case KindResolution:
		return new(Resolution), nil
	case KindVault:
		return new(VaultEvent), nil
	case KindApproval:
		return new(Approval), nil
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

// VaultEvent records the vault being locked or unlocked. While locked,
// the gateway refuses every call.
type VaultEvent struct {
	Locked   bool      `json:"locked"`
	Operator string    `json:"operator"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
	// Source is set on an event imported from another log: it says what
	// that log's vault did and leaves this database's vault alone.
	Source Provenance `json:"source,omitzero"`
}

// RunEnd records that an agent run ended.
type RunEnd struct {
	RunID RunID     `json:"run_id"`
	At    time.Time `json:"at"`
}
