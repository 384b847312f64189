package analyze_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/demo"
	"github.com/mcpdup/mcpdup/gatewaylite"
	"github.com/mcpdup/mcpdup/internal/pgtest"
)

var ctx = context.Background()

var (
	incidentOnce  sync.Once
	incidentStore *activity.Store
	incidentErr   error
	tempDir       string
)

func TestMain(m *testing.M) {
	var err error
	if tempDir, err = os.MkdirTemp("", "mcpdup-analyze-"); err != nil {
		panic(err)
	}
	code := m.Run()
	if incidentStore != nil {
		incidentStore.Close()
	}
	pgtest.StopShared()
	os.RemoveAll(tempDir)
	os.Exit(code)
}

// incident builds the scripted incident once (real gateway, real faults)
// and shares the read-only result between tests.
func incident(t *testing.T) *activity.Store {
	t.Helper()
	incidentOnce.Do(func() {
		dir := tempDir
		path, keys := filepath.Join(dir, "incident.db"), filepath.Join(dir, "keys")
		s, err := activity.Open(ctx, path, activity.Options{KeyDir: keys})
		if err != nil {
			incidentErr = err
			return
		}
		if incidentErr = demo.Run(ctx, s, keys); incidentErr != nil {
			return
		}
		s.Close()
		incidentStore, incidentErr = activity.Open(ctx, path, activity.Options{ReadOnly: true, KeyDir: keys})
	})
	if incidentErr != nil {
		t.Fatal(incidentErr)
	}
	return incidentStore
}

func suspectsByTool(t *testing.T, s *activity.Store) map[string]*analyze.Suspect {
	t.Helper()
	all, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*analyze.Suspect{}
	for _, sus := range all {
		if out[sus.Tool] != nil {
			t.Fatalf("two suspects for %s", sus.Tool)
		}
		out[sus.Tool] = sus
	}
	return out
}

// want lists, per scenario, the five answers in order.
var wantAnswers = map[string]string{
	"attached":      "unknown yes yes no yes", // two MCP sessions: a reconnect, or two processes?
	"pending":       "yes yes no unknown yes", // no outcome was observed: delivery cannot be judged
	"locked":        "yes no no no yes",
	"failed_first":  "yes yes yes no no",
	"two_runs":      "no yes yes no no",
	"repeat":        "yes yes yes no no",
	"read_only":     "yes yes yes no no",
	"pt_duplicate":  "unknown yes yes unknown unknown",
	"pt_risk":       "unknown yes no unknown unknown",
	"pt_no_outcome": "unknown yes unknown unknown unknown",
}

func TestIncidentVerdictsAndAnswers(t *testing.T) {
	s := incident(t)
	got := suspectsByTool(t, s)
	if len(got) != len(demo.Scenarios) {
		t.Errorf("%d suspects, want one per scenario (%d)", len(got), len(demo.Scenarios))
	}
	for _, sc := range demo.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			sus := got[sc.Tool]
			if sus == nil {
				t.Fatalf("no suspect for %s (%s)", sc.Tool, sc.Story)
			}
			if string(sus.Verdict) != sc.Verdict {
				t.Errorf("verdict %s, want %s\n%s", sus.Verdict, sc.Verdict, dump(sus))
			}
			var answers []string
			for _, q := range sus.Questions {
				answers = append(answers, string(q.Answer))
			}
			if a := strings.Join(answers, " "); a != wantAnswers[sc.Name] {
				t.Errorf("answers %q, want %q\n%s", a, wantAnswers[sc.Name], dump(sus))
			}
			checkEvidence(t, s, sus)
		})
	}
}

