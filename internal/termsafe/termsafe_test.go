package termsafe

import (
	"bytes"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"deploy_release":        "deploy_release",
		"naïve café 日本":         "naïve café 日本",
		"a\tb\nc":               "a\tb\nc",
		"\x1b]0;pwned\x07title": `\x1b]0;pwned\x07title`,
		"\x1b[2J\x1b[H":         `\x1b[2J\x1b[H`,
		"evil\u202egnp.exe":     `evil\u202egnp.exe`,
		"\u2066x\u2069 \u200f":  `\u2066x\u2069 \u200f`,
		"\u009b31m c1":          `\x9b31m c1`,
		"bad \xff\xfe utf8":     `bad \xff\xfe utf8`,
		"cr\roverwrite\x7f":     `cr\x0doverwrite\x7f`,
		"line\u2028sep":         `line\u2028sep`,
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Line("a\nb\tc"); got != `a\x0ab\x09c` {
		t.Errorf("Line: %q", got)
	}
}

func TestStyled(t *testing.T) {
	in := "\x1b[1;38;5;196mred\x1b[0m \x1b]8;;http://x\x07link \x1b[2J"
	want := "\x1b[1;38;5;196mred\x1b[0m " + `\x1b]8;;http://x\x07link \x1b[2J`
	if got := Styled(in); got != want {
		t.Errorf("Styled:\n got %q\nwant %q", got, want)
	}
}

// TestWriterSplitRunes: a rune cut between two writes is not mistaken for
// invalid UTF-8.
func TestWriterSplitRunes(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	s := "café \u202e日本\x1b!"
	for i := 0; i < len(s); i++ {
		w.Write([]byte{s[i]})
	}
	w.Flush()
	if got, want := out.String(), String(s); got != want || strings.ContainsRune(got, 0x1b) {
		t.Fatalf("byte-by-byte %q, want %q", got, want)
	}
}

func FuzzString(f *testing.F) {
	f.Add("\x1b]0;x\x07\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{String(s), Line(s), Styled(s)} {
			for _, r := range out {
				if unsafe(r) && r != 0x1b {
					t.Fatalf("%q: %q left in %q", s, r, out)
				}
			}
		}
		if strings.ContainsRune(String(s), 0x1b) {
			t.Fatalf("%q: ESC left", s)
		}
	})
}
