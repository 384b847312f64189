package gatewaylite

// A target that echoes what it was sent (an echo endpoint, an error page
// quoting the request, a command printing its argument) would put the
// call's secrets into its result, which the store keeps and replays. The
// gateway knows every secret it sent: the tool's credential and the
// call's secret arguments. Each is cut from the result and the reason
// before either is recorded or answered.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mcpdup/mcpdup/activity"
)

// RedactedEcho replaces a secret the call sent wherever the target's
// answer repeats it.
const RedactedEcho = "[redacted: a secret this call sent]"

// minEcho is the shortest secret searched for: a shorter one would match
// ordinary text anywhere in a result.
const minEcho = 4

// withoutEchoes is out with every spelling of the secrets the call sent
// (the credential, secret_args, secret-named members of send) cut from its
// result and reason. send may be nil (a recovery's lookup): the
// credential alone then, and the lookup cuts the secrets it knows by their
// keyed hashes (Gateway.withoutHashedSecrets).
func (s *toolSpec) withoutEchoes(out Outcome, send map[string]any) Outcome {
	secrets := s.sentSecrets(send)
	if len(secrets) == 0 {
		return out
	}
	spellings := echoSpellings(secrets)
	out.Result = redactResult(out.Result, secrets, spellings)
	if out.cut {
		out.Result = redactCutEnd(out.Result, spellings)
	}
	out.Reason = replaceAll(out.Reason, spellings)
	return out
}

// redactCutEnd cuts from the text of a result whose body was cut short
// the beginning of a secret its cut end may hold ("Bearer apitok-SUPERS"):
// whole spellings no longer match it.
func redactCutEnd(result json.RawMessage, spellings []string) json.RawMessage {
	var doc map[string]any
	d := json.NewDecoder(bytes.NewReader(result))
	d.UseNumber()
	if d.Decode(&doc) != nil {
		return result
	}
	content, _ := doc["content"].([]any)
	if len(content) == 0 {
		return result
	}
	block, _ := content[len(content)-1].(map[string]any)
	text, _ := block["text"].(string)
	cut := cutPartialEnd(text, spellings)
	if cut == text {
		return result
	}
	block["text"] = cut
	b, err := json.Marshal(doc)
	if err != nil {
		return result
	}
	return b
}

// cutPartialEnd replaces the longest beginning of a spelling, of at least
// minEcho bytes, that s ends with.
func cutPartialEnd(s string, spellings []string) string {
	best := 0
	for _, sp := range spellings {
		for n := min(len(sp)-1, len(s)); n >= minEcho && n > best; n-- {
			if strings.HasSuffix(s, sp[:n]) {
				best = n
				break
			}
		}
	}
	if best == 0 {
		return s
	}
	return s[:len(s)-best] + RedactedEcho
}

// withoutSentSecrets is text with every spelling of the secrets the
// arguments raw hold cut (a refusal that quotes what it refused: an
// input_schema error quoted an undeclared password whole).
func (s *toolSpec) withoutSentSecrets(text string, raw json.RawMessage) string {
	var send map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&send) != nil {
		return text
	}
	if secrets := s.sentSecrets(send); len(secrets) > 0 {
		return replaceAll(text, echoSpellings(secrets))
	}
	return text
}

