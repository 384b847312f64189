package activity

import (
	"errors"
	"strings"
	"testing"
)

// legal is the lifecycle written out pair by pair, independently of the
// transitions map, so a change to either shows up here.
var legal = map[[2]State]bool{
	{StateAccepted, StateAuthorized}:   true,
	{StateAccepted, StateRejected}:     true,
	{StateAccepted, StateFailedBefore}: true,

	{StateAuthorized, StateDispatched}:   true,
	{StateAuthorized, StateFailedBefore}: true,

	{StateDispatched, StateSucceeded}:    true,
	{StateDispatched, StateFailed}:       true,
	{StateDispatched, StateUnknown}:      true,
	{StateDispatched, StateFailedBefore}: true, // nothing left the process

	{StateSucceeded, StateDelivered}:      true,
	{StateSucceeded, StateDeliveryFailed}: true,
	{StateSucceeded, StateNotDelivered}:   true,
	{StateFailed, StateDelivered}:         true,
	{StateFailed, StateDeliveryFailed}:    true,
	{StateFailed, StateNotDelivered}:      true,

	{StateUnknown, StateSucceeded}:           true,
	{StateUnknown, StateFailed}:              true,
	{StateUnknown, StateDispatched}:          true, // repeatable_with_key only
	{StateUnknown, StatePendingVerification}: true,
	{StateUnknown, StateVerified}:            true,
	{StateUnknown, StateRejectedByOperator}:  true,

	{StateDeliveryFailed, StateDelivered}: true,
	{StateNotDelivered, StateDelivered}:   true,

	{StatePendingVerification, StateVerified}:           true,
	{StatePendingVerification, StateRejectedByOperator}: true,
}

func TestEveryPairOfStates(t *testing.T) {
	if len(States) != 14 {
		t.Fatalf("%d states; this test lists the legal pairs of 14", len(States))
	}
	checked := 0
	for _, from := range States {
		for _, to := range States {
			for _, c := range Contracts {
				err := CheckTransition("act_test", c, from, to)
				want := legal[[2]State{from, to}]
				if from == StateUnknown && to == StateDispatched {
					want = c == ContractRepeatableWithKey || c == ContractRecoverableByLookup
				}
				if (err == nil) != want {
					t.Errorf("%s → %s under %s: err = %v, want legal = %v", from, to, c, err, want)
				}
				if err != nil {
					var te *TransitionError
					if !errors.As(err, &te) || te.From != from || te.To != to {
						t.Errorf("%s → %s: error %v is not a TransitionError naming both states", from, to, err)
					}
				}
				checked++
			}
		}
	}
	if checked != 14*14*4 {
		t.Fatalf("checked %d combinations", checked)
	}
}

func TestIllegalTransitionMessages(t *testing.T) {
	cases := []struct {
		from, to State
		want     string
	}{
		{StateDispatched, StateDispatched, "already dispatched"},
		{StateSucceeded, StateDispatched, "already dispatched"},
		{StateDispatched, StateDelivered, "no outcome has been observed yet"},
		{StateAuthorized, StateDelivered, "no outcome has been observed yet"},
		{StateDelivered, StateDispatched, "delivered is terminal"},
		{StateVerified, StateUnknown, "verified is terminal"},
		{StateRejected, StateAuthorized, "rejected is terminal"},
	}
	for _, c := range cases {
		err := CheckTransition("act_x", ContractRepeatableWithKey, c.from, c.to)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: error %v, want it to say %q", c.from, c.to, err, c.want)
		}
	}
	for _, c := range []Contract{ContractBlockedAfterUnknown, ContractReadOnly} {
		err := CheckTransition("act_x", c, StateUnknown, StateDispatched)
		if err == nil || !strings.Contains(err.Error(), string(c)+" forbids resending") {
			t.Errorf("resend after unknown under %s: %v", c, err)
		}
	}
	for _, c := range []Contract{ContractRepeatableWithKey, ContractRecoverableByLookup} {
		if err := CheckTransition("act_x", c, StateUnknown, StateDispatched); err != nil {
			t.Errorf("resend after unknown under %s: %v", c, err)
		}
	}
}

func TestTerminalStates(t *testing.T) {
	want := map[State]bool{StateRejected: true, StateFailedBefore: true, StateDelivered: true, StateVerified: true, StateRejectedByOperator: true}
	for _, s := range States {
		if s.Terminal() != want[s] {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
	}
	if State("bogus").Terminal() || State("bogus").Valid() {
		t.Error("an unknown state is neither valid nor terminal")
	}
}
