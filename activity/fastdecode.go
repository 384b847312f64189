package activity

// A direct decoder for the transition records the store writes, the
// counterpart of Transition.appendCanonical: most of a log is
// transitions, and a replay of a million records spent a third of its
// time in the general JSON decoder. It reads only the canonical form
// (keys known, sorted, unique; strings without escapes; plain integers)
// and leaves everything else to Record.Event's decoders, so it can never
// read a record differently from them (FuzzEventDecoders holds them to
// it).

import (
	"bytes"
	"strconv"
	"time"
	"unicode/utf8"
)

// scanner walks canonical JSON; any surprise sets bad.
type scanner struct {
	b   []byte
	i   int
	bad bool
}

func (s *scanner) byte(c byte) {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return
	}
	s.bad = true
}

func (s *scanner) peek(c byte) bool { return !s.bad && s.i < len(s.b) && s.b[s.i] == c }

// str reads a string with nothing to unescape.
func (s *scanner) str() string {
	raw := s.rawStr()
	if s.bad {
		return ""
	}
	return string(raw[1 : len(raw)-1])
}

// rawStr is the string token, quotes included.
func (s *scanner) rawStr() []byte {
	if s.bad || !s.peek('"') {
		s.bad = true
		return nil
	}
	end := bytes.IndexByte(s.b[s.i+1:], '"')
	if end < 0 {
		s.bad = true
		return nil
	}
	body := s.b[s.i+1 : s.i+1+end]
	for _, c := range body {
		if c < 0x20 || c == '\\' {
			s.bad = true
			return nil
		}
	}
	if !utf8.Valid(body) {
		s.bad = true
		return nil
	}
	tok := s.b[s.i : s.i+end+2]
	s.i += end + 2
	return tok
}

// int reads a plain integer (no sign but '-', no leading zero, no
// fraction or exponent).
func (s *scanner) int() int64 {
	start := s.i
	if s.peek('-') {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	n := s.i - digits
	if s.bad || n == 0 || n > 15 || (n > 1 && s.b[digits] == '0') {
		s.bad = true
		return 0
	}
	v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil {
		s.bad = true
	}
	return v
}

// keys reads an object's members in canonical order; each key must come
// after the one before it and be one field knows.
func (s *scanner) keys(field func(key string) bool) {
	s.byte('{')
	prev := ""
	for first := true; !s.bad && !s.peek('}'); first = false {
		if !first {
			s.byte(',')
		}
		k := s.str()
		s.byte(':')
		if s.bad || k <= prev || !field(k) {
			s.bad = true
			return
		}
		prev = k
	}
	s.byte('}')
}

// decodeTransition reads a transition record's data, or reports false.
func decodeTransition(data []byte) (*Transition, bool) {
	t := new(Transition)
	s := &scanner{b: data}
	s.keys(func(k string) bool {
		switch k {
		case "at":
			var tm time.Time
			if err := tm.UnmarshalJSON(s.rawStr()); s.bad || err != nil {
				return false
			}
			t.At = Some(tm)
		case "call_id":
			t.CallID = CallID(s.str())
		case "created":
			t.Created = s.str()
		case "execution_id":
			t.ExecutionID = ExecutionID(s.str())
		case "exit_code":
			t.ExitCode = Some(int(s.int()))
		case "from":
			t.From = State(s.str())
		case "implied":
			if !bytes.HasPrefix(s.b[s.i:], []byte("true")) {
				return false
			}
			s.i += 4
			t.Implied = true
		case "reason":
			t.Reason = s.str()
		case "replayed":
			t.Replayed = s.str()
		case "replica":
			t.Replica = s.str()
		case "result_ref":
			t.ResultRef = s.str()
		case "shows":
			s.byte('[')
			for first := true; !s.bad && !s.peek(']'); first = false {
				if !first {
					s.byte(',')
				}
				t.Shows = append(t.Shows, s.str())
			}
			s.byte(']')
			if len(t.Shows) == 0 {
				return false // [] decodes to an empty, not nil, slice
			}
		case "source":
			s.keys(func(k string) bool {
				switch k {
				case "line":
					t.Source.Line = s.int()
				case "record":
					t.Source.Record = s.str()
				case "source":
					t.Source.Source = SourceID(s.str())
				default:
					return false
				}
				return !s.bad
			})
		case "target_status":
			t.TargetStatus = Some(int(s.int()))
		case "to":
			t.To = State(s.str())
		default:
			return false
		}
		return !s.bad
	})
	if s.bad || s.i != len(data) {
		return nil, false
	}
	return t, true
}
