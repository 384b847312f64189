package activity_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
)

// Secrets written as text inside arguments (the shapes producers write
// when they do not deserialize: a Python dict's repr, JSON encoded twice,
// a form, a header line, a DSN, a header list) lose their values; what
// is not a secret keeps its value byte for byte.
func TestRedactSecretsWrittenAsText(t *testing.T) {
	for _, c := range []struct {
		args    string
		secrets []string // must be gone
		kept    []string // must stay
	}{
		{`{"arguments":"{'host': 'db-3', 'password': 'SECRETP1'}"}`, []string{"SECRETP1"}, []string{"db-3", "'password': '"}},
		{`{"arguments":"{\"password\": \"SECRETD1\", \"user\": \"ann\"}"}`, []string{"SECRETD1"}, []string{"ann"}},
		{`{"arguments":"password=SECRETF1&user=admin"}`, []string{"SECRETF1"}, []string{"user=admin"}},
		{`{"body":"x: token=SECRETT1 more"}`, []string{"SECRETT1"}, []string{"more"}},
		{`{"h":"Authorization: Bearer SECRETB1.x-y"}`, []string{"SECRETB1"}, []string{"Authorization: "}},
		{`{"dsn":"postgres://admin:SECRETU1@db.internal:5432/app"}`, []string{"SECRETU1"}, []string{"postgres://admin:", "@db.internal:5432/app"}},
		{`{"headers":[{"name":"Authorization","value":"Bearer SECRETH1"},{"name":"Accept","value":"text/plain"}]}`, []string{"SECRETH1"}, []string{"text/plain"}},
		{`"{\"password\": \"SECRETS1\", \"user\": \"ann\"}"`, []string{"SECRETS1"}, []string{"ann"}}, // the whole arguments a string
		{`{"list":["api_key=SECRETL1","plain"]}`, []string{"SECRETL1"}, []string{"plain"}},
		{`{"note":"the token expired; password_policy: strict; max_tokens=100","url":"https://example.com/a?b=c"}`, nil,
			[]string{"the token expired; password_policy: strict; max_tokens=100", "https://example.com/a?b=c"}},
		{`{"arguments":"{'password': 'SECRETQ1"}`, []string{"SECRETQ", "ECRETQ1", "Q1"}, []string{activity.RedactedValue}}, // a quote never closed
	} {
		out, _ := activity.RedactSecretFields(json.RawMessage(c.args))
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s: redacted arguments are not JSON: %s", c.args, out)
		}
		flat := strings.NewReplacer(`\"`, `"`, `\u0026`, "&").Replace(string(out)) // strings as written
		for _, s := range c.secrets {
			if strings.Contains(flat, s) {
				t.Errorf("%s: %q is still there: %s", c.args, s, out)
			}
		}
		for _, s := range c.kept {
			if !strings.Contains(flat, s) {
				t.Errorf("%s: %q was lost: %s", c.args, s, out)
			}
		}
	}
}
