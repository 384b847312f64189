package analyze

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// Suspect is a group of calls requesting the same effect close in time,
// with the five answers and the verdict.
type Suspect struct {
	ID        string            `json:"id"`
	EffectKey string            `json:"effect_key"`
	Tool      string            `json:"tool"`
	Target    string            `json:"target"`
	Method    string            `json:"method"`
	Contract  activity.Contract `json:"contract"`
	Window    string            `json:"window"`
	FirstAt   time.Time         `json:"first_at"`
	LastAt    time.Time         `json:"last_at"`
	// Calls and Executions list the group's calls and executions: all of
	// them, or past maxListed the first maxListed and those the answers
	// cite; CallsTotal and ExecutionsTotal count them all.
	Calls           []CallRef          `json:"calls"`
	Executions      []ExecutionSummary `json:"executions"`
	CallsTotal      int                `json:"calls_total"`
	ExecutionsTotal int                `json:"executions_total"`
	// Recorder is who recorded its executions: "gateway" (mcpdup's) or
	// the format of the log they were imported from.
	Recorder  string   `json:"recorder"`
	Questions []Answer `json:"questions"`
	Verdict   Verdict  `json:"verdict"`
	Title     string   `json:"verdict_title"`
	Severity  Severity `json:"severity"`
	Fix       string   `json:"recommended_fix"`
	Summary   string   `json:"summary"`
	Missing   []string `json:"missing,omitempty"`
	Effects   int      `json:"effects_shown"` // executions the records show acted
	// Shown cites what shows a duplicate's two effects: each answer naming
	// what it created, and a later request that undid the second.
	Shown     []Evidence          `json:"effects_evidence,omitempty"`
	MaybeMore int                 `json:"effects_uncertain"` // executions that may have acted
	first     *activity.Execution // the first call's execution
	listCap   int                 // maxListed when it was listed
	runs      []activity.Run      // the runs of its calls, as the first question read them (Prove)
}

// ExecutionSummary is one execution of a suspect as the analysis read it.
type ExecutionSummary struct {
	ID             activity.ExecutionID  `json:"id"`
	State          activity.State        `json:"state"`
	Outcome        activity.Outcome      `json:"outcome,omitempty"`
	Actor          string                `json:"actor"`
	RunID          activity.RunID        `json:"run_id,omitempty"`
	Contract       activity.Contract     `json:"contract"`
	TargetStatus   *int                  `json:"target_status,omitempty"`
	ExitCode       *int                  `json:"exit_code,omitempty"`
	IdempotencyKey string                `json:"idempotency_key"`
	NotRecorded    []activity.Fact       `json:"not_recorded,omitempty"`
	Seq            int64                 `json:"seq"`
	Source         string                `json:"source,omitempty"` // the imported record it came from
	Transitions    []activity.Transition `json:"-"`
	// Approvals are the operator approvals it waited on (who, when, what).
	Approvals []activity.Approval `json:"approvals,omitempty"`
	exec      activity.Execution
}

// Answer is one of the five questions, answered.
type Answer struct {
	N           int        `json:"n"`
	Question    string     `json:"question"`
	Answer      Tri        `json:"answer"`
	Finding     string     `json:"finding"` // short code: one_process, dispatched, new_attempt, ...
	Evidence    []Evidence `json:"evidence"`
	Explanation string     `json:"explanation"`
	Missing     string     `json:"missing,omitempty"` // what the log does not record, when unknown
}

// MarshalJSON writes an answer with no evidence as "evidence": [], not
// null: a script iterating it (jq '.evidence[]') must not fail.
func (a Answer) MarshalJSON() ([]byte, error) {
	type plain Answer
	if a.Evidence == nil {
		a.Evidence = []Evidence{}
	}
	return json.Marshal(plain(a))
}

// Tri is yes, no or unknown.
type Tri string

const (
	Yes     Tri = "yes"
	No      Tri = "no"
	Unknown Tri = "unknown"
)

// Evidence is a log record that supports an answer.
type Evidence struct {
	Seq  int64  `json:"seq"`  // the record in the tamper-evident log
	What string `json:"what"` // what it shows
	// Source is where an imported record came from: "file:line" and the
	// record inside the line ("traces.jsonl:3 span 00f067aa0ba902b7").
	Source string `json:"source,omitempty"`
}

