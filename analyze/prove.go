package analyze

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpdup/mcpdup/activity"
)

// Proof is what proving one suspect against the signed log found.
type Proof struct {
	Records  int      // log records proven and compared
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
			!rec.ReceivedAt.Equal(c.ReceivedAt):
			bad("call %s differs from record %d", c.ID, c.Seq)
		}
	}
	for _, e := range sus.Executions {
		if err := proveExecution(e, prove, bad); err != nil {
			return p, err
		}
	}
	return p, nil
}

func proveExecution(e ExecutionSummary, prove func(int64) (any, bool, error), bad func(string, ...any)) error {
	ev, ok, err := prove(e.Seq)
	if err != nil {
		return err
	}
	if ok {
		rec, isExec := ev.(*activity.Execution)
		switch {
		case !isExec:
			bad("execution %s: record %d is not an acceptance", e.ID, e.Seq)
		case rec.ID != e.ID || rec.Contract != e.Contract || rec.Action.Actor != e.exec.Action.Actor || rec.Action.Tool != e.exec.Action.Tool ||
			rec.Action.Target != e.exec.Action.Target || rec.Action.Method != e.exec.Action.Method:
			bad("execution %s differs from its acceptance, record %d", e.ID, e.Seq)
		}
	}
	state := activity.StateAccepted
	for _, t := range e.Transitions {
		if t.Seq == e.Seq {
			continue // the acceptance itself, proven above
		}
		ev, ok, err := prove(t.Seq)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		rec, isTr := ev.(*activity.Transition)
		switch {
		case !isTr:
			bad("execution %s: record %d is not a transition", e.ID, t.Seq)
			continue
		case rec.ExecutionID != e.ID || rec.To != t.To || rec.From != t.From || rec.TargetStatus != t.TargetStatus ||
			rec.ExitCode != t.ExitCode || rec.ResultRef != t.ResultRef:
			bad("execution %s: transition %d differs from its record", e.ID, t.Seq)
		}
		state = rec.To
	}
	if state != e.State {
		bad("execution %s is %s, its last proven transition says %s", e.ID, e.State, state)
	}
	return nil
}
