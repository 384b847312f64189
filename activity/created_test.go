package activity

import (
	"encoding/json"
	"strings"
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

func TestListed(t *testing.T) {
	for _, c := range []struct {
		name string
		got  []string
		want string
	}{
		{"bare array", ListedInHTTP(200, `[{"id":"vm-71"},{"id":"vm-72"}]`), "vm-71,vm-72"},
		{"page object", ListedInHTTP(200, `{"object":"list","data":[{"id":"ch_1"},{"id":"ch_2"}],"has_more":false}`), "ch_1,ch_2"},
		{"the one array", ListedInHTTP(200, `{"vms":[{"vm_id":"a"},{"vm_id":"b"}],"next":null}`), "a,b"},
		{"one item says nothing", ListedInHTTP(200, `[{"id":"vm-71"}]`), ""},
		{"an error lists nothing", ListedInHTTP(500, `[{"id":"a"},{"id":"b"}]`), ""},
		{"two arrays are ambiguous", ListedInHTTP(200, `{"a":[{"id":"1"},{"id":"2"}],"b":[{"id":"3"},{"id":"4"}]}`), ""},
		{"tool result", ListedInToolResult(json.RawMessage(`{"content":[{"type":"text","text":"[{\"id\":\"TCK-1\"},{\"id\":\"TCK-2\"}]"}]}`)), "TCK-1,TCK-2"},
	} {
		if got := strings.Join(c.got, ","); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	big := "[" + strings.Repeat(`{"id":"x"},`, 3*MaxShown) + `{"id":"y"}]`
	if n := len(ListedInHTTP(200, big)); n != MaxShown {
		t.Errorf("a %d-item listing kept %d ids, want the cap %d", 3*MaxShown+1, n, MaxShown)
	}
	shown := []string{"vm-71", "ch_2"}
	for created, want := range map[string]bool{"/v1/vms/vm-71": true, "ch_2": true, "vm-7": false, "/v1/vms/": false, "": false} {
		if Lists(shown, created) != want {
			t.Errorf("Lists(%v, %q) = %v, want %v", shown, created, !want, want)
		}
	}
}
