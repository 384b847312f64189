package gatewaylite

import (
	"os"
	"strings"
	"testing"
)

const minimalActor = `
[[actor]]
name = "agent:a"
token_env = "T"
`

func TestConfigErrorsNameTheField(t *testing.T) {
	cases := map[string]string{
		``: "no [[actor]]",
		minimalActor + `[[tool]]
name = "x"
url = "ftp://h/x"`: "tool x: url",
		minimalActor + `[[tool]]
name = "x"
url = "http://h/x"
contract = "maybe"`: `tool x: contract: unknown contract "maybe"`,
		minimalActor + `[[tool]]
name = "x"
url = "http://h/x"
contract = "recoverable_by_lookup"`: "tool x: status_url",
		minimalActor + `[[tool]]
name = "x"
url = "http://h/x"
credential_ref = "nope"`: "tool x: credential_ref: no [credential.nope]",
		minimalActor + `[[tool]]
name = "x"
url = "http://h/{card}"
secret_args = ["card"]`: "secret argument {card} must not appear in the URL",
		// A placeholder names the target: left out of a written
		// fingerprint, two orders' refunds would be one intent.
		minimalActor + `[[tool]]
name = "refund"
url = "http://h/v1/orders/{order}/refund"
fingerprint = ["amount"]`: `tool refund: url: placeholder {order} is not in fingerprint`,
		minimalActor + `[credential.k]
key_file = "/dev/null"

[[tool]]
name = "restart"
channel = "ssh"
credential_ref = "k"
host = "h:22"
user = "ops"
host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGj0Ob6kfaBmIeqpT1m1w4n3fBfEo1qfpPf7QDHkz3dY"
command = ["systemctl", "restart", "{service}"]
fingerprint = ["reason"]`: `placeholder {service} is not in fingerprint`,
		minimalActor + `[[tool]]
name = "x"
url = "http://h/x"
input_schema = '{"type":"array"}'`: "tool x: input_schema",
		minimalActor + `[[tool]]
name = "x"
url = "http://h/x"
attach_window = "forever"`: `duration "forever"`,
		minimalActor + `[[tool]]
name = "x"
url = "http://h/x"
input_schema = '{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}'`: "tool x: input_schema",
		minimalActor + "[limits]\nmax_body_bytes = 10":       "limits.max_body_bytes",
		minimalActor + "[limits]\nrate_per_second = -3":      "rate_per_second",
		minimalActor + "[limits]\nallowed_origins = [\"*\"]": "limits.allowed_origins",
		minimalActor + `colour = "blue"`:                     "unknown field",
		minimalActor + `session_grant = "maybe"`:             "session_grant",
		minimalActor + `[[upstream]]
name = "u"`: "upstream 1: name and exactly one of command or url",
	}
	for text, want := range cases {
		_, err := ParseConfig([]byte(text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q:\n  error %v\n  want it to mention %q", text, err, want)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte(minimalActor + `[[tool]]
name = "t"
url = "http://127.0.0.1:9/x"`))
	if err != nil {
		t.Fatal(err)
	}
	tool := cfg.Tools[0]
	if tool.Contract != "blocked_after_unknown" || tool.Method != "POST" || tool.AttachWindow.Duration != DefaultAttachWindow ||
		cfg.Listen != DefaultListen || cfg.SessionGrant != "auto" || tool.DefaultsPolicy != "materialise" {
		t.Fatalf("defaults: %+v %+v", cfg, tool)
	}
}

// TestREADMEExampleParses keeps the README's configuration example valid.
func TestREADMEExampleParses(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, conf, _ := strings.Cut(string(b), "## Configuration")
	_, rest, ok := strings.Cut(conf, "```toml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no toml example")
	}
	cfg, err := ParseConfig([]byte(example))
	if err != nil {
		t.Fatalf("README example: %v", err)
	}
	if len(cfg.Tools) != 4 || cfg.Tools[3].Contract != "recoverable_by_lookup" || len(cfg.Upstreams) != 1 || !cfg.Credentials["payments"].PerUseApproval {
		t.Fatalf("README example parsed to %+v", cfg)
	}
}