// The five questions, in the order the design requires.
var Questions = [5]string{
	"Did one agent process send both calls?",
	"Was the first call authorized, and did it reach dispatch?",
	"Did the gateway get a response or exit code from the target?",
	"Did result delivery fail after the action finished at the target?",
	"Did the second call reuse the first execution (its id or its idempotency key)?",
}

// groupRecords is what analysing groups reads of their executions,
// loaded for a batch of groups at once: three queries for many groups,
// where one group at a time made three each (they were most of an
// analysis's time).
type groupRecords struct {
	execs     map[activity.ExecutionID]activity.Execution
	trs       map[activity.ExecutionID][]activity.Transition
	approvals map[activity.ExecutionID][]activity.Approval
	// partial: trs and approvals were not read (executions past those a
	// suspect lists, when no source has unsigned records): read them for
	// one that is listed after all (loadSteps).
	partial bool
}

// maxBatchIDs bounds the ids one query binds.
const maxBatchIDs = 900

// loadGroupRecords completes the calls of every group in gs and reads
// their executions.
func loadGroupRecords(ctx context.Context, s *activity.Store, names sourceNames, gs []*group) (*groupRecords, error) {
	seen := map[activity.ExecutionID]bool{}
	var ids []activity.ExecutionID
	var calls []*CallRef
	for _, g := range gs {
		for i := range g.calls {
			calls = append(calls, &g.calls[i])
		}
	}
	if err := fillCalls(ctx, s, names, calls); err != nil {
		return nil, err
	}
	for _, g := range gs {
		for _, c := range g.calls {
			if !seen[c.ExecutionID] {
				seen[c.ExecutionID] = true
				ids = append(ids, c.ExecutionID)
			}
		}
	}
	return loadExecutions(ctx, s, ids, false)
}

// loadExecutions reads executions with their transitions and approvals,
// or without them (partial).
func loadExecutions(ctx context.Context, s *activity.Store, ids []activity.ExecutionID, partial bool) (*groupRecords, error) {
	r := &groupRecords{execs: map[activity.ExecutionID]activity.Execution{}, trs: map[activity.ExecutionID][]activity.Transition{},
		approvals: map[activity.ExecutionID][]activity.Approval{}, partial: partial}
	for chunk := range slices.Chunk(ids, maxBatchIDs) {
		execs, err := s.ExecutionsByID(ctx, chunk)
		if err != nil {
			return nil, err
		}
		if partial {
			maps.Copy(r.execs, execs)
			continue
		}
		trs, err := s.TransitionsOf(ctx, chunk)
		if err != nil {
			return nil, err
		}
		approvals, err := s.ApprovalsOf(ctx, chunk)
		if err != nil {
			return nil, err
		}
		maps.Copy(r.execs, execs)
		maps.Copy(r.trs, trs)
		maps.Copy(r.approvals, approvals)
	}
	return r, nil
}

// analyseGroup loads what a group's records show and walks the questions.
func analyseGroup(ctx context.Context, s *activity.Store, g *group, names sourceNames) (*Suspect, error) {
	if len(g.calls) > maxListed {
		return analyseLarge(ctx, s, g, names)
	}
	recs, err := loadGroupRecords(ctx, s, names, []*group{g})
	if err != nil {
		return nil, err
	}
	return analyseLoaded(ctx, s, g, names, recs)
}

// suspectID names the suspect a call starts.
func suspectID(first activity.CallID) string {
	return "sus_" + strings.TrimPrefix(string(first), "call_")
}

// analyseLoaded walks the questions over a group of at most maxListed
// calls whose records are loaded (its calls completed).
func analyseLoaded(ctx context.Context, s *activity.Store, g *group, names sourceNames, recs *groupRecords) (*Suspect, error) {
	b := newBuilder(ctx, s, g, names)
	if err := b.add(b.ids, recs); err != nil {
		return nil, err
	}
	return b.finish(ctx, s, nil)
}

