package gatewaylite

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShellQuoteIsData runs quoted words through a real POSIX shell, the
// way the host's shell receives an SSH command line: separators, quotes,
// substitutions and newlines arrive as the same bytes, and nothing runs.
func TestShellQuoteIsData(t *testing.T) {
	dir := t.TempDir()
	pwned := filepath.Join(dir, "pwned")
	words := []string{
		"plain", "", "with space", "semi;colon; touch " + pwned, "$(touch " + pwned + ")", "`touch " + pwned + "`",
		`double "quoted"`, "single 'quoted'", "it's", "new\nline", "back\\slash", "tab\there", "*", "~", "$HOME", "a|b&c>d<e",
		"--flag=value", "ünïcödé", "'", "''", `\'`,
	}
	line := "printf '%s\\0'"
	for _, w := range words {
		line += " " + shellQuote(w)
	}
	out, err := exec.Command("sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(got) != len(words) {
		t.Fatalf("%d words came back, want %d: %q", len(got), len(words), got)
	}
	for i := range words {
		if got[i] != words[i] {
			t.Errorf("word %d: %q came back as %q", i, words[i], got[i])
		}
	}
	if _, err := exec.Command("test", "-e", pwned).Output(); err == nil {
		t.Fatal("an argument ran as code")
	}
}

func TestSSHToolConfig(t *testing.T) {
	base := `
[[actor]]
name = "agent:ops"
token_env = "T"
[credential.deploy]
key_file = "/tmp/id"
[[tool]]
name = "restart"
channel = "ssh"
host = "127.0.0.1"
user = "deploy"
host_key = "SHA256:abc"
credential_ref = "deploy"
command = ["systemctl", "restart", "{service}"]
`
	cfg, err := ParseConfig([]byte(base + `marker_dir = "/var/lib/mcpdup/markers"`))
	if err != nil {
		t.Fatal(err)
	}
	tool := cfg.Tools[0]
	if tool.Contract != "recoverable_by_lookup" || tool.Port != 22 || tool.Helper != "mcpdup" || tool.Method != "exec" {
		t.Fatalf("defaults with a marker: %+v", tool)
	}
	if cfg, err := ParseConfig([]byte(base)); err != nil || cfg.Tools[0].Contract != "blocked_after_unknown" {
		t.Fatalf("without a marker: %+v %v", cfg, err)
	}
	if _, err := ParseConfig([]byte(strings.Replace(base, `key_file = "/tmp/id"`, "ssh_agent = true", 1))); err != nil {
		t.Fatalf("an agent credential: %v", err)
	}
	for _, c := range []struct{ text, want string }{
		{strings.Replace(base, `host_key = "SHA256:abc"`, "", 1), "host_key"},
		{strings.Replace(base, `user = "deploy"`, "", 1), "user"},
		{strings.Replace(base, `key_file = "/tmp/id"`, "", 1), "key_file"},
		{base + `contract = "recoverable_by_lookup"`, "needs marker_dir"},
		{base + `contract = "repeatable_with_key"`, "cannot send"},
		{strings.Replace(base, `key_file = "/tmp/id"`, "key_file = \"/tmp/id\"\nssh_agent = true", 1), "exclude each other"},
		{strings.Replace(base, `key_file = "/tmp/id"`, "passphrase_env = \"P\"", 1), "passphrase_env needs key_file"},
	} {
		if _, err := ParseConfig([]byte(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error about %s, got %v", c.want, err)
		}
	}
}
