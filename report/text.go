package report

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
)

// TableWriter prints suspects one line each, most severe first (or in
// the order they were found). It keeps a small row per suspect, not the
// suspect, so a long listing is sorted without holding every suspect whole.
type TableWriter struct {
	w         io.Writer
	questions bool
	byTime    bool
	rows      []tableRow
}

type tableRow struct {
	glyph, verdict, severity, tool, first, id string
	rank, calls, execs, order                 int
	answers                                   []string // "Q1 yes", then the explanation
}

// Orders of the suspects table.
const (
	SortSeverity = "severity" // most severe first, then oldest
	SortTime     = "time"     // as found: by first call
)

// NewTableWriter writes to w, sorted by order (SortSeverity or SortTime);
// with questions, each suspect is followed by its five answers.
func NewTableWriter(w io.Writer, questions bool, order string) *TableWriter {
	return &TableWriter{w: w, questions: questions, byTime: order == SortTime}
}

// Write adds one suspect.
func (t *TableWriter) Write(s *analyze.Suspect) {
	r := tableRow{glyph: s.Verdict.Glyph(), verdict: string(s.Verdict), severity: string(s.Severity), rank: s.Severity.Rank(),
		tool: s.Tool, calls: len(s.Calls), execs: len(s.Executions), first: s.FirstAt.UTC().Format(time.RFC3339), id: s.ID, order: len(t.rows)}
	if t.questions {
		for _, q := range s.Questions {
			r.answers = append(r.answers, fmt.Sprintf("Q%d %s", q.N, q.Answer), q.Explanation)
		}
	}
	t.rows = append(t.rows, r)
}

// Flush sorts and prints the table. The suspect lines are aligned with
// each other; with questions, each one's answers follow it, indented and
// aligned among themselves, so neither disturbs the other's columns.
func (t *TableWriter) Flush() error {
	if len(t.rows) == 0 {
		return nil
	}
	if !t.byTime {
		slices.SortStableFunc(t.rows, func(a, b tableRow) int { return b.rank - a.rank })
	}
	head := []string{"", "VERDICT", "SEVERITY", "TOOL", "CALLS", "EXECS", "FIRST CALL", "SUSPECT"}
	width := make([]int, len(head))
	cells := func(r tableRow) []string {
		return []string{r.glyph, r.verdict, r.severity, r.tool, strconv.Itoa(r.calls), strconv.Itoa(r.execs), r.first, r.id}
	}
	for i, h := range head {
		width[i] = ansi.StringWidth(h)
	}
	answerW := 0
	for _, r := range t.rows {
		for i, c := range cells(r) {
			width[i] = max(width[i], ansi.StringWidth(c))
		}
		for i := 0; i < len(r.answers); i += 2 {
			answerW = max(answerW, ansi.StringWidth(r.answers[i]))
		}
	}
	bw := bufio.NewWriter(t.w)
	line := func(cs []string) {
		for i, c := range cs {
			if i == len(cs)-1 {
				bw.WriteString(c)
				break
			}
			bw.WriteString(c + strings.Repeat(" ", width[i]-ansi.StringWidth(c)+2))
		}
		bw.WriteByte('\n')
	}
	line(head)
	for _, r := range t.rows {
		line(cells(r))
		for i := 0; i+1 < len(r.answers); i += 2 {
			fmt.Fprintf(bw, "    %s%s  %s\n", r.answers[i], strings.Repeat(" ", answerW-ansi.StringWidth(r.answers[i])), r.answers[i+1])
		}
	}
	t.rows = nil
	return bw.Flush()
}

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
		fmt.Fprintf(w, "%d\t%s\t%s→%s\t%s\t%s\n", f.Seq, at, tl.LaneName(f.From), tl.LaneName(f.To), f.Label, states)
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
