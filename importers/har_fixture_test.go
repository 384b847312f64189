package importers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// The HAR fixture is an agent host's traffic as mitmproxy's HAR export
// writes it (2-space indented; timings, connection ids), with one entry
// as Chrome saves a failed request (status 0, _error).

type hx = map[string]any

func hdrs(kv ...string) []hx {
	var out []hx
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, hx{"name": kv[i], "value": kv[i+1]})
	}
	return out
}

var harT0 = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

func harEntryFx(at time.Duration, ms float64, method, url string, reqH []hx, body string, status int, respH []hx, mime, text string, conn string) hx {
	req := hx{"method": method, "url": url, "httpVersion": "HTTP/1.1", "cookies": []hx{}, "headers": reqH, "queryString": []hx{},
		"headersSize": -1, "bodySize": len(body)}
	if body != "" {
		req["postData"] = hx{"mimeType": "application/json", "text": body, "params": []hx{}}
	}
	statusText := map[int]string{0: "", 200: "OK", 201: "Created", 502: "Bad Gateway"}[status]
	resp := hx{"status": status, "statusText": statusText, "httpVersion": "HTTP/1.1", "cookies": []hx{}, "headers": respH,
		"content": hx{"size": len(text), "compression": 0, "mimeType": mime, "text": text}, "redirectURL": "", "headersSize": -1, "bodySize": len(text)}
	return hx{"startedDateTime": harT0.Add(at).Format("2006-01-02T15:04:05.000000-07:00"), "time": ms, "request": req, "response": resp,
		"cache": hx{}, "timings": hx{"connect": -1, "ssl": -1, "send": 1.2, "receive": 0.4, "wait": ms - 1.6}, "serverIPAddress": "10.0.4.20",
		"connection": conn}
}

func mcpPost(at time.Duration, ms float64, id int, tool, args, session string, status int, sse string, conn string) hx {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
	reqH := hdrs("Host", "gateway.internal:8443", "User-Agent", "python-httpx/0.28.1", "Accept", "application/json, text/event-stream",
		"Content-Type", "application/json", "Mcp-Session-Id", session, "MCP-Protocol-Version", "2025-06-18")
	respH := hdrs("Content-Type", "text/event-stream", "Cache-Control", "no-cache", "Mcp-Session-Id", session)
	return harEntryFx(at, ms, "POST", "https://gateway.internal:8443/mcp", reqH, body, status, respH, "text/event-stream", sse, conn)
}

func sseResult(id int, text string) string {
	return fmt.Sprintf("event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%q}],\"isError\":false}}\n\n", id, text)
}

func harFixture() hx {
	const sess = "191c4850af6c49e08843a3f6c80e5046"
	api := func(at time.Duration, ms float64, method, path, key, body string, status int, replayed bool, text string) hx {
		reqH := hdrs("Host", "api.stripe.example", "User-Agent", "python-httpx/0.28.1", "Authorization", "Bearer [REDACTED]", "Content-Type", "application/json")
		if key != "" {
			reqH = append(reqH, hx{"name": "Idempotency-Key", "value": key})
		}
		respH := hdrs("Content-Type", "application/json", "Request-Id", "req_9Qp2")
		if replayed {
			respH = append(respH, hx{"name": "Idempotent-Replayed", "value": "true"})
		}
		return harEntryFx(at, ms, method, "https://api.stripe.example"+path, reqH, body, status, respH, "application/json", text, "52530")
	}
	failed := mcpPost(20*time.Second, 30004, 8, "send_email", `{"to":"ops@example.com","subject":"weekly digest"}`, sess, 0, "", "52501")
	failed["response"].(hx)["_error"] = "net::ERR_CONNECTION_RESET"
	entries := []hx{
		mcpPost(0, 812, 7, "create_invoice", `{"customer":"cus_42","amount_cents":12000}`, sess, 200, sseResult(7, "invoice in_1PXa created"), "52492"),
		failed,
		mcpPost(55*time.Second, 640, 9, "send_email", `{"to":"ops@example.com","subject":"weekly digest"}`, sess, 200, sseResult(9, "queued"), "52514"),
		api(60*time.Second, 30000, "POST", "/v1/refunds", `"rf-77-c2"`, `{"charge":"ch_9","amount":500}`, 502, false, `{"error":"upstream timeout"}`),
		api(92*time.Second, 420, "POST", "/v1/refunds", `"rf-77-c2"`, `{"charge":"ch_9","amount":500}`, 200, false, `{"id":"re_3","status":"succeeded"}`),
		api(95*time.Second, 35, "POST", "/v1/refunds", "rf-77-c2", `{"charge":"ch_9","amount":500}`, 200, true, `{"id":"re_3","status":"succeeded"}`),
		api(100*time.Second, 80, "GET", "/v1/balance", "", "", 200, false, `{"available":[{"amount":99000}]}`),
		api(101*time.Second, 75, "GET", "/v1/balance", "", "", 200, false, `{"available":[{"amount":99000}]}`),
		api(110*time.Second, 900, "POST", "/v1/payouts", "", `{"amount":5000,"destination":"ba_1"}`, 200, false, `{"id":"po_1"}`),
		api(140*time.Second, 880, "POST", "/v1/payouts", "", `{"amount":5000,"destination":"ba_1"}`, 200, false, `{"id":"po_2"}`),
	}
	return hx{"log": hx{"version": "1.2", "creator": hx{"name": "mitmproxy", "version": "10.4.2", "comment": "mitmproxy version mitmproxy 10.4.2"},
		"pages": []hx{}, "entries": entries}}
}

