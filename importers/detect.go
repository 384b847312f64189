package importers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Detect names the format of a file from its first bytes (decompressed):
// the first line's JSON keys, or the shape of a log line. It never guesses
// between two formats: content that fits none is an error that lists them.
func Detect(head []byte) (string, error) {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	name, err := detectBare(head)
	if err == nil {
		return name, nil
	}
	// Lines wrapped by what collected them (envelope.go): the format
	// inside, if one whose reader unwraps them.
	if inner, ok := unwrapHead(head); ok {
		name, ierr := detectBare(inner)
		if ierr == nil && presets[name] == nil {
			return "", &UnknownFormatError{Why: fmt.Sprintf("a container log (CRI, kubectl logs --timestamps or Docker's json-file) of %s lines, which are read only as %s writes them: take them out first (jq -r .log, or cut -d' ' -f4- for CRI)", name, name)}
		}
		if ierr == nil {
			return name, nil
		}
	}
	return "", err
}

// detectLines is how many of a file's first lines detection looks at.
const detectLines = 50

// detectBare is Detect of lines as their producer wrote them.
func detectBare(head []byte) (string, error) {
	first, _, _ := bytes.Cut(head, []byte("\n"))
	first = bytes.TrimSpace(first)
	if len(first) == 0 {
		rest := bytes.TrimSpace(head)
		if len(rest) == 0 {
			return "", fmt.Errorf("the file is empty")
		}
		first, _, _ = bytes.Cut(rest, []byte("\n"))
	}
	// A JSON Lines file may start with a line that is not a record (a
	// runtime's banner): the first line that is a JSON object decides.
	escaped := false // the line decides with nginx's \xHH escapes undone
	for i, l := range bytes.SplitN(head, []byte("\n"), detectLines+1) {
		if l = bytes.TrimSpace(l); i < detectLines && len(l) > 0 && l[0] == '{' && json.Valid(l) {
			first, escaped = l, false
			break
		}
		if fixed, ok := xEscapedJSON(l); ok && i < detectLines && l[0] == '{' && !escaped {
			first, escaped = fixed, true // unless a later line is JSON as it is
		}
	}
	if escaped {
		return detectXEscaped(first)
	}
	var obj map[string]json.RawMessage
	if first[0] == '{' && !bytes.Contains(head, []byte("\n")) && !json.Valid(first) {
		// A first line longer than the head (a logged request body):
		// its keys up to there decide.
		obj = partialObject(first)
	}
	if first[0] == '{' && (obj != nil || json.Unmarshal(first, &obj) == nil) {
		if name := detectObject(obj); name != "" {
			return name, nil
		}
		if name := detectPreset(obj); name != "" {
			return name, nil
		}
		// A log of several kinds of entries (Tyk's gateway messages
		// before its access log's, Teleport's logins before its MCP
		// events): a later object among the first lines may decide.
		if name := detectLater(head, first); name != "" {
			return name, nil
		}
		return "", &UnknownFormatError{Why: fmt.Sprintf("the first line is JSON with keys %s, which no format here has", keys(obj)), Mapping: true}
	}
	if first[0] == '{' {
		// One pretty-printed document: look for its format's key near the top.
		if bytes.Contains(head, []byte(`"resourceSpans"`)) {
			return "otlp", nil
		}
		if bytes.Contains(head, []byte(`"log"`)) && bytes.Contains(head, []byte(`"entries"`)) {
			return "har", nil
		}
	}
	// Log formats: a recognisable line among the first few (a log may
	// start with lines of other kinds, such as start-up messages).
	for i, l := range bytes.SplitN(head, []byte("\n"), detectLines+1) {
		if i == detectLines {
			break
		}
		for name, re := range linePatterns {
			if re.Match(bytes.TrimSpace(l)) {
				return name, nil
			}
		}
		if name := detectText(bytes.TrimSpace(l)); name != "" {
			return name, nil
		}
	}
	if first[0] == '[' && json.Valid(first) {
		return "", &UnknownFormatError{Why: batchWhy(first)}
	}
	return "", &UnknownFormatError{Why: fmt.Sprintf("cannot tell the format from the first line %q", clip(first, 80))}
}

