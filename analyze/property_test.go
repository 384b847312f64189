package analyze_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/analyze"
)

// truth is what really happened to one generated group.
type truth struct {
	effects int // times the target really acted
}

// TestPropertyVerdictsNeverUnderstate generates random, truthful but
// incomplete histories (logs may omit facts or lose outcomes, never lie)
// and checks two promises: a "duplicate" always has two executions whose
// records show the target acted, and a group where the target really
// acted twice is never called one action.
func TestPropertyVerdictsNeverUnderstate(t *testing.T) {
	verdicts, twoEffects := map[analyze.Verdict]int{}, 0
	defer func() {
		// The property means nothing if the generator never produced the
		// cases it is about.
		if twoEffects == 0 || verdicts[analyze.VerdictDuplicate] == 0 || verdicts[analyze.VerdictDuplicateRisk] == 0 {
			t.Errorf("generator too tame: %d groups with two effects, verdicts %v", twoEffects, verdicts)
		}
		t.Logf("verdicts over all seeds: %v; groups with two or more real effects: %d", verdicts, twoEffects)
	}()
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 99))
		s, _ := activitytest.Open(t, activity.Options{})
		truths := generate(t, s, rng, 60)
		sus, err := analyze.All(ctx, s, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range sus {
			tr := truths[x.Tool]
			verdicts[x.Verdict]++
			if tr.effects >= 2 {
				twoEffects++
			}
			shown := 0
			for _, e := range x.Executions {
				if e.Outcome == activity.OutcomeSuccess {
					shown++
				}
			}
			if x.Verdict == analyze.VerdictDuplicate && shown < 2 {
				t.Fatalf("seed %d %s: called duplicate but the records show %d effects\n%s", seed, x.Tool, shown, dump(x))
			}
			one := x.Verdict == analyze.VerdictAttached || x.Verdict == analyze.VerdictRefused || x.Verdict == analyze.VerdictFirstNoEffect
			if tr.effects >= 2 && one {
				t.Fatalf("seed %d %s: the target acted %d times but the verdict is %s\n%s", seed, x.Tool, tr.effects, x.Verdict, dump(x))
			}
		}
	}
}

// generate writes n groups of 2-4 calls for one effect each (its own tool
// name), as an imported source so facts can be missing, and returns what
// really happened.
func generate(t *testing.T, s *activity.Store, rng *rand.Rand, n int) map[string]truth {
	truths := map[string]truth{}
	base := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	_, err := s.Write(ctx, func(w *activity.Tx) error {
		src, err := w.AddSource(activity.Source{Format: "property-test"})
		if err != nil {
			return err
		}
		runs := make([]activity.RunID, 3)
		for i := range runs {
			by := []activity.RunIdentification{activity.RunByMetaID, activity.RunBySession}[rng.IntN(2)]
			r, err := w.StartRun(activity.Run{Actor: "agent:p", IdentifiedBy: by, Evidence: fmt.Sprint("r", i), Source: activity.Provenance{Source: src.ID, Line: 1}})
			if err != nil {
				return err
			}
			runs[i] = r.ID
		}
		for g := range n {
			tool := fmt.Sprintf("tool_%03d", g)
			args := json.RawMessage(`{"g":` + fmt.Sprint(g) + `}`)
			at := base.Add(time.Duration(g) * 2 * time.Hour)
			var tr truth
			var last activity.ExecutionID
			for c := range 2 + rng.IntN(3) {
				at = at.Add(time.Duration(1+rng.IntN(30)) * time.Second)
				prov := activity.Provenance{Source: src.ID, Line: int64(g*10 + c + 2)}
				run := runs[rng.IntN(len(runs))]
				if last != "" && rng.IntN(3) == 0 { // a retry that attached
					if _, err := w.RecordCall(activity.Call{RunID: run, Actor: "agent:p", Method: "tools/call", Tool: tool, ReceivedAt: at,
						Arguments: args, Disposition: activity.DispositionAttached, ExecutionID: last, Source: prov}); err != nil {
						return err
					}
					continue
				}
				id := activity.NewExecutionID(at)
				if _, err := w.RecordCall(activity.Call{RunID: run, Actor: "agent:p", Method: "tools/call", Tool: tool, ReceivedAt: at,
					Arguments: args, Disposition: activity.DispositionNewExecution, ExecutionID: id, Source: prov}); err != nil {
					return err
				}
				acted, err := randomLifecycle(w, rng, id, tool, args, run, at, prov)
				if err != nil {
					return err
				}
				if acted {
					tr.effects++
				}
				last = id
			}
			truths[tool] = tr
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return truths
}

// randomLifecycle records one execution: what really happened is drawn
// first, then one of the truthful ways a log may show it.
func randomLifecycle(w *activity.Tx, rng *rand.Rand, id activity.ExecutionID, tool string, args json.RawMessage,
	run activity.RunID, at time.Time, prov activity.Provenance) (bool, error) {
	contract := activity.Contracts[1+rng.IntN(3)]
	var notRecorded []activity.Fact
	if rng.IntN(4) == 0 {
		notRecorded = append(notRecorded, activity.FactOutcome)
	}
	if _, err := w.Accept(activity.Execution{ID: id, Action: activity.Action{Actor: "agent:p", Tool: tool, Channel: activity.ChannelHTTP,
		Target: "api.example/" + tool, Method: "POST", Arguments: args}, RunID: run, Contract: contract, Source: prov,
		NotRecorded: notRecorded, Times: activity.Times{Accepted: activity.Some(at)}}); err != nil {
		return false, err
	}
	step := func(to activity.State, extra ...func(*activity.Transition)) error {
		tr := activity.Transition{ExecutionID: id, To: to, At: activity.Some(at)}
		for _, f := range extra {
			f(&tr)
		}
		_, err := w.Transition(tr)
		return err
	}
	switch rng.IntN(6) {
	case 0:
		return false, step(activity.StateRejected)
	case 1:
		if err := step(activity.StateAuthorized); err != nil {
			return false, err
		}
		return false, step(activity.StateFailedBefore)
	}
	if err := step(activity.StateAuthorized); err != nil {
		return false, err
	}
	if err := step(activity.StateDispatched); err != nil {
		return false, err
	}
	acted := rng.IntN(3) > 0
	if len(notRecorded) > 0 {
		return acted, nil // the log never says
	}
	switch {
	case rng.IntN(3) == 0: // the answer was lost either way
		if err := step(activity.StateUnknown); err != nil {
			return acted, err
		}
		if rng.IntN(2) == 0 {
			return acted, step(activity.StatePendingVerification)
		}
		return acted, nil
	case acted:
		// Some logs show what each effect created: truthfully one id per
		// real effect.
		created := ""
		if rng.IntN(2) == 0 {
			created = "eff_" + string(id)
		}
		if err := step(activity.StateSucceeded, func(t *activity.Transition) { t.TargetStatus, t.Created = activity.Some(201), created }); err != nil {
			return acted, err
		}
	default:
		if err := step(activity.StateFailed, func(t *activity.Transition) { t.TargetStatus = activity.Some(500) }); err != nil {
			return acted, err
		}
	}
	if rng.IntN(2) == 0 {
		return acted, step(activity.StateDelivered)
	}
	return acted, step(activity.StateDeliveryFailed)
}