func TestGenerateHARFixture(t *testing.T) {
	want, err := json.MarshalIndent(harFixture(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	path := filepath.Join("testdata", "har", "agent.har")
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, want, 0o644)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("testdata/har/agent.har is stale: go test ./importer -run TestGenerate -update")
	}
}

// TestHARBase64ThatIsNot: an answer marked base64 that does not decode is
// a bad record naming its field, not a body read as it stands.
func TestHARBase64ThatIsNot(t *testing.T) {
	har := `{"log":{"version":"1.2","creator":{"name":"mitmproxy","version":"10"},"entries":[{"startedDateTime":"2026-11-27T10:00:00.000Z","time":120,"request":{"method":"POST","url":"https://api.payments.example/v1/payments","headers":[]},"response":{"status":200,"headers":[],"content":{"mimeType":"application/json","text":"not base64!","encoding":"base64"}}}]}}`
	_, err := Import(ctx, newStore(t), writeFile(t, "a.har", []byte(har)), Options{})
	if err == nil || !strings.Contains(err.Error(), "log.entries[0].response.content.text") {
		t.Errorf("an answer marked base64 that is not: %v", err)
	}
}

// TestSecretsInImportedBodies: a login form's password and a JSON body's
// api_key, as a HAR holds them, reach neither the database nor its WAL;
// the fields stay, their values do not.
func TestSecretsInImportedBodies(t *testing.T) {
	har := `{"log":{"version":"1.2","creator":{"name":"WebInspector","version":"537.36"},"entries":[
{"startedDateTime":"2026-11-27T10:00:00.000Z","time":120,"request":{"method":"POST","url":"https://app.example/login","headers":[],"postData":{"mimeType":"application/x-www-form-urlencoded","text":"user=ann&password=hunter2-S3cret"}},"response":{"status":302,"headers":[],"content":{"mimeType":"text/html","text":""}}},
{"startedDateTime":"2026-11-27T10:00:01.000Z","time":120,"request":{"method":"POST","url":"https://api.payments.example/v1/charges","headers":[],"postData":{"mimeType":"application/json","text":"{\"amount\":5,\"api_key\":\"sk_live_ABCDEF123\",\"nested\":{\"client_secret\":\"cs_987XYZ\"},\"idempotency_key\":\"k-1\"}"}},"response":{"status":200,"headers":[],"content":{"mimeType":"application/json","text":"{\"id\":\"ch_1\"}"}}}]}}`
	dir := t.TempDir()
	s, err := activity.Open(ctx, filepath.Join(dir, "t.db"), activity.Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, s, writeFile(t, "a.har", []byte(har)), Options{}); err != nil {
		t.Fatal(err)
	}
	ex, err := s.Executions(ctx, activity.ExecutionFilter{})
	if err != nil || len(ex) != 2 {
		t.Fatalf("%d executions, %v", len(ex), err)
	}
	for _, e := range ex {
		if strings.Contains(e.Tool, "charges") && (!strings.Contains(string(e.Arguments), activity.RedactedValue) || !strings.Contains(string(e.Arguments), `"k-1"`)) {
			t.Errorf("charge arguments %s: want the secrets redacted, the key kept", e.Arguments)
		}
	}
	for _, name := range []string{"t.db", "t.db-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, secret := range []string{"hunter2-S3cret", "sk_live_ABCDEF123", "cs_987XYZ"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds %s", name, secret)
			}
		}
	}
	s.Close()
	for name, want := range map[string]bool{"password": true, "db_password": true, "X-Api-Key": true, "github_token": true, "client_secret": true,
		"idempotency_key": false, "key": false, "amount": false, "author": false, "passenger": false} {
		if activity.SecretField(name) != want {
			t.Errorf("SecretField(%q) = %v, want %v", name, !want, want)
		}
	}
}

