package activity

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpdup/mcpdup/activity/canon"
)

// randomTransition draws transitions with every field present or absent
// and strings full of what JSON escapes.
func randomTransition(r *rand.Rand) Transition {
	str := func() string { return randomString(r) }
	t := Transition{ExecutionID: ExecutionID(str()), From: State(str()), To: State(str()), ResultRef: str(), Reason: str(), CallID: CallID(str())}
	switch r.IntN(3) {
	case 0:
		t.At = Some(time.Unix(r.Int64N(1<<34), r.Int64N(1e9)).UTC())
	case 1:
		t.At = Some(time.Unix(r.Int64N(1<<34), r.Int64N(1e9)).In(time.FixedZone("x", 3600*(r.IntN(25)-12))))
	}
	if r.IntN(2) == 0 {
		t.TargetStatus = Some(r.IntN(600) - 50)
	}
	if r.IntN(2) == 0 {
		t.ExitCode = Some(r.IntN(300) - 150)
	}
	return t
}

func randomString(r *rand.Rand) string {
	pieces := []string{"", "a", "\"", "\\", "\n", "\x00", "\x7f", "é", "\u2028", "\xff", "<&>", "act_01JD8Q", " "}
	var s string
	for range r.IntN(5) {
		s += pieces[r.IntN(len(pieces))]
	}
	return s
}

func randomTime(r *rand.Rand) Opt[time.Time] {
	switch r.IntN(3) {
	case 0:
		return Some(time.Unix(r.Int64N(1<<34), r.Int64N(1e9)).UTC())
	case 1:
		return Some(time.Unix(r.Int64N(1<<34), r.Int64N(1e9)).In(time.FixedZone("x", 3600*(r.IntN(25)-12))))
	}
	return Opt[time.Time]{}
}

func randomOptString(r *rand.Rand) Opt[string] {
	if r.IntN(2) == 0 {
		return Some(randomString(r))
	}
	return Opt[string]{}
}

func randomOptInt(r *rand.Rand) Opt[int] {
	if r.IntN(2) == 0 {
		return Some(r.IntN(600) - 50)
	}
	return Opt[int]{}
}

// randomArguments draws tool arguments, canonical or not (unsorted keys,
// spaces, exponents), nil or empty.
func randomArguments(r *rand.Rand) json.RawMessage {
	all := []string{"", `{}`, `{"b":1,"a":[1.50,"x",{"d":null,"c":true}]}`, ` { "z" : 1e2 , "y":"\u00e9\n" } `, `null`, `[3,2,1]`, `{"k":"\ud83d\ude00"}`}
	a := all[r.IntN(len(all))]
	if a == "" && r.IntN(2) == 0 {
		return nil
	}
	return json.RawMessage(a)
}

func randomSource(r *rand.Rand) Provenance {
	if r.IntN(2) == 0 {
		return Provenance{}
	}
	return Provenance{Source: SourceID(randomString(r) + "src"), Line: r.Int64N(3) * r.Int64N(1e6)}
}

func randomCall(r *rand.Rand) Call {
	return Call{ID: CallID(randomString(r)), RunID: RunID(randomString(r)), Actor: randomString(r), Method: randomString(r), Tool: randomString(r),
		JSONRPCID: randomOptString(r), SessionID: randomOptString(r), StreamID: randomOptString(r), EventID: randomOptString(r),
		ProtocolVersion: randomOptString(r), ReceivedAt: randomTime(r).V, Arguments: randomArguments(r),
		Disposition: Disposition(randomString(r)), ExecutionID: ExecutionID(randomString(r)), Reason: randomString(r), Source: randomSource(r)}
}

