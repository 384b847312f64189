package importers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A TextFormat is one plain-text line format of a producer whose mapping
// reads JSON: Envoy's default format, nginx's combined, Traefik's common
// log format. A line is matched whole; each named group is a key of the
// record the mapping's pointers then read ("/start_time"), so one mapping
// holds one producer's rules for its JSON and its text alike.
type TextFormat struct {
	Name    string `toml:"name"`    // what the format is, for messages ("Envoy's default format")
	Pattern string `toml:"pattern"` // a regular expression (RE2 syntax) a whole line matches
	// Escapes is how the producer writes bytes it escapes inside a value:
	// "x" for \xHH (nginx's default escaping), "backslash" for \" and \\
	// (Traefik); empty: values are written as they are (Envoy).
	Escapes string `toml:"escapes"`
	// Detect: a line of this format names the producer when the format
	// is detected. Off for a format another producer writes too (the
	// combined format: nginx's, and Traefik's genericCLF).
	Detect bool `toml:"detect"`

	re    *regexp.Regexp
	names []string
}

// compile checks the format and prepares its pattern.
func (t *TextFormat) compile() error {
	if t.Name == "" {
		return fmt.Errorf("text format: name is required")
	}
	re, err := regexp.Compile(t.Pattern)
	if err != nil {
		return fmt.Errorf("text format %q: pattern: %w", t.Name, err)
	}
	names := re.SubexpNames()
	named := 0
	for _, n := range names {
		if n != "" {
			named++
		}
	}
	if named == 0 {
		return fmt.Errorf("text format %q: the pattern names no group: nothing would be read", t.Name)
	}
	switch t.Escapes {
	case "", "x", "backslash":
	default:
		return fmt.Errorf("text format %q: escapes %q: one of x, backslash or none", t.Name, t.Escapes)
	}
	t.re, t.names = re, names
	return nil
}

// record reads a line in this format: the named groups by name (a group
// that took no part is "", as the producer's "-" reads), or false when
// the line is not in this format.
func (t *TextFormat) record(line string) (map[string]any, bool) {
	m := t.re.FindStringSubmatch(line)
	if m == nil {
		return nil, false
	}
	doc := make(map[string]any, len(t.names))
	for i, n := range t.names {
		if n != "" {
			doc[n] = t.unescape(m[i])
		}
	}
	return doc, true
}

// unescape undoes the producer's escaping; what is not valid UTF-8
// afterwards is replaced, as every string the store keeps must be.
func (t *TextFormat) unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch {
		case t.Escapes == "x" && s[i+1] == 'x' && i+4 <= len(s) && hexByte(s[i+2:i+4]) >= 0:
			b.WriteByte(byte(hexByte(s[i+2 : i+4])))
			i += 3
		case t.Escapes == "backslash" && (s[i+1] == '"' || s[i+1] == '\\'):
			b.WriteByte(s[i+1])
			i++
		default:
			b.WriteByte(c)
		}
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

// hexByte reads two hex digits, or returns -1.
func hexByte(s string) int {
	if len(s) != 2 {
		return -1
	}
	v, err := strconv.ParseUint(s, 16, 8)
	if err != nil {
		return -1
	}
	return int(v)
}

// textRecord reads a line through the first of the mapping's text formats
// it is in.
func (m *Mapping) textRecord(line []byte) (map[string]any, bool) {
	s := strings.TrimSpace(string(line))
	for i := range m.Text {
		if doc, ok := m.Text[i].record(s); ok {
			return doc, true
		}
	}
	return nil, false
}

// reads reports whether a line is one the mapping reads as it is: a JSON
// object (not Docker's wrapper of a line), or a line of one of its text
// formats.
func (m *Mapping) reads(line []byte) bool {
	l := bytes.TrimSpace(line)
	if len(l) > 0 && l[0] == '{' {
		_, wrapped, _ := unwrap(l)
		return !wrapped && json.Valid(l)
	}
	_, ok := m.textRecord(l)
	return ok
}

// textFormatNames lists the mapping's text formats, for messages.
func (m *Mapping) textFormatNames() string {
	names := make([]string, len(m.Text))
	for i, t := range m.Text {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}
