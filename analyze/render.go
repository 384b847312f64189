package analyze

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Counts tallies suspects by verdict.
type Counts map[Verdict]int

// Add counts a suspect.
func (c Counts) Add(s *Suspect) { c[s.Verdict]++ }

// Total is the number of suspects counted.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// String lists the non-zero counts, most alarming first.
func (c Counts) String() string {
	var parts []string
	for _, v := range Verdicts {
		if c[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[v], v))
		}
	}
	if len(parts) == 0 {
		return "no suspects"
	}
	return strings.Join(parts, ", ")
}

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
func (t *TableWriter) Write(s *Suspect) {
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

// WriteMarkdown renders suspects as a Markdown report: a summary table,
// then each suspect's five answers with evidence and the recommended fix.
func WriteMarkdown(w io.Writer, source string, suspects []*Suspect) error {
	var b strings.Builder
	counts := Counts{}
	for _, s := range suspects {
		counts.Add(s)
	}
	fmt.Fprintf(&b, "# Suspected duplicate actions\n\nSource: `%s`. %d suspects: %s.\n\n", source, len(suspects), counts)
	if len(suspects) == 0 {
		_, err := io.WriteString(w, b.String())
		return err
	}
	sorted := append([]*Suspect(nil), suspects...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Severity.Rank() > sorted[j].Severity.Rank() })
	b.WriteString("| | verdict | severity | tool | calls | executions | first call | suspect |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range sorted {
		fmt.Fprintf(&b, "| %s | %s | %s | `%s` | %d | %d | %s | `%s` |\n", s.Verdict.Glyph(), s.Verdict, s.Severity, s.Tool,
			len(s.Calls), len(s.Executions), s.FirstAt.UTC().Format(time.RFC3339), s.ID)
	}
	for _, s := range sorted {
		WriteSuspectMarkdown(&b, s)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteSuspectMarkdown renders one suspect's walk.
func WriteSuspectMarkdown(b *strings.Builder, s *Suspect) {
	fmt.Fprintf(b, "\n## %s %s: %s\n\n", s.Verdict.Glyph(), s.ID, s.Title)
	fmt.Fprintf(b, "`%s` on `%s %s`, contract `%s`, severity **%s**. %s\n\n", s.Tool, s.Method, s.Target, s.Contract, s.Severity, s.Summary)
	for _, q := range s.Questions {
		fmt.Fprintf(b, "%d. **%s** %s. %s", q.N, q.Question, strings.ToUpper(string(q.Answer)), q.Explanation)
		if len(q.Evidence) > 0 {
			var ev []string
			for _, e := range q.Evidence {
				ev = append(ev, fmt.Sprintf("#%d %s", e.Seq, e.What))
			}
			fmt.Fprintf(b, " Evidence: %s.", strings.Join(ev, "; "))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "\n**Recommended fix:** %s\n", s.Fix)
}
