package analyze_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
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
		truths := generate(t, s, rng, 60, 4, 0)
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

// generate writes n groups of 2 to most calls for one effect each (its
// own tool name), as an imported source so facts can be missing, and
// returns what really happened. Lines from unsignedFrom on (0: none) are
// records nothing signs, as an export imported with --allow-unsealed.
func generate(t *testing.T, s *activity.Store, rng *rand.Rand, n, most int, unsignedFrom int64) map[string]truth {
	truths := map[string]truth{}
	base := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	_, err := s.Write(ctx, func(w *activity.Tx) error {
		src, err := w.AddSource(activity.Source{Format: "property-test", UnsignedFrom: unsignedFrom})
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
			for c := range 2 + rng.IntN(most-1) {
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
		// An answer's line comes later in the file than its call's.
		tr := activity.Transition{ExecutionID: id, To: to, At: activity.Some(at), Source: activity.Provenance{Source: prov.Source, Line: prov.Line + 1000}}
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

// TestPropertyListingCutKeepsTheAnswers analyses random groups of up to
// 14 calls twice: listing them whole, and listing only the first three
// calls and executions (as a group of more than maxListed is). The cut
// may shorten the lists, never change what the suspect says: the verdict,
// the five answers and their evidence, the effects counted, the totals.
// And what is listed is the whole listing's, the first three, and the
// pair the answers examine.
func TestPropertyListingCutKeepsTheAnswers(t *testing.T) {
	cut, beyond := 0, 0
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		s, _ := activitytest.Open(t, activity.Options{})
		generate(t, s, rng, 80, 14, int64(seed%2)*400) // odd seeds: the second half unsigned
		whole, err := analyze.All(ctx, s, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		restore := analyze.SetMaxListed(3)
		short, err := analyze.All(ctx, s, analyze.Options{})
		restore()
		if err != nil {
			t.Fatal(err)
		}
		if len(short) != len(whole) {
			t.Fatalf("seed %d: %d suspects listing whole, %d with the cut", seed, len(whole), len(short))
		}
		for i, w := range whole {
			c := short[i]
			if len(w.Calls) != w.CallsTotal || len(w.Executions) != w.ExecutionsTotal {
				t.Fatalf("seed %d %s: listed whole, %d/%d calls and %d/%d executions", seed, w.ID, len(w.Calls), w.CallsTotal, len(w.Executions), w.ExecutionsTotal)
			}
			if c.ListingNote() != "" {
				cut++
				if !strings.HasSuffix(c.Summary, " "+c.ListingNote()+".") {
					t.Fatalf("seed %d %s: the summary does not say what is listed: %s", seed, c.ID, c.Summary)
				}
				c.Summary = strings.TrimSuffix(c.Summary, " "+c.ListingNote()+".")
			}
			if len(c.Calls) > 3+2 || len(c.Executions) > 3+2 {
				t.Fatalf("seed %d %s: lists %d calls and %d executions past a cut of 3", seed, c.ID, len(c.Calls), len(c.Executions))
			}
			beyond += max(0, len(c.Executions)-3)
			wc, ww := *w, *c
			wc.Calls, wc.Executions, ww.Calls, ww.Executions = nil, nil, nil, nil
			a, _ := json.Marshal(wc)
			b, _ := json.Marshal(ww)
			if string(a) != string(b) {
				t.Fatalf("seed %d: the cut changed what suspect %s says\nwhole: %s\n  cut: %s", seed, w.ID, a, b)
			}
			if !listedFrom(c.Calls, w.Calls, func(x analyze.CallRef) string { return string(x.ID) }) ||
				!listedFrom(c.Executions, w.Executions, func(x analyze.ExecutionSummary) string { return string(x.ID) }) {
				t.Fatalf("seed %d %s: the cut lists what the whole listing does not, or out of order", seed, w.ID)
			}
		}
	}
	if cut == 0 || beyond == 0 {
		t.Errorf("generator too tame: %d suspects cut, %d executions listed past the cut", cut, beyond)
	}
	t.Logf("%d suspects cut; %d executions listed past the cut because the answers examine them", cut, beyond)
}

// listedFrom reports whether part is whole's first min(3, len) entries
// followed by later entries of whole, in whole's order, each equal.
func listedFrom[T any](part, whole []T, id func(T) string) bool {
	j := 0
	for i, p := range part {
		for j < len(whole) && id(whole[j]) != id(p) {
			if i < 3 {
				return false
			}
			j++
		}
		if j == len(whole) {
			return false
		}
		a, _ := json.Marshal(p)
		b, _ := json.Marshal(whole[j])
		if string(a) != string(b) {
			return false
		}
		j++
	}
	return true
}

// TestPropertyCheckCountsWhatTheAnalysisShows: history --check and the
// analysis read effects by one rule. Over random groups (one effect each,
// every fact possibly missing), an effect is duplicated for the checker
// exactly when its suspect shows two effects or more, and possibly
// duplicated exactly when it shows fewer but two or more may have acted.
func TestPropertyCheckCountsWhatTheAnalysisShows(t *testing.T) {
	dup, maybe := 0, 0
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 11))
		s, _ := activitytest.Open(t, activity.Options{})
		generate(t, s, rng, 80, 6, 0)
		sus, err := analyze.All(ctx, s, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := analyze.Check(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		wantDup, wantMaybe := map[string]bool{}, 0
		for _, x := range sus {
			switch {
			case x.Effects >= 2:
				wantDup[x.EffectKey] = true
			case x.Effects+x.MaybeMore >= 2:
				wantMaybe++
			}
		}
		gotDup := map[string]bool{}
		for _, k := range res.DuplicatedEffects {
			gotDup[k] = true
		}
		if !maps.Equal(gotDup, wantDup) || res.PossiblyDuplicated != wantMaybe {
			t.Fatalf("seed %d: check says %d duplicated, %d possibly; the analysis shows %d and %d", seed, len(gotDup), res.PossiblyDuplicated, len(wantDup), wantMaybe)
		}
		dup, maybe = dup+len(gotDup), maybe+res.PossiblyDuplicated
	}
	if dup == 0 || maybe == 0 {
		t.Errorf("generator too tame: %d duplicated, %d possibly", dup, maybe)
	}
	t.Logf("%d duplicated and %d possibly duplicated effects, each as the analysis shows it", dup, maybe)
}

// TestResolutionShowsInTheAnswers: an operator's finding about an unknown
// outcome is cited by the answers about it, whatever the log recorded:
// over random groups, every suspect whose first execution an operator
// resolved says so in Q3 (its answer) and cites the record.
func TestResolutionShowsInTheAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	s, _ := activitytest.Open(t, activity.Options{})
	generate(t, s, rng, 80, 4, 0)
	// And a proxy's way: the log records neither the dispatch nor the
	// answer, the first send's outcome is unknown (a 499), then a resend.
	at := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	if _, err := s.Write(ctx, func(w *activity.Tx) error {
		src, err := w.AddSource(activity.Source{Format: "proxy-test"})
		if err != nil {
			return err
		}
		for i := range 2 {
			id := activity.NewExecutionID(at.Add(time.Duration(i) * time.Second))
			prov := activity.Provenance{Source: src.ID, Line: int64(i + 1)}
			if _, err := w.RecordCall(activity.Call{Actor: "client:10.0.0.1", Method: "http", Tool: "http POST /v1/refunds", ReceivedAt: at.Add(time.Duration(i) * time.Second),
				Disposition: activity.DispositionNewExecution, ExecutionID: id, Source: prov}); err != nil {
				return err
			}
			if _, err := w.Accept(activity.Execution{ID: id, Action: activity.Action{Actor: "client:10.0.0.1", Tool: "http POST /v1/refunds", Channel: activity.ChannelHTTP,
				Target: "/v1/refunds", Method: "POST"}, Source: prov, NotRecorded: []activity.Fact{activity.FactDispatch, activity.FactArguments}}); err != nil {
				return err
			}
			for _, tr := range []activity.Transition{{To: activity.StateAuthorized, Implied: true}, {To: activity.StateDispatched, Implied: true},
				{To: activity.StateUnknown, Reason: "the client went away (499)"}} {
				tr.ExecutionID = id
				if _, err := w.Transition(tr); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resolved := map[activity.ExecutionID]bool{}
	for _, x := range before {
		e := x.Executions[0]
		if e.State != activity.StateUnknown && e.State != activity.StatePendingVerification {
			continue
		}
		if _, err := s.Write(ctx, func(w *activity.Tx) error {
			_, err := w.Resolve(activity.Resolution{ExecutionID: e.ID, Outcome: activity.ResolutionVerified, Operator: "ann", Note: "seen at the target"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		resolved[e.ID] = true
	}
	after, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for _, x := range after {
		if !resolved[x.Executions[0].ID] || x.Questions[1].Answer == analyze.No {
			continue
		}
		if !strings.Contains(x.Questions[2].Explanation, "An operator later resolved it: verified") {
			t.Fatalf("%s: Q3 does not say the first was verified: %s", x.ID, x.Questions[2].Explanation)
		}
		shown++
	}
	if shown == 0 {
		t.Errorf("generator too tame: no resolved first execution (%d resolved)", len(resolved))
	}
	t.Logf("%d suspects cite the operator's finding", shown)
}
