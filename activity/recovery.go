package activity

import (
	"fmt"
	"strings"
	"time"
)

// DefaultAttachWindow is the attach window of a tool whose contract sets
// none, and the grouping window for logs that record no window at all.
const DefaultAttachWindow = time.Hour

// Recovery is what the gateway does with a call, given the newest
// execution of the same intent (fingerprint, actor and scope). It is the
// whole of recover_or_attach (design.md, "Matching a retry"), kept pure so
// the gateway and the analysis's what-if replay run exactly this code.
type Recovery string

const (
	// RecoveryNew: no matching execution is open; create a new one.
	RecoveryNew Recovery = "new_execution"
	// RecoveryContinue: the match was accepted but never dispatched;
	// dispatch that execution (once).
	RecoveryContinue Recovery = "continue"
	// RecoveryWait: the match is dispatched and running; attach and wait,
	// then answer "in progress" if it is still running.
	RecoveryWait Recovery = "wait"
	// RecoveryStoredResult: the match completed; return its stored result
	// without touching the target.
	RecoveryStoredResult Recovery = "stored_result"
	// RecoveryResend: outcome unknown on a repeatable_with_key tool; send
	// again with the same Idempotency-Key.
	RecoveryResend Recovery = "resend_with_key"
	// RecoveryLookup: outcome unknown on a recoverable_by_lookup tool; ask
	// the target's status endpoint.
	RecoveryLookup Recovery = "lookup"
	// RecoveryBlock: outcome unknown and the tool cannot be safely resent;
	// report pending verification.
	RecoveryBlock Recovery = "pending_verification"
	// RecoveryRejection: the match was refused authorization; return that
	// refusal, never a new approval prompt.
	RecoveryRejection Recovery = "rejection"
	// RecoveryResolved: an operator verified the match took effect; say so.
	RecoveryResolved Recovery = "resolved"
)

// Attaches reports whether the call attaches to the prior execution rather
// than creating a new one.
func (r Recovery) Attaches() bool { return r != RecoveryNew }

// Decide chooses the recovery for a call whose intent matches prior (nil
// when nothing matches) under contract, at now, with the tool's attach
// window. It returns a sentence saying why, for the call record.
//
// Unresolved executions (accepted, authorized, dispatched, unknown,
// pending verification) answer a matching call whatever their age: letting
// a window expire must never turn uncertainty into a second action. The
// window bounds only how long a finished execution's result is handed back
// instead of acting again, delivered or not; after it the execution is a
// tombstone and the new execution is recorded as a late repeat.
//
// A refusal stands for a retry (an operator's denial, an approval nobody
// gave in time), except one caused only by the vault lock: it lapses when
// the lock is lifted (vaultLocked false), since nothing about the call
// itself was refused.
func Decide(prior *Execution, contract Contract, now time.Time, window time.Duration, vaultLocked bool) (Recovery, string) {
	if prior == nil {
		return RecoveryNew, ""
	}
	if contract == ContractReadOnly {
		return RecoveryNew, fmt.Sprintf("read-only repeat of %s", prior.ID)
	}
	switch prior.State {
	case StateAccepted, StateAuthorized:
		return RecoveryContinue, fmt.Sprintf("retry of %s, accepted but not yet dispatched", prior.ID)
	case StateDispatched:
		return RecoveryWait, fmt.Sprintf("retry of %s, dispatched and still running", prior.ID)
	case StateUnknown:
		switch prior.Contract {
		case ContractRepeatableWithKey:
			return RecoveryResend, fmt.Sprintf("retry of %s, outcome unknown: resend with the same Idempotency-Key", prior.ID)
		case ContractRecoverableByLookup:
			return RecoveryLookup, fmt.Sprintf("retry of %s, outcome unknown: ask the target's status endpoint", prior.ID)
		}
		return RecoveryBlock, fmt.Sprintf("retry of %s, outcome unknown and the tool cannot be resent safely", prior.ID)
	case StatePendingVerification:
		return RecoveryBlock, fmt.Sprintf("retry of %s, which awaits operator verification", prior.ID)
	}
	if prior.State == StateRejected && prior.RefusedByLock() && !vaultLocked {
		return RecoveryNew, fmt.Sprintf("new attempt after %s, which was refused only because the vault was locked; it has been unlocked since", prior.ID)
	}
	if now.Sub(prior.LastChanged()) > window {
		return RecoveryNew, fmt.Sprintf("late repeat of %s (%s), outside the %s attach window", prior.ID, prior.State, window)
	}
	switch prior.State {
	case StateSucceeded, StateFailed, StateDeliveryFailed, StateNotDelivered:
		return RecoveryStoredResult, fmt.Sprintf("retry of %s, which completed: stored result returned", prior.ID)
	case StateDelivered:
		if prior.Outcome == OutcomeFailure {
			return RecoveryNew, fmt.Sprintf("new attempt after %s, whose failure (%s) was delivered", prior.ID, prior.Error)
		}
		// HTTP cannot prove the agent read the answer (a proxy or a kernel
		// buffer may have swallowed it), so inside the window a repeat is
		// answered from the first execution. A deliberate repeat names a
		// new intent scope in _meta.
		return RecoveryStoredResult, fmt.Sprintf("repeat of %s, whose result was written to the agent at %s, inside the %s attach window: stored result returned",
			prior.ID, prior.Times.Delivered.String(), window)
	case StateRejected:
		return RecoveryRejection, fmt.Sprintf("retry of %s, which was refused: same refusal returned", prior.ID)
	case StateVerified:
		return RecoveryResolved, fmt.Sprintf("retry of %s, which an operator verified took effect", prior.ID)
	}
	// failed_before_dispatch, rejected_by_operator: nothing happened; act.
	return RecoveryNew, fmt.Sprintf("new attempt after %s (%s): the target never acted", prior.ID, prior.State)
}

// vaultLockedPrefix begins the reason of every refusal the vault lock
// caused (and no other), so the rule above can tell it from a denial.
const vaultLockedPrefix = "vault locked: "

// VaultLockedReason is the recorded reason of a refusal by the vault lock;
// why is the operator's reason for locking.
func VaultLockedReason(why string) string {
	return vaultLockedPrefix + "every call is refused until an operator unlocks it (" + why + ")"
}

// RefusedByLock reports whether the execution was rejected by the vault
// lock alone.
func (e *Execution) RefusedByLock() bool {
	return e.State == StateRejected && strings.HasPrefix(e.Error, vaultLockedPrefix)
}

// LastChanged is when the execution last changed, as far as recorded.
func (e *Execution) LastChanged() time.Time {
	var t time.Time
	for _, o := range []Opt[time.Time]{e.Times.Accepted, e.Times.Authorized, e.Times.Rejected,
		e.Times.Dispatched, e.Times.Observed, e.Times.Delivered, e.Times.Resolved} {
		if o.OK && o.V.After(t) {
			t = o.V
		}
	}
	return t
}
