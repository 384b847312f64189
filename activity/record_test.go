package activity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

func TestRecordRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 0, 0, 123, time.UTC)
	call := Call{ID: "call_1", Actor: "agent:a", Method: "tools/call", JSONRPCID: Some(`"7"`), ReceivedAt: at,
		Arguments: json.RawMessage(`{"b":1,"a":"<x>"}`), Disposition: DispositionNewExecution}
	rec, err := EncodeRecord(42, GenesisHash("o"), at, KindCall, call)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(rec.Bytes, []byte(`{"v":1,"seq":42,"prev":"`)) {
		t.Fatalf("record prefix: %s", rec.Bytes)
	}
	if !bytes.Contains(rec.Bytes, []byte(`"arguments":{"a":"<x>","b":1}`)) {
		t.Fatalf("arguments not canonical, or HTML-escaped: %s", rec.Bytes)
	}
	if bytes.Contains(rec.Bytes, []byte(`session_id`)) {
		t.Fatalf("a not-recorded field must be omitted, not null: %s", rec.Bytes)
	}
	if rec.Hash != tlog.RecordHash(rec.Bytes) {
		t.Fatal("record hash is not the RFC 6962 leaf hash of its bytes")
	}
	back, err := DecodeRecord(rec.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if back.Seq != 42 || back.Prev != GenesisHash("o") || !back.Time.Equal(at) || back.Kind != KindCall || back.Hash != rec.Hash {
		t.Fatalf("decoded %+v", back)
	}
	ev, err := back.Event()
	if err != nil {
		t.Fatal(err)
	}
	got := ev.(*Call)
	if got.JSONRPCID != Some(`"7"`) || got.SessionID.OK || got.Disposition != DispositionNewExecution {
		t.Fatalf("event: %+v", got)
	}
}

