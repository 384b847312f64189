package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/internal/termsafe"
)

// suspectSpool keeps analyze -o json from holding every suspect: each one
// is encoded as it streams in and written to a temporary file, one per
// severity when the document lists them most severe first (one in all for
// --sort time), and the files are copied out in order at the end. Memory
// stays one suspect; disk holds the document once.
type suspectSpool struct {
	dir    string
	byRank bool
	files  map[int]*os.File
	n      int
}

func newSuspectSpool(byRank bool) (*suspectSpool, error) {
	dir, err := os.MkdirTemp("", "mcpdup-analyze-")
	if err != nil {
		return nil, err
	}
	return &suspectSpool{dir: dir, byRank: byRank, files: map[int]*os.File{}}, nil
}

// add encodes one suspect, as an element of the suspects array.
func (s *suspectSpool) add(sus *analyze.Suspect) error {
	rank := 0
	if s.byRank {
		rank = sus.Severity.Rank()
	}
	f := s.files[rank]
	if f == nil {
		var err error
		if f, err = os.Create(filepath.Join(s.dir, fmt.Sprintf("rank-%d", rank))); err != nil {
			return err
		}
		s.files[rank] = f
	}
	b, err := indented(sus, "    ")
	if err != nil {
		return err
	}
	s.n++
	_, err = f.Write(append([]byte(",\n    "), b...))
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
	ranks := make([]int, 0, len(s.files))
	for r := range s.files {
		ranks = append(ranks, r)
	}
	slices.Sort(ranks)
	slices.Reverse(ranks)
	first := true
	for _, r := range ranks {
		f := s.files[r]
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		rd := bufio.NewReader(f)
		if first { // the document's first element has no comma before it
			if _, err := rd.Discard(1); err != nil {
				return err
			}
			first = false
		}
		if _, err := io.Copy(bw, rd); err != nil {
			return err
		}
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

func (s *suspectSpool) close() {
	for _, f := range s.files {
		f.Close()
	}
	os.RemoveAll(s.dir)
}

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
