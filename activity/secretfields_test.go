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
		{`{"h":"Cookie: _ga=GA1.2.3; session=SECRETC1\nAccept: */*"}`, []string{"SECRETC1", "GA1.2.3"}, []string{"Accept: */*"}},
		{`{"k":"private_key: -----BEGIN RSA PRIVATE KEY-----\nMIIESECRETK1\n-----END RSA PRIVATE KEY-----\nuser: ann"}`, []string{"SECRETK1"}, []string{"user: ann"}},
		{`{"t":"token: \"abc\\\"SECRETE1\" next"}`, []string{"SECRETE1"}, []string{"next"}},
		{`{"h":"Proxy-Authorization: Basic SECRETP2"}`, []string{"SECRETP2"}, nil},
		{`{"cmd":"deploy --password SECRETF2 --region eu"}`, []string{"SECRETF2"}, []string{"--region eu"}},
		{`{"args_preview":"mysql -uroot -pSECRETM1 -e 'DELETE FROM t'","other":"mkdir -p /tmp/x"}`, []string{"SECRETM1"}, []string{"-uroot -p", "mkdir -p /tmp/x"}},
		{`{"a":"mysql -u root -p'S3 SECRETM2' db","b":"run mysql backup; then tar -pczf x.tgz dir","env":"MYSQL_PWD=SECRETM3"}`, []string{"SECRETM2", "SECRETM3"}, []string{"tar -pczf x.tgz dir"}},
		{`{"cmd":"curl -H 'Cookie: a=1; session=SECRETC2' https://x.example/a","i":"  Cookie: theme=dark; sid=SECRETC3"}`, []string{"SECRETC2", "SECRETC3"}, []string{"https://x.example/a"}},
		{`{"repr":"{'user': 'bob', 'pass': 'SECRETQ2'}"}`, []string{"SECRETQ2"}, []string{"'user': 'bob'"}},
		{`{"env":"AWS_SECRET_ACCESS_KEY=SECRETA1 AWS_REGION=eu","secret_key":"SECRETA2"}`, []string{"SECRETA1", "SECRETA2"}, []string{"AWS_REGION=eu"}},
		// A word too common to be a secret's name before a colon in prose is
		// one in a form, an environment and a header list.
		{`{"summary":"pass: 3, fail: 0","form":"user=bob&pass=SECRETW1","env":"auth=SECRETW2","h":[{"name":"pass","value":"SECRETW3"}]}`,
			[]string{"SECRETW1", "SECRETW2", "SECRETW3"}, []string{"pass: 3, fail: 0", "user=bob"}},
		// Credentials services take in a URL's path: the public part before
		// them stays, so two bots or two webhooks are still two targets.
		{`{"url":"https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage","f":"/file/bot42:ABCDEFGHIJKLMNOPQRSTUVWXYZ_-12/doc.pdf"}`,
			[]string{"AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}, []string{"/bot123456789:", "/sendMessage", "/file/bot42:", "/doc.pdf"}},
		{`{"hook":"POST https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX","d":"https://discord.com/api/webhooks/1234567890/AbCdEfGhIjKlMnOpQrStUvWxYz_0123456789-abcdefghijklmnopqrstuvwxyzABCDEF/slack"}`,
			[]string{"XXXXXXXXXXXXXXXXXXXXXXXX", "AbCdEfGhIjKlMnOpQrStUvWxYz"}, []string{"/services/T00000000/B00000000/", "/api/webhooks/1234567890/", "/slack"}},
		// Not credentials: a path with bot in a word, a short segment.
		{`{"p":"/robots/bot-7/status","q":"/bots/9/run","s":"/services/Tokyo/Bay/x"}`, nil, []string{"/robots/bot-7/status", "/bots/9/run", "/services/Tokyo/Bay/x"}},
		// Not secrets: an authorization id, a word of prose before a colon.
		{`{"payment_authorization":"pa_123","note":"Card authorization: failed for order 1234"}`, nil, []string{"pa_123", "for order 1234"}},
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

// BenchmarkRedactLargeText redacts one 16 MiB argument of text full of
// name:value pairs (the review's blow-up: every match was held, and each
// name built its own replacer: 13.5 s and 1.77 GB): the scan is one pass.
//
//	go test ./activity -run '^$' -bench RedactLargeText -benchtime 3x
func BenchmarkRedactLargeText(b *testing.B) {
	text := strings.Repeat("a:", 8<<20) + " token=x"
	args, _ := json.Marshal(map[string]string{"key": text})
	b.SetBytes(int64(len(args)))
	for range b.N {
		out, ok := activity.RedactSecretFields(args)
		if !ok || strings.Contains(string(out), "token=x") {
			b.Fatal("the token is still there")
		}
	}
}

// BenchmarkRedactManyHeaders: one 8 MiB line of header names, each of
// which looks back for where its header starts: the look back is
// bounded, so the scan stays linear.
//
//	go test ./activity -run '^$' -bench RedactManyHeaders -benchtime 3x
func BenchmarkRedactManyHeaders(b *testing.B) {
	args, _ := json.Marshal(map[string]string{"h": strings.Repeat("Cookie: a=1 ", 700_000)})
	b.SetBytes(int64(len(args)))
	for range b.N {
		if _, ok := activity.RedactSecretFields(args); !ok {
			b.Fatal("nothing redacted")
		}
	}
}
