// Package termsafe neutralises what a log or a client could put in a
// string to act on a terminal: C0 and C1 controls (ESC starts cursor
// moves, screen clears, OSC title and clipboard writes), DEL, invalid
// UTF-8 and the Unicode controls that reorder or break text (BiDi
// overrides and isolates, line and paragraph separators). Each becomes a
// visible escape (\x1b, \u202e), so what was hidden is seen instead.
// Newlines and tabs stay: tables and messages are made of them.
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// unsafe reports whether r must not reach a terminal raw.
func unsafe(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // BiDi marks, embeddings, overrides, isolates
	case r == 0x2028 || r == 0x2029:
		return true
	}
	return false
}

// String returns s with every unsafe character escaped. A string with
// none is returned as is, without copying.
func String(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	appendSafe(&b, s, false)
	return b.String()
}

// Line is String for a single line: newlines and tabs are escaped too.
func Line(s string) string {
	if clean(s) && !strings.ContainsAny(s, "\n\t") {
		return s
	}
	var b strings.Builder
	appendSafe(&b, s, true)
	return b.String()
}

func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 {
			return cleanSlow(s[i:])
		}
	}
	return true
}

func cleanSlow(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || unsafe(r) {
			return false
		}
	}
	return true
}

func appendSafe(b *strings.Builder, s string, line bool) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(b, `\x%02x`, s[i])
		case unsafe(r) || line && (r == '\n' || r == '\t'):
			if r < 0x100 {
				fmt.Fprintf(b, `\x%02x`, r)
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
}

// Styled is String for text the program styled itself: its SGR sequences
// (ESC [ digits ; m, which only set colours and weights) pass, every other
// escape is neutralised. The console's frame goes through it last.
func Styled(s string) string {
	if !strings.ContainsRune(s, 0x1b) {
		return String(s)
	}
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, 0x1b)
		if i < 0 {
			b.WriteString(String(s))
			break
		}
		b.WriteString(String(s[:i]))
		if n := sgrLen(s[i:]); n > 0 {
			b.WriteString(s[i : i+n])
			s = s[i+n:]
			continue
		}
		b.WriteString(`\x1b`)
		s = s[i+1:]
	}
	return b.String()
}

// sgrLen is the length of the SGR sequence s starts with, or 0.
func sgrLen(s string) int {
	if len(s) < 3 || s[1] != '[' {
		return 0
	}
	for i := 2; i < len(s) && i < 64; i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9' || c == ';' || c == ':':
		case c == 'm':
			return i + 1
		default:
			return 0
		}
	}
	return 0
}

// Writer escapes what passes through it, as String does, for text output
// (tables, Markdown, messages). Raw is the writer under it, for output
// that must stay exact (JSON: its encoder escapes what JSON must).
type Writer struct {
	Raw  io.Writer
	tail []byte // an incomplete UTF-8 sequence held for the next Write
}

// NewWriter wraps w.
func NewWriter(w io.Writer) *Writer { return &Writer{Raw: w} }

func (w *Writer) Write(p []byte) (int, error) {
	buf := append(w.tail, p...)
	w.tail = nil
	// Hold back a rune cut at the end of this write.
	if cut := incompleteTail(buf); cut > 0 {
		w.tail = append([]byte(nil), buf[len(buf)-cut:]...)
		buf = buf[:len(buf)-cut]
	}
	if _, err := io.WriteString(w.Raw, String(string(buf))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a held incomplete sequence, escaped.
func (w *Writer) Flush() error {
	if len(w.tail) == 0 {
		return nil
	}
	_, err := io.WriteString(w.Raw, String(string(w.tail)))
	w.tail = nil
	return err
}

// incompleteTail is how many bytes at the end of b start a UTF-8
// sequence that b does not finish.
func incompleteTail(b []byte) int {
	for n := 1; n <= 3 && n <= len(b); n++ {
		c := b[len(b)-n]
		if c < 0x80 {
			return 0
		}
		if c >= 0xc0 { // a leading byte
			need := 2
			switch {
			case c >= 0xf0:
				need = 4
			case c >= 0xe0:
				need = 3
			}
			if need > n {
				return n
			}
			return 0
		}
	}
	return 0
}