func summarise(e activity.Execution, trs []activity.Transition) ExecutionSummary {
	es := ExecutionSummary{ID: e.ID, State: e.State, Outcome: e.Outcome, Actor: e.Actor, RunID: e.RunID, Contract: e.Contract,
		IdempotencyKey: e.IdempotencyKey.String(), NotRecorded: e.NotRecorded, Transitions: trs, exec: e}
	if e.IdempotencyKey.OK && e.IdempotencyKey.V == "" {
		es.IdempotencyKey = "none sent"
	}
	if e.TargetStatus.OK {
		es.TargetStatus = &e.TargetStatus.V
	}
	if e.ExitCode.OK {
		es.ExitCode = &e.ExitCode.V
	}
	// The record that accepted it, as its row says: with its transitions
	// rows gone, the first of them no longer names it (Seq stayed 0, and
	// --verify-records proved record 0 "not an acceptance").
	es.Seq = e.Seq
	if es.Seq == 0 && len(trs) > 0 {
		es.Seq = trs[0].Seq
	}
	return es
}

// walk answers the questions for one suspect.
type walk struct {
	sus     *Suspect
	runs    map[activity.RunID]activity.Run
	sources sourceNames
	// eff is what each of the group's executions did, in order, from
	// what ins holds of each: all of them, listed or not.
	eff       []effect
	ins       []effectIn
	i1, i2    int               // the pair examined: places in eff (i2 -1: one execution)
	e1, e2    *ExecutionSummary // the first execution, and the second one if a later call made one
	c1, c2    CallRef           // the first call, and the later call examined
	q2ans     Tri
	unsignedN int // executions resting on records nothing signs
}

// pick counts the effects and chooses the pair examined: the first two
// executions; but when two or more may have acted, the first two of
// those, pair (an attempt that had no effect cannot be half of a
// duplicate).
func (w *walk) pick(pair []int) {
	s := w.sus
	for _, ef := range w.eff {
		switch ef.acted {
		case Yes:
			s.Effects++
		case Unknown:
			s.MaybeMore++
		}
	}
	w.i1, w.i2 = 0, 1
	if s.Effects+s.MaybeMore >= 2 {
		w.i1, w.i2 = pair[0], pair[1]
	}
	if len(w.eff) < 2 {
		w.i2 = -1
	}
}

// run walks the questions over the pair pick chose, once its executions
// (e1, e2) and the calls are listed.
func (w *walk) run() {
	s := w.sus
	w.c1 = firstCallOf(s.Calls, w.e1.ID)
	if w.e2 != nil {
		w.c2 = firstCallOf(s.Calls, w.e2.ID)
	} else {
		w.c2 = s.Calls[1]
	}
	s.first = &w.e1.exec
	s.Contract = w.e1.Contract
	q1, q2 := w.q1(), w.q2()
	w.q2ans = q2.Answer
	s.Questions = []Answer{q1, q2, w.q3(), w.q4(), w.q5()}
	for i := range s.Questions {
		s.Questions[i].N, s.Questions[i].Question = i+1, Questions[i]
		if s.Questions[i].Missing != "" {
			s.Missing = append(s.Missing, s.Questions[i].Missing)
		}
	}
	s.Verdict = w.verdict()
	s.Title, s.Fix, s.Severity = s.Verdict.Title(), s.Verdict.Fix(), severity(s.Verdict, s.Contract)
	s.Summary = w.summary()
	if n := w.unsignedN; n > 0 {
		why := fmt.Sprintf("%d of these executions rest on records no verified checkpoint signs (an export imported with --allow-unsealed): anyone could have written them", n)
		s.Missing = append(s.Missing, why)
		s.Summary += " Caution: " + why + "."
	}
}

// evidence cites transition t of execution e: its record, and the
// source record it was imported from.
func (w *walk) evidence(e *ExecutionSummary, t *activity.Transition, what string) []Evidence {
	src := t.Source
	if src.IsZero() {
		src = e.exec.Source
	}
	return []Evidence{{t.Seq, what, w.sources.text(src)}}
}

func (w *walk) runEvidence(r activity.Run, what string) Evidence {
	return Evidence{r.Seq, what, w.sources.text(r.Source)}
}

func (w *walk) callEvidence(c CallRef, what string) []Evidence {
	if c.Seq > 0 {
		return []Evidence{{c.Seq, what, c.Source}}
	}
	return nil
}

// transitionTo is the first recorded (not implied) transition of e into
// one of states.
func transitionTo(e *ExecutionSummary, states ...activity.State) *activity.Transition {
	for i := range e.Transitions {
		if !e.Transitions[i].Implied && slices.Contains(states, e.Transitions[i].To) {
			return &e.Transitions[i]
		}
	}
	return nil
}

