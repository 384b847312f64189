package activity

// Secrets written as text inside a value, where a producer wrote
// arguments as a string: JSON encoded again, a form, a Python dict's
// repr, a header line, a command line, a URL with a password (a DSN), a
// PEM private key. Every scan is linear in the string (RE2, one pass):
// a value may be megabytes.

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
)

var (
	// secretName is a name and what separates it from its value:
	// `password=`, `'api_key': `, `"token": `, `Authorization: `,
	// `--token=`; or a command line's flag and its space (`--password x`).
	secretName = regexp.MustCompile(`([A-Za-z][A-Za-z0-9_\-]*)(["']?\s*[:=]\s*)|--([A-Za-z][A-Za-z0-9_\-]*)( +)`)
	// authScheme starts a header value whose token follows ("Bearer x").
	authScheme = regexp.MustCompile(`^(?i:bearer|basic|digest|token|negotiate)\s+`)
	// urlPassword is a URL's userinfo password: scheme://user:password@.
	urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)([^@/\s]+)@`)
	// mysqlPassword is the MySQL clients' attached password (-pSECRET, as
	// their docs give it), on their command lines only: -p is a port or
	// a parents flag elsewhere.
	mysqlPassword = regexp.MustCompile(`(\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n;&|]*?\s-p)('[^']*'|"[^"]*"|[^\s'";&|]+)`)
	// pathToken is a credential a service takes in its URL's path, where
	// a proxy's request line records it: Telegram's bot token
	// (/bot<id>:<secret>, core.telegram.org/bots/api "Making requests"),
	// Slack's incoming webhook (/services/T…/B…/<secret>, api.slack.com
	// "Sending messages using incoming webhooks"), Discord's webhook
	// (/api/webhooks/<id>/<token>, discord.com/developers "Execute
	// Webhook"). The public part before the secret is kept: two bots or
	// two webhooks stay two targets.
	pathToken = regexp.MustCompile(`(/bot[0-9]+:)[A-Za-z0-9_\-]{20,}|(/services/T[A-Z0-9]+/B[A-Z0-9]+/)[A-Za-z0-9]{16,}|(/api/webhooks/[0-9]+/)[A-Za-z0-9_.\-]{20,}`)
	// privateKey is a PEM private key, whatever field holds it.
	privateKey = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`)
	// wholeLine names the headers whose value runs to the end of the line
	// ("Cookie: a=1; session=…").
	wholeLine = map[string]bool{"cookie": true, "setcookie": true, "authorization": true, "proxyauthorization": true}
	// ambiguous names are secrets as a field's name, and in a form or an
	// environment (pass=…), but too common as words of prose to be taken
	// for one before a colon ("pass: 3, fail: 0").
	ambiguous = map[string]bool{"pass": true, "auth": true, "otp": true}
)

// textSecret reports whether a name found in text, before sep, says its
// value is a secret: a quoted name is a key, not a word of prose.
func textSecret(name, sep string, quoted bool) bool {
	return SecretField(name) && (quoted || !strings.Contains(sep, ":") || !ambiguous[nameNorm.Replace(strings.ToLower(name))])
}

// headerAt reports whether the name at i starts a header: at a line's
// start, after blanks or a quote ("curl -H 'Cookie: …'"), or after a
// header flag; not a word of prose ("Card authorization: …").
func headerAt(s string, i int) bool {
	// Only the 64 bytes before it: a header's lead ("curl -H '") is
	// short, and a scan back to the line's start for each name would make
	// a long line of names quadratic.
	from := max(i-64, 0)
	begin := from + strings.LastIndexAny(s[from:i], "\r\n") + 1
	before := strings.TrimRight(s[begin:i], " \t'\"")
	return before == "" || strings.HasSuffix(before, "-H") || strings.HasSuffix(before, "--header")
}

// hinted reports whether s holds any substring a secret's name, a URL's
// password or a MySQL client's needs: a value without one is passed over
// unscanned.
func hinted(s string) bool {
	lower := bytes.ToLower([]byte(s))
	for _, h := range secretHints {
		if bytes.Contains(lower, h) {
			return true
		}
	}
	return bytes.Contains(lower, []byte("mysql")) || bytes.Contains(lower, []byte("mariadb")) || pathHinted(s)
}

// pathHinted reports whether s may hold a pathToken.
func pathHinted(s string) bool {
	return strings.Contains(s, "/bot") || strings.Contains(s, "/services/T") || strings.Contains(s, "/webhooks/")
}

// redactText returns s with the secrets it holds as text redacted, and
// whether there were any.
func redactText(s string) (string, bool) {
	if !hinted(s) {
		return s, false
	}
	if t := strings.TrimSpace(s); len(t) > 1 && (t[0] == '{' || t[0] == '[') {
		dec := json.NewDecoder(strings.NewReader(t))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) == nil && !dec.More() {
			if _, changed := redactValue(v); !changed {
				return s, false
			}
			b, err := json.Marshal(v)
			return string(b), err == nil
		}
	}
	out, changed := s, false
	if privateKey.MatchString(out) {
		out, changed = privateKey.ReplaceAllLiteralString(out, RedactedValue), true
	}
	if r, ok := redactPairs(out); ok {
		out, changed = r, true
	}
	if mysqlPassword.MatchString(out) {
		out, changed = mysqlPassword.ReplaceAllString(out, "${1}"+RedactedValue), true
	}
	if urlPassword.MatchString(out) {
		out, changed = urlPassword.ReplaceAllString(out, "${1}"+RedactedValue+"@"), true
	}
	if pathHinted(out) && pathToken.MatchString(out) {
		out, changed = pathToken.ReplaceAllString(out, "${1}${2}${3}"+RedactedPath), true
	}
	return out, changed
}

// RedactedPath replaces a credential in a URL's path (pathToken).
const RedactedPath = "[redacted]"

// redactPairs redacts the value after every secret's name in s, one
// match at a time.
func redactPairs(s string) (string, bool) {
	var b strings.Builder
	last, pos, changed := 0, 0, false
	for pos < len(s) {
		m := secretName.FindStringSubmatchIndex(s[pos:])
		if m == nil {
			break
		}
		for i := range m {
			if m[i] >= 0 {
				m[i] += pos
			}
		}
		name, sep := m[2], m[3]
		if name < 0 {
			name, sep = m[6], m[7] // the flag form
		}
		pos = m[1]
		n := s[name:sep]
		quoted := name > 0 && (s[name-1] == '"' || s[name-1] == '\'')
		if len(n) < 3 || !textSecret(n, s[sep:m[1]], quoted) { // no secret's name is shorter ("pwd")
			continue
		}
		from := m[1]
		to := valueEnd(s, from)
		// A header's value runs to its line's end ("Cookie: a=1; b=2"), or
		// to the quote it is in; not a word of prose's.
		if wholeLine[nameNorm.Replace(strings.ToLower(n))] && strings.Contains(s[sep:m[1]], ":") && headerAt(s, name) {
			to = lineEnd(s, from)
			if quoted {
				if j := strings.IndexByte(s[from:to], s[name-1]); j >= 0 {
					to = from + j
				}
			}
		}
		if to == from {
			continue
		}
		if q := s[from]; q == '"' || q == '\'' { // the quotes stay
			from++
			if to > from && s[to-1] == q {
				to--
			}
		}
		b.WriteString(s[last:from])
		b.WriteString(RedactedValue)
		last, pos, changed = to, max(to, pos), true
	}
	if !changed {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// valueEnd is where the value that starts at i ends: its closing quote
// (past escaped ones), or the first space or delimiter (after an auth
// scheme's word).
func valueEnd(s string, i int) int {
	if i >= len(s) {
		return i
	}
	if q := s[i]; q == '"' || q == '\'' {
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case q:
				return j + 1
			}
		}
		return len(s)
	}
	if m := authScheme.FindStringIndex(s[i:]); m != nil {
		i += m[1]
	}
	j := i
	for j < len(s) && !strings.ContainsRune(" \t\r\n\"'&,;}]", rune(s[j])) {
		j++
	}
	return j
}

// lineEnd is where the line that holds i ends.
func lineEnd(s string, i int) int {
	if j := strings.IndexAny(s[i:], "\r\n"); j >= 0 {
		return i + j
	}
	return len(s)
}

// RedactText returns text a log states in words (an error message) with
// the secrets it holds as text redacted. The store applies it to every
// execution's target and tool, call's tool and transition's reason, so no
// producer brings a URL's credential (a path's token, a userinfo
// password, a query's secret-named value) into the log.
func RedactText(s string) string {
	r, _ := redactText(s)
	return r
}
