package activity_test

import (
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

func TestDecideEveryStateAndContract(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const window = time.Hour
	type want struct{ in, out activity.Recovery } // inside and outside the window
	byState := map[activity.State]map[activity.Contract]want{}
	all := func(in, out activity.Recovery) map[activity.Contract]want {
		m := map[activity.Contract]want{}
		for _, c := range activity.Contracts {
			m[c] = want{in, out}
		}
		return m
	}
	byState[activity.StateAccepted] = all(activity.RecoveryContinue, activity.RecoveryContinue)
	byState[activity.StateAuthorized] = all(activity.RecoveryContinue, activity.RecoveryContinue)
	byState[activity.StateDispatched] = all(activity.RecoveryWait, activity.RecoveryWait)
	byState[activity.StateUnknown] = map[activity.Contract]want{
		activity.ContractRepeatableWithKey:   {activity.RecoveryResend, activity.RecoveryResend},
		activity.ContractRecoverableByLookup: {activity.RecoveryLookup, activity.RecoveryLookup},
		activity.ContractBlockedAfterUnknown: {activity.RecoveryBlock, activity.RecoveryBlock},
	}
	byState[activity.StatePendingVerification] = all(activity.RecoveryBlock, activity.RecoveryBlock)
	for _, s := range []activity.State{activity.StateSucceeded, activity.StateFailed, activity.StateDeliveryFailed, activity.StateNotDelivered, activity.StateDelivered} {
		byState[s] = all(activity.RecoveryStoredResult, activity.RecoveryNew)
	}
	byState[activity.StateRejected] = all(activity.RecoveryRejection, activity.RecoveryNew)
	byState[activity.StateVerified] = all(activity.RecoveryResolved, activity.RecoveryNew)
	byState[activity.StateFailedBefore] = all(activity.RecoveryNew, activity.RecoveryNew)
	byState[activity.StateRejectedByOperator] = all(activity.RecoveryNew, activity.RecoveryNew)

	for _, s := range activity.States {
		for _, c := range activity.Contracts {
			w, ok := byState[s][c]
			if c == activity.ContractReadOnly {
				w, ok = want{activity.RecoveryNew, activity.RecoveryNew}, true // reads are never deduplicated
			}
			if !ok {
				t.Fatalf("no expectation for %s under %s", s, c)
			}
			for _, age := range []time.Duration{time.Minute, 2 * window} {
				prior := &activity.Execution{ID: "act_x", State: s, Contract: c}
				prior.Times.Accepted = activity.Some(now.Add(-age))
				got, why := activity.Decide(prior, c, now, window, true)
				exp := w.in
				if age > window {
					exp = w.out
				}
				if got != exp {
					t.Errorf("%s under %s, age %s: %s (%s), want %s", s, c, age, got, why, exp)
				}
				if why == "" {
					t.Errorf("%s under %s: no reason given", s, c)
				}
			}
		}
	}
	if got, _ := activity.Decide(nil, activity.ContractBlockedAfterUnknown, now, window, false); got != activity.RecoveryNew {
		t.Fatalf("no prior: %s", got)
	}
	failed := &activity.Execution{ID: "act_f", State: activity.StateDelivered, Outcome: activity.OutcomeFailure, Contract: activity.ContractRepeatableWithKey}
	failed.Times.Delivered = activity.Some(now)
	if got, _ := activity.Decide(failed, failed.Contract, now, window, false); got != activity.RecoveryNew {
		t.Fatalf("a delivered failure is retried as a new attempt, got %s", got)
	}
}

// A refusal by the vault lock lapses with the lock; a denial stands.
func TestDecideLockRefusalLapsesWithTheLock(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	byLock := &activity.Execution{ID: "act_l", State: activity.StateRejected, Contract: activity.ContractBlockedAfterUnknown,
		Error: activity.VaultLockedReason("incident 4711")}
	byLock.Times.Rejected = activity.Some(now.Add(-time.Minute))
	denied := *byLock
	denied.Error = "approval apr_1 denied by alice: not this one"
	cases := []struct {
		prior  *activity.Execution
		locked bool
		want   activity.Recovery
	}{
		{byLock, true, activity.RecoveryRejection},
		{byLock, false, activity.RecoveryNew},
		{&denied, false, activity.RecoveryRejection},
		{&denied, true, activity.RecoveryRejection},
	}
	for _, c := range cases {
		if got, why := activity.Decide(c.prior, c.prior.Contract, now, time.Hour, c.locked); got != c.want {
			t.Errorf("%q, vault locked %v: %s (%s), want %s", c.prior.Error, c.locked, got, why, c.want)
		}
	}
	if denied.RefusedByLock() || !byLock.RefusedByLock() {
		t.Fatal("RefusedByLock misreads the reason")
	}
}
