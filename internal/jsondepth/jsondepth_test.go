package jsondepth

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`{"a":[1,{"b":2}]}`, true},
		{strings.Repeat("[", Max) + strings.Repeat("]", Max), true},
		{strings.Repeat("[", Max+1) + strings.Repeat("]", Max+1), false},
		{`"` + strings.Repeat("[", 5000) + `"`, true},      // inside a string
		{`"\"` + strings.Repeat("{", 5000) + `"`, true},    // after an escaped quote
		{`{"k":"\\"}` + strings.Repeat("[", Max+1), false}, // an escaped backslash ends
	} {
		if err := Check([]byte(c.in), Max); (err == nil) != c.ok {
			t.Errorf("%.40q…: %v, want ok %v", c.in, err, c.ok)
		}
	}
}
