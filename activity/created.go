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
// path (RFC 9110: a 201 identifies the new resource there), else an id
// in its JSON body.
func CreatedInHTTP(status int, location, body string) string {
	if location != "" && status >= 200 && status < 300 {
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