func randomExecution(r *rand.Rand) Execution {
	e := Execution{ID: ExecutionID(randomString(r)),
		Action: Action{Actor: randomString(r), Tool: randomString(r), Channel: Channel(randomString(r)), Target: randomString(r),
			Method: randomString(r), CredentialRef: randomString(r), Arguments: randomArguments(r), IntentScope: randomString(r)},
		Fingerprint: randomString(r), FingerprintKeyID: randomString(r), RunID: RunID(randomString(r)), Contract: Contract(randomString(r)),
		State: State(randomString(r)), CreatedByCall: CallID(randomString(r)), IdempotencyKey: randomOptString(r),
		TargetStatus: randomOptInt(r), ExitCode: randomOptInt(r), ResultRef: randomString(r), Error: randomString(r),
		Outcome: Outcome(randomString(r)), Source: randomSource(r),
		Times: Times{Accepted: randomTime(r), Authorized: randomTime(r), Rejected: randomTime(r), Dispatched: randomTime(r),
			Observed: randomTime(r), Delivered: randomTime(r), Resolved: randomTime(r)}}
	if r.IntN(2) == 0 {
		e.Window = Some(time.Duration(r.Int64N(1<<40) - 1<<20))
	}
	for range r.IntN(3) {
		e.NotRecorded = append(e.NotRecorded, Fact(randomString(r)))
		e.Attached = append(e.Attached, CallID(randomString(r)))
	}
	return e
}

// sameAsMarshal checks one value's direct encoding against canon.Marshal:
// equal bytes, or both refusing.
func sameAsMarshal(t *testing.T, v canonicalAppender) {
	t.Helper()
	want, err := canon.Marshal(v)
	got, ok := v.appendCanonical(nil)
	switch {
	case err != nil && ok:
		t.Fatalf("%+v: direct encoding %s where Marshal fails: %v", v, got, err)
	case err == nil && (!ok || string(got) != string(want)):
		t.Fatalf("%+v:\n got %s (ok %v)\nwant %s", v, got, ok, want)
	}
}

// TestCanonicalAppenders: the direct encoders write exactly canon.Marshal's
// bytes.
func TestCanonicalAppenders(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, v := range []canonicalAppender{Transition{}, Transition{ExecutionID: "act_x", To: StateDispatched}, Call{}, Execution{}} {
		sameAsMarshal(t, v)
	}
	for range 20000 {
		sameAsMarshal(t, randomTransition(r))
		sameAsMarshal(t, randomCall(r))
		sameAsMarshal(t, randomExecution(r))
	}
	// A time encoding/json refuses takes the general path and its error.
	bad := Transition{ExecutionID: "act_x", To: StateDispatched, At: Some(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}
	if _, ok := bad.appendCanonical(nil); ok {
		t.Fatal("a year past 9999 was encoded directly")
	}
	if _, err := EncodeRecord(1, [32]byte{}, time.Now(), KindTransition, bad); err == nil {
		t.Fatal("EncodeRecord accepted a time encoding/json refuses")
	}
}

// BenchmarkEncode: record data through canon.Marshal and through the
// direct encoders, side by side, for the three frequent kinds.
//
//	go test ./activity -run '^$' -bench Encode
func BenchmarkEncode(b *testing.B) {
	at := Some(time.Date(2026, 11, 30, 10, 0, 0, 125000000, time.UTC))
	tr := Transition{ExecutionID: "act_01JD8Q4ZK3W5X7Y9A1B3C5D7E9", From: StateDispatched, To: StateSucceeded, At: at, TargetStatus: Some(201),
		ResultRef: "sha256:9f2c4d1e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d", CallID: "call_01JD8Q4ZK3W5X7Y9A1B3C5D7E9"}
	args := json.RawMessage(`{"region":"us-east-1","service":"billing","version":"2.4.1"}`)
	call := Call{ID: "call_01JD8Q4ZK3W5X7Y9A1B3C5D7E9", RunID: "run_01JD8Q4ZK3W5X7Y9A1B3C5D7E9", Actor: "agent:deployer", Method: "tools/call",
		Tool: "deploy_release", JSONRPCID: Some("7"), SessionID: Some("mcp-sess-1"), ProtocolVersion: Some("2025-11-25"), ReceivedAt: at.V,
		Arguments: args, Disposition: DispositionNewExecution, ExecutionID: "act_01JD8Q4ZK3W5X7Y9A1B3C5D7E9"}
	exec := Execution{ID: "act_01JD8Q4ZK3W5X7Y9A1B3C5D7E9", Action: Action{Actor: "agent:deployer", Tool: "deploy_release", Channel: ChannelHTTP,
		Target: "http://127.0.0.1:9400/v1/releases", Method: "POST", CredentialRef: "deploy-service", Arguments: args, IntentScope: "run:run-7f3a"},
		Fingerprint: "hmac-sha256:9f2c4d1e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d", FingerprintKeyID: "fp1",
		Contract: ContractRepeatableWithKey, State: StateAccepted, CreatedByCall: "call_01JD8Q4ZK3W5X7Y9A1B3C5D7E9",
		Window: Some(time.Hour), IdempotencyKey: Some("act_01JD8Q4ZK3W5X7Y9A1B3C5D7E9"), Times: Times{Accepted: at}}
	for _, c := range []struct {
		name string
		v    canonicalAppender
	}{{"transition", tr}, {"call", call}, {"execution", exec}} {
		b.Run(c.name+"/canon.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				canon.Marshal(c.v)
			}
		})
		b.Run(c.name+"/appendCanonical", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.v.appendCanonical(make([]byte, 0, 256))
			}
		})
	}
}

