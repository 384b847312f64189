package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/internal/spool"
	"github.com/mcpdup/mcpdup/internal/termsafe"
)

// suspectSpool keeps analyze -o json from holding every suspect: each one
// is encoded as it streams in and spooled to disk under its severity when
// the document lists them most severe first (under one rank for --sort
// time), and copied out in order at the end. Memory stays one suspect;
// disk holds the document once.
type suspectSpool struct {
	sp     *spool.Spool
	byRank bool
	n      int
}

func newSuspectSpool(byRank bool) *suspectSpool {
	return &suspectSpool{sp: spool.New(), byRank: byRank}
}

// add encodes one suspect, as an element of the suspects array.
func (s *suspectSpool) add(sus *analyze.Suspect) error {
	rank := 0
	if s.byRank {
		rank = sus.Severity.Rank()
	}
	w, err := s.sp.Writer("json", rank)
	if err != nil {
		return err
	}
	b, err := indented(sus, "    ")
	if err != nil {
		return err
	}
	s.n++
	_, err = w.Write(append([]byte(",\n    "), b...))
	return err
}

// writeDocument writes the whole analysis document: the suspects from the
// spool, most severe first, then tail's fields.
func (s *suspectSpool) writeDocument(w io.Writer, db string, tail [][2]any) error {
	if sw, ok := w.(*termsafe.Writer); ok {
		w = sw.Raw // JSON stays exact: its encoder escapes what JSON must
	}
	bw := bufio.NewWriter(w)
	dbJSON, _ := indented(db, "  ")
	fmt.Fprintf(bw, "{\n  \"schema_version\": 1,\n  \"db\": %s,\n  \"suspects\": [", dbJSON)
	rd, err := s.sp.Reader("json")
	if err != nil {
		return err
	}
	if s.n > 0 { // the document's first element has no comma before it
		if _, err := io.CopyN(io.Discard, rd, 1); err != nil {
			return err
		}
	}
	if _, err := io.Copy(bw, rd); err != nil {
		return err
	}
	if s.n > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]")
	for _, kv := range tail {
		b, err := indented(kv[1], "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(bw, ",\n  %q: %s", kv[0], b)
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

func (s *suspectSpool) close() { s.sp.Close() }

// indented is v as writeJSON writes it, for a place at indent prefix.
func indented(v any, prefix string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
