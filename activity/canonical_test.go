package activity

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity/canon"
)

// randomTransition draws transitions with every field present or absent
// and strings full of what JSON escapes.
func randomTransition(r *rand.Rand) Transition {
	str := func() string {
		pieces := []string{"", "a", "\"", "\\", "\n", "\x00", "\x7f", "é", "\u2028", "\xff", "<&>", "act_01JD8Q", " "}
		var s string
		for range r.IntN(5) {
			s += pieces[r.IntN(len(pieces))]
		}
		return s
	}
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

// TestCanonicalAppenders: the direct encoders write exactly canon.Marshal's
// bytes.
func TestCanonicalAppenders(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []Transition{{}, {ExecutionID: "act_x", To: StateDispatched}}
	for range 20000 {
		cases = append(cases, randomTransition(r))
	}
	for _, c := range cases {
		want, err := canon.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := c.appendCanonical(nil)
		if !ok || string(got) != string(want) {
			t.Fatalf("%+v:\n got %s\nwant %s", c, got, want)
		}
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

// BenchmarkEncodeTransition: a transition record through canon.Marshal and
// through its direct encoder, side by side.
func BenchmarkEncodeTransition(b *testing.B) {
	tr := Transition{ExecutionID: "act_01JD8Q4ZK3W5X7Y9A1B3C5D7E9", From: StateDispatched, To: StateSucceeded,
		At: Some(time.Date(2026, 11, 30, 10, 0, 0, 125000000, time.UTC)), TargetStatus: Some(201),
		ResultRef: "sha256:9f2c4d1e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d", CallID: "call_01JD8Q4ZK3W5X7Y9A1B3C5D7E9"}
	b.Run("canon.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			canon.Marshal(tr)
		}
	})
	b.Run("appendCanonical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tr.appendCanonical(make([]byte, 0, 256))
		}
	})
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
