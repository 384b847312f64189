package activity

import (
	"encoding/json"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// What a target's answer says it created: the one rule every producer
// reads answers with, so "two created ids" means the same in every log.

// CreatedInHTTP is what an HTTP answer names as created: its Location's
// path (RFC 9110: a 201 identifies the new resource there, a 303 after a
// POST the result it made), else an id in its JSON body.
func CreatedInHTTP(status int, location, body string) string {
	if location != "" && (status >= 200 && status < 300 || status == 303) {
		if u, err := url.Parse(strings.TrimSpace(location)); err == nil && u.Path != "" {
			return u.Path
		}
		return strings.TrimSpace(location)
	}
	if status < 200 || status >= 300 {
		return ""
	}
	var v any
	if json.Unmarshal([]byte(body), &v) != nil {
		return ""
	}
	return createdInJSON(v)
}

// CreatedInToolResult is what an MCP tool result names as created: an id
// in its structuredContent, else in a text block that is JSON, else an
// identifier-looking token in its text ("TCK-881 opened").
func CreatedInToolResult(result json.RawMessage) string {
	var r struct {
		IsError    bool `json:"isError"`
		Structured any  `json:"structuredContent"`
		Content    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(result, &r) != nil || r.IsError {
		return ""
	}
	if id := createdInJSON(r.Structured); id != "" {
		return id
	}
	for _, c := range r.Content {
		var v any
		if json.Unmarshal([]byte(c.Text), &v) == nil {
			if id := createdInJSON(v); id != "" {
				return id
			}
		}
		if id := idToken.FindString(c.Text); id != "" {
			return id
		}
	}
	return ""
}

// idToken matches the ids people write in answers: TCK-881, ch_3QdX1,
// ord_5521.
var idToken = regexp.MustCompile(`\b(?:[A-Z][A-Z0-9]{1,9}-\d{2,}|[a-z]{1,8}_[A-Za-z0-9]{3,})\b`)

// createdInJSON finds an id in a decoded JSON object: "id", else the one
// key named like one (order_id, invoiceId), else a nested object's id.
func createdInJSON(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if id := scalarID(m["id"]); id != "" {
		return id
	}
	var keys []string
	for k := range m {
		lk := strings.ToLower(k)
		if strings.HasSuffix(lk, "_id") || strings.HasSuffix(k, "Id") || lk == "ticket" || lk == "uuid" {
			if scalarID(m[k]) != "" {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		return scalarID(m[keys[0]])
	}
	return ""
}

func scalarID(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return ""
}

// MaxShown bounds the ids kept from one listing: enough for any page a
// person reads, never a log's worth of memory.
const MaxShown = 1000

// ListedInHTTP is the ids a read's JSON answer lists: an array of
// objects, or an object holding one (data, items, results, or the one
// array it has). A list of fewer than two says nothing two effects need.
func ListedInHTTP(status int, body string) []string {
	if status < 200 || status >= 300 {
		return nil
	}
	var v any
	if json.Unmarshal([]byte(body), &v) != nil {
		return nil
	}
	return listedInJSON(v)
}

// ListedInToolResult is the ids an MCP tool's answer lists, in its
// structuredContent or a text block that is JSON.
func ListedInToolResult(result json.RawMessage) []string {
	var r struct {
		IsError    bool `json:"isError"`
		Structured any  `json:"structuredContent"`
		Content    []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(result, &r) != nil || r.IsError {
		return nil
	}
	if ids := listedInJSON(r.Structured); ids != nil {
		return ids
	}
	for _, c := range r.Content {
		var v any
		if json.Unmarshal([]byte(c.Text), &v) == nil {
			if ids := listedInJSON(v); ids != nil {
				return ids
			}
		}
	}
	return nil
}

func listedInJSON(v any) []string {
	list, ok := v.([]any)
	if m, isObj := v.(map[string]any); isObj {
		list, ok = arrayIn(m)
	}
	if !ok {
		return nil
	}
	var ids []string
	for _, item := range list {
		if id := createdInJSON(item); id != "" && len(ids) < MaxShown {
			ids = append(ids, id)
		}
	}
	if len(ids) < 2 {
		return nil
	}
	return ids
}

// arrayIn finds the list in a page object: a conventional key, else the
// only array value it holds.
func arrayIn(m map[string]any) ([]any, bool) {
	for _, k := range []string{"data", "items", "results", "records", "entries"} {
		if a, ok := m[k].([]any); ok {
			return a, true
		}
	}
	var found []any
	n := 0
	for _, v := range m {
		if a, ok := v.([]any); ok {
			found, n = a, n+1
		}
	}
	return found, n == 1
}

// Lists reports whether a listing shows what an answer said it created:
// the id itself, or the last segment of a created path (/v1/vms/vm-72
// is listed as vm-72).
func Lists(shown []string, created string) bool {
	if created == "" {
		return false
	}
	last := created[strings.LastIndexByte(created, '/')+1:]
	for _, s := range shown {
		if s == created || (last != "" && s == last) {
			return true
		}
	}
	return false
}

// SafeMethod reports RFC 9110's safe methods (GET, HEAD, OPTIONS): they
// ask and change nothing, so they create nothing and are read-only.
func SafeMethod(method string) bool {
	switch strings.ToUpper(method) {
	case "GET", "HEAD", "OPTIONS":
		return true
	}
	return false
}
