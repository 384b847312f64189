package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/internal/spool"
)

// TableWriter prints suspects one line each, most severe first (or in
// the order they were found). Each suspect's row is spooled to disk as it
// is written (internal/spool), so a listing of any length is sorted and
// aligned with memory for one row and the column widths.
type TableWriter struct {
	w         io.Writer
	questions bool
	byTime    bool
	sp        *spool.Spool
	n         int
	width     []int // of each column, over the rows so far
	answerW   int
	err       error
}

// tableRow is a spooled row: its cells, then with questions each answer
// ("Q1 yes") and its explanation.
type tableRow struct {
	Cells   []string `json:"c"`
	Answers []string `json:"a,omitempty"`
}

var tableHead = []string{"", "VERDICT", "SEVERITY", "TOOL", "CALLS", "EXECS", "FIRST CALL", "SUSPECT"}

// Orders of the suspects table.
const (
	SortSeverity = "severity" // most severe first, then oldest
	SortTime     = "time"     // as found: by first call
)

// NewTableWriter writes to w, sorted by order (SortSeverity or SortTime);
// with questions, each suspect is followed by its five answers. Close it
// (Flush does) to remove its spool.
func NewTableWriter(w io.Writer, questions bool, order string) *TableWriter {
	t := &TableWriter{w: w, questions: questions, byTime: order == SortTime, sp: spool.New(), width: make([]int, len(tableHead))}
	for i, h := range tableHead {
		t.width[i] = ansi.StringWidth(h)
	}
	return t
}

// Write adds one suspect. An error writing the spool is Flush's.
func (t *TableWriter) Write(s *analyze.Suspect) {
	if t.err != nil {
		return
	}
	r := tableRow{Cells: []string{s.Verdict.Glyph(), string(s.Verdict), string(s.Severity), s.Tool, strconv.Itoa(s.NCalls()),
		strconv.Itoa(s.NExecutions()), s.FirstAt.UTC().Format(time.RFC3339), s.ID}}
	for i, c := range r.Cells {
		t.width[i] = max(t.width[i], ansi.StringWidth(c))
	}
	if t.questions {
		for _, q := range s.Questions {
			label := fmt.Sprintf("Q%d %s", q.N, q.Answer)
			t.answerW = max(t.answerW, ansi.StringWidth(label))
			r.Answers = append(r.Answers, label, q.Explanation)
		}
	}
	rank := 0
	if !t.byTime {
		rank = s.Severity.Rank()
	}
	w, err := t.sp.Writer("rows", rank)
	if err == nil {
		err = json.NewEncoder(w).Encode(r)
	}
	t.err = err
	t.n++
}

// Flush prints the table. The suspect lines are aligned with each other;
// with questions, each one's answers follow it, indented and aligned
// among themselves, so neither disturbs the other's columns.
func (t *TableWriter) Flush() error {
	defer t.Close()
	if t.err != nil {
		return fmt.Errorf("suspects table: %w", t.err)
	}
	if t.n == 0 {
		return nil
	}
	rd, err := t.sp.Reader("rows")
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(t.w)
	line := func(cs []string) {
		for i, c := range cs {
			if i == len(cs)-1 {
				bw.WriteString(c)
				break
			}
			bw.WriteString(c + strings.Repeat(" ", t.width[i]-ansi.StringWidth(c)+2))
		}
		bw.WriteByte('\n')
	}
	line(tableHead)
	dec := json.NewDecoder(rd)
	for {
		var r tableRow
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("suspects table: %w", err)
		}
		line(r.Cells)
		for i := 0; i+1 < len(r.Answers); i += 2 {
			fmt.Fprintf(bw, "    %s%s  %s\n", r.Answers[i], strings.Repeat(" ", t.answerW-ansi.StringWidth(r.Answers[i])), r.Answers[i+1])
		}
	}
	return bw.Flush()
}

// Close removes the spool; Flush closes it too.
func (t *TableWriter) Close() error { return t.sp.Close() }

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
		for _, s := range tl.States(f, Short) {
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
