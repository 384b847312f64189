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
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
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
	return AppendTransform(make([]byte, 0, len(data)), data)
}

// AppendTransform appends the canonical form of data to dst, as Transform
// returns it.
func AppendTransform(dst, data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("canon: invalid UTF-8")
	}
	p := parsers.Get().(*parser)
	defer p.release()
	p.data = data
	out := bytes.NewBuffer(dst)
	p.skipSpace()
	if err := p.value(out, 0); err != nil {
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
	data   []byte
	pos    int
	path   []segment // where the parser is, for errors
	levels []*level  // member buffers, one per object depth
}

// parsers keeps parsers with their member buffers between documents: a
// log writer transforms every record it appends.
var parsers = sync.Pool{New: func() any { return new(parser) }}

// release returns p to the pool, dropping every reference into the
// document so the pool does not keep it alive.
func (p *parser) release() {
	p.data, p.pos, p.path = nil, 0, p.path[:0]
	for _, lv := range p.levels {
		clear(lv.members[:cap(lv.members)])
		clear(lv.seen)
		if lv.scratch.Cap() > 1<<20 {
			lv.scratch = bytes.Buffer{} // do not pin a huge document's buffer
		}
	}
	parsers.Put(p)
}

// segment is one step of the path: a member name, or an array index when
// index >= 0.
type segment struct {
	key   string
	index int
}

type member struct {
	key        string
	start, end int // value bytes in the level's scratch
}

type level struct {
	scratch bytes.Buffer
	members []member
	seen    map[string]bool // only for objects of more than 8 members
}

// pointer renders the path as a JSON Pointer.
func (p *parser) pointer() pointer {
	ptr := make(pointer, len(p.path))
	for i, s := range p.path {
		if s.index >= 0 {
			ptr[i] = strconv.Itoa(s.index)
		} else {
			ptr[i] = s.key
		}
	}
	return ptr
}

// canonicalInteger reports whether lit is an integer already in canonical
// form (no sign but a leading minus, no leading zero, no fraction or
// exponent, not -0, at most 40 digits, past which Number switches to
// scientific notation), which Number would return unchanged.
func canonicalInteger(lit []byte) bool {
	if len(lit) > 0 && lit[0] == '-' {
		lit = lit[1:]
		if len(lit) == 1 && lit[0] == '0' {
			return false
		}
	}
	if len(lit) == 0 || len(lit) > 40 || len(lit) > 1 && lit[0] == '0' {
		return false
	}
	for _, c := range lit {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("canon: at %s (byte %d): %s", p.pointer(), p.pos, fmt.Sprintf(format, args...))
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

func (p *parser) value(out *bytes.Buffer, depth int) error {
	if depth > maxDepth {
		return p.errorf("nested deeper than %d", maxDepth)
	}
	if p.pos >= len(p.data) {
		return p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(out, depth)
	case c == '[':
		return p.array(out, depth)
	case c == '"':
		start := p.pos
		s, err := p.str()
		if err != nil {
			return err
		}
		if raw := p.data[start:p.pos]; len(raw) == len(s)+2 {
			out.Write(raw) // no escapes: already canonical
		} else {
			writeString(out, s)
		}
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.pos
		for p.pos < len(p.data) && strings.IndexByte("+-.eE0123456789", p.data[p.pos]) >= 0 {
			p.pos++
		}
		if lit := p.data[start:p.pos]; canonicalInteger(lit) {
			out.Write(lit)
			return nil
		}
		n, err := Number(string(p.data[start:p.pos]))
		if err != nil {
			return p.errorf("%v", err)
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
		return p.errorf("invalid character %q", c)
	}
	return nil
}

func (p *parser) object(out *bytes.Buffer, depth int) error {
	p.pos++ // {
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		out.WriteString("{}")
		return nil
	}
	// Members are buffered to be sorted; the buffers are the parser's,
	// one per depth, so a document costs a few allocations, not one per
	// object.
	for len(p.levels) <= depth {
		p.levels = append(p.levels, &level{})
	}
	lv := p.levels[depth]
	lv.scratch.Reset()
	lv.members = lv.members[:0]
	clear(lv.seen)
	sorted := true
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return p.errorf("expected a member name")
		}
		key, err := p.str()
		if err != nil {
			return err
		}
		if len(lv.members) == 8 {
			if lv.seen == nil {
				lv.seen = make(map[string]bool, 16)
			}
			for _, m := range lv.members {
				lv.seen[m.key] = true
			}
		}
		dup := false
		if len(lv.members) >= 8 {
			dup = lv.seen[key]
			lv.seen[key] = true
		} else {
			for _, m := range lv.members {
				dup = dup || m.key == key
			}
		}
		if dup {
			return p.errorf("duplicate member %q", key)
		}
		if n := len(lv.members); n > 0 && compareUTF16(lv.members[n-1].key, key) > 0 {
			sorted = false
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return p.errorf("expected ':' after member %q", key)
		}
		p.pos++
		p.skipSpace()
		start := lv.scratch.Len()
		p.path = append(p.path, segment{key: key, index: -1})
		if err := p.value(&lv.scratch, depth+1); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
		lv.members = append(lv.members, member{key, start, lv.scratch.Len()})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return p.errorf("unexpected end of input in object")
		}
		if p.data[p.pos] == '}' {
			p.pos++
			break
		}
		if p.data[p.pos] != ',' {
			return p.errorf("expected ',' or '}' after member %q", key)
		}
		p.pos++
	}
	if !sorted {
		slices.SortFunc(lv.members, func(a, b member) int { return compareUTF16(a.key, b.key) })
	}
	out.WriteByte('{')
	for i, m := range lv.members {
		if i > 0 {
			out.WriteByte(',')
		}
		writeString(out, m.key)
		out.WriteByte(':')
		out.Write(lv.scratch.Bytes()[m.start:m.end])
	}
	out.WriteByte('}')
	return nil
}

