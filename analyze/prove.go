package analyze

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// Proof is what proving one suspect against the signed log found.
type Proof struct {
	Records int // log records proven and compared
	// Unsealed of them are past the newest checkpoint this host's key
	// verifies: proven by the chain to it, not yet by a signature.
	Unsealed int
	Problems []string // a record not proven, or a row that differs from its record
}

// maxProofProblems bounds what a proof keeps.
const maxProofProblems = 20

// Prove proves every log record a suspect was built from part of the
// signed log (activity.Store.ProveRecord: a Merkle inclusion proof against
// the newest checkpoint this host's key verifies, or the chain to it in
// the unsealed tail) and checks what the suspect shows of each against
// the record itself: each call's execution, disposition, actor and time;
// each execution's acceptance (action and contract); each transition's
// states and the target's answer; the execution's state as its last
// transition left it. It reads a few dozen records, where a whole
// verification reads the log.
//
// What it cannot see is an absence: a row deleted (or hidden from the
// index) together with nothing else is simply not in the suspect. A whole
// verification (audit verify) finds those.
func Prove(ctx context.Context, s *activity.Store, sus *Suspect) (Proof, error) {
	var p Proof
	signed, err := s.SignedSize(ctx)
	if err != nil {
		return p, err
	}
	bad := func(format string, args ...any) {
		if len(p.Problems) < maxProofProblems {
			p.Problems = append(p.Problems, fmt.Sprintf(format, args...))
		}
	}
	prove := func(seq int64) (any, bool, error) {
		ev, err := s.ProveRecord(ctx, seq)
		if errors.Is(err, activity.ErrUnproven) {
			bad("%v", err)
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		p.Records++
		if seq >= signed {
			p.Unsealed++
		}
		return ev, true, nil
	}
	for _, c := range sus.Calls {
		ev, ok, err := prove(c.Seq)
		if err != nil || !ok {
			if err != nil {
				return p, err
			}
			continue
		}
		rec, isCall := ev.(*activity.Call)
		switch {
		case !isCall:
			bad("call %s: record %d is not a call", c.ID, c.Seq)
		case rec.ID != c.ID || rec.ExecutionID != c.ExecutionID || rec.Disposition != c.Disposition || rec.Actor != c.Actor ||
			!rec.ReceivedAt.Equal(c.ReceivedAt) || rec.RunID != c.RunID || rec.Reason != c.Reason:
			bad("call %s differs from record %d", c.ID, c.Seq)
		}
	}
	for _, e := range sus.Executions {
		if err := proveExecution(e, prove, bad); err != nil {
			return p, err
		}
	}
	// The runs the first question reads: who identified them, and how.
	for _, r := range sus.runs {
		ev, ok, err := prove(r.Seq)
		if err != nil {
			return p, err
		}
		if !ok {
			continue
		}
		rec, isRun := ev.(*activity.Run)
		if !isRun || rec.ID != r.ID || rec.Actor != r.Actor || rec.IdentifiedBy != r.IdentifiedBy || rec.Evidence != r.Evidence ||
			!rec.StartedAt.Equal(r.StartedAt) {
			bad("run %s differs from record %d", r.ID, r.Seq)
		}
	}
	return p, nil
}

// proveExecution proves an execution's acceptance and transitions, then
// replays them through the model's one state machine (Execution.Apply)
// and compares the result with the row the suspect shows: every field a
// verdict reads (state, outcome, the target's answer, key, arguments,
// what was not recorded).
func proveExecution(e ExecutionSummary, prove func(int64) (any, bool, error), bad func(string, ...any)) error {
	ev, ok, err := prove(e.Seq)
	if err != nil {
		return err
	}
	var replayed *activity.Execution
	if ok {
		rec, isExec := ev.(*activity.Execution)
		if !isExec {
			bad("execution %s: record %d is not an acceptance", e.ID, e.Seq)
		} else {
			x := *rec
			if x.State == "" {
				x.State = activity.StateAccepted
			}
			replayed = &x
		}
	}
	if !slices.ContainsFunc(e.Transitions, func(t activity.Transition) bool { return t.Seq == e.Seq }) {
		// Every execution's acceptance is also its first transitions row.
		bad("execution %s: the transitions table has no row for its acceptance (record %d)%s: transitions rows were deleted or hidden", e.ID, e.Seq, shownRows(e.Transitions))
		replayed = nil // what is left of its steps cannot be compared with the row
	}
	for _, t := range e.Transitions {
		if t.Seq == e.Seq {
			continue // the acceptance itself, proven above
		}
		ev, ok, err := prove(t.Seq)
		if err != nil {
			return err
		}
		if !ok {
			replayed = nil // a step unproven: nothing to compare the row with
			continue
		}
		rec, isTr := ev.(*activity.Transition)
		switch {
		case !isTr:
			bad("execution %s: record %d is not a transition", e.ID, t.Seq)
			replayed = nil
			continue
		case rec.ExecutionID != e.ID || rec.To != t.To || rec.From != t.From || rec.TargetStatus != t.TargetStatus ||
			rec.ExitCode != t.ExitCode || rec.ResultRef != t.ResultRef || rec.Reason != t.Reason || !sameAt(rec.At, t.At):
			bad("execution %s: transition %d differs from its record", e.ID, t.Seq)
		}
		if replayed != nil {
			if err := replayed.Apply(*rec); err != nil {
				bad("execution %s: transition %d does not apply: %v", e.ID, t.Seq, err)
				replayed = nil
			}
		}
	}
	if replayed != nil {
		if field := rowDiffers(*replayed, e.exec); field != "" {
			bad("execution %s: its %s differs from what its records imply (its row, or transitions rows deleted after record %d)", e.ID, field, lastSeq(e))
		}
	}
	return nil
}

// lastSeq is the newest record the execution's rows show.
func lastSeq(e ExecutionSummary) int64 {
	n := e.Seq
	for _, t := range e.Transitions {
		n = max(n, t.Seq)
	}
	return n
}

// shownRows says which transitions rows are left, for a message.
func shownRows(trs []activity.Transition) string {
	switch len(trs) {
	case 0:
		return " nor any of its steps"
	case 1:
		return fmt.Sprintf(", only record %d", trs[0].Seq)
	}
	return fmt.Sprintf(", only %d of its steps (records %d..%d)", len(trs), trs[0].Seq, trs[len(trs)-1].Seq)
}

// rowDiffers names the first field a verdict reads where the row differs
// from the execution its records imply, or "".
func rowDiffers(want, got activity.Execution) string {
	switch {
	case want.ID != got.ID:
		return "id"
	case want.Action.Actor != got.Action.Actor || want.Action.Tool != got.Action.Tool || want.Action.Channel != got.Action.Channel ||
		want.Action.Target != got.Action.Target || want.Action.Method != got.Action.Method || want.Action.IntentScope != got.Action.IntentScope:
		return "action"
	case !bytes.Equal(want.Action.Arguments, got.Action.Arguments):
		return "arguments"
	case want.Fingerprint != got.Fingerprint:
		return "fingerprint"
	case want.RunID != got.RunID:
		return "run"
	case want.Contract != got.Contract:
		return "contract"
	case want.State != got.State:
		return "state"
	case want.Outcome != got.Outcome:
		return "outcome"
	case want.IdempotencyKey != got.IdempotencyKey:
		return "idempotency key"
	case want.TargetStatus != got.TargetStatus || want.ExitCode != got.ExitCode || want.ResultRef != got.ResultRef:
		return "target's answer"
	case want.Created != got.Created || want.Replayed != got.Replayed:
		return "created or replayed ids"
	case !slices.Equal(want.NotRecorded, got.NotRecorded):
		return "not-recorded facts"
	case want.Error != got.Error:
		return "error"
	}
	return ""
}

// sameAt compares two optional times by instant.
func sameAt(a, b activity.Opt[time.Time]) bool {
	return a.OK == b.OK && a.V.Equal(b.V)
}
