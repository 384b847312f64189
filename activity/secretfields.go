package activity

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
)

// Imported logs carry request bodies as their producers logged them (a
// HAR's login form, a JSON body with an api_key, OTLP's recorded tool
// arguments): a field whose name says it holds a secret keeps its name
// and loses its value, so no secret reaches the store, its exports or a
// fingerprint. The gateway knows its tools' secret arguments by
// configuration and hashes them (gatewaylite: secret_args); a log's
// fields are known only by name.

// RedactedValue replaces a secret field's value.
const RedactedValue = "[redacted: a secret field]"

// secretNames are field names, lowercased without '-' and '_', that hold
// secrets; secretSuffixes end such names ("db_password", "github_token").
var (
	secretNames = map[string]bool{"password": true, "passwd": true, "pwd": true, "pass": true, "secret": true,
		"token": true, "apikey": true, "authorization": true, "auth": true, "privatekey": true, "cookie": true,
		"credential": true, "credentials": true, "clientsecret": true, "accesstoken": true, "refreshtoken": true,
		"idtoken": true, "sessiontoken": true, "bearer": true, "passphrase": true, "otp": true, "cvv": true, "cvc": true}
	secretSuffixes = []string{"password", "passwd", "secret", "token", "apikey", "privatekey", "passphrase"}
)

// SecretField reports whether a field's name says its value is a secret.
func SecretField(name string) bool {
	n := strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(name))
	if secretNames[n] {
		return true
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// secretHints are substrings one of which a secret field's name holds:
// arguments without any are returned as they are, unparsed.
var secretHints = [][]byte{[]byte("pass"), []byte("pwd"), []byte("secret"), []byte("token"), []byte("key"), []byte("auth"),
	[]byte("cookie"), []byte("cred"), []byte("bearer"), []byte("otp"), []byte("cvv"), []byte("cvc"), []byte("://")}

// RedactSecretFields returns JSON arguments with the value of every
// object member SecretField names replaced by RedactedValue, at any
// depth, and whether it replaced any. Arguments that are not JSON are
// returned unchanged.
func RedactSecretFields(args json.RawMessage) (json.RawMessage, bool) {
	lower := bytes.ToLower(args)
	hinted := false
	for _, h := range secretHints {
		if bytes.Contains(lower, h) {
			hinted = true
			break
		}
	}
	if !hinted {
		return args, false
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return args, false
	}
	if s, ok := v.(string); ok { // arguments encoded twice: JSON in a string
		r, ok := redactText(s)
		if !ok {
			return args, false
		}
		v = r
	} else if !redact(v) {
		return args, false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return args, false
	}
	return out, true
}

func redact(v any) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		// A header as a name and a value ({"name": "Authorization",
		// "value": "Bearer …"}: HAR, OTLP, many loggers).
		if name, ok := x["name"].(string); ok && SecretField(name) {
			if e, ok := x["value"]; ok && e != nil && e != "" {
				x["value"], changed = RedactedValue, true
			}
		}
		for k, e := range x {
			if SecretField(k) {
				if e != nil && e != "" {
					x[k], changed = RedactedValue, true
				}
				continue
			}
			if s, ok := e.(string); ok {
				if r, ok := redactText(s); ok {
					x[k], changed = r, true
				}
				continue
			}
			changed = redact(e) || changed
		}
	case []any:
		for i, e := range x {
			if s, ok := e.(string); ok {
				if r, ok := redactText(s); ok {
					x[i], changed = r, true
				}
				continue
			}
			changed = redact(e) || changed
		}
	}
	return changed
}

// A string can hold secrets too, where a producer wrote arguments as
// text: JSON encoded again, a form, a Python dict's repr, a header line,
// a URL with a password (a DSN).
var (
	// secretName is a name and what separates it from its value:
	// `password=`, `'api_key': `, `"token": `, `Authorization: `.
	secretName = regexp.MustCompile(`([A-Za-z][A-Za-z0-9_\-]*)(["']?\s*[:=]\s*)`)
	// authScheme starts a header value whose token follows ("Bearer x").
	authScheme = regexp.MustCompile(`^(?i:bearer|basic|digest|token)\s+`)
	// urlPassword is a URL's userinfo password: scheme://user:password@.
	urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)([^@/\s]+)@`)
)

// valueEnd is where the value that starts at i ends: its closing quote,
// or the first space or delimiter (after an auth scheme's word).
func valueEnd(s string, i int) int {
	if i >= len(s) {
		return i
	}
	if q := s[i]; q == '"' || q == '\'' {
		if j := strings.IndexByte(s[i+1:], q); j >= 0 {
			return i + 1 + j + 1
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

// redactText returns s with the secrets it holds as text redacted, and
// whether there were any.
func redactText(s string) (string, bool) {
	if t := strings.TrimSpace(s); len(t) > 1 && (t[0] == '{' || t[0] == '[') {
		dec := json.NewDecoder(strings.NewReader(t))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) == nil && !dec.More() {
			if !redact(v) {
				return s, false
			}
			b, err := json.Marshal(v)
			return string(b), err == nil
		}
	}
	changed := false
	var b strings.Builder
	last := 0
	for _, m := range secretName.FindAllStringSubmatchIndex(s, -1) {
		if m[0] < last || !SecretField(s[m[2]:m[3]]) {
			continue // inside a value already redacted, or no secret's name
		}
		from, to := m[1], valueEnd(s, m[1])
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
		last, changed = to, true
	}
	out := s
	if changed {
		out = b.String() + s[last:]
	}
	if urlPassword.MatchString(out) {
		out, changed = urlPassword.ReplaceAllString(out, "${1}"+RedactedValue+"@"), true
	}
	return out, changed
}
