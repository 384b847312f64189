package activity

import (
	"encoding/json"
	"testing"
)

func TestCreated(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{CreatedInHTTP(201, "/v1/tickets/T-1001", `{"id":"T-1001"}`), "/v1/tickets/T-1001"},
		{CreatedInHTTP(201, "https://cloud.example/v1/vms/vm-72?x=1", ""), "/v1/vms/vm-72"},
		{CreatedInHTTP(200, "", `{"id":"ch_3QdX1","object":"charge"}`), "ch_3QdX1"},
		{CreatedInHTTP(200, "", `{"order_id":"ord_2","status":"ok"}`), "ord_2"},
		{CreatedInHTTP(503, "", `{"id":"err_1"}`), ""},
		{CreatedInHTTP(200, "", `not json`), ""},
		{CreatedInToolResult(json.RawMessage(`{"content":[{"type":"text","text":"x"}],"structuredContent":{"invoice_id":"in_1Q9xK2"}}`)), "in_1Q9xK2"},
		{CreatedInToolResult(json.RawMessage(`{"content":[{"type":"text","text":"{\"ticket\":\"TCK-1904\"}"}]}`)), "TCK-1904"},
		{CreatedInToolResult(json.RawMessage(`{"content":[{"type":"text","text":"TCK-881 opened for disk full on db-3"}]}`)), "TCK-881"},
		{CreatedInToolResult(json.RawMessage(`{"content":[{"type":"text","text":"Document saved to /Users/ana/report.docx"}]}`)), ""},
		{CreatedInToolResult(json.RawMessage(`{"content":[{"type":"text","text":"TCK-9 failed"}],"isError":true}`)), ""},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