func strong(by activity.RunIdentification) bool {
	return by == activity.RunByMetaID || by == activity.RunByPeer
}

// q1: one agent process or two?
func (w *walk) q1() Answer {
	a := Answer{Finding: "unknown"}
	a.Evidence = append(w.callEvidence(w.c1, "first call"), w.callEvidence(w.c2, "second call")...)
	r1, ok1 := w.runs[w.c1.RunID]
	r2, ok2 := w.runs[w.c2.RunID]
	switch {
	case !ok1 || !ok2:
		a.Answer, a.Missing = Unknown, "the log does not record which agent process sent each call"
		a.Explanation = "Unknown: " + a.Missing + "."
	case r1.ID == r2.ID:
		a.Answer, a.Finding = Yes, "one_process"
		a.Evidence = append(a.Evidence, w.runEvidence(r1, fmt.Sprintf("run %s (%s)", r1.ID, r1.IdentifiedBy)))
		a.Explanation = fmt.Sprintf("Yes: both calls belong to run %s of %s, identified by %s.", r1.ID, r1.Actor, r1.IdentifiedBy)
	case strong(r1.IdentifiedBy) && strong(r2.IdentifiedBy):
		a.Answer, a.Finding = No, "two_processes"
		a.Evidence = append(a.Evidence, w.runEvidence(r1, "run "+string(r1.ID)), w.runEvidence(r2, "run "+string(r2.ID)))
		a.Explanation = fmt.Sprintf("No: the calls come from two runs the agents named themselves (%s and %s).", r1.Evidence, r2.Evidence)
	default:
		a.Answer = Unknown
		a.Evidence = append(a.Evidence, w.runEvidence(r1, "run "+string(r1.ID)), w.runEvidence(r2, "run "+string(r2.ID)))
		a.Missing = weakRunsText(r1.IdentifiedBy, r2.IdentifiedBy)
		a.Explanation = "Unknown: two runs, but " + a.Missing + ": it may be one process that reconnected."
	}
	return a
}

// q2: was the first call authorized, and did it reach dispatch? A source
// that does not record the dispatch (an MCP message log sees only the
// server's answer) cannot say, whatever its importer had to write.
func (w *walk) q2() Answer {
	e := w.e1
	a := Answer{}
	if t := transitionTo(e, activity.StateRejected); t != nil {
		a.Answer, a.Finding = No, "rejected"
		a.Evidence = w.evidence(e, t, "rejected")
		a.Explanation = fmt.Sprintf("No: %s was refused before dispatch%s.", e.ID, parenthesised(t.Reason))
		return a
	}
	if f := transitionTo(e, activity.StateFailedBefore); f != nil {
		a.Answer, a.Finding = No, "failed_before_dispatch"
		a.Evidence = w.evidence(e, f, "failed before dispatch")
		a.Explanation = fmt.Sprintf("No: %s failed before any byte reached the target%s.", e.ID, parenthesised(f.Reason))
		return a
	}
	d := transitionTo(e, activity.StateDispatched)
	if !e.exec.Records(activity.FactDispatch) || d == nil && e.exec.State.Dispatched() {
		a.Answer, a.Finding, a.Missing = Unknown, "unknown", "the log does not record whether the request was sent on to the target"
		a.Explanation = "Unknown: " + a.Missing + "."
		return a
	}
	if d == nil {
		a.Answer, a.Finding = No, "not_dispatched"
		a.Explanation = fmt.Sprintf("No: %s is %s and was never dispatched.", e.ID, e.State)
		return a
	}
	a.Answer, a.Finding = Yes, "dispatched"
	if t := transitionTo(e, activity.StateAuthorized); t != nil {
		a.Evidence = append(a.Evidence, w.evidence(e, t, "authorized")...)
	}
	a.Evidence = append(a.Evidence, w.evidence(e, d, "dispatched")...)
	if e.exec.Records(activity.FactAuthorization) {
		a.Explanation = fmt.Sprintf("Yes: %s was authorized and dispatched%s.", e.ID, atText(d.At))
	} else {
		a.Explanation = fmt.Sprintf("Yes: %s was dispatched%s; the log records no authorization step, so it passed whatever there was.", e.ID, atText(d.At))
	}
	return a
}

