// Package spool keeps output that must be reordered before it is written
// (most severe first, a header that counts what follows) on disk instead
// of in memory: bytes are written to a stream under a rank, and read back
// highest rank first, in the order written within a rank. Memory stays a
// buffer per file, whatever the output's size.
package spool

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Spool is a set of temporary files under one directory.
type Spool struct {
	dir   string
	files map[key]*file
}

type key struct {
	stream string
	rank   int
}

type file struct {
	f *os.File
	w *bufio.Writer
}

// New makes a spool in the system's temporary directory; it is created on
// the first write, so an empty output costs no file.
func New() *Spool { return &Spool{files: map[key]*file{}} }

// Writer returns the writer of a stream's rank.
func (s *Spool) Writer(stream string, rank int) (io.Writer, error) {
	k := key{stream, rank}
	if f := s.files[k]; f != nil {
		return f.w, nil
	}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "mcpdup-spool-")
		if err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
		s.dir = dir
	}
	f, err := os.Create(filepath.Join(s.dir, fmt.Sprintf("%s-%d", stream, rank)))
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s.files[k] = &file{f: f, w: bufio.NewWriterSize(f, 64<<10)}
	return s.files[k].w, nil
}

// Reader returns a stream's bytes, highest rank first. Call it once per
// stream, after the last write to it.
func (s *Spool) Reader(stream string) (io.Reader, error) {
	var ranks []int
	for k := range s.files {
		if k.stream == stream {
			ranks = append(ranks, k.rank)
		}
	}
	slices.Sort(ranks)
	slices.Reverse(ranks)
	rs := make([]io.Reader, 0, len(ranks))
	for _, r := range ranks {
		f := s.files[key{stream, r}]
		if err := f.w.Flush(); err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
		if _, err := f.f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
		rs = append(rs, bufio.NewReaderSize(f.f, 64<<10))
	}
	return io.MultiReader(rs...), nil
}

// Close removes the spool's files.
func (s *Spool) Close() error {
	for _, f := range s.files {
		f.f.Close()
	}
	s.files = map[key]*file{}
	if s.dir == "" {
		return nil
	}
	err := os.RemoveAll(s.dir)
	s.dir = ""
	return err
}
