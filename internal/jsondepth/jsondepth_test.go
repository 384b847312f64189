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

// FuzzCheck: the fast scan agrees with a byte-by-byte one.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"a":"\\\"[[[","b":[[1]]}`), 2)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max < 0 || max > 64 {
			return
		}
		if (Check(data, max) == nil) != (slowCheck(data, max) == nil) {
			t.Fatalf("%q max %d: fast %v, slow %v", data, max, Check(data, max), slowCheck(data, max))
		}
	})
}

func slowCheck(data []byte, max int) error {
	depth, inString, escaped := 0, false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > max {
				return errDeep
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}

var errDeep = errorString("deep")

type errorString string

func (e errorString) Error() string { return string(e) }