// q3: did the gateway get a response or exit code from the target? It is
// about the first dispatch: a later resend under the same execution that
// was answered does not make the first one answered.
func (w *walk) q3() Answer {
	e := w.e1
	a := Answer{}
	obs := firstObservation(e)
	switch {
	case w.q2ans == No:
		a.Answer, a.Finding = No, "not_sent"
		a.Explanation = "No: the first call never reached the target, so there was nothing to answer."
	case obs != nil && (obs.To == activity.StateSucceeded || obs.To == activity.StateFailed):
		a.Answer, a.Finding = Yes, "response"
		a.Evidence = w.evidence(e, obs, string(obs.To))
		a.Explanation = fmt.Sprintf("Yes: the target answered (%s) for %s.", responseText(*obs, e.exec), e.ID)
	case !e.exec.Records(activity.FactOutcome) || !e.exec.Records(activity.FactDispatch):
		a.Answer, a.Finding, a.Missing = Unknown, "unknown", "the log does not record the target's response"
		a.Explanation = "Unknown: " + a.Missing + "."
		if obs != nil && obs.Reason != "" {
			a.Evidence = w.evidence(e, obs, "no answer in the log")
			a.Explanation += " (" + obs.Reason + ")"
		}
		w.resolution(e, &a)
	case obs != nil:
		a.Answer, a.Finding = No, "outcome_unknown"
		a.Evidence = w.evidence(e, obs, "outcome unknown")
		a.Explanation = fmt.Sprintf("No: after dispatch no response came back%s; the target may or may not have acted.", parenthesised(obs.Reason))
		if obs.TargetStatus.OK && obs.TargetStatus.V == 500 {
			a.Explanation = fmt.Sprintf("No: after dispatch the target's answer does not say what it did%s; the target may or may not have acted.", parenthesised(obs.Reason))
		}
		w.resolution(e, &a)
	default:
		a.Answer, a.Finding, a.Missing = Unknown, "no_answer_shown", "the log does not record the target's response"
		a.Explanation = fmt.Sprintf("Unknown: %s is %s; the log shows no answer to its dispatch.", e.ID, e.State)
		w.resolution(e, &a)
	}
	return a
}

// resolution adds to an answer about an unknown outcome what an operator
// later found, when one resolved it: the answer stays what the log showed
// at the time, and says what was verified since.
func (w *walk) resolution(e *ExecutionSummary, a *Answer) {
	if r := transitionTo(e, activity.StateVerified, activity.StateRejectedByOperator); r != nil {
		a.Evidence = append(a.Evidence, w.evidence(e, r, string(r.To))...)
		a.Explanation += fmt.Sprintf(" An operator later resolved it: %s%s.", r.To, parenthesised(r.Reason))
	}
}

// firstObservation is what the records finally say about the first
// dispatch: its answer, or its loss, before any resend. An outcome
// recovered without a resend (a marker, a status lookup) is that
// dispatch's; an answer to a resend is not.
func firstObservation(e *ExecutionSummary) *activity.Transition {
	var obs *activity.Transition
	dispatches := 0
	for i := range e.Transitions {
		t := &e.Transitions[i]
		switch {
		case t.To == activity.StateDispatched:
			if dispatches++; dispatches > 1 {
				return obs
			}
		case !t.Implied && slices.Contains([]activity.State{activity.StateSucceeded, activity.StateFailed, activity.StateUnknown}, t.To):
			obs = t
		}
	}
	return obs
}

