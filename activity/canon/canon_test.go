package canon

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// normalise rounds numbers to float64 for comparison: canonical numbers
// are exact, so the float views of input and output must agree.
func normalise(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalise(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalise(e)
		}
	}
	return v
}

func TestTransform(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{` { "a" : [ 1 , 2 ] } `, `{"a":[1,2]}`},
		{`{"html":"<a&b>"}`, `{"html":"<a&b>"}`},
		{`"\u00e9\u0001\n\/"`, "\"é\\u0001\\n/\""},
		{`12345678901234567890123`, `12345678901234567890123`},
		{`1.0`, `1`},
		{`1e2`, `100`},
		{`1E+2`, `100`},
		{`0.50`, `0.5`},
		{`-0`, `0`},
		{`-0.0e10`, `0`},
		{`100e-2`, `1`},
		{`0.000001`, `0.000001`},
		{`0.0000001`, `1e-7`},
		{`1e21`, `1000000000000000000000`},
		{`1e41`, `1e+41`},
		{`1e20`, `100000000000000000000`},
		{`123.456e-1`, `12.3456`},
		{`-1.5e300`, `-1.5e+300`},
		{`[true,false,null]`, `[true,false,null]`},
		// U+1F600 sorts after U+FB01 in UTF-8, before it in UTF-16 (0xD83D < 0xFB01).
		{`{"\ufb01":1,"😀":2}`, `{"😀":2,"ﬁ":1}`},
	}
	for _, c := range cases {
		got, err := Transform([]byte(c.in))
		if err != nil {
			t.Errorf("Transform(%s): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("Transform(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestTransformRejects(t *testing.T) {
	cases := map[string]string{
		`{"a":1,"a":2}`:       "duplicate member",
		`{"x":{"a":1,"a":1}}`: `at /x (byte 15): duplicate member "a"`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"a":0}`: "duplicate member \"a\"",
		`"\ud800"`:       "lone surrogate",
		`"\udc00\ud800"`: "lone surrogate",
		"\"a\tb\"":       "control character",
		`[1,]`:           "invalid character",
		`{"a" 1}`:        "expected ':'",
		`tru`:            "invalid character",
		strings.Repeat("[", 600) + strings.Repeat("]", 600): "nested deeper",
		"\"\xff\"":     "invalid UTF-8",
		`{"a":1} {}`:   "trailing data",
		`{"a":`:        "unexpected end of input",
		`1e9999999999`: "exponent out of range",
	}
	for in, want := range cases {
		_, err := Transform([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Transform(%q) error = %v, want it to mention %q", in, err, want)
		}
	}
}

func TestNumberRejectsNonJSON(t *testing.T) {
	for _, s := range []string{"", "+1", ".5", "1.", "01", "0x10", "Inf", "NaN", "1e", "1.e3", "--1"} {
		if _, err := Number(s); err == nil {
			t.Errorf("Number(%q) accepted a non-JSON literal", s)
		}
	}
}

func TestMarshalIsStable(t *testing.T) {
	a, err := Marshal(map[string]any{"z": []int{3, 2}, "a": "x<y"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Transform(a)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) || string(a) != `{"a":"x<y","z":[3,2]}` {
		t.Fatalf("Marshal = %s, re-canonicalised = %s", a, b)
	}
}

// FuzzTransform checks Transform against encoding/json: it accepts only
// valid JSON, keeps the value, and its output is a fixed point.
func FuzzTransform(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.50,"x"]}`, `1e-7`, `"\u0000"`, `{"b":{"a":null}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Transform(data)
		if err != nil {
			if json.Valid(data) && !strings.Contains(err.Error(), "duplicate") && !strings.Contains(err.Error(), "surrogate") &&
				!strings.Contains(err.Error(), "nested") && !strings.Contains(err.Error(), "exponent") && !strings.Contains(err.Error(), "UTF-8") {
				t.Fatalf("rejected valid JSON %q: %v", data, err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		var a, b any
		if json.Unmarshal(data, &a) != nil || json.Unmarshal(out, &b) != nil {
			t.Fatalf("%q -> %q: not both parseable", data, out)
		}
		if !reflect.DeepEqual(normalise(a), normalise(b)) {
			t.Fatalf("value changed: %q -> %q", data, out)
		}
		// Canonical output is a fixed point.
		again, err := Transform(out)
		if err != nil {
			t.Fatalf("canonical output %q does not parse: %v", out, err)
		}
		if string(again) != string(out) {
			t.Fatalf("not a fixed point: %q -> %q", out, again)
		}
	})
}

// FuzzAppendString: the direct string encoder spells every string exactly
// as Marshal does, invalid UTF-8 and control characters included.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"uote\\", "\x00\x1f\t\n\r\b\f", "\xff\xfe", "\xed\xa0\x80", "é\u2028\u2029<>&", "\U0001F600"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %q, Marshal = %q", s, got, want)
		}
	})
}

// TestPlain: an integer past 40 digits, which Number writes in scientific
// form, comes back in plain digits (the same value); fractions, smaller
// numbers and integers past MaxPlainDigits are left as they are.
func TestPlain(t *testing.T) {
	const big = "12345678901234567890123456789012345678901234567890"
	for _, c := range []struct{ in, want string }{
		{big, big},
		{"-" + big, "-" + big},
		{"1e41", "1" + strings.Repeat("0", 41)},
		{"1e+2", "100"},
		{"-1.5e300", "-15" + strings.Repeat("0", 299)},
		{"0.5", "0.5"},
		{"1e-7", "1e-7"},
		{"1e1000", "1e+1000"},
		{"12345678901234567890", "12345678901234567890"},
	} {
		n, err := Number(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := Plain(n); got != c.want {
			t.Errorf("Plain(Number(%s)) = %s, want %s", c.in, got, c.want)
		}
	}
}
