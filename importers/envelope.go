package importers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
)

// Access logs pulled off a cluster often arrive wrapped, one wrapper per
// line, by what collected them: the container runtime's CRI log (a node's
// /var/log/pods/…: "<time> stdout F <line>"), `kubectl logs --timestamps`
// ("<time> <line>"), Docker's json-file driver ({"log":"<line>\n",
// "stream":"stdout","time":"…"}). unwrap returns the line inside, so a
// proxy's own format is read as if from its own file; the wrapper's time
// is when the runtime read the line, not the request's, and is dropped.

// criLine is a CRI log line: time, stream, full or partial tag, content.
// The runtime splits a long line into partial ones (P) ended by a full
// one (F).
var criLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) (?:stdout|stderr) ([FP]) `)

// stampedLine is a line prefixed with an RFC 3339 time and a space
// (kubectl logs --timestamps, docker logs -t).
var stampedLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) `)

// maxJoined bounds a line the runtime split into partial CRI lines.
const maxJoined = 4 << 20

// unwrap returns the line inside a container log wrapper, whether there
// was one, and whether it is a partial CRI line that the next continues.
func unwrap(line []byte) (inner []byte, wrapped, partial bool) {
	l := bytes.TrimSpace(line)
	if len(l) > 0 && l[0] == '{' && bytes.HasPrefix(l, []byte(`{"log":`)) {
		var d struct {
			Log    *string `json:"log"`
			Stream string  `json:"stream"`
			Time   string  `json:"time"`
		}
		if json.Unmarshal(l, &d) == nil && d.Log != nil && d.Stream != "" && d.Time != "" {
			// json-file ends a line with \n; a line without one is
			// continued by the next entry.
			return bytes.TrimRight([]byte(*d.Log), "\r\n"), true, !bytes.HasSuffix([]byte(*d.Log), []byte("\n"))
		}
		return line, false, false
	}
	// The content as written: a partial line may end in a space.
	l = bytes.TrimRight(line, "\r\n")
	if m := criLine.FindSubmatchIndex(l); m != nil {
		return l[m[1]:], true, l[m[2]] == 'P'
	}
	if m := stampedLine.Find(l); m != nil {
		return l[len(m):], true, false
	}
	return line, false, false
}

// unwrapper joins a file's wrapped lines back into the producer's.
type unwrapper struct {
	pending []byte
	on      bool // the file's lines are wrapped (decided by its first)
	decided bool
	// bare, if set, says whether a line is already the producer's own:
	// then the file is not taken for wrapped (a format whose lines start
	// with a time of their own).
	bare func(line []byte) bool
}

// line returns the producer's line for a line of the file, or false
// while a split line is still being joined.
func (u *unwrapper) line(l []byte) ([]byte, bool, error) {
	if u.decided && !u.on {
		return l, true, nil
	}
	inner, wrapped, partial := unwrap(l)
	if !u.decided {
		u.on, u.decided = wrapped && (u.bare == nil || !u.bare(l)), true
	}
	if !u.on || !wrapped {
		return l, true, nil
	}
	if partial || len(u.pending) > 0 {
		if len(u.pending)+len(inner) > maxJoined {
			u.pending = nil
			return nil, false, fmt.Errorf("a line split by the container runtime is longer than %d MiB", maxJoined>>20)
		}
		u.pending = append(u.pending, inner...)
		if partial {
			return nil, false, nil
		}
		inner, u.pending = u.pending, nil
	}
	return inner, true, nil
}

// unwrapHead unwraps the lines of a file's head when its first line is
// wrapped, for detection; ok is false when it is not.
func unwrapHead(head []byte) ([]byte, bool) {
	var u unwrapper
	var out [][]byte
	for _, l := range bytes.Split(head, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		inner, ok, err := u.line(l)
		if !u.on {
			return head, false
		}
		if ok && err == nil {
			out = append(out, inner)
		}
	}
	return bytes.Join(out, []byte("\n")), u.on
}