// detectXEscaped names the format of a JSON line in nginx's default
// escaping (its \xHH escapes undone): a preset whose producer writes it.
func detectXEscaped(line []byte) (string, error) {
	var obj map[string]json.RawMessage
	json.Unmarshal(line, &obj)
	name := detectPreset(obj)
	if name != "" && presets[name].JSONEscapes == "x" {
		return name, nil
	}
	what := "no format here has"
	if name != "" {
		what = name + " does not write so"
	}
	return "", &UnknownFormatError{Why: fmt.Sprintf("the first line is JSON in nginx's default escaping (\\xHH in its strings: a log_format without escape=json) with keys %s, which %s", keys(obj), what), Mapping: true}
}

// detectLater names the format of the first of the head's first lines,
// after first, that is a JSON object a format has the keys of, or "".
func detectLater(head, first []byte) string {
	for i, l := range bytes.SplitN(head, []byte("\n"), detectLines+1) {
		if l = bytes.TrimSpace(l); i == detectLines || len(l) == 0 || l[0] != '{' || bytes.Equal(l, first) {
			continue
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(l, &obj) != nil {
			continue
		}
		if name := detectObject(obj); name != "" {
			return name
		}
		if name := detectPreset(obj); name != "" {
			return name
		}
	}
	return ""
}

// batchWhy says what a line that is a JSON array is: a batch of records
// (Kong's http-log posts its queue so), which the formats read one a line.
func batchWhy(line []byte) string {
	var a []json.RawMessage
	json.Unmarshal(line, &a)
	return fmt.Sprintf("the line is a JSON array of %d entries, not one record: a batch, as Kong's http-log posts its queue (queue.max_batch_size > 1); write one record a line first (jq -c '.[]' FILE)", len(a))
}

// partialObject reads the members of a JSON object cut short, up to the
// cut; nil if there are none.
func partialObject(b []byte) map[string]json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	obj := map[string]json.RawMessage{}
	for {
		t, err := dec.Token()
		k, ok := t.(string)
		if err != nil || !ok {
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		obj[k] = v
	}
	if len(obj) == 0 {
		return nil
	}
	return obj
}

// UnknownFormatError: the format of a file could not be detected. Why is
// what was seen; Error adds what to do on the command line (the console
// offers the list to choose from instead).
type UnknownFormatError struct {
	Why     string
	Mapping bool // JSON whose fields a --mapping could name
}

func (e *UnknownFormatError) Error() string {
	if e.Mapping {
		return e.Why + "; give --format (one of " + strings.Join(Formats(), ", ") + "), or --mapping FILE to map its fields"
	}
	return e.Why + "; give --format (one of " + strings.Join(Formats(), ", ") + ")"
}

// detectObject recognises a first line by the keys its format always has.
func detectObject(obj map[string]json.RawMessage) string {
	has := func(ks ...string) bool {
		for _, k := range ks {
			if _, ok := obj[k]; !ok {
				return false
			}
		}
		return true
	}
	switch {
	case has("format") && bytes.HasPrefix(obj["format"], []byte(`"mcpdup-export/`)):
		return "mcpdup"
	case has("resourceSpans"):
		return "otlp"
	case has("seq", "ts", "identity", "session", "channel", "decision", "this_hash"):
		return "sallyport"
	case has("log") && bytes.Contains(obj["log"], []byte(`"entries"`)):
		return "har"
	}
	return ""
}

var linePatterns = map[string]*regexp.Regexp{}

func keys(obj map[string]json.RawMessage) string {
	ks := make([]string, 0, len(obj))
	for k := range obj {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	if len(ks) > 8 {
		ks = append(ks[:8], "…")
	}
	return strings.Join(ks, ", ")
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
