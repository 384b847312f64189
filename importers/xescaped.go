package importers

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// JSON lines in nginx's default escaping. A log_format written as JSON
// without escape=json (the parameter came in nginx 1.11.8; many configs
// still lack it) escapes each variable's `"`, `\`, bytes below 0x20 and
// above 0x7E as \xHH (ngx_http_log_module: "For default escaping,
// characters “"”, “\”, and other characters with values less than 32 or
// above 126 are escaped as “\xXX”"), which no JSON reader takes: a logged
// MCP request body is all \x22. The mapping that says json_escapes = "x"
// reads such lines with the escapes undone.

// xEscapedJSON rewrites a line of JSON whose strings carry \xHH escapes
// as JSON: \x22 as \", \x5C as \\, other bytes below 0x20 and 0x7F as
// \u00HH, bytes above 0x7F as themselves (the UTF-8 the client sent, made
// valid if it was not). False if a string holds any other backslash (not
// this escaping) or the result is not JSON.
func xEscapedJSON(line []byte) ([]byte, bool) {
	if !bytes.Contains(line, []byte(`\x`)) {
		return nil, false
	}
	out := make([]byte, 0, len(line))
	in := false // inside a string
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			in = !in
			out = append(out, c)
		case c != '\\' || !in:
			out = append(out, c)
		case i+3 < len(line) && line[i+1] == 'x' && hexByte(string(line[i+2:i+4])) >= 0:
			b := byte(hexByte(string(line[i+2 : i+4])))
			switch {
			case b == '"' || b == '\\':
				out = append(out, '\\', b)
			case b < 0x20 || b == 0x7f:
				out = append(out, `\u00`...)
				out = append(out, line[i+2:i+4]...)
			default:
				out = append(out, b)
			}
			i += 3
		default:
			return nil, false
		}
	}
	if !utf8.Valid(out) {
		out = bytes.ToValidUTF8(out, []byte("\uFFFD"))
	}
	if !json.Valid(out) {
		return nil, false
	}
	return out, true
}
