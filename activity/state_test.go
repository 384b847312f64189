package activity

import (
	"encoding/json"
	"errors"
	"strconv"
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

func TestApplyChangesNothingWhenRefused(t *testing.T) {
	e := Execution{ID: "act_a", Contract: ContractBlockedAfterUnknown, State: StateDispatched}
	for _, tr := range []Transition{
		{ExecutionID: "act_b", To: StateSucceeded},
		{ExecutionID: "act_a", From: StateAuthorized, To: StateSucceeded},
		{ExecutionID: "act_a", To: StateDelivered},
	} {
		before := e
		if err := e.Apply(tr); err == nil {
			t.Errorf("%+v applied", tr)
		}
		if e.State != before.State || e.Times != before.Times {
			t.Errorf("%+v: a refused transition changed the execution", tr)
		}
	}
}

func TestApplyOutcomeAndResend(t *testing.T) {
	e := Execution{ID: "act_a", Contract: ContractRepeatableWithKey, State: StateDispatched}
	steps := []struct {
		t       Transition
		outcome Outcome
	}{
		{Transition{To: StateUnknown, Reason: "connection reset"}, ""},
		{Transition{To: StateDispatched}, ""},
		{Transition{To: StateSucceeded, TargetStatus: Some(201), ResultRef: "sha256:ab"}, OutcomeSuccess},
		{Transition{To: StateNotDelivered, Reason: "client left"}, OutcomeSuccess},
	}
	for _, st := range steps {
		if err := e.Apply(st.t); err != nil {
			t.Fatal(err)
		}
		if e.State != st.t.To || e.Outcome != st.outcome {
			t.Fatalf("after %s: state %s outcome %q, want %q", st.t.To, e.State, e.Outcome, st.outcome)
		}
	}
	if e.TargetStatus != Some(201) || e.ResultRef != "sha256:ab" || e.Error != "client left" {
		t.Fatalf("the target's answer was not kept: %+v", e)
	}
}

// TestStateForHTTPStatus: what a status says the target did, for the
// gateway and every importer alike. Cloudflare's 520 and 524 come after
// the origin got the request (its answer lost): unknown, as 502 and 504;
// its 521, 522, 523, 525, 526 before (a refusal, as a 503). 524 was read as
// the target refusing: a lost charge's resend was "no effect".
func TestStateForHTTPStatus(t *testing.T) {
	want := map[int]State{
		200: StateSucceeded, 201: StateSucceeded, 204: StateSucceeded, 303: StateSucceeded,
		301: StateFailed, 302: StateFailed, 307: StateFailed, 308: StateFailed,
		500: StateUnknown, 502: StateUnknown, 504: StateUnknown, 520: StateUnknown, 524: StateUnknown,
		400: StateFailed, 404: StateFailed, 409: StateFailed, 429: StateFailed, 503: StateFailed,
		521: StateFailed, 522: StateFailed, 523: StateFailed, 525: StateFailed, 526: StateFailed,
	}
	for code, st := range want {
		got, why := StateForHTTPStatus(code)
		if got != st {
			t.Errorf("%d: %s (%s), want %s", code, got, why, st)
		}
		if st != StateSucceeded && !strings.Contains(why, strconv.Itoa(code)) {
			t.Errorf("%d: reason %q does not name the status", code, why)
		}
	}
}

// TestToolErrorState: a tool's error answer is a failure unless it says
// its own request got no answer after leaving (FastMCP's wrapped httpx
// ReadTimeout, a Go handler's deadline): then the target may have acted.
// Every isError was a failure: a timed-out ticket's retry read "no effect".
func TestToolErrorState(t *testing.T) {
	result := func(text string) []byte {
		b, _ := json.Marshal(map[string]any{"isError": true, "content": []map[string]string{{"type": "text", "text": text}}})
		return b
	}
	cases := map[string]State{
		"Error executing tool open_ticket: The read operation timed out":                                              StateUnknown,
		`Post "https://api.example/v1/deploys": context deadline exceeded`:                                            StateUnknown,
		"upstream answered 504 Gateway Timeout":                                                                       StateUnknown,
		"read tcp 10.0.0.2:5512->10.0.0.9:443: read: connection reset by peer":                                        StateUnknown,
		"Error executing tool open_ticket: [Errno 111] Connection refused":                                            StateFailed,
		`Post "https://api.example/v1": dial tcp: lookup api.example: no such host`:                                   StateFailed,
		"Error executing tool open_ticket: ConnectTimeout: timed out connecting":                                      StateFailed,
		"Error executing tool open_ticket: 422 Unprocessable Entity: queue is required":                               StateFailed,
		"Client error '400 Bad Request': field timeout must be positive":                                              StateFailed,
		"Error executing tool open_ticket: _ssl.c:989: The handshake operation timed out":                             StateFailed,
		`Get "https://api.example/v1": net/http: TLS handshake timeout`:                                               StateFailed,
		"Execution act_1 failed before anything was sent to the target (dial tcp: i/o timeout). It is safe to retry.": StateFailed,
		`read tcp 10.0.0.2:5512->10.0.0.9:443: i/o timeout`:                                                           StateUnknown,
		"net/http: request canceled (Client.Timeout exceeded while awaiting headers)":                                 StateUnknown,
		"": StateFailed,
	}
	for text, want := range cases {
		if got, why := ToolErrorState(result(text)); got != want {
			t.Errorf("%q: %s (%s), want %s", text, got, why, want)
		}
	}
}

// TestStateForHTTPAnswer: Envoy's own 503 says in words whether the
// request reached the upstream; a plain 503 stays a refusal. A 503 "reset
// reason: connection termination" (UC) was read as the target refusing.
func TestStateForHTTPAnswer(t *testing.T) {
	const envoy = "upstream connect error or disconnect/reset before headers. reset reason: "
	for body, want := range map[string]State{
		envoy + "connection termination":                     StateUnknown,
		envoy + "remote reset":                               StateUnknown,
		"retried and the latest " + envoy + "protocol error": StateUnknown,
		envoy + "connection failure":                         StateFailed,
		envoy + "remote connection failure, transport failure reason: delayed connect error: 111": StateFailed,
		envoy + "overflow":    StateFailed,
		"no healthy upstream": StateFailed,
		"Service Unavailable": StateFailed,
	} {
		if got, why := StateForHTTPAnswer(503, body); got != want {
			t.Errorf("503 %q: %s (%s), want %s", body, got, why, want)
		}
	}
	if got, _ := StateForHTTPAnswer(500, envoy+"connection failure"); got != StateUnknown {
		t.Errorf("a 500 is unknown whatever its body: %s", got)
	}
}
