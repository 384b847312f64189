package analyze

import (
	"fmt"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// ContractOf looks up a tool's written contract: its class and attach
// window; ok is false for a tool without one. The command line builds it
// from a gateway configuration, so the analysis reads contracts as data.
type ContractOf func(tool string) (contract activity.Contract, window time.Duration, ok bool)

// WhatIfCall is what the gateway would have done with one recorded call.
type WhatIfCall struct {
	CallID   activity.CallID   `json:"call_id"`
	At       time.Time         `json:"at"`
	Recorded string            `json:"recorded"` // what the record shows happened
	Would    activity.Recovery `json:"would"`
	Action   string            `json:"action"` // attached | stored result | blocked | dispatched | ...
	Reason   string            `json:"reason"`
}

// WhatIf replays a suspect's calls through the gateway's own matching
// and recovery decision (activity.Decide: the function the gateway runs,
// not a copy) under the contracts and windows contracts gives, against the
// first execution as its recorded transitions had left it at each call's
// time (rebuilt by activity's Execution.Apply). A tool without a contract
// is blocked_after_unknown with the default window, as in the gateway.
func WhatIf(sus *Suspect, contracts ContractOf) ([]WhatIfCall, error) {
	contract, window, ok := contracts(sus.Tool)
	if !ok {
		contract, window = activity.ContractBlockedAfterUnknown, activity.DefaultAttachWindow
	}
	execs := map[activity.ExecutionID]*ExecutionSummary{}
	for i := range sus.Executions {
		execs[sus.Executions[i].ID] = &sus.Executions[i]
	}
	var out []WhatIfCall
	var prior *ExecutionSummary
	for _, c := range sus.Calls {
		recorded := "created " + string(c.ExecutionID)
		if c.Disposition == activity.DispositionAttached {
			recorded = "attached to " + string(c.ExecutionID)
		}
		var p *activity.Execution
		if prior != nil {
			e, err := prior.before(c.Seq)
			if err != nil {
				return nil, err
			}
			e.Contract = contract // the what-if's contract, not the recorded one
			p = &e
		}
		// The vault's state at each call is not replayed: a refusal by the
		// lock is taken to stand, the cautious reading.
		rec, why := activity.Decide(p, contract, c.ReceivedAt, window, true)
		if why == "" {
			why = "no earlier execution of this intent"
		}
		out = append(out, WhatIfCall{CallID: c.ID, At: c.ReceivedAt, Recorded: recorded, Would: rec, Action: actionText(rec), Reason: why})
		if rec == activity.RecoveryNew {
			prior = execs[c.ExecutionID]
		}
	}
	return out, nil
}

// before rebuilds the execution as it stood just before log record seq:
// as accepted, then each recorded transition applied through the model's
// one state machine.
func (e *ExecutionSummary) before(seq int64) (activity.Execution, error) {
	x := e.exec.AsAccepted()
	for _, t := range e.Transitions {
		if t.Seq >= seq {
			break
		}
		if t.To == activity.StateAccepted {
			continue // the record that created it
		}
		if err := x.Apply(t); err != nil {
			return x, fmt.Errorf("replay #%d: %w", t.Seq, err)
		}
	}
	return x, nil
}

func actionText(r activity.Recovery) string {
	switch r {
	case activity.RecoveryNew:
		return "dispatched a new execution"
	case activity.RecoveryContinue, activity.RecoveryWait:
		return "attached and waited"
	case activity.RecoveryStoredResult, activity.RecoveryResolved:
		return "returned the stored result"
	case activity.RecoveryResend:
		return "resent with the same Idempotency-Key"
	case activity.RecoveryLookup:
		return "asked the status endpoint"
	case activity.RecoveryBlock:
		return "blocked: pending verification"
	case activity.RecoveryRejection:
		return "returned the same refusal"
	}
	return fmt.Sprint(r)
}