// checkEvidence resolves every cited record and checks it is about this
// suspect: a call of the group, or a transition or run of its executions.
func checkEvidence(t *testing.T, s *activity.Store, sus *analyze.Suspect) {
	t.Helper()
	calls, execs := map[string]bool{}, map[string]bool{}
	for _, c := range sus.Calls {
		calls[string(c.ID)] = true
	}
	for _, e := range sus.Executions {
		execs[string(e.ID)] = true
	}
	for _, q := range sus.Questions {
		if q.Answer != analyze.Unknown && len(q.Evidence) == 0 && q.Finding != "no_result" && q.Finding != "not_sent" {
			t.Errorf("Q%d answers %s with no evidence: %s", q.N, q.Answer, q.Explanation)
		}
		if q.Answer == analyze.Unknown && q.Missing == "" && q.N != 5 {
			t.Errorf("Q%d is unknown but does not say what the log lacks", q.N)
		}
		for _, ev := range q.Evidence {
			rec, err := s.Record(ctx, ev.Seq)
			if err != nil {
				t.Fatalf("Q%d cites record %d: %v", q.N, ev.Seq, err)
			}
			var data struct {
				ID          string `json:"id"`
				ExecutionID string `json:"execution_id"`
				To          string `json:"to"`
				Actor       string `json:"actor"`
			}
			json.Unmarshal(rec.Data, &data)
			switch rec.Kind {
			case activity.KindCall:
				if !calls[data.ID] {
					t.Errorf("Q%d cites call record %d (%s), not of this suspect", q.N, ev.Seq, data.ID)
				}
			case activity.KindTransition:
				if !execs[data.ExecutionID] || !strings.Contains(ev.What, data.To) && !strings.Contains(ev.What, strings.ReplaceAll(data.To, "_", " ")) {
					t.Errorf("Q%d cites transition %d (%s → %s) as %q", q.N, ev.Seq, data.ExecutionID, data.To, ev.What)
				}
			case activity.KindExecution:
				if !execs[data.ID] {
					t.Errorf("Q%d cites execution record %d (%s), not of this suspect", q.N, ev.Seq, data.ID)
				}
			case activity.KindRun:
				if !strings.Contains(ev.What, data.ID) {
					t.Errorf("Q%d cites run record %d (%s) as %q", q.N, ev.Seq, data.ID, ev.What)
				}
			default:
				t.Errorf("Q%d cites a %s record", q.N, rec.Kind)
			}
		}
	}
}

func TestUnknownSaysWhatIsMissing(t *testing.T) {
	sus := suspectsByTool(t, incident(t))["pt_send_email"]
	q3 := sus.Questions[2]
	if q3.Answer != analyze.Unknown || q3.Missing != "the log does not record the target's response" {
		t.Fatalf("Q3: %+v", q3)
	}
	if len(sus.Missing) == 0 || sus.Verdict != analyze.VerdictInsufficient {
		t.Fatalf("suspect: %+v", sus)
	}
}

func dump(s *analyze.Suspect) string {
	b, _ := json.MarshalIndent(s, "", "  ")
	return string(b)
}