func parenthesised(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func atText(t activity.Opt[time.Time]) string {
	if !t.OK {
		return " (time not recorded)"
	}
	return " at " + t.V.UTC().Format(time.RFC3339Nano)
}

func firstCallOf(calls []CallRef, id activity.ExecutionID) CallRef {
	for _, c := range calls {
		if c.ExecutionID == id {
			return c
		}
	}
	return calls[0]
}

// responseText says what an observation recorded: its status or exit
// code, else the outcome it established.
func responseText(t activity.Transition, e activity.Execution) string {
	switch {
	case t.TargetStatus.OK:
		return fmt.Sprintf("status %d", t.TargetStatus.V)
	case t.ExitCode.OK:
		return fmt.Sprintf("exit code %d", t.ExitCode.V)
	case t.To == activity.StateSucceeded:
		return "success"
	case t.To == activity.StateFailed:
		return "failure"
	}
	return string(e.Outcome)
}

// q4: did result delivery fail after the action finished? Unknown, not
// no, when no outcome was observed: the target may have finished and its
// answer been lost on the way.
func (w *walk) q4() Answer {
	e := w.e1
	a := Answer{}
	failed := transitionTo(e, activity.StateDeliveryFailed, activity.StateNotDelivered)
	delivered := transitionTo(e, activity.StateDelivered)
	answered := transitionTo(e, activity.StateSucceeded, activity.StateFailed)
	switch {
	case w.q2ans == No:
		a.Answer, a.Finding = No, "not_sent"
		a.Explanation = "No: the first call was never dispatched, so there was no result to deliver."
	case failed != nil:
		a.Answer, a.Finding = Yes, string(failed.To)
		a.Evidence = w.evidence(e, failed, string(failed.To))
		a.Explanation = "Yes: the action finished but its result did not reach the agent" + parenthesised(failed.Reason) + "."
		if delivered != nil {
			a.Evidence = append(a.Evidence, w.evidence(e, delivered, "delivered later")...)
			a.Explanation += " It was delivered later, to a retry."
		}
	case answered == nil:
		a.Answer, a.Finding, a.Missing = Unknown, "no_outcome", "the log shows no outcome for the first call: the target may have finished and its answer been lost"
		a.Explanation = "Unknown: " + a.Missing + "."
		w.resolution(e, &a)
	case !e.exec.Records(activity.FactDelivery):
		a.Answer, a.Finding, a.Missing = Unknown, "unknown", "the log does not record delivery"
		a.Explanation = "Unknown: " + a.Missing + "."
	case delivered != nil:
		a.Answer, a.Finding = No, "delivered"
		a.Evidence = w.evidence(e, delivered, "delivered")
		a.Explanation = "No: the result was written to the agent's connection (HTTP cannot prove the agent read it)."
	default:
		a.Answer, a.Finding = Unknown, "pending"
		a.Missing = "the log does not show the result being delivered or failing"
		a.Explanation = "Unknown: " + a.Missing + "."
	}
	return a
}

// q5: did the second call reuse the first execution? "reused_execution"
// only when the execution itself was reused (the call attached to it);
// "same_key" when a new request carried the first one's key; a key the
// log does not record is unknown, never "none sent".
func (w *walk) q5() Answer {
	a := Answer{Evidence: w.callEvidence(w.c2, "second call")}
	if w.e2 == nil {
		a.Answer, a.Finding = Yes, "reused_execution"
		a.Explanation = fmt.Sprintf("Yes: every later call attached to %s; no new attempt was made.", w.e1.ID)
		if w.c2.Imported {
			a.Finding = "attached"
		}
		if w.c2.Reason != "" {
			a.Explanation += " (" + w.c2.Reason + ")"
		}
		return a
	}
	x1, x2 := w.e1.exec, w.e2.exec
	k1, k2 := x1.IdempotencyKey, x2.IdempotencyKey
	a.Evidence = append(a.Evidence, Evidence{Seq: w.e2.Seq, What: "new execution " + string(w.e2.ID), Source: w.e2.Source})
	switch {
	case sameKey(k1, k2):
		a.Answer, a.Finding = Yes, "same_key"
		a.Explanation = fmt.Sprintf("Yes: %s is a new request, but it carried the first one's idempotency key (%s), so the target could answer it from the first.", w.e2.ID, k2.V)
	case !k1.OK || !k2.OK || !x1.Records(activity.FactIdempotencyKey) || !x2.Records(activity.FactIdempotencyKey):
		a.Answer, a.Finding = Unknown, "new_attempt"
		a.Missing = "the log does not record the idempotency keys sent"
		a.Explanation = fmt.Sprintf("Unknown: the second call created a new execution %s; %s.", w.e2.ID, a.Missing)
	default:
		a.Answer, a.Finding = No, "new_attempt"
		a.Explanation = fmt.Sprintf("No: the second call created a new execution %s with %s: a new attempt.", w.e2.ID, keyText(k1, k2))
	}
	return a
}

// keyText says how two recorded keys differ.
func keyText(k1, k2 activity.Opt[string]) string {
	switch {
	case k1.V == "" && k2.V == "":
		return "no idempotency key sent with either"
	case k2.V == "":
		return "no idempotency key (the first carried " + k1.V + ")"
	}
	return "a new idempotency key (" + k2.V + ")"
}

// verdict decides from the answers and what each execution shows. It
// never says "duplicate" unless the records show two executions the
// target acted on, and never says "one action" when two may have acted.
func (w *walk) verdict() Verdict {
	s := w.sus
	if s.Contract == activity.ContractReadOnly {
		return VerdictReadOnly
	}
	if s.Effects+s.MaybeMore <= 1 {
		switch {
		case w.e2 == nil && oneOf(w.e1.exec.State, activity.StateRejected, activity.StateUnknown,
			activity.StatePendingVerification, activity.StateRejectedByOperator):
			return VerdictRefused
		case w.e2 == nil:
			return VerdictAttached
		case w.answeredFromFirst():
			if w.eff[0].acted == Yes || w.replayAnswered() {
				return VerdictAttached
			}
			return VerdictRefused // keyed to a first whose outcome is unknown: one action at most
		case w.eff[0].acted == No:
			return VerdictFirstNoEffect
		}
		return VerdictRefused
	}
	q := s.Questions
	f1, f2 := w.eff[w.i1], w.eff[w.i2]
	switch {
	case q[0].Answer == No:
		return VerdictTwoProcesses
	case delivered(w.e1) && w.c2.ReceivedAt.After(deliveredAt(w.e1)):
		return VerdictIntentional
	case f1.acted == Yes && f2.acted == Yes:
		return VerdictDuplicate
	case f1.possibleReplay || f2.possibleReplay || f1.noOutcome && f2.noOutcome ||
		!w.e1.exec.Records(activity.FactArguments) || !w.e2.exec.Records(activity.FactArguments):
		return VerdictInsufficient
	}
	return VerdictDuplicateRisk
}

// replayAnswered reports whether a later execution keyed or marked as a
// replay of an earlier one was answered success: the target answered it
// from the first.
func (w *walk) replayAnswered() bool {
	for i, ef := range w.eff {
		if i > 0 && ef.replayOf >= 0 && w.ins[i].outcome == activity.OutcomeSuccess {
			return true
		}
	}
	return false
}

// answeredFromFirst reports whether a later execution was answered from
// an earlier one's effect (a replay by key, by created id, or by the
// target's own mark).
func (w *walk) answeredFromFirst() bool {
	for i, ef := range w.eff {
		if i > 0 && ef.replayOf >= 0 {
			return true
		}
	}
	return false
}

func oneOf(s activity.State, states ...activity.State) bool { return slices.Contains(states, s) }

func delivered(e *ExecutionSummary) bool {
	t := transitionTo(e, activity.StateDelivered)
	return t != nil && transitionTo(e, activity.StateDeliveryFailed, activity.StateNotDelivered) == nil
}

func deliveredAt(e *ExecutionSummary) time.Time {
	if t := transitionTo(e, activity.StateDelivered); t != nil && t.At.OK {
		return t.At.V
	}
	return time.Time{}
}

// summary says what happened in one or two sentences.
func (w *walk) summary() string {
	s := w.sus
	var b strings.Builder
	fmt.Fprintf(&b, "%d calls to %s within %s; %d execution(s)", s.CallsTotal, s.Tool,
		s.LastAt.Sub(s.FirstAt).Round(time.Millisecond), s.ExecutionsTotal)
	switch {
	case s.Effects == 1 && s.MaybeMore == 0:
		b.WriteString("; the records show the target acted once")
	case s.Effects > 1:
		fmt.Fprintf(&b, "; the records show the target acted %d times", s.Effects)
	case s.MaybeMore > 0:
		fmt.Fprintf(&b, "; the records show %d effect(s) and %d execution(s) that may also have acted", s.Effects, s.MaybeMore)
	default:
		b.WriteString("; the records show no effect at the target")
	}
	return b.String() + ". Verdict: " + s.Title + "."
}

// weakRunsText says what tells two runs apart when that is weak evidence,
// naming it once when both runs rest on the same kind ("different
// mcp_session values", not "mcp_session and mcp_session").
func weakRunsText(a, b activity.RunIdentification) string {
	if a == b {
		return fmt.Sprintf("the runs are told apart only by different %s values, which a reconnect also changes", a)
	}
	return fmt.Sprintf("the runs are told apart only by %s and %s, which a reconnect also changes", a, b)
}
