package analyze

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
)

// The effect walk finds the execution a success may be a replay of
// through maps (answerable). It must say exactly what comparing each
// success with every earlier execution, newest first, says: that walk,
// as it was, is the reference here, run over random sequences whose keys
// and created ids collide often.
func TestAnswerableAgreesWithTheWalkBack(t *testing.T) {
	compared := map[string]int{}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var ew effectWalk
		var ins []effectIn
		var want []effect
		for i := range 2 + rng.IntN(40) {
			in := randomEffectIn(rng, i)
			ins = append(ins, in)
			got := ew.addIn(in)
			want = append(want, walkBack(ins, want, i))
			if got != want[i] {
				t.Fatalf("seed %d, execution %d of %+v:\n got %+v\nwant %+v", seed, i, ins, got, want[i])
			}
			compared[got.why]++
		}
	}
	for _, why := range []string{"a second success the records do not show to be a second effect", "the target answered success"} {
		if compared[why] == 0 {
			t.Errorf("no execution ended %q: the generator is too tame (%v)", why, compared)
		}
	}
	replays := 0
	for why, n := range compared {
		if len(why) > 20 && (why[:20] == "the same created id " || why[:20] == "the same Idempotency" || why[:20] == "the target says its ") {
			replays += n
		}
	}
	if replays == 0 {
		t.Errorf("no replay found: the generator is too tame (%v)", compared)
	}
}

func randomEffectIn(rng *rand.Rand, i int) effectIn {
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	in := effectIn{id: activity.ExecutionID(fmt.Sprint("act_", i)), dispatched: rng.IntN(8) > 0,
		outcome:        activity.Outcome(pick("success", "success", "success", "failure", "")),
		recordsOutcome: rng.IntN(4) > 0, recordsKey: rng.IntN(5) > 0, recordsArgs: rng.IntN(5) > 0,
		created: pick("", "", "c1", "c2", "c3"), replayed: pick("", "", "", "", "", "true")}
	if rng.IntN(6) > 0 {
		in.key = activity.Some(pick("", "k1", "k2", "k3", "k4"))
	}
	return in
}

// walkBack is the effect of ins[i] as the walk before answerable found
// it: compared with every earlier execution, newest first.
func walkBack(ins []effectIn, prior []effect, i int) effect {
	x := ins[i]
	ef := effect{acted: Unknown, replayOf: -1}
	switch {
	case !x.dispatched:
		ef.acted, ef.why = No, "never dispatched"
		return ef
	case x.outcome == activity.OutcomeFailure:
		ef.acted, ef.why = No, "the target answered that it failed"
		return ef
	case x.outcome != activity.OutcomeSuccess:
		ef.noOutcome = !x.recordsOutcome
		ef.why = "no outcome shown"
		for j := i - 1; j >= 0; j-- {
			if prior[j].acted != No && sameKey(x.key, ins[j].key) {
				ef.acted, ef.replayOf, ef.why = No, j, "the same Idempotency-Key as "+string(ins[j].id)+": the target acts on it once at most"
				break
			}
		}
		return ef
	}
	ef.acted, ef.why = Yes, "the target answered success"
	if x.replayed != "" {
		first := -1
		base := -1
		for j := 0; j < i && base < 0; j++ {
			if prior[j].acted == No && prior[j].replayOf < 0 {
				continue
			}
			if sameKey(x.key, ins[j].key) {
				base = j
			}
			if first < 0 {
				first = j
			}
		}
		if base < 0 {
			base = max(first, 0)
		}
		ef.acted, ef.replayOf, ef.why = No, base, "the target says its answer is a replay ("+x.replayed+")"
	}
	for j := i - 1; j >= 0 && ef.acted == Yes; j-- {
		y := ins[j]
		if prior[j].acted == No && prior[j].replayOf < 0 {
			continue
		}
		base := j
		if prior[j].replayOf >= 0 {
			base = prior[j].replayOf
		}
		switch {
		case x.created != "" && x.created == y.created:
			ef.acted, ef.replayOf, ef.why = No, base, "the same created id as "+string(y.id)+": a replay"
		case x.created != "" && y.created != "" && x.created != y.created:
		case sameKey(x.key, y.key):
			ef.acted, ef.replayOf, ef.why = No, base, "the same Idempotency-Key as "+string(y.id)+": the target answers it from the first"
		case y.outcome == activity.OutcomeSuccess && (!x.recordsKey || !y.recordsKey || !x.key.OK || !y.key.OK || !x.recordsArgs || !y.recordsArgs):
			ef.acted, ef.possibleReplay, ef.why = Unknown, true, "a second success the records do not show to be a second effect"
		}
	}
	return ef
}

// BenchmarkEffectWalk reads 20,000 successes of one effect, each with its
// own recorded key (a tool polled with the same arguments, through the
// gateway), the way before answerable (each compared with every earlier
// one) and now, side by side.
//
//	go test ./analyze -run '^$' -bench EffectWalk -benchtime 3x
func BenchmarkEffectWalk(b *testing.B) {
	const n = 20_000
	ins := make([]effectIn, n)
	for i := range ins {
		ins[i] = effectIn{id: activity.ExecutionID(fmt.Sprint("act_", i)), dispatched: true, outcome: activity.OutcomeSuccess,
			recordsOutcome: true, recordsKey: true, recordsArgs: true, key: activity.Some(fmt.Sprint("act_", i))}
	}
	b.Run("walk_back", func(b *testing.B) {
		for range b.N {
			out := make([]effect, 0, n)
			for i := range ins {
				out = append(out, walkBack(ins[:i+1], out, i))
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/group")
	})
	b.Run("answerable", func(b *testing.B) {
		for range b.N {
			var ew effectWalk
			for i := range ins {
				ew.addIn(ins[i])
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/group")
	})
}
