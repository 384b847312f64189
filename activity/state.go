package activity

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// State is where an execution is in its lifecycle. The lifecycle is
//
//	accepted → authorized | rejected
//	authorized → dispatched
//	dispatched → succeeded | failed | unknown   (outcome observed)
//	succeeded, failed → delivered | delivery_failed | completed_result_not_delivered
//
// with these side paths:
//
//	accepted, authorized, dispatched → failed_before_dispatch
//	    (nothing left the process: safe to send again)
//	unknown → succeeded | failed        (recovered: status lookup, marker, resend with key)
//	unknown → dispatched                (resend with the same Idempotency-Key; repeatable_with_key only)
//	unknown → pending_verification      (blocked: an operator must check the target)
//	unknown, pending_verification → verified | rejected_by_operator
//	delivery_failed, completed_result_not_delivered → delivered  (a retry received the stored result)
//
// Everything else is illegal, in particular a second dispatch, delivery
// before an outcome, and anything after a terminal state.
type State string

const (
	StateAccepted     State = "accepted"
	StateAuthorized   State = "authorized"
	StateRejected     State = "rejected"
	StateFailedBefore State = "failed_before_dispatch"
	StateDispatched   State = "dispatched"
	StateSucceeded    State = "succeeded"
	StateFailed       State = "failed"
	StateUnknown      State = "unknown"
	StateDelivered    State = "delivered"
	// StateDeliveryFailed: the gateway tried to hand the result to the agent
	// and the transport reported an error.
	StateDeliveryFailed State = "delivery_failed"
	// StateNotDelivered: the outcome is known but delivery was never
	// established (the client left first, or the gateway restarted).
	StateNotDelivered        State = "completed_result_not_delivered"
	StatePendingVerification State = "pending_verification"
	StateVerified            State = "verified"
	StateRejectedByOperator  State = "rejected_by_operator"
)

// States lists every state in lifecycle order.
var States = []State{
	StateAccepted, StateAuthorized, StateRejected, StateFailedBefore,
	StateDispatched, StateSucceeded, StateFailed, StateUnknown,
	StateDelivered, StateDeliveryFailed, StateNotDelivered,
	StatePendingVerification, StateVerified, StateRejectedByOperator,
}

// transitions is the whole state machine. Keep it the only one.
var transitions = map[State][]State{
	StateAccepted:            {StateAuthorized, StateRejected, StateFailedBefore},
	StateAuthorized:          {StateDispatched, StateFailedBefore},
	StateDispatched:          {StateSucceeded, StateFailed, StateUnknown, StateFailedBefore},
	StateSucceeded:           {StateDelivered, StateDeliveryFailed, StateNotDelivered},
	StateFailed:              {StateDelivered, StateDeliveryFailed, StateNotDelivered},
	StateUnknown:             {StateSucceeded, StateFailed, StateDispatched, StatePendingVerification, StateVerified, StateRejectedByOperator},
	StateDeliveryFailed:      {StateDelivered},
	StateNotDelivered:        {StateDelivered},
	StatePendingVerification: {StateVerified, StateRejectedByOperator},
}

// Valid reports whether s is a known state.
func (s State) Valid() bool { return slices.Contains(States, s) }

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool { return s.Valid() && len(transitions[s]) == 0 }

// Dispatched reports whether an execution in state s was handed to its
// target (so the target may have acted).
func (s State) Dispatched() bool {
	switch s {
	case StateAccepted, StateAuthorized, StateRejected, StateFailedBefore:
		return false
	}
	return s.Valid()
}

// OutcomeUnresolved reports whether the target's outcome is not known and
// an operator may resolve it.
func (s State) OutcomeUnresolved() bool {
	return s == StateUnknown || s == StatePendingVerification
}

// TransitionError is returned for a transition the state machine forbids.
type TransitionError struct {
	Execution ExecutionID
	From, To  State
	Reason    string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("execution %s: illegal transition %s → %s: %s", e.Execution, e.From, e.To, e.Reason)
}

