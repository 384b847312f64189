package activity

import (
	"bytes"
	"encoding/json"
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
		"idtoken": true, "sessiontoken": true, "bearer": true, "passphrase": true, "otp": true, "cvv": true, "cvc": true,
		"proxyauthorization": true, "mysqlpwd": true}
	secretSuffixes = []string{"password", "passwd", "secret", "token", "apikey", "privatekey", "passphrase", "secretkey", "secretaccesskey"}
	nameNorm       = strings.NewReplacer("-", "", "_", "")
)

// SecretField reports whether a field's name says its value is a secret.
func SecretField(name string) bool {
	n := nameNorm.Replace(strings.ToLower(name))
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
	v, changed := redactValue(v) // a string too: arguments encoded twice, JSON in a string
	if !changed {
		return args, false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return args, false
	}
	return out, true
}

// redactValue redacts v: a string as text, an object's secret-named
// members and what the others hold, a list's elements. Objects and lists
// change in place; a string's redaction is returned.
func redactValue(v any) (any, bool) {
	changed := false
	switch x := v.(type) {
	case string:
		return redactText(x)
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
			if r, ok := redactValue(e); ok {
				x[k], changed = r, true
			}
		}
	case []any:
		for i, e := range x {
			if r, ok := redactValue(e); ok {
				x[i], changed = r, true
			}
		}
	}
	return v, changed
}
