// Package canon writes canonical JSON: the one byte form used for audit
// records, intent fingerprints and effect keys, so that two encodings of the
// same value can never hash differently.
//
// The form follows RFC 8785 (JCS) where it matters for hashing: object
// members sorted by UTF-16 code units, no insignificant whitespace, minimal
// string escaping (no HTML escaping), and one spelling per number. Unlike
// JCS, numbers are never rounded through float64: 12345678901234567890 stays
// exact, 1.0 and 1 and 1e0 all become 1, and 0.50 becomes 0.5. Duplicate
// member names and invalid UTF-8 are errors, not silently resolved.
package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Marshal encodes v with encoding/json and returns its canonical form.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return Transform(buf.Bytes())
}

// Transform returns the canonical form of the JSON document in data. It
// rejects invalid JSON, trailing data, duplicate member names, invalid
// UTF-8 and lone surrogates, naming the JSON Pointer where it stopped.
func Transform(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("canon: invalid UTF-8")
	}
	p := parser{data: data}
	out := bytes.NewBuffer(make([]byte, 0, len(data)))
	p.skipSpace()
	if err := p.value(out, nil, 0); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, errors.New("canon: trailing data after JSON value")
	}
	return out.Bytes(), nil
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 512

// parser is a single-pass JSON reader that writes the canonical form as it
// goes; only object members are buffered, to be sorted.
type parser struct {
	data []byte
	pos  int
}

func (p *parser) errorf(path pointer, format string, args ...any) error {
	return fmt.Errorf("canon: at %s (byte %d): %s", path, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(out *bytes.Buffer, path pointer, depth int) error {
	if depth > maxDepth {
		return p.errorf(path, "nested deeper than %d", maxDepth)
	}
	if p.pos >= len(p.data) {
		return p.errorf(path, "unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(out, path, depth)
	case c == '[':
		return p.array(out, path, depth)
	case c == '"':
		s, err := p.str(path)
		if err != nil {
			return err
		}
		writeString(out, s)
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.pos
		for p.pos < len(p.data) && strings.IndexByte("+-.eE0123456789", p.data[p.pos]) >= 0 {
			p.pos++
		}
		n, err := Number(string(p.data[start:p.pos]))
		if err != nil {
			return p.errorf(path, "%v", err)
		}
		out.WriteString(n)
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(p.data[p.pos:], []byte(lit)) {
				p.pos += len(lit)
				out.WriteString(lit)
				return nil
			}
		}
		return p.errorf(path, "invalid character %q", c)
	}
	return nil
}

func (p *parser) object(out *bytes.Buffer, path pointer, depth int) error {
	p.pos++ // {
	type member struct {
		key        string
		start, end int // value bytes in scratch
	}
	var members []member
	var seen map[string]bool // only for large objects
	var scratch bytes.Buffer
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		out.WriteString("{}")
		return nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return p.errorf(path, "expected a member name")
		}
		key, err := p.str(path)
		if err != nil {
			return err
		}
		if seen == nil && len(members) >= 8 {
			seen = make(map[string]bool, 2*len(members))
			for _, m := range members {
				seen[m.key] = true
			}
		}
		dup := seen[key]
		for i := 0; seen == nil && i < len(members); i++ {
			dup = dup || members[i].key == key
		}
		if dup {
			return p.errorf(path, "duplicate member %q", key)
		}
		if seen != nil {
			seen[key] = true
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return p.errorf(path, "expected ':' after member %q", key)
		}
		p.pos++
		p.skipSpace()
		start := scratch.Len()
		if err := p.value(&scratch, path.push(key), depth+1); err != nil {
			return err
		}
		members = append(members, member{key, start, scratch.Len()})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return p.errorf(path, "unexpected end of input in object")
		}
		if p.data[p.pos] == '}' {
			p.pos++
			break
		}
		if p.data[p.pos] != ',' {
			return p.errorf(path, "expected ',' or '}' after member %q", key)
		}
		p.pos++
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.key, b.key) })
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			out.WriteByte(',')
		}
		writeString(out, m.key)
		out.WriteByte(':')
		out.Write(scratch.Bytes()[m.start:m.end])
	}
	out.WriteByte('}')
	return nil
}

func (p *parser) array(out *bytes.Buffer, path pointer, depth int) error {
	p.pos++ // [
	out.WriteByte('[')
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		out.WriteByte(']')
		return nil
	}
	for i := 0; ; i++ {
		if i > 0 {
			out.WriteByte(',')
		}
		p.skipSpace()
		if err := p.value(out, path.push(strconv.Itoa(i)), depth+1); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return p.errorf(path, "unexpected end of input in array")
		}
		if p.data[p.pos] == ']' {
			p.pos++
			out.WriteByte(']')
			return nil
		}
		if p.data[p.pos] != ',' {
			return p.errorf(path, "expected ',' or ']' in array")
		}
		p.pos++
	}
}