// CheckTransition reports whether an execution under contract c may move
// from one state to another. The contract matters once: only an execution
// whose target can tell a resend from a new request may be dispatched
// again after an unknown outcome: repeatable_with_key (the Idempotency-Key)
// and recoverable_by_lookup, whose resend the gateway makes only after the
// lookup found no trace and under the same id (the SSH marker refuses a
// second start of one id).
func CheckTransition(id ExecutionID, c Contract, from, to State) error {
	fail := func(reason string) error { return &TransitionError{id, from, to, reason} }
	switch {
	case !from.Valid():
		return fail(fmt.Sprintf("unknown state %q", from))
	case !to.Valid():
		return fail(fmt.Sprintf("unknown state %q", to))
	case from.Terminal():
		return fail(fmt.Sprintf("%s is terminal", from))
	case from == StateDispatched && to == StateDispatched:
		return fail("already dispatched")
	case !slices.Contains(transitions[from], to):
		return fail(illegalReason(from, to))
	case from == StateUnknown && to == StateDispatched && c != ContractRepeatableWithKey && c != ContractRecoverableByLookup:
		return fail(fmt.Sprintf("contract %s forbids resending after an unknown outcome", c))
	}
	return nil
}

func illegalReason(from, to State) string {
	switch {
	case to == StateDelivered || to == StateDeliveryFailed || to == StateNotDelivered:
		return "no outcome has been observed yet"
	case to == StateDispatched && from.Dispatched():
		return "already dispatched"
	case to == StateAccepted:
		return "an execution is accepted only once"
	}
	return fmt.Sprintf("%s may only move to %v", from, transitions[from])
}

// Apply moves e through one recorded transition, checked against the
// state machine. It is the one place that says how a transition changes an
// execution (state, outcome, times, the target's answer): the store's
// writer applies each transition it records with it, and the analysis
// replays recorded transitions through it. A transition that names a From
// must find e in that state. Apply changes nothing when it fails.
func (e *Execution) Apply(t Transition) error {
	if t.ExecutionID != "" && t.ExecutionID != e.ID {
		return fmt.Errorf("execution %s: transition of another execution (%s)", e.ID, t.ExecutionID)
	}
	if t.From != "" && t.From != e.State {
		return fmt.Errorf("execution %s: expected state %s, found %s", e.ID, t.From, e.State)
	}
	if err := CheckTransition(e.ID, e.Contract, e.State, t.To); err != nil {
		return err
	}
	e.State = t.To
	e.Times.set(t.To, t.At)
	if t.TargetStatus.OK {
		e.TargetStatus = t.TargetStatus
	}
	if t.ExitCode.OK {
		e.ExitCode = t.ExitCode
	}
	if t.ResultRef != "" {
		e.ResultRef = t.ResultRef
	}
	if t.Created != "" {
		e.Created = t.Created
	}
	if t.Replayed != "" {
		e.Replayed = t.Replayed
	}
	if t.Replica != "" {
		e.Replica = t.Replica
	}
	if t.Reason != "" && errorState(t.To) {
		e.Error = t.Reason
	}
	if o, ok := outcomeOf(t.To); ok {
		e.Outcome = o
	} else if t.To == StateDispatched {
		e.Outcome = "" // a resend: the earlier unknown is superseded
	}
	return nil
}

// AsAccepted is the execution as it stood when it was accepted: its
// identity, with no step of its lifecycle after that.
func (e Execution) AsAccepted() Execution {
	x := e
	x.State, x.Outcome, x.Error, x.ResultRef = StateAccepted, "", "", ""
	x.TargetStatus, x.ExitCode = Opt[int]{}, Opt[int]{}
	x.Times = Times{Accepted: e.Times.Accepted}
	x.Attached = nil
	return x
}

// set stamps the time a transition into s happened.
func (t *Times) set(s State, v Opt[time.Time]) {
	switch s {
	case StateAccepted:
		t.Accepted = v
	case StateAuthorized:
		t.Authorized = v
	case StateRejected, StateFailedBefore:
		t.Rejected = v
	case StateDispatched:
		t.Dispatched = v
	case StateSucceeded, StateFailed, StateUnknown:
		t.Observed = v
	case StateDelivered, StateDeliveryFailed, StateNotDelivered:
		t.Delivered = v
	case StatePendingVerification, StateVerified, StateRejectedByOperator:
		t.Resolved = v
	}
}

