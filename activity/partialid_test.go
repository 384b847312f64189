package activity_test

import (
	"errors"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
)

func TestPartialIDPick(t *testing.T) {
	ids := []string{"act_01JD8Z2K3M4N5P6Q7R8S9VF4KC", "act_01JD8Z2K3M4N5P6Q7R8S9T0V1W", "act_01KB0Q4Y7D3V8W6E2N5R1T9H4C"}
	for typed, want := range map[string]string{
		"act_01JD8Z2K3M4N5P6Q7R8S9VF4KC": ids[0], // whole
		"9VF4KC":                         ids[0], // the tail a screen shows
		"act_…9VF4KC":                    ids[0], // the short form itself
		"act_...t0v1w":                   ids[1], // ASCII dots, any case
		"act_01KB":                       ids[2], // a prefix
	} {
		got, err := activity.ParsePartialID(typed).Pick("execution", ids)
		if err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", typed, got, err, want)
		}
	}
	if _, err := activity.ParsePartialID("act_01JD").Pick("execution", ids); !errors.Is(err, activity.ErrAmbiguous) {
		t.Errorf("an ambiguous prefix: %v", err)
	}
	if _, err := activity.ParsePartialID("ZZZZZZ").Pick("execution", ids); !errors.Is(err, activity.ErrNotFound) {
		t.Errorf("no match: %v", err)
	}
	if _, err := activity.ParsePartialID("").Pick("execution", ids); !errors.Is(err, activity.ErrNotFound) {
		t.Errorf("an empty id must match nothing: %v", err)
	}
}

func TestPartialIDExactIsAnID(t *testing.T) {
	for typed, want := range map[string]bool{
		"act_01JD8Z2K3M4N5P6Q7R8S9VF4KC": true,
		"act_01jd8z2k3m4n5p6q7r8s9vf4kc": false, // lower case: looked up, not taken as is
		"act_01JD8Z2K3M4N5P6Q7R8S9VF4K…": false,
		"act_01JD8Z2K3M4N5P6Q7R8S9VF4KU": false, // U is not Crockford base32
	} {
		if got := activity.ParsePartialID(typed).Exact("act_"); got != want {
			t.Errorf("%q: Exact %v, want %v", typed, got, want)
		}
	}
}