// TestNearMissesAreNotSuspects: the same tool with other arguments is a
// different effect, never a suspect; and calls far apart (beyond the
// window) are not grouped.
func TestNearMissesAreNotSuspects(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	all, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sus := range all {
		var args []string
		for _, e := range sus.Executions {
			ex, _ := s.Execution(ctx, e.ID)
			args = append(args, string(ex.Arguments))
		}
		for _, a := range args[1:] {
			if a != args[0] {
				t.Fatalf("suspect %s groups different arguments: %v", sus.ID, args)
			}
		}
		if sus.Tool == "deploy_release" && len(sus.Executions) != 2 {
			t.Fatalf("deploy_release: the eu-west-1 deploy must stay out of the us-east-1 group: %d executions", len(sus.Executions))
		}
	}
	// A window shorter than the gap between calls splits the groups.
	short, err := analyze.All(ctx, s, analyze.Options{Window: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(short) != 0 {
		t.Fatalf("with a 1ns window nothing is close in time, got %d suspects", len(short))
	}
}

func TestHistoryChecker(t *testing.T) {
	res, err := analyze.Check(ctx, incident(t))
	if err != nil {
		t.Fatal(err)
	}
	// scale_service (two runs), publish_notes (a deliberate repeat) and the
	// pass-through's order: three effects performed twice. Reads do not count.
	if res.Duplicated != 3 || len(res.DuplicatedEffects) != 3 {
		t.Errorf("duplicated %d %v, want 3", res.Duplicated, res.DuplicatedEffects)
	}
	// The pass-through log records no outcome for either email: not lost
	// (a log that records outcomes and shows none), not known either.
	if res.Lost != 0 || res.OutcomeNotRecorded != 2 {
		t.Errorf("lost %d, outcome not recorded %d, want 0 and 2", res.Lost, res.OutcomeNotRecorded)
	}
	// charge_card, refund_charge (pending verification) and the
	// pass-through transfer: indeterminate and never settled.
	if res.StillUnknown != 3 {
		t.Errorf("still unknown %d, want 3", res.StillUnknown)
	}
	if res.Invocations != 17 || res.OK != 11 || res.Info != 3 {
		t.Errorf("operations: %+v", res)
	}
	t.Logf("%+v", res)
}

const whatIfConfig = `
[[actor]]
name = "agent:ops"
token_env = "UNUSED"
[[tool]]
name = "pt_create_order"
url = "http://127.0.0.1:1/v1/orders"
contract = "repeatable_with_key"
[[tool]]
name = "pt_transfer_funds"
url = "http://127.0.0.1:1/v1/transfers"
contract = "%s"
`

// TestWhatIfThroughGatewayDecide replays the pass-through's duplicates
// through the gateway's own decision function.
func TestWhatIfThroughGatewayDecide(t *testing.T) {
	got := suspectsByTool(t, incident(t))
	for contract, want := range map[string]activity.Recovery{
		"blocked_after_unknown": activity.RecoveryBlock,
		"repeatable_with_key":   activity.RecoveryResend,
		"read_only":             activity.RecoveryNew,
	} {
		cfg, err := gatewaylite.ParseConfig([]byte(fmt.Sprintf(whatIfConfig, contract)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := analyze.WhatIf(got["pt_transfer_funds"], cfg.Contract)
		if err != nil {
			t.Fatal(err)
		}
		if len(w) != 2 || w[0].Would != activity.RecoveryNew || w[1].Would != want {
			t.Errorf("transfer under %s: %+v", contract, w)
		}
		if w, err = analyze.WhatIf(got["pt_create_order"], cfg.Contract); err != nil {
			t.Fatal(err)
		}
		if w[1].Would != activity.RecoveryStoredResult || w[1].Action != "returned the stored result" {
			t.Errorf("order: the gateway would have answered the retry from the first execution: %+v", w[1])
		}
	}
}

// TestFindRebuildsOneSuspect: a whole suspect id is rebuilt from its first
// call's effect alone (an index read, not a scan of the log), and the
// suspect is exactly the one Scan finds, for every suspect of a mixed log
// with many groups; a call that starts no group is no suspect.
func TestFindRebuildsOneSuspect(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := activitytest.FillMixed(ctx, s, 3000, 300, 7); err != nil {
		t.Fatal(err)
	}
	all, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil || len(all) < 20 {
		t.Fatalf("%d suspects: %v", len(all), err)
	}
	inGroup := map[activity.CallID]bool{}
	for _, want := range all {
		got, err := analyze.Find(ctx, s, analyze.Options{}, want.ID)
		if err != nil {
			t.Fatalf("find %s: %v", want.ID, err)
		}
		if a, b := mustJSON(t, got), mustJSON(t, want); a != b {
			t.Fatalf("suspect %s found alone differs from the scan's:\n%s\n%s", want.ID, a, b)
		}
		for _, c := range want.Calls[1:] {
			inGroup[c.ID] = true
		}
	}
	for id := range inGroup { // a later call of a group starts none
		sus := "sus_" + strings.TrimPrefix(string(id), "call_")
		if _, err := analyze.Find(ctx, s, analyze.Options{}, sus); !errors.Is(err, activity.ErrNotFound) {
			t.Fatalf("%s (not a group's first call) was found: %v", sus, err)
		}
		break
	}
	if _, err := analyze.Find(ctx, s, analyze.Options{}, "sus_01M8NTXEK8E2GQ6MH0YHJA6M4Y"); !errors.Is(err, activity.ErrNotFound) {
		t.Fatalf("an id of no call: %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRebuildTouchedEqualsScan: after more records are appended, the
// suspects of the effects the new records touched, rebuilt alone and put
// in place of those keys' old suspects, are exactly what a whole new scan
// finds: what the live console does instead of reloading everything.
func TestRebuildTouchedEqualsScan(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := activitytest.FillMixed(ctx, s, 1500, 150, 5); err != nil {
		t.Fatal(err)
	}
	before, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	size, _ := s.LogSize(ctx)
	// New suspects, and new calls of effects that already had some (the
	// incident again: its calls join its old groups).
	if err := activitytest.FillMixed(ctx, s, 600, 100, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	touched, err := analyze.TouchedSince(ctx, s, size)
	if err != nil || len(touched.Keys) == 0 {
		t.Fatalf("touched: %+v %v", touched, err)
	}
	if now, _ := s.LogSize(ctx); touched.Through != now {
		t.Fatalf("read through %d, the log has %d", touched.Through, now)
	}
	_, changed, untouched := mergedMatchesScan(t, s, before, touched)
	if changed == 0 || untouched == 0 {
		t.Fatalf("the test must change old suspects and leave others: %d changed, %d untouched", changed, untouched)
	}
}

// TestRebuildOfAHotEffectAnalysesItsLastGroup holds live mode to "only
// the groups they touch": an effect called every 25 minutes for a day
// and a half falls into a suspect every hour or so; two more calls at the
// end change its last group alone, and the rest are kept, unanalysed,
// equal to a scan's.
func TestRebuildOfAHotEffectAnalysesItsLastGroup(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	from := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	if err := activitytest.FillHot(ctx, s, "hot", from, 90, 25*time.Minute); err != nil {
		t.Fatal(err)
	}
	before, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil || len(before) < 20 {
		t.Fatalf("%d suspects, %v", len(before), err)
	}
	size, _ := s.LogSize(ctx)
	if err := activitytest.FillHot(ctx, s, "hot", from.Add(90*25*time.Minute), 2, 25*time.Minute); err != nil {
		t.Fatal(err)
	}
	touched, err := analyze.TouchedSince(ctx, s, size)
	if err != nil || len(touched.Keys) != 1 {
		t.Fatalf("touched: %+v %v", touched.Keys, err)
	}
	rebuilt, _, _ := mergedMatchesScan(t, s, before, touched)
	if len(rebuilt.Fresh) > 2 || len(rebuilt.Kept) < len(before)-2 {
		t.Fatalf("of %d suspects, %d analysed again and %d kept: the whole history was rebuilt", len(before), len(rebuilt.Fresh), len(rebuilt.Kept))
	}
	// An older log imported later puts a call before all of them: every
	// window after it is cut anew, though no execution it holds changed.
	if before, err = analyze.All(ctx, s, analyze.Options{}); err != nil {
		t.Fatal(err)
	}
	size, _ = s.LogSize(ctx)
	if err := activitytest.FillHot(ctx, s, "hot", from.Add(-20*time.Minute), 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if touched, err = analyze.TouchedSince(ctx, s, size); err != nil {
		t.Fatal(err)
	}
	if rebuilt, _, _ = mergedMatchesScan(t, s, before, touched); len(rebuilt.Kept) > 0 {
		t.Fatalf("%d suspects kept after a call before all of them", len(rebuilt.Kept))
	}
}

// mergedMatchesScan applies Rebuild's answer to the suspects before the
// new records, as the console does, and fails unless the result is a
// scan's suspects, byte for byte. It counts the suspects the new records
// changed and those of effects they did not touch.
func mergedMatchesScan(t *testing.T, s *activity.Store, before []*analyze.Suspect, touched analyze.Touched) (rebuilt analyze.Rebuilt, changed, untouched int) {
	t.Helper()
	rebuilt, _, changed, untouched = rebuildMatchesScan(t, s, analyze.Options{}, before, touched)
	return rebuilt, changed, untouched
}

// rebuildMatchesScan is mergedMatchesScan with opts (EffectCuts, say); it
// also returns the merged suspects, which a scan finds.
func rebuildMatchesScan(t *testing.T, s *activity.Store, opts analyze.Options, before []*analyze.Suspect, touched analyze.Touched) (rebuilt analyze.Rebuilt, after []*analyze.Suspect, changed, untouched int) {
	t.Helper()
	rebuilt, err := analyze.Rebuild(ctx, s, opts, touched)
	if err != nil {
		t.Fatal(err)
	}
	keys, kept := map[string]bool{}, map[string]bool{}
	for _, k := range touched.Keys {
		keys[k] = true
	}
	for _, id := range rebuilt.Kept {
		kept[id] = true
	}
	merged, old := map[string]string{}, map[string]string{}
	for _, sus := range before {
		old[sus.ID] = mustJSON(t, sus)
		if !keys[sus.EffectKey] || kept[sus.ID] {
			merged[sus.ID] = old[sus.ID]
		}
		if !keys[sus.EffectKey] {
			untouched++
		}
	}
	for _, sus := range rebuilt.Fresh {
		if kept[sus.ID] {
			t.Fatalf("suspect %s both kept and analysed again", sus.ID)
		}
		merged[sus.ID] = mustJSON(t, sus)
	}
	after, err = analyze.All(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(merged) {
		t.Fatalf("a scan finds %d suspects, the incremental update %d (%d kept, %d rebuilt)", len(after), len(merged), len(rebuilt.Kept), len(rebuilt.Fresh))
	}
	for _, sus := range after {
		if merged[sus.ID] != mustJSON(t, sus) {
			t.Fatalf("suspect %s differs from the scan's", sus.ID)
		}
		if o, ok := old[sus.ID]; ok && o != merged[sus.ID] {
			changed++
		}
	}
	return rebuilt, after, changed, untouched
}

// TestNearMissFinderFollowsNewCalls holds live mode's near misses to a
// scan's: a finder fed by a scan and then by the calls of the records
// appended since names what a scan of the whole log names.
func TestNearMissFinderFollowsNewCalls(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	if err := activitytest.FillMixed(ctx, s, 200, 50, 7); err != nil {
		t.Fatal(err)
	}
	finder := analyze.NewNearMissFinder()
	var first []analyze.NearMiss
	if err := analyze.Scan(ctx, s, analyze.Options{Finder: finder, NearMisses: func(f []analyze.NearMiss, _ int) { first = f }},
		func(*analyze.Suspect) error { return nil }); err != nil {
		t.Fatal(err)
	}
	size, _ := s.LogSize(ctx)
	// Two services deployed in turn, a minute apart, an hour on: each
	// call a near miss of the one before.
	later := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	if err := activitytest.FillHot(ctx, s, "api", later, 5, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := activitytest.FillHot(ctx, s, "web", later.Add(30*time.Second), 5, time.Minute); err != nil {
		t.Fatal(err)
	}
	touched, err := analyze.TouchedSince(ctx, s, size)
	if err != nil || len(touched.Calls) == 0 {
		t.Fatalf("touched: %d calls, %v", len(touched.Calls), err)
	}
	finder.Follow(analyze.Options{}, touched.Calls, time.Now())
	got, gotOmitted, err := finder.Name(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	res, err := analyze.Analyse(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) <= len(first) || mustJSON(t, got) != mustJSON(t, res.NearMisses) || gotOmitted != res.NearMissesOmitted {
		t.Fatalf("the finder names %d near misses (%d omitted, %d before the new records), a scan %d (%d omitted)",
			len(got), gotOmitted, len(first), len(res.NearMisses), res.NearMissesOmitted)
	}
}

// TestScanRangeEqualsAScanFiltered holds a range's analysis to a whole
// scan's: the same suspects, byte for byte, as those of the scan whose
// first call lies in the range, including an effect called all along whose
// windows are cut by calls before the range; and the near misses of the
// scan between two calls of the range.
func TestScanRangeEqualsAScanFiltered(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	if err := activitytest.FillMixed(ctx, s, 3000, 300, 4); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	if err := activitytest.FillHot(ctx, s, "hot", start.Add(-3*time.Hour), 40, 25*time.Minute); err != nil {
		t.Fatal(err)
	}
	whole, err := analyze.Analyse(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The scan names its first 200 near misses: a range after the last of
	// them cannot be held to its list.
	named := whole.NearMisses[len(whole.NearMisses)-1].Second.ReceivedAt
	checkedNear := 0
	for _, r := range []struct{ from, to time.Time }{
		{start.Add(2 * time.Second), start.Add(12 * time.Second)},
		{start.Add(10 * time.Second), start.Add(40 * time.Second)},
		{start.Add(-130 * time.Minute), start.Add(20 * time.Second)}, // inside a window of the hot effect (its calls 25 minutes apart from -3h)
		{time.Time{}, start.Add(5 * time.Second)},
		{start.Add(45 * time.Second), time.Time{}},
	} {
		want := map[string]string{}
		for _, sus := range whole.Suspects {
			if !sus.FirstAt.Before(r.from) && (r.to.IsZero() || !sus.FirstAt.After(r.to)) {
				want[sus.ID] = mustJSON(t, sus)
			}
		}
		wantNear := []analyze.NearMiss{}
		for _, m := range whole.NearMisses {
			if !m.First.ReceivedAt.Before(r.from) && (r.to.IsZero() || !m.Second.ReceivedAt.After(r.to)) {
				wantNear = append(wantNear, m)
			}
		}
		got, err := analyze.Analyse(ctx, s, analyze.Options{From: r.from, To: r.to})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Suspects) != len(want) || len(want) == 0 {
			t.Fatalf("range %v–%v: %d suspects, a scan has %d there", r.from, r.to, len(got.Suspects), len(want))
		}
		for i, sus := range got.Suspects {
			if want[sus.ID] != mustJSON(t, sus) {
				t.Fatalf("range %v–%v: suspect %s differs from the scan's", r.from, r.to, sus.ID)
			}
			if i > 0 && sus.FirstAt.Before(got.Suspects[i-1].FirstAt) {
				t.Fatalf("range %v–%v: suspects out of order", r.from, r.to)
			}
		}
		if whole.NearMissesOmitted > 0 && (r.to.IsZero() || r.to.After(named)) {
			continue
		}
		checkedNear++
		if len(wantNear) == 0 || mustJSON(t, got.NearMisses) != mustJSON(t, wantNear) {
			t.Fatalf("range %v–%v: %d near misses, the scan has %d there", r.from, r.to, len(got.NearMisses), len(wantNear))
		}
	}
	if checkedNear == 0 {
		t.Fatal("no range's near misses were checked")
	}
}

// TestNearMissFinderFollowsLikeAScan: what live mode feeds a finder
// beyond new calls in order: calls the scan already saw (a refresh reads
// from the log size taken before the scan), two calls of a tool at one
// instant, a call of one tool committed after another tool's later call,
// and a call received too recently to be sure of its place. Each time
// the finder names what a scan names, and is never Behind.
func TestNearMissFinderFollowsLikeAScan(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	size, _ := s.LogSize(ctx)
	nearCall(t, s, "tool_a", "x", t0)
	nearCall(t, s, "tool_a", "y", t0) // the same instant: an imported log's precision
	nearCall(t, s, "tool_b", "x", t0.Add(10*time.Second))
	nearCall(t, s, "tool_b", "y", t0.Add(11*time.Second))
	finder := analyze.NewNearMissFinder()
	if err := analyze.Scan(ctx, s, analyze.Options{Finder: finder, NearMisses: func([]analyze.NearMiss, int) {}},
		func(*analyze.Suspect) error { return nil }); err != nil {
		t.Fatal(err)
	}
	follow := func(step string, since int64, now time.Time) {
		t.Helper()
		touched, err := analyze.TouchedSince(ctx, s, since)
		if err != nil {
			t.Fatal(err)
		}
		finder.Follow(analyze.Options{}, touched.Calls, now)
		got, _, err := finder.Name(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		res, err := analyze.Analyse(ctx, s, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if finder.Behind() || mustJSON(t, got) != mustJSON(t, res.NearMisses) {
			t.Fatalf("%s: behind %v; the finder names %s\na scan names %s", step, finder.Behind(), mustJSON(t, got), mustJSON(t, res.NearMisses))
		}
	}
	follow("calls the scan saw, fed again", size, time.Now())
	size, _ = s.LogSize(ctx)
	nearCall(t, s, "tool_a", "z", t0.Add(5*time.Second)) // before tool_b's latest, after tool_a's
	follow("a call committed late", size, time.Now())
	// A call received a moment ago waits: one received before it may
	// still be on its way.
	size, _ = s.LogSize(ctx)
	nearCall(t, s, "tool_b", "z", t0.Add(20*time.Second))
	touched, err := analyze.TouchedSince(ctx, s, size)
	if err != nil {
		t.Fatal(err)
	}
	finder.Follow(analyze.Options{}, touched.Calls, t0.Add(21*time.Second))
	if finder.Changed() {
		t.Fatal("a call received 1 s before now was seen at once")
	}
	nearCall(t, s, "tool_b", "w", t0.Add(19*time.Second)) // committed after it, received before
	follow("a call that arrived before one already followed", size, t0.Add(30*time.Second))
}

// nearCall records one new execution of tool with service svc, received at
// at.
func nearCall(t *testing.T, s *activity.Store, tool, svc string, at time.Time) {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"service": svc})
	_, err := s.Write(ctx, func(w *activity.Tx) error {
		id := activity.NewExecutionID(at)
		c, err := w.RecordCall(activity.Call{Actor: "agent:x", Method: "tools/call", Tool: tool, ReceivedAt: at,
			Arguments: args, Disposition: activity.DispositionNewExecution, ExecutionID: id})
		if err != nil {
			return err
		}
		_, err = w.Accept(activity.Execution{ID: id,
			Action: activity.Action{Actor: "agent:x", Tool: tool, Channel: activity.ChannelHTTP,
				Target: "127.0.0.1:9400/v1/" + tool, Method: "POST", Arguments: args},
			Fingerprint: "hmac-sha256:" + string(id), FingerprintKeyID: "fp1", Contract: activity.ContractRepeatableWithKey,
			CreatedByCall: c.ID, Window: activity.Some(time.Hour)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRebuildFromTheLastGroupEqualsScan holds the console's rebuilds with
// EffectCuts to a scan over rounds of what live records can do to an
// effect called all day: a call joining its last group, one opening a
// new group, a retry attached to an old execution, an older log imported
// with a call before them all, an approval asked about an old execution,
// other effects' calls. After each round the suspects equal a
// scan's byte for byte, and a round that only adds to the last group
// reads that group's calls, not the effect's history.
func TestRebuildFromTheLastGroupEqualsScan(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	from := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	if err := activitytest.FillHot(ctx, s, "hot", from, 120, 25*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := activitytest.FillHot(ctx, s, "warm", from, 30, 50*time.Minute); err != nil {
		t.Fatal(err)
	}
	before, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts := analyze.Options{Cuts: analyze.NewEffectCuts()}
	end := from.Add(119 * 25 * time.Minute) // the hot effect's last call
	hotExecs := func() []activity.ExecutionID {
		var ids []activity.ExecutionID
		for _, sus := range before {
			if strings.Contains(sus.Tool, "deploy") && len(ids) < 3 {
				for _, c := range sus.Calls {
					ids = append(ids, c.ExecutionID)
				}
			}
		}
		return ids
	}
	rounds := []struct {
		name     string
		add      func() error
		tailOnly bool // reads the last group, not the history
	}{
		{"the first refresh reads it whole", func() error {
			end = end.Add(10 * time.Minute)
			return activitytest.FillHot(ctx, s, "hot", end, 1, time.Minute)
		}, false},
		{"a call joins the last group", func() error {
			end = end.Add(10 * time.Minute)
			return activitytest.FillHot(ctx, s, "hot", end, 1, time.Minute)
		}, true},
		{"another", func() error {
			end = end.Add(5 * time.Minute)
			return activitytest.FillHot(ctx, s, "hot", end, 1, time.Minute)
		}, true},
		{"a call opens a new group", func() error {
			end = end.Add(3 * time.Hour)
			return activitytest.FillHot(ctx, s, "hot", end, 1, time.Minute)
		}, true},
		{"two calls in it", func() error {
			end = end.Add(time.Minute)
			return activitytest.FillHot(ctx, s, "hot", end, 2, time.Minute)
		}, true},
		{"another effect's first calls since the load", func() error { return activitytest.FillHot(ctx, s, "warm", end.Add(time.Hour), 3, 10*time.Minute) }, false},
		{"and its next", func() error { return activitytest.FillHot(ctx, s, "warm", end.Add(2*time.Hour), 1, time.Minute) }, true},
		{"a retry attached to an old execution", func() error {
			_, err := s.Write(ctx, func(w *activity.Tx) error {
				end = end.Add(time.Minute)
				_, err := w.RecordCall(activity.Call{Actor: "agent:bulk", Method: "tools/call", Tool: "deploy_release", ReceivedAt: end,
					Arguments: []byte(`{"service":"hot"}`), Disposition: activity.DispositionAttached, ExecutionID: hotExecs()[0]})
				return err
			})
			return err
		}, false},
		// Its last group now holds a call of an old execution: read from
		// that execution's acceptance on, the last group's calls alone.
		{"a call after it", func() error {
			end = end.Add(2 * time.Minute)
			return activitytest.FillHot(ctx, s, "hot", end, 1, time.Minute)
		}, true},
		{"an older log with a call before them all", func() error {
			return activitytest.FillHot(ctx, s, "hot", from.Add(-30*time.Minute), 1, time.Minute)
		}, false},
		{"a call at the end again", func() error {
			end = end.Add(4 * time.Hour)
			return activitytest.FillHot(ctx, s, "hot", end, 1, time.Minute)
		}, true},
		{"and one more", func() error {
			end = end.Add(time.Minute)
			return activitytest.FillHot(ctx, s, "hot", end, 1, time.Minute)
		}, true},
		{"an approval asked about an old execution", func() error {
			_, err := s.Write(ctx, func(w *activity.Tx) error {
				_, err := w.RequestApproval(activity.Approval{Kind: activity.ApprovalPerUse, ExecutionID: hotExecs()[1], Actor: "agent:bulk",
					Tool: "deploy_release", Summary: "asked late"})
				return err
			})
			return err
		}, false},
		{"a call at the end once more", func() error {
			end = end.Add(time.Minute)
			return activitytest.FillHot(ctx, s, "hot", end, 1, time.Minute)
		}, true},
	}
	total := 0
	for _, r := range rounds {
		size, _ := s.LogSize(ctx)
		if err := r.add(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		touched, err := analyze.TouchedSince(ctx, s, size)
		if err != nil {
			t.Fatal(err)
		}
		var rebuilt analyze.Rebuilt
		rebuilt, before, _, _ = rebuildMatchesScan(t, s, opts, before, touched)
		if total, err = callsOf(s, touched.Keys); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d suspects, %d kept, %d analysed, %d of the touched effects' %d calls read", r.name, len(before), len(rebuilt.Kept), len(rebuilt.Fresh), rebuilt.Read, total)
		if r.tailOnly && rebuilt.Read*4 > total {
			t.Fatalf("%s: read %d of the touched effects' %d calls: more than their last groups", r.name, rebuilt.Read, total)
		}
		if !r.tailOnly && rebuilt.Read < total {
			t.Fatalf("%s: read %d of the touched effects' %d calls: this round must read them whole", r.name, rebuilt.Read, total)
		}
	}
}

// callsOf counts the calls of the effects keys.
func callsOf(s *activity.Store, keys []string) (int, error) {
	n := 0
	for _, k := range keys {
		if err := s.ScanCallKeysOfEffect(ctx, k, func(*activity.CallKey) error { n++; return nil }); err != nil {
			return 0, err
		}
	}
	return n, nil
}
