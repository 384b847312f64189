package tomlfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFileIsBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.toml")
	os.WriteFile(p, make([]byte, MaxSize+1), 0o600)
	if _, err := ReadFile(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a file past the bound: %v", err)
	}
	os.WriteFile(p, []byte("a = 1\n"), 0o600)
	if b, err := ReadFile(p); err != nil || string(b) != "a = 1\n" {
		t.Fatalf("a small file: %q %v", b, err)
	}
}