// TestHARFormAsParams: HAR 1.2 gives a form as text or as params; given
// as params, its fields are the request's arguments all the same (two
// refunds of two orders are two requests), a secret among them redacted.
func TestHARFormAsParams(t *testing.T) {
	entry := func(at, order, pin string) string {
		return `{"startedDateTime":"` + at + `","time":80,"request":{"method":"POST","url":"https://shop.example/refunds","headers":[],"postData":{"mimeType":"application/x-www-form-urlencoded","params":[{"name":"order","value":"` + order + `"},{"name":"password","value":"` + pin + `"}]}},"response":{"status":200,"headers":[],"content":{"mimeType":"application/json","text":"{}"}}}`
	}
	har := `{"log":{"version":"1.2","creator":{"name":"WebInspector","version":"537.36"},"entries":[` + entry("2026-11-27T10:00:00.000Z", "A-100", "s3cret-1") + `,` + entry("2026-11-27T10:00:05.000Z", "B-200", "s3cret-1") + `]}}`
	s := newStore(t)
	if _, err := Import(ctx, s, writeFile(t, "a.har", []byte(har)), Options{}); err != nil {
		t.Fatal(err)
	}
	ex, err := s.Executions(ctx, activity.ExecutionFilter{})
	if err != nil || len(ex) != 2 {
		t.Fatalf("%d executions, %v", len(ex), err)
	}
	var args []string
	for _, e := range ex {
		args = append(args, string(e.Arguments))
	}
	all := strings.Join(args, " ")
	if !strings.Contains(all, "A-100") || !strings.Contains(all, "B-200") || strings.Contains(all, "s3cret-1") {
		t.Errorf("arguments %s: want each order, no password", all)
	}
}

// An API client's export (Insomnia's exportHar: its requests as written,
// each with the export's time, status 0 for the unsent) is not traffic:
// refused, naming the creator, rather than read as sends.
func TestHARFromAnAPIClient(t *testing.T) {
	doc := `{"log":{"version":"1.2","creator":{"name":"Insomnia","version":"2023.5.8"},"entries":[
{"startedDateTime":"2026-11-20T10:00:00.000Z","time":0,"request":{"method":"POST","url":"https://api.example/payouts","headers":[]},"response":{"status":0,"headers":[],"content":{"text":""}},"comment":"Create payout"},
{"startedDateTime":"2026-11-20T10:00:00.000Z","time":0,"request":{"method":"POST","url":"https://api.example/payouts","headers":[]},"response":{"status":0,"headers":[],"content":{"text":""}},"comment":"Create payout (copy)"}]}}`
	s := newStore(t)
	_, err := Import(ctx, s, writeFile(t, "insomnia.har", []byte(doc)), Options{})
	var le *LineError
	if !errors.As(err, &le) || le.Field != "log.creator.name" || !strings.Contains(err.Error(), "Insomnia") {
		t.Fatalf("an Insomnia export: %v", err)
	}
	if n, _ := s.LogSize(ctx); n != 0 {
		t.Errorf("%d records written from a refused export", n)
	}
}
