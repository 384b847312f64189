package importers

// A log that grew since it was imported (an access log imported at 3:05,
// then again at 3:20) holds the first import's lines again: imported
// whole, each of its requests would be two, and every write a suspect.
// Its content begins with the earlier import's content exactly
// (Source.ContentSize bytes hashing to Source.Content), which one more
// read of the file tells.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// grownFrom is an earlier import this file is a longer copy of, and how
// many of the file's first lines it holds whole.
type grownFrom struct {
	src   activity.Source
	lines int64
}

// shorterCopy finds the longest earlier import of this format the file
// begins with, if any.
func shorterCopy(ctx context.Context, s *activity.Store, opts *Options, path, format string, sums fileSums) (grownFrom, error) {
	cands, err := s.ShorterSources(ctx, format, sums.contentSize)
	if err != nil {
		return grownFrom{}, err
	}
	if opts.SeenIn != nil { // a dry run: what this run would have added too
		more, err := opts.SeenIn.ShorterSources(ctx, format, sums.contentSize)
		if err != nil {
			return grownFrom{}, err
		}
		cands = append(cands, more...)
	}
	if len(cands) == 0 {
		return grownFrom{}, nil
	}
	slices.SortStableFunc(cands, func(a, b activity.Source) int { return cmp.Compare(a.ContentSize, b.ContentSize) })
	p := &prefixHash{h: sha256.New(), cands: cands}
	if _, err := readContent(path, io.Discard, &contentHash{h: p}); err != nil && !errors.Is(err, errPrefixDone) {
		return grownFrom{}, err
	}
	return p.found, nil
}

// errPrefixDone ends the read once every candidate is decided.
var errPrefixDone = errors.New("every shorter copy is decided")

// prefixHash hashes what contentHash emits and, as it passes each
// candidate's size, checks whether the bytes so far are that candidate's
// content. The candidate's last line is held whole only if this file ends
// it there too (the next byte is a line end): an import of a log caught
// mid-line read a partial line, which the longer file completes.
type prefixHash struct {
	h     hash.Hash
	n     int64 // bytes hashed
	lines int64 // line ends among them
	cands []activity.Source
	next  int // the first candidate n has not reached
	found grownFrom
	// decide: a candidate matched at n; the next byte says whether its
	// last line (lines+1) is whole.
	decide bool
}

func (p *prefixHash) Write(b []byte) (int, error) {
	size := len(b)
	for len(b) > 0 {
		if p.decide { // blank space after it: what the earlier import's content dropped
			j := 0
			for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\r') {
				j++
			}
			if j < len(b) {
				if p.decide = false; b[j] == '\n' {
					p.found.lines++
				}
			}
		}
		chunk := b
		if p.next < len(p.cands) {
			if left := p.cands[p.next].ContentSize - p.n; int64(len(chunk)) > left {
				chunk = chunk[:left]
			}
		}
		p.h.Write(chunk)
		p.n += int64(len(chunk))
		p.lines += int64(bytes.Count(chunk, []byte{'\n'}))
		b = b[len(chunk):]
		for p.next < len(p.cands) && p.cands[p.next].ContentSize <= p.n {
			c := p.cands[p.next]
			p.next++
			if c.ContentSize == p.n && hex.EncodeToString(p.h.Sum(nil)) == c.Content {
				p.found, p.decide = grownFrom{src: c, lines: p.lines}, true
			}
		}
		if p.next == len(p.cands) && !p.decide {
			return size, errPrefixDone
		}
	}
	return size, nil
}

// note says what of the file was not imported again.
func (g grownFrom) note() string {
	return fmt.Sprintf("Its first %d lines are %s (%s, imported %s), a shorter copy of this log: not imported again.",
		g.lines, g.src.ID, g.src.File, g.src.ImportedAt.UTC().Format(time.RFC3339))
}