func TestDecodeRecordIsStrict(t *testing.T) {
	rec, err := EncodeRecord(3, GenesisHash("o"), time.Unix(0, 0), KindRunEnd, RunEnd{RunID: "run_1", At: time.Unix(5, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	good := string(rec.Bytes)
	variants := map[string]string{
		"spaces":         strings.Replace(good, `"seq":3,`, `"seq": 3,`, 1),
		"leading zero":   strings.Replace(good, `"seq":3,`, `"seq":03,`, 1),
		"key order":      strings.Replace(good, `{"v":1,"seq":3,`, `{"seq":3,"v":1,`, 1),
		"data reordered": strings.Replace(good, `{"at":"1970-01-01T00:00:05Z","run_id":"run_1"}`, `{"run_id":"run_1","at":"1970-01-01T00:00:05Z"}`, 1),
		"time format":    strings.Replace(good, `1970-01-01T00:00:00.000000000Z`, `1970-01-01T00:00:00Z`, 1),
		"trailing space": good + " ",
		"short prev":     strings.Replace(good, `"prev":"`, `"prev":"A`, 1),
	}
	for name, v := range variants {
		if v == good {
			t.Fatalf("%s: variant is unchanged", name)
		}
		if _, err := DecodeRecord([]byte(v)); err == nil {
			t.Errorf("%s: accepted %s", name, v)
		}
	}
	if _, err := DecodeRecord([]byte(good)); err != nil {
		t.Fatal(err)
	}
}

func TestEventRejectsUnknownFields(t *testing.T) {
	rec, err := EncodeRecord(0, GenesisHash("o"), time.Unix(0, 0), KindGrant, map[string]any{"run_id": "r", "scope": "s", "sneaky": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Event(); err == nil || !strings.Contains(err.Error(), "sneaky") {
		t.Fatalf("unknown field accepted: %v", err)
	}
}

func TestCheckpointTextIsStrict(t *testing.T) {
	root := tlog.RecordHash([]byte("x"))
	good := CheckpointText("mcpdup.local/x", 12, root)
	if _, n, r, err := ParseCheckpointText(good); err != nil || n != 12 || r != root {
		t.Fatalf("ParseCheckpointText(%q) = %d, %v, %v", good, n, r, err)
	}
	bad := []string{
		strings.Replace(good, "\n12\n", "\n012\n", 1),
		strings.Replace(good, "\n12\n", "\n+12\n", 1),
		strings.Replace(good, "\n12\n", "\n 12\n", 1),
		strings.Replace(good, "\n", "\r\n", -1),
		good + "extension\n",
		strings.TrimSuffix(good, "\n"),
		strings.Replace(good, root.String(), root.String()[:43], 1),
		strings.Replace(good, "mcpdup.local/x", "with space", 1),
	}
	for _, b := range bad {
		if _, _, _, err := ParseCheckpointText(b); err == nil {
			t.Errorf("accepted %q", b)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	rec, _ := EncodeRecord(7, GenesisHash("o"), time.Unix(0, 0), KindRunEnd, RunEnd{RunID: "run_1"})
	f.Add(rec.Bytes)
	f.Add([]byte(`{"v":1,"seq":0,"prev":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","t":"x","kind":"call","data":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		// Anything accepted has exactly one encoding: itself.
		again, err := EncodeRecord(r.Seq, r.Prev, r.Time, r.Kind, json.RawMessage(r.Data))
		if err != nil || !bytes.Equal(again.Bytes, b) {
			t.Fatalf("accepted %q but re-encodes to %q (%v)", b, again.Bytes, err)
		}
	})
}

// TestIDsForAnyTime: ids are made for times an imported log may carry,
// however far off; none panics and each keeps its prefix.
func TestIDsForAnyTime(t *testing.T) {
	for _, tm := range []time.Time{{}, time.Unix(-1e12, 0), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), time.Unix(1<<62, 0)} {
		if id := string(NewExecutionID(tm)); !strings.HasPrefix(id, "act_") || len(id) != 30 {
			t.Errorf("%v: %q", tm, id)
		}
	}
}

// TestParseRecordLayout: the by-position reading of an envelope agrees
// with decoding it as JSON, and bytes laid out otherwise are still read
// (by the decoder).
func TestParseRecordLayout(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 15, 0, 123456789, time.UTC)
	for i, data := range []any{
		Transition{ExecutionID: "act_01", To: StateDispatched, Reason: `quote " and \ and "t":"x"`},
		Call{ID: "call_1", Method: "tools/call", Disposition: DispositionRefused, Arguments: []byte(`{"data":"}"}`)},
	} {
		kind := KindTransition
		if i == 1 {
			kind = KindCall
		}
		rec, err := EncodeRecord(int64(1000+i), GenesisHash("test"), at, kind, data)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := parseLayout(rec.Bytes); !ok {
			t.Fatalf("EncodeRecord's layout not recognised: %s", rec.Bytes)
		}
		got, err := ParseRecord(rec.Bytes)
		if err != nil || got.Seq != rec.Seq || !got.Time.Equal(at) || got.Kind != kind || !bytes.Equal(got.Data, rec.Data) {
			t.Fatalf("layout: %+v %v; want data %s", got, err, rec.Data)
		}
		// The same envelope with its keys in another order and spacing.
		other := fmt.Sprintf(`{"kind":%q, "data":%s, "seq":%d, "t":%q, "v":1}`, kind, rec.Data, rec.Seq, FormatTime(at))
		if _, ok := parseLayout([]byte(other)); ok {
			t.Fatal("another layout read by position")
		}
		got2, err := ParseRecord([]byte(other))
		if err != nil || got2.Seq != got.Seq || !got2.Time.Equal(got.Time) || got2.Kind != got.Kind || !bytes.Equal(got2.Data, got.Data) {
			t.Fatalf("decoder: %+v %v", got2, err)
		}
		if _, err := got.Event(); err != nil {
			t.Fatal(err)
		}
	}
	// Data followed by more than its one value is refused by Event.
	bad := Record{Seq: 7, Kind: KindTransition, Data: []byte(`{"execution_id":"act_01","to":"dispatched"},"x":1`)}
	if _, err := bad.Event(); err == nil {
		t.Fatal("trailing data accepted")
	}
}

// FuzzParseRecordLayout: whenever the by-position reading accepts bytes
// and their data decodes as an event, decoding the envelope as JSON gives
// the same record.
func FuzzParseRecordLayout(f *testing.F) {
	at := time.Date(2026, 11, 30, 8, 15, 0, 1, time.UTC)
	for i, data := range []any{
		Transition{ExecutionID: "act_01", To: StateDispatched, Reason: `"t":"x"`},
		Call{ID: "call_1", Method: "tools/call", Disposition: DispositionRefused, Arguments: []byte(`{"data":"}"}`)},
	} {
		kind := []Kind{KindTransition, KindCall}[i]
		rec, err := EncodeRecord(int64(i), GenesisHash("fuzz"), at, kind, data)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(rec.Bytes)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parseLayout(b)
		if !ok {
			return
		}
		if _, err := got.Event(); err != nil {
			return
		}
		want, err := parseJSON(b)
		if err != nil {
			t.Fatalf("read by position, refused as JSON: %v", err)
		}
		if want.Seq != got.Seq || !want.Time.Equal(got.Time) || want.Kind != got.Kind || !bytes.Equal(want.Data, got.Data) {
			t.Fatalf("position %+v, JSON %+v", got, want)
		}
	})
}

// FuzzEventDecoders: Event decodes with segmentio/encoding/json and falls
// back to encoding/json; whatever the data, both must agree: the same
// payload, or both refuse it.
func FuzzEventDecoders(f *testing.F) {
	at := time.Date(2026, 11, 30, 8, 15, 0, 1, time.UTC)
	kinds := []Kind{KindSource, KindRun, KindRunEnd, KindGrant, KindCall, KindExecution,
		KindTransition, KindResolution, KindVault, KindApproval}
	samples := map[Kind]any{
		KindCall: Call{ID: "call_1", Method: "tools/call", Disposition: DispositionRefused,
			Arguments: []byte(`{"data":"}","n":1.50}`), ReceivedAt: at},
		KindExecution: Execution{ID: "act_01", Action: Action{Actor: "agent:é", Tool: "deploy", Arguments: []byte(`{"v":"1.2"}`)},
			State: StateUnknown, TargetStatus: Some(502), Times: Times{Accepted: Some(at)}, NotRecorded: []Fact{FactDelivery}},
		KindTransition: Transition{ExecutionID: "act_01", To: StateDispatched, Reason: "\u2028 <b>"},
	}
	for i, k := range kinds {
		v, _ := newEvent(k)
		if s, ok := samples[k]; ok {
			v = s
		}
		rec, err := EncodeRecord(int64(i), GenesisHash("fuzz"), at, k, v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), []byte(rec.Data))
	}
	for _, d := range []string{
		`{"execution_id":"act_1","EXECUTION_ID":"act_2","to":"failed"}`, // key case, duplicate
		`{"execution_id":"\ud800\u00e9","to":"failed"}`,                 // lone surrogate
		"{\"execution_id\":\"\xff\xfe\",\"to\":\"failed\"}",             // invalid UTF-8
		`{"execution_id":"act_1","to":"failed","target_status":1e2}`,    // exponent into an int
		`{"execution_id":"act_1","to":"failed","target_status":null}`,
		`{"execution_id":"act_1","to":"failed"} {}`,
		`{"execution_id":"act_1","to":"failed","extra":true}`,
	} {
		f.Add(uint8(6), []byte(d))
	}
	f.Fuzz(func(t *testing.T, k uint8, data []byte) {
		r := Record{Seq: 1, Kind: kinds[int(k)%len(kinds)], Data: data}
		fast, ferr := r.Event()
		std, serr := r.eventStd()
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("%s %q: Event error %v, encoding/json error %v", r.Kind, data, ferr, serr)
		}
		if ferr == nil && !reflect.DeepEqual(fast, std) {
			t.Fatalf("%s %q decoded differently:\nEvent         %+v\nencoding/json %+v", r.Kind, data, fast, std)
		}
	})
}

// TestFormatTimeMatchesLayout: the hand-written formatter writes what
// time.Format writes for TimeFormat, in and outside four-digit years and
// from any location.
func TestFormatTimeMatchesLayout(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	times := []time.Time{
		{}, time.Unix(0, 0), time.Unix(0, 1), time.Unix(-1, 999999999),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 6, 1, 0, 0, 0, 5, time.UTC),
		time.Date(2026, 12, 1, 0, 30, 0, 250000000, paris), // the day before in UTC
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		times = append(times, time.Unix(rng.Int64N(400_000_000_000)-62_135_596_800, rng.Int64N(1e9)).In(paris))
	}
	for _, tm := range times {
		if got, want := FormatTime(tm), tm.UTC().Format(TimeFormat); got != want {
			t.Fatalf("%v: %q, want %q", tm, got, want)
		}
	}
}
