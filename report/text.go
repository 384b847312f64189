package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
)

// TableWriter prints suspects one line each, as they stream in.
type TableWriter struct {
	tw        *tabwriter.Writer
	questions bool
	header    bool
}

// NewTableWriter writes to w; with questions, each suspect is followed by
// its five answers.
func NewTableWriter(w io.Writer, questions bool) *TableWriter {
	return &TableWriter{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0), questions: questions}
}

// Write prints one suspect.
func (t *TableWriter) Write(s *analyze.Suspect) {
	if !t.header {
		fmt.Fprintln(t.tw, "\tVERDICT\tSEVERITY\tTOOL\tCALLS\tEXECS\tFIRST CALL\tSUSPECT")
		t.header = true
	}
	fmt.Fprintf(t.tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", s.Verdict.Glyph(), s.Verdict, s.Severity, s.Tool,
		len(s.Calls), len(s.Executions), s.FirstAt.UTC().Format(time.RFC3339), s.ID)
	if t.questions {
		for _, q := range s.Questions {
			fmt.Fprintf(t.tw, "\t\t\tQ%d %s\t%s\n", q.N, q.Answer, q.Explanation)
		}
	}
}

// Flush ends the table.
func (t *TableWriter) Flush() error { return t.tw.Flush() }

// TimelineTable prints a timeline one event a line, with each execution's
// state after it (whole ids, to copy into other commands), then what the
// gateway would have done with each call, when whatIf has it.
func TimelineTable(out io.Writer, tl *Timeline, whatIf []analyze.WhatIfCall, in audit.Integrity) error {
	fmt.Fprintf(out, "%s\nintegrity: %s\n\n", tl.Title, in.Text)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "#\tTIME\tLANES\tEVENT\tSTATES AFTER")
	for _, f := range tl.Frames {
		at := Clock(f)
		if at == "" {
			at = "not recorded"
		}
		var states string
		for _, s := range tl.States(f, Full) {
			states += s + " "
		}
		fmt.Fprintf(w, "%d\t%s\t%s→%s\t%s\t%s\n", f.Seq, at, f.From, f.To, f.Label, states)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(whatIf) > 0 {
		fmt.Fprintln(out, "\nwhat the gateway would have done:")
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, c := range whatIf {
			fmt.Fprintf(w, "  %s\t%s\t→ %s\t(%s)\n", c.CallID, c.Recorded, c.Action, c.Reason)
		}
		return w.Flush()
	}
	return nil
}

// NearMissesTable lists near misses under the suspects: one tool, calls
// close together that asked for different effects, and what differs.
func NearMissesTable(out io.Writer, near []analyze.NearMiss, omitted int) error {
	if len(near) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\n%d near misses (one tool, another effect: not suspects):\n", len(near)+omitted)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, m := range near {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", m.Tool, m.First.ReceivedAt.UTC().Format(time.RFC3339), NearMissText(m), ShortID(string(m.Second.ID)))
	}
	if omitted > 0 {
		fmt.Fprintf(w, "  … and %d more\n", omitted)
	}
	return w.Flush()
}

// NearMissText says what tells a near miss's two calls apart.
func NearMissText(m analyze.NearMiss) string {
	if len(m.Differs) == 0 {
		return "another effect"
	}
	return strings.Join(m.Differs, "; ")
}