// outcomeOf returns the outcome a transition into s establishes.
func outcomeOf(s State) (Outcome, bool) {
	switch s {
	case StateSucceeded, StateVerified:
		return OutcomeSuccess, true
	case StateFailed, StateRejectedByOperator:
		return OutcomeFailure, true
	}
	return "", false
}

// errorState reports whether a transition's reason explains a failure or
// an uncertainty, and so becomes the execution's error.
func errorState(s State) bool {
	switch s {
	case StateRejected, StateFailedBefore, StateFailed, StateUnknown, StateDeliveryFailed, StateNotDelivered, StatePendingVerification:
		return true
	}
	return false
}

// StateForHTTPAnswer is StateForHTTPStatus read with the answer's body:
// a proxy's own 503 says in words whether the request reached the
// upstream. Envoy (and Istio, Envoy Gateway, which run it) answers
// "upstream connect error or disconnect/reset before headers. reset
// reason: …": connection failure, overflow or a connect timeout (UF, UO:
// it never connected, nothing was sent, a refusal as any 503); connection
// termination, remote or local reset, protocol error (UC, UR, LR: the
// connection broke after the request may have been written: unknown, the
// target may have acted).
func StateForHTTPAnswer(code int, body string) (State, string) {
	st, why := StateForHTTPStatus(code)
	if code != 503 {
		return st, why
	}
	const envoy = "upstream connect error or disconnect/reset before headers"
	i := strings.LastIndex(body, envoy)
	if i < 0 {
		return st, why
	}
	reason := body[i:]
	if j := strings.LastIndex(reason, "reset reason:"); j >= 0 {
		reason = strings.TrimSpace(reason[j+len("reset reason:"):])
	}
	reason = strings.ToLower(reason[:min(len(reason), 120)])
	for _, unsent := range []string{"connection failure", "overflow", "connection timeout"} {
		if strings.Contains(reason, unsent) {
			return st, fmt.Sprintf("a proxy answered 503 (%s): nothing reached the target", unsent)
		}
	}
	for _, lost := range []string{"connection termination", "remote reset", "protocol error", "local reset"} {
		if strings.Contains(reason, lost) {
			return StateUnknown, fmt.Sprintf("a proxy answered 503 (%s): the upstream connection broke after the request may have reached the target, which may have acted", lost)
		}
	}
	return st, why
}

// StateForHTTPStatus is what an HTTP target's status code says about an
// action, the same for the gateway and for imported logs: 2xx it acted,
// and so did a 303 (redirects are not followed: the other 3xx say to ask
// elsewhere, and nothing was done here);
// 502 and 504 come from an intermediary that lost the upstream answer, so
// it may or may not have; so do Cloudflare's 520 (the origin's answer was
// empty or unreadable) and 524 (the connection to the origin was made and
// the request sent, the origin did not answer within 100 s: OpenAI's and
// many agents' APIs sit behind it); a 500 is a server that failed part
// way, which may have acted too (Stripe: "treat a 500 as
// indeterminate"): unknown, so a retry is blocked, looked up or resent
// under the same key, never a fresh send; anything else (a 503 too: RFC
// 9110, the server was unable to handle the request; Cloudflare's 521,
// 522, 523, 525 and 526, raised before the origin got the request) is the
// target refusing.
func StateForHTTPStatus(code int) (State, string) {
	switch {
	case code >= 200 && code < 300:
		return StateSucceeded, ""
	case code == 303:
		// See Other: the request was processed, its result is elsewhere
		// (RFC 9110 §15.4.4: POST, then redirect to what it made).
		return StateSucceeded, "the target answered 303 See Other: it acted, and points to the result"
	case code == 502 || code == 504:
		return StateUnknown, fmt.Sprintf("an intermediary answered %d: the target may have acted", code)
	case code == 520 || code == 524:
		return StateUnknown, fmt.Sprintf("Cloudflare answered %d: the origin got the request and its answer never came, so the target may have acted", code)
	case code == 500:
		return StateUnknown, fmt.Sprintf("the target answered %d, a server error: it may have acted", code)
	}
	return StateFailed, fmt.Sprintf("the target answered %d", code)
}