func (p *parser) array(out *bytes.Buffer, depth int) error {
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
		p.path = append(p.path, segment{index: i})
		if err := p.value(out, depth+1); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
		p.skipSpace()
		if p.pos >= len(p.data) {
			return p.errorf("unexpected end of input in array")
		}
		if p.data[p.pos] == ']' {
			p.pos++
			out.WriteByte(']')
			return nil
		}
		if p.data[p.pos] != ',' {
			return p.errorf("expected ',' or ']' in array")
		}
		p.pos++
	}
}

// str reads a JSON string starting at its opening quote and returns its
// value. Raw control characters and lone surrogates are errors.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			// No copy: the string lives only while the document is
			// parsed (keys to sort, values to write), and data is not
			// changed meanwhile.
			s := unsafe.String(unsafe.SliceData(p.data[start:p.pos]), p.pos-start)
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.errorf("control character in string")
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
			return "", p.errorf("control character in string")
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
			r, err := p.unicodeEscape()
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
		default:
			return "", p.errorf("invalid escape \\%c", esc)
		}
	}
	return "", p.errorf("unterminated string")
}

// unicodeEscape reads the hex digits after \u (and a following low
// surrogate escape when the first is a high surrogate).
func (p *parser) unicodeEscape() (rune, error) {
	r, ok := p.hex4()
	if !ok {
		return 0, p.errorf("invalid \\u escape")
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
	return 0, p.errorf("lone surrogate in \\u escape")
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
	out.Write(AppendString(out.AvailableBuffer(), s))
}

// AppendString appends s as a canonical JSON string, the spelling Marshal
// gives it: only '"', '\\' and control characters are escaped, and each
// byte of invalid UTF-8 becomes U+FFFD, as encoding/json does. For types
// that write their canonical form directly instead of through Marshal.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch {
		case c == '"':
			dst = append(dst, '\\', '"')
		case c == '\\':
			dst = append(dst, '\\', '\\')
		case c >= 0x20:
			dst = append(dst, c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
	}
	return append(dst, '"')
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

// MaxPlainDigits is the longest integer Plain writes out digit by digit.
const MaxPlainDigits = 1000

// Plain returns a canonical number (Number's output) with an integer of
// more than 40 digits written in plain decimal, as a program that reads
// JSON integers into a big integer type expects (1.2345e+49 reads as a
// float or not at all), up to MaxPlainDigits; any other number as given.
// It is the same value, and one spelling for it: 1e50 and 10…0 both come
// out as 10…0.
func Plain(n string) string {
	i := strings.Index(n, "e+")
	if i < 0 {
		return n
	}
	exp, err := strconv.Atoi(n[i+2:])
	if err != nil || exp >= MaxPlainDigits {
		return n
	}
	sign, mant := "", n[:i]
	if strings.HasPrefix(mant, "-") {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	if len(digits) > exp+1 {
		return n // a fraction: Number writes none in scientific form, but keep it whole
	}
	return sign + digits + strings.Repeat("0", exp+1-len(digits))
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
