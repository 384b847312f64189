package analyze

import (
	"fmt"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/gatewaylite"
)

// WhatIfCall is what the gateway would have done with one recorded call.
type WhatIfCall struct {
	CallID   activity.CallID      `json:"call_id"`
	At       time.Time            `json:"at"`
	Recorded string               `json:"recorded"` // what the record shows happened
	Would    gatewaylite.Recovery `json:"would"`
	Action   string               `json:"action"` // attached | stored result | blocked | dispatched | ...
	Reason   string               `json:"reason"`
}

// WhatIf replays a suspect's calls through the gateway's own matching
// and recovery decision (gatewaylite.Decide: the same function the gateway
// runs, not a copy) under the contracts and windows of cfg, against the
// first execution's state as recorded at each call's time.
func WhatIf(sus *Suspect, cfg *gatewaylite.Config) []WhatIfCall {
	contract, window := activity.ContractBlockedAfterUnknown, gatewaylite.DefaultAttachWindow
	if t, ok := cfg.Tool(sus.Tool); ok {
		contract, window = activity.Contract(t.Contract), t.AttachWindow.Duration
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
			e := stateAt(prior, c.Seq, contract)
			p = &e
		}
		rec, why := gatewaylite.Decide(p, contract, c.ReceivedAt, window)
		if why == "" {
			why = "no earlier execution of this intent"
		}
		out = append(out, WhatIfCall{CallID: c.ID, At: c.ReceivedAt, Recorded: recorded, Would: rec, Action: actionText(rec), Reason: why})
		if rec == gatewaylite.RecoveryNew {
			prior = execs[c.ExecutionID]
		}
	}
	return out
}

// stateAt rebuilds an execution as it stood just before log record seq.
func stateAt(e *ExecutionSummary, seq int64, c activity.Contract) activity.Execution {
	x := activity.Execution{ID: e.ID, Contract: c, State: activity.StateAccepted}
	x.Times.Accepted = e.exec.Times.Accepted
	for _, t := range e.Transitions {
		if t.Seq >= seq {
			break
		}
		x.State = t.To
		if o, ok := outcomeOf(t.To); ok {
			x.Outcome = o
		}
		if t.At.OK {
			x.Times.Observed = t.At // the latest change; Decide measures age from it
		}
	}
	return x
}

func outcomeOf(s activity.State) (activity.Outcome, bool) {
	switch s {
	case activity.StateSucceeded, activity.StateVerified:
		return activity.OutcomeSuccess, true
	case activity.StateFailed, activity.StateRejectedByOperator:
		return activity.OutcomeFailure, true
	}
	return "", false
}

func actionText(r gatewaylite.Recovery) string {
	switch r {
	case gatewaylite.RecoveryNew:
		return "dispatched a new execution"
	case gatewaylite.RecoveryContinue, gatewaylite.RecoveryWait:
		return "attached and waited"
	case gatewaylite.RecoveryStoredResult, gatewaylite.RecoveryResolved:
		return "returned the stored result"
	case gatewaylite.RecoveryResend:
		return "resent with the same Idempotency-Key"
	case gatewaylite.RecoveryLookup:
		return "asked the status endpoint"
	case gatewaylite.RecoveryBlock:
		return "blocked: pending verification"
	case gatewaylite.RecoveryRejection:
		return "returned the same refusal"
	}
	return fmt.Sprint(r)
}