// FuzzTransitionCanonical holds the direct encoder to canon.Marshal on
// arbitrary field values.
func FuzzTransitionCanonical(f *testing.F) {
	f.Add("act_x", "dispatched", "unknown", "connection reset", "sha256:ab", "call_y", int64(1764493200), int64(5), 201, 0, uint8(7))
	f.Fuzz(func(t *testing.T, id, from, to, reason, ref, call string, sec, nsec int64, status, code int, present uint8) {
		tr := Transition{ExecutionID: ExecutionID(id), From: State(from), To: State(to), Reason: reason, ResultRef: ref, CallID: CallID(call)}
		if present&1 != 0 {
			tr.At = Some(time.Unix(sec, nsec).UTC())
		}
		if present&2 != 0 {
			tr.TargetStatus = Some(status)
		}
		if present&4 != 0 {
			tr.ExitCode = Some(code)
		}
		want, err := canon.Marshal(tr)
		got, ok := tr.appendCanonical(nil)
		if err != nil {
			if ok {
				t.Fatalf("%+v: direct encoding %s where Marshal fails: %v", tr, got, err)
			}
			return
		}
		if !ok || string(got) != string(want) {
			t.Fatalf("%+v:\n got %s\nwant %s", tr, got, want)
		}
	})
}

// randomFill sets every exported field of the struct v points to, at
// random present or zero, whatever its type: a field added to a model
// type is drawn here without anyone remembering to, so a direct encoder
// that forgets it fails TestCanonicalAppendersCoverEveryField.
func randomFill(r *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		randomFill(r, v.Elem())
	case reflect.Struct:
		switch v.Interface().(type) {
		case time.Time:
			v.Set(reflect.ValueOf(randomTime(r).V))
			return
		}
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() && (r.IntN(4) != 0 || v.Type().Field(i).Name == "OK") {
				randomFill(r, f)
			}
		}
	case reflect.String:
		v.SetString(randomString(r) + "s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(r.Int64N(1<<40) - 1<<20)
	case reflect.Slice:
		if v.Type() == reflect.TypeOf(json.RawMessage(nil)) {
			if a := randomArguments(r); a != nil {
				v.SetBytes(a)
			} else {
				v.SetBytes([]byte(`{"k":1}`))
			}
			return
		}
		n := 1 + r.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			randomFill(r, s.Index(i))
		}
		v.Set(s)
	}
}

// TestCanonicalAppendersCoverEveryField: with every field of the model
// types set, the direct encoders still write canon.Marshal's bytes, so
// nothing a writer sets is missing from the signed record.
func TestCanonicalAppendersCoverEveryField(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		for _, v := range []any{new(Transition), new(Call), new(Execution)} {
			randomFill(r, reflect.ValueOf(v))
			sameAsMarshal(t, reflect.ValueOf(v).Elem().Interface().(canonicalAppender))
		}
	}
}