// str reads a JSON string starting at its opening quote and returns its
// value. Raw control characters and lone surrogates are errors.
func (p *parser) str(path pointer) (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := string(p.data[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.errorf(path, "control character in string")
		}
		p.pos++
	}
	var b strings.Builder
	b.Write(p.data[start:p.pos])
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return b.String(), nil
		case c < 0x20:
			return "", p.errorf(path, "control character in string")
		case c != '\\':
			b.WriteByte(c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.data) {
			break
		}
		esc := p.data[p.pos+1]
		p.pos += 2
		switch esc {
		case '"', '\\', '/':
			b.WriteByte(esc)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, err := p.unicodeEscape(path)
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
		default:
			return "", p.errorf(path, "invalid escape \\%c", esc)
		}
	}
	return "", p.errorf(path, "unterminated string")
}

// unicodeEscape reads the hex digits after \u (and a following low
// surrogate escape when the first is a high surrogate).
func (p *parser) unicodeEscape(path pointer) (rune, error) {
	r, ok := p.hex4()
	if !ok {
		return 0, p.errorf(path, "invalid \\u escape")
	}
	if !utf16.IsSurrogate(r) {
		return r, nil
	}
	if r < 0xDC00 && bytes.HasPrefix(p.data[p.pos:], []byte(`\u`)) {
		p.pos += 2
		if lo, ok := p.hex4(); ok {
			if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
				return dec, nil
			}
		}
	}
	return 0, p.errorf(path, "lone surrogate in \\u escape")
}

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(v), true
}

// compareUTF16 orders member names by UTF-16 code units, as RFC 8785
// §3.2.3 requires. It differs from byte order only between a character
// above U+E000 and a supplementary one, whose first unit is a surrogate.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmpUnit(firstUnit(ra), firstUnit(rb), ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func firstUnit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	hi, _ := utf16.EncodeRune(r)
	return hi
}

func cmpUnit(ua, ub, ra, rb rune) int {
	if ua != ub {
		return int(ua - ub)
	}
	return int(ra - rb) // both supplementary with the same high surrogate
}

const hexDigits = "0123456789abcdef"

// writeString writes s as a JSON string with the minimal escaping of
// RFC 8785 §3.2.2.2: only '"', '\\' and control characters are escaped.
func writeString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			out.WriteString(`\"`)
		case c == '\\':
			out.WriteString(`\\`)
		case c >= 0x20:
			out.WriteByte(c)
		case c == '\b':
			out.WriteString(`\b`)
		case c == '\t':
			out.WriteString(`\t`)
		case c == '\n':
			out.WriteString(`\n`)
		case c == '\f':
			out.WriteString(`\f`)
		case c == '\r':
			out.WriteString(`\r`)
		default:
			out.WriteString(`\u00`)
			out.WriteByte(hexDigits[c>>4])
			out.WriteByte(hexDigits[c&0xf])
		}
	}
	out.WriteByte('"')
}

// Number returns the one canonical spelling of a JSON number literal, exact
// to the last digit: integers in plain decimal, fractions as the shortest
// exact decimal, with an exponent only for integers of more than 40 digits
// (room for any 128-bit id) or fractions below 1e-6 (ECMAScript's threshold,
// so common values match RFC 8785).
func Number(lit string) (string, error) {
	if !isJSONNumber(lit) {
		return "", fmt.Errorf("invalid number %q", lit)
	}
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, exp := lit, 0
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
		if err != nil || e > 1e9 || e < -1e9 {
			return "", fmt.Errorf("number %q: exponent out of range", lit)
		}
		mant, exp = lit[:i], e
	}
	// digits × 10^exp, with digits free of the decimal point.
	digits := mant
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		digits = mant[:i] + mant[i+1:]
		exp -= len(mant) - i - 1
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil // -0 and 0.000 are both 0
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	digits = trimmed
	s := formatDecimal(digits, exp)
	if neg {
		s = "-" + s
	}
	return s, nil
}

// formatDecimal writes digits × 10^exp (digits has no leading or trailing
// zeros).
func formatDecimal(digits string, exp int) string {
	// Position of the decimal point relative to the start of digits.
	point := len(digits) + exp
	switch {
	case exp >= 0 && point <= 40:
		return digits + strings.Repeat("0", exp)
	case exp < 0 && point > 0:
		return digits[:point] + "." + digits[point:]
	case exp < 0 && point > -6:
		return "0." + strings.Repeat("0", -point) + digits
	}
	// Scientific: d.ddd e±x
	sci := point - 1
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	sign := "+"
	if sci < 0 {
		sign = "-"
		sci = -sci
	}
	return m + "e" + sign + strconv.Itoa(sci)
}

// isJSONNumber reports whether s matches the JSON number grammar
// (RFC 8259 §6): -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(s)
}

func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// pointer is the JSON Pointer (RFC 6901) of the value being read; it is
// only rendered when an error names it.
type pointer []string

func (p pointer) push(token string) pointer { return append(p[:len(p):len(p)], token) }

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func (p pointer) String() string {
	if len(p) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range p {
		b.WriteByte('/')
		pointerEscaper.WriteString(&b, t)
	}
	return b.String()
}
