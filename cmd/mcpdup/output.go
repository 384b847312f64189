package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/mcpdup/mcpdup/internal/termsafe"
)

// writeJSON writes v as indented JSON with a trailing newline. Field names
// are snake_case and stable: scripts read them.
func writeJSON(w io.Writer, v any) error {
	if sw, ok := w.(*termsafe.Writer); ok {
		w = sw.Raw // JSON stays exact: its encoder escapes what JSON must
	}
	b, err := indented(v, "")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// isTerminal reports whether w is an interactive terminal.
func isTerminal(w io.Writer) bool {
	if sw, ok := w.(*termsafe.Writer); ok {
		w = sw.Raw
	}
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// progress prints "verb done/total" on one rewritten stderr line, only on
// a terminal and only once the work has taken long enough to matter.
type progress struct {
	w     io.Writer
	verb  string
	start time.Time
	shown bool
	bytes bool // done and total are bytes, not records
}

func newProgress(w io.Writer, verb string) *progress {
	if !isTerminal(w) {
		return nil
	}
	if sw, ok := w.(*termsafe.Writer); ok {
		w = sw.Raw // the progress line is ours: its \r redraws it
	}
	return &progress{w: w, verb: verb, start: time.Now()}
}

func (p *progress) update(done, total int64) {
	if p == nil || time.Since(p.start) < 300*time.Millisecond {
		return
	}
	p.shown = true
	if p.bytes {
		if total > 0 {
			fmt.Fprintf(p.w, "\r%s: %d of %d MB (%d%%)", p.verb, done>>20, total>>20, done*100/total)
		} else {
			fmt.Fprintf(p.w, "\r%s: %d MB", p.verb, done>>20)
		}
		return
	}
	if total > 0 {
		fmt.Fprintf(p.w, "\r%s %d/%d records (%d%%)", p.verb, done, total, done*100/total)
	} else {
		fmt.Fprintf(p.w, "\r%s %d records", p.verb, done)
	}
}

func (p *progress) done() {
	if p != nil && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