// TestRecordPayload: the replay's short envelope read agrees with
// ParseRecord on every record EncodeRecord writes.
func TestRecordPayload(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 3000 {
		var tr Transition
		randomFill(r, reflect.ValueOf(&tr))
		rec, err := EncodeRecord(int64(i*977), [32]byte{byte(i)}, time.Unix(int64(i), 0), KindTransition, tr)
		if err != nil {
			continue
		}
		seq, kind, data, ok := recordPayload(rec.Bytes)
		want, err := ParseRecord(rec.Bytes)
		if !ok || err != nil || seq != want.Seq || kind != want.Kind || string(data) != string(want.Data) {
			t.Fatalf("%s: got %d %s %s %v, want %+v (%v)", rec.Bytes, seq, kind, data, ok, want, err)
		}
	}
	if _, _, _, ok := recordPayload([]byte(`{"v":1,"seq":1}`)); ok {
		t.Fatal("a short record was read")
	}
}

// TestOptDecodeFast: Opt's short paths read exactly what encoding/json
// reads, or leave the value to it.
func TestOptDecodeFast(t *testing.T) {
	for _, in := range []string{`"abc"`, `""`, `"a\"b"`, `"\u00e9"`, `"é"`, "\"\xff\"", `"tab	"`, `"a\\b"`,
		`0`, `-0`, `12`, `-7`, `007`, `1.0`, `1e2`, `-`, `99999999999999999999`, `"12"`,
		`"2026-11-30T10:00:00.125Z"`, `"2026-11-30T10:00:00+02:00"`, `"2026-13-30T10:00:00Z"`, `"x"`} {
		var s, sWant Opt[string]
		var n, nWant Opt[int]
		var tm, tWant Opt[time.Time]
		for _, c := range []struct {
			got, want any
		}{{&s, &sWant.V}, {&n, &nWant.V}, {&tm, &tWant.V}} {
			errGot := json.Unmarshal([]byte(in), c.got)
			errWant := json.Unmarshal([]byte(in), c.want)
			if (errGot == nil) != (errWant == nil) {
				t.Errorf("%s into %T: error %v, encoding/json %v", in, c.got, errGot, errWant)
			}
		}
		if s.V != sWant.V || n.V != nWant.V || !tm.V.Equal(tWant.V) {
			t.Errorf("%s: got %q %d %v, want %q %d %v", in, s.V, n.V, tm.V, sWant.V, nWant.V, tWant.V)
		}
	}
}

// TestDecodeTransition: the direct decoder reads back every transition
// the direct encoder writes, field for field.
func TestDecodeTransition(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	read := 0
	for range 20000 {
		var tr Transition
		randomFill(r, reflect.ValueOf(&tr))
		if r.IntN(2) == 0 {
			plainStrings(reflect.ValueOf(&tr))
		}
		tr.Seq = 0
		if tr.At.OK {
			tr.At.V = tr.At.V.UTC()
		}
		b, ok := tr.appendCanonical(nil)
		if !ok {
			continue
		}
		got, ok := decodeTransition(b)
		std, err := Record{Kind: KindTransition, Data: b}.eventStd()
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if ok {
			read++
			if !reflect.DeepEqual(got, std) {
				t.Fatalf("%s:\ndirect %+v\nstd    %+v", b, got, std)
			}
		}
	}
	if read < 1000 {
		t.Fatalf("the direct decoder read only %d of 20000 transitions", read)
	}
}

// plainStrings strips what JSON escapes from every string v holds.
func plainStrings(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		plainStrings(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				plainStrings(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			plainStrings(v.Index(i))
		}
	case reflect.String:
		v.SetString(strings.Map(func(r rune) rune {
			if r < 0x20 || r == '"' || r == '\\' || r == utf8.RuneError {
				return -1
			}
			return r
		}, v.String()))
	}
}
