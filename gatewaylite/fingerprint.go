package gatewaylite

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/canon"
)

// Fingerprinter turns a canonical action record into the intent
// fingerprint "hmac-sha256:<hex>". The key is secret so that the audit
// store is not a guessing oracle for arguments; it lives in a 0600 file in
// the key directory, never in the database.
type Fingerprinter struct {
	key   []byte
	KeyID string
}

// FingerprintKeyFile is the key's file name inside the key directory.
const FingerprintKeyFile = "fingerprint.key"

// sameFingerprintKey refuses a gateway whose fingerprint key is not the
// one the database's gateway executions were fingerprinted with: a retry
// it received would never match them and would act again (a replica whose
// key directory was copied before the first gateway created the key made
// its own, started without a word, and split every intent in two).
func sameFingerprintKey(ctx context.Context, store *activity.Store, fp *Fingerprinter, dir string) error {
	id, err := store.LatestFingerprintKey(ctx)
	if err != nil || id == "" || id == fp.KeyID {
		return err
	}
	return fmt.Errorf("fingerprint key %s is %s, but this database's newest gateway execution was fingerprinted with %s: "+
		"a retry this gateway receives would not match it and would act again. Give every gateway of this database the same %s "+
		"(copy it from the key directory of the gateway that wrote them, or point --key-dir there); a new key needs a new database",
		filepath.Join(dir, FingerprintKeyFile), fp.KeyID, id, FingerprintKeyFile)
}

// LoadFingerprinter reads the fingerprint key from dir, creating it on
// first use.
func LoadFingerprinter(dir string) (*Fingerprinter, error) {
	path := filepath.Join(dir, FingerprintKeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return LoadFingerprinter(dir) // another process created it first
		}
		if err != nil {
			return nil, fmt.Errorf("create fingerprint key: %w", err)
		}
		_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("write %s: %w", path, werr)
		}
		return NewFingerprinter(key), nil
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("fingerprint key %s has mode %v: it must be 0600", path, fi.Mode().Perm())
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) < 16 {
		return nil, fmt.Errorf("fingerprint key %s: not a hex key of at least 16 bytes", path)
	}
	return NewFingerprinter(key), nil
}

// NewFingerprinter uses key directly; its id is derived from the key so
// records say which key made a fingerprint without revealing it.
func NewFingerprinter(key []byte) *Fingerprinter {
	id := sha256.Sum256(append([]byte("mcpdup fingerprint key id\n"), key...))
	return &Fingerprinter{key: key, KeyID: "fp-" + hex.EncodeToString(id[:4])}
}

func (f *Fingerprinter) mac(domain string, data []byte) string {
	m := hmac.New(sha256.New, f.key)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write(data)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// Fingerprint returns the intent fingerprint of a canonical action record.
func (f *Fingerprinter) Fingerprint(a activity.Action) (string, error) {
	b, err := canon.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	return f.mac("action", b), nil
}

// HashSecret replaces a secret argument value with a keyed hash: equal
// secrets still compare equal, but the value cannot be read or guessed
// from the record.
func (f *Fingerprinter) HashSecret(canonicalValue []byte) string {
	return f.mac("secret", canonicalValue)
}

// Intent is a tool call's arguments prepared three ways.
type Intent struct {
	// Send is what the target receives: the arguments with defaults
	// materialised, secrets included.
	Send map[string]any
	// Record is what the store keeps: canonical, secrets keyed-hashed.
	Record json.RawMessage
	// Effect is the fingerprinted subset of Record: the fields that define
	// the effect, defaults handled per the tool's policy.
	Effect json.RawMessage
}

// ArgSpec is the part of a tool's contract that shapes its arguments.
type ArgSpec struct {
	Fingerprint  []string
	Defaults     map[string]any
	OmitDefaults bool
	SecretArgs   []string
}

// PrepareArgs parses raw tool arguments (a JSON object; absent means {})
// and prepares them. Duplicate keys and non-objects are errors.
func (f *Fingerprinter) PrepareArgs(raw json.RawMessage, spec ArgSpec) (Intent, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	canonical, err := canon.Transform(raw)
	if err != nil {
		return Intent{}, fmt.Errorf("arguments: %w", err)
	}
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil || args == nil {
		return Intent{}, errors.New("arguments: must be a JSON object")
	}
	send := make(map[string]any, len(args)+len(spec.Defaults))
	for k, v := range spec.Defaults {
		send[k] = v
	}
	for k, v := range args {
		send[k] = v
	}
	record := make(map[string]any, len(send))
	for k, v := range send {
		if slices.Contains(spec.SecretArgs, k) {
			b, err := canon.Marshal(v)
			if err != nil {
				return Intent{}, fmt.Errorf("argument %s: %w", k, err)
			}
			record[k] = f.HashSecret(b)
			continue
		}
		record[k] = f.scrub(k, v)
	}
	effect := make(map[string]any, len(record))
	for k, v := range record {
		if len(spec.Fingerprint) > 0 && !slices.Contains(spec.Fingerprint, k) {
			continue
		}
		if spec.OmitDefaults && isDefault(spec.Defaults, k, v) {
			continue
		}
		effect[k] = v
	}
	in := Intent{Send: plainNumber(send).(map[string]any)}
	if in.Record, err = canon.Marshal(record); err != nil {
		return Intent{}, fmt.Errorf("arguments: %w", err)
	}
	if in.Effect, err = canon.Marshal(effect); err != nil {
		return Intent{}, fmt.Errorf("arguments: %w", err)
	}
	return in, nil
}

// scrub is an argument as the store keeps it: a member whose name says it
// holds a secret (api_key, password, a header list's Authorization, at any
// depth: activity.SecretField) and a string holding one written as text
// (a command's --password x) lose the secret to a keyed hash, as
// secret_args do, so equal secrets still compare equal and two different
// ones stay two intents. The target still gets the value (Send).
func (f *Fingerprinter) scrub(name string, v any) any {
	if name != "" && activity.SecretField(name) && v != nil && v != "" {
		b, err := canon.Marshal(v)
		if err != nil {
			return activity.RedactedValue
		}
		return f.HashSecret(b)
	}
	switch x := v.(type) {
	case string:
		if r := activity.RedactText(x); r != x {
			return r + " (" + f.HashSecret([]byte(x)) + ")"
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		header, _ := x["name"].(string) // {"name": "Authorization", "value": …}
		for k, e := range x {
			if k == "value" && header != "" && activity.SecretField(header) {
				out[k] = f.scrub(header, e)
				continue
			}
			out[k] = f.scrub(k, e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = f.scrub("", e)
		}
		return out
	}
	return v
}

// plainNumber is v with its canonical numbers as the target gets them
// (canon.Plain): a 50-digit integer in digits, not as 1.2345…e+49, which a
// target reads as a lossy float. The body and the URL and command
// placeholders all get this one spelling, so two calls the fingerprint
// takes for one intent ({"n":1e50} and {"n":10…0}) send the same thing.
// It copies what it walks: defaults are the config's, shared by calls.
func plainNumber(v any) any {
	switch x := v.(type) {
	case json.Number:
		return json.Number(canon.Plain(string(x)))
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plainNumber(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainNumber(e)
		}
		return out
	}
	return v
}

func isDefault(defaults map[string]any, k string, v any) bool {
	d, ok := defaults[k]
	if !ok {
		return false
	}
	a, err1 := canon.Marshal(d)
	b, err2 := canon.Marshal(v)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}