// sentSecrets are the secret values a dispatch of send carries, at least
// minEcho bytes long.
func (s *toolSpec) sentSecrets(send map[string]any) []string {
	var out []string
	add := func(v string) {
		if len(v) >= minEcho && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if s.http != nil && s.http.credValue != "" {
		add(s.http.credValue)
		if s.http.credPrefix != "" {
			add(strings.TrimPrefix(s.http.credValue, s.http.credPrefix))
		}
	}
	for k, v := range send {
		if slices.Contains(s.args.SecretArgs, k) {
			leaves(v, add)
			continue
		}
		secretMembers(k, v, add)
	}
	return out
}

// secretMembers adds the values of v's members whose names say they hold
// a secret, at any depth, as the fingerprint's scrub finds them
// (activity.SecretField; a header list's {"name": "Authorization",
// "value": …}).
func secretMembers(name string, v any, add func(string)) {
	if name != "" && activity.SecretField(name) {
		leaves(v, add)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if header, _ := x["name"].(string); header != "" && activity.SecretField(header) {
			leaves(x["value"], add)
		}
		for k, e := range x {
			secretMembers(k, e, add)
		}
	case []any:
		for _, e := range x {
			secretMembers("", e, add)
		}
	}
}

// leaves adds every string and number inside v.
func leaves(v any, add func(string)) {
	switch x := v.(type) {
	case string:
		add(x)
	case json.Number:
		add(string(x))
	case map[string]any:
		for _, e := range x {
			leaves(e, add)
		}
	case []any:
		for _, e := range x {
			leaves(e, add)
		}
	}
}

// echoSpellings are the ways a target's text may spell each secret: as
// is, JSON-escaped (Go's, with and without HTML escapes; ASCII-only as
// Python writes it; "/" as "\/"), and URL-escaped. Longest first, so a
// credential goes before the bare token inside it.
func echoSpellings(secrets []string) []string {
	var out []string
	add := func(v string) {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for _, s := range secrets {
		add(s)
		plain := jsonEscape(s, false)
		add(plain)
		add(jsonEscape(s, true))
		add(asciiEscape(plain))
		add(strings.ReplaceAll(plain, "/", `\/`))
		add(url.QueryEscape(s))
		add(url.PathEscape(s))
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// jsonEscape is s as inside a JSON string, without the quotes.
func jsonEscape(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	enc.Encode(s)
	return strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(b.String(), `"`), "\n"), `"`)
}

// asciiEscape writes every non-ASCII rune of s as \uXXXX (a surrogate
// pair beyond the BMP), as Python's json.dumps does by default.
func asciiEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// redactResult cuts the spellings from every string of an MCP result (a
// JSON document), or returns it as it came when none is there. A quick
// look first: every spelling keeps a secret's letters and digits as they
// are, so a result holding none of the secrets' longest such runs holds
// no echo and is not decoded.
func redactResult(result json.RawMessage, secrets, spellings []string) json.RawMessage {
	if len(result) == 0 || !mayHold(result, secrets) {
		return result
	}
	dec := json.NewDecoder(bytes.NewReader(result))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		// Not JSON (a dispatcher's own rendering always is): cut the
		// spellings from the bytes.
		return json.RawMessage(replaceAll(string(result), spellings))
	}
	doc, changed := redactStrings(doc, spellings)
	if !changed {
		return result
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return json.RawMessage(replaceAll(string(result), spellings))
	}
	return b
}

// mayHold reports whether result may spell one of the secrets.
func mayHold(result []byte, secrets []string) bool {
	for _, s := range secrets {
		core := longestAlnum(s)
		if len(core) < minEcho || bytes.Contains(result, []byte(core)) {
			return true
		}
	}
	return false
}

// longestAlnum is the longest run of ASCII letters and digits in s.
func longestAlnum(s string) string {
	best, start := "", -1
	for i := 0; i <= len(s); i++ {
		alnum := i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z')
		switch {
		case alnum && start < 0:
			start = i
		case !alnum && start >= 0:
			if i-start > len(best) {
				best = s[start:i]
			}
			start = -1
		}
	}
	return best
}

// redactStrings cuts the spellings from every string in v, keys included.
func redactStrings(v any, spellings []string) (any, bool) {
	switch x := v.(type) {
	case string:
		r := replaceAll(x, spellings)
		return r, r != x
	case map[string]any:
		changed := false
		out := make(map[string]any, len(x))
		for k, e := range x {
			rk := replaceAll(k, spellings)
			re, c := redactStrings(e, spellings)
			out[rk] = re
			changed = changed || c || rk != k
		}
		return out, changed
	case []any:
		changed := false
		for i, e := range x {
			var c bool
			x[i], c = redactStrings(e, spellings)
			changed = changed || c
		}
		return x, changed
	}
	return v, false
}

func replaceAll(s string, spellings []string) string {
	for _, sp := range spellings {
		if strings.Contains(s, sp) {
			s = strings.ReplaceAll(s, sp, RedactedEcho)
		}
	}
	return s
}

// withoutHashedSecrets cuts from a result and reason every word whose
// keyed hash (Fingerprinter.HashSecret) is one of those the recorded
// arguments hold: what a target echoed of a secret_args value, found
// without the value (a recovery's lookup has only the record).
func (g *Gateway) withoutHashedSecrets(out Outcome, recorded json.RawMessage) Outcome {
	hashes := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if strings.HasPrefix(x, "hmac-sha256:") {
				hashes[x] = true
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	var args any
	if json.Unmarshal(recorded, &args) != nil {
		return out
	}
	if walk(args); len(hashes) == 0 {
		return out
	}
	var secrets []string
	seen := map[string]bool{}
	for _, text := range []string{string(out.Result), out.Reason} {
		for _, w := range secretCandidates(text) {
			if seen[w] {
				continue
			}
			seen[w] = true
			if b, err := json.Marshal(w); err == nil && hashes[g.fp.HashSecret(b)] {
				secrets = append(secrets, w)
			}
		}
	}
	if len(secrets) == 0 {
		return out
	}
	spellings := echoSpellings(secrets)
	out.Result = redactResult(out.Result, secrets, spellings)
	out.Reason = replaceAll(out.Reason, spellings)
	return out
}

// secretCandidates are the words of text a secret may be: runs of the
// characters tokens are written with, at least minEcho long, and each
// without its trailing punctuation.
func secretCandidates(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(text, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.~+/=:@", r))
	}) {
		for _, c := range []string{w, strings.TrimRight(w, ".:=")} {
			if len(c) >= minEcho && len(c) <= 512 {
				out = append(out, c)
			}
		}
	}
	return out
}
