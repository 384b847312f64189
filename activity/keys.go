package activity

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// The log's signing key is an Ed25519 signed-note key whose name is the log
// origin. The private half lives in a 0600 file outside the database and is
// never written to the database, an export or a log line; the public half
// (the "vkey", name+hash+key) is what verifiers pin.

// DefaultKeyDir is where signing keys live unless MCPDUP_KEY_DIR or an
// explicit directory says otherwise: $XDG_CONFIG_HOME/mcpdup/keys.
func DefaultKeyDir() string {
	if d := os.Getenv("MCPDUP_KEY_DIR"); d != "" {
		return d
	}
	base, err := os.UserConfigDir()
	if err != nil {
		base = "."
	}
	return filepath.Join(base, "mcpdup", "keys")
}

// KeyFiles returns the private and public key file paths for an origin.
func KeyFiles(dir, origin string) (private, public string) {
	base := strings.NewReplacer("/", "_", ":", "_", `\`, "_").Replace(origin)
	return filepath.Join(dir, base+".key"), filepath.Join(dir, base+".pub")
}

// ErrNoKey means no signing key exists for the origin.
var ErrNoKey = errors.New("no signing key")

// CreateSigningKey makes a new key pair for origin in dir and returns the
// verifier key. It refuses to overwrite an existing key.
func CreateSigningKey(dir, origin string) (vkey string, err error) {
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return "", fmt.Errorf("generate signing key for %s: %w", origin, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create key directory: %w", err)
	}
	priv, pub := KeyFiles(dir, origin)
	f, err := os.OpenFile(priv, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("create signing key: %w", err)
	}
	if _, err := f.WriteString(skey + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("write %s: %w", priv, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("write %s: %w", priv, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", priv, err)
	}
	if err := os.WriteFile(pub, []byte(vkey+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", pub, err)
	}
	return vkey, nil
}

// LoadSigner reads the signing key for origin from dir. The file must not
// be readable by group or others, as ssh insists for its keys.
func LoadSigner(dir, origin string) (note.Signer, string, error) {
	priv, _ := KeyFiles(dir, origin)
	fi, err := os.Stat(priv)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%w for %s in %s", ErrNoKey, origin, dir)
	}
	if err != nil {
		return nil, "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, "", fmt.Errorf("signing key %s has mode %v: it must be 0600", priv, fi.Mode().Perm())
	}
	b, err := os.ReadFile(priv)
	if err != nil {
		return nil, "", err
	}
	signer, err := note.NewSigner(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, "", fmt.Errorf("signing key %s: %w", priv, err)
	}
	if signer.Name() != origin {
		return nil, "", fmt.Errorf("signing key %s is for %q, not %q", priv, signer.Name(), origin)
	}
	vkey, err := vkeyOf(string(b))
	if err != nil {
		return nil, "", fmt.Errorf("signing key %s: %w", priv, err)
	}
	return signer, vkey, nil
}

// vkeyOf derives the verifier key from a private signed-note key
// (PRIVATE+KEY+name+hash+keydata).
func vkeyOf(skey string) (string, error) {
	skey = strings.TrimSpace(skey)
	rest, ok := strings.CutPrefix(skey, "PRIVATE+KEY+")
	if !ok {
		return "", errors.New("not a signed-note private key")
	}
	name, hashAndKey, _ := strings.Cut(rest, "+")
	hash, key, _ := strings.Cut(hashAndKey, "+")
	priv, err := decodeEd25519Private(key)
	if err != nil {
		return "", err
	}
	vkey, err := note.NewEd25519VerifierKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(vkey, name+"+"+hash+"+") {
		return "", errors.New("private key hash does not match its key")
	}
	return vkey, nil
}

func decodeEd25519Private(b64 string) (ed25519.PrivateKey, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
		return nil, errors.New("not an Ed25519 signed-note key")
	}
	return ed25519.NewKeyFromSeed(raw[1:]), nil
}

// ReadVerifierKey accepts a verifier key given inline or as a file holding
// one (the first non-empty line).
func ReadVerifierKey(arg string) (note.Verifier, string, error) {
	text := strings.TrimSpace(arg)
	if _, err := note.NewVerifier(text); err != nil {
		b, ferr := os.ReadFile(arg)
		if ferr != nil {
			return nil, "", fmt.Errorf("public key %q: neither a key nor a readable file: %v", arg, ferr)
		}
		text = firstLine(string(b))
	}
	if strings.HasPrefix(text, "PRIVATE+KEY") {
		return nil, "", fmt.Errorf("public key %q is a private key: pass the .pub file", arg)
	}
	v, err := note.NewVerifier(text)
	if err != nil {
		return nil, "", fmt.Errorf("public key %q: %w", arg, err)
	}
	return v, text, nil
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
