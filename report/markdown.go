package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/internal/spool"
)

// Markdown writes a post-incident report for one suspect: verdict, the
// five answers with evidence, the recommended fix, and the timeline.
func Markdown(w io.Writer, sus *analyze.Suspect, tl *Timeline, whatIf []analyze.WhatIfCall, in audit.Integrity) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Post-incident report: %s\n\n%s\n", sus.ID, integrityMarkdown(in))
	suspectMarkdown(&b, sus)
	b.WriteString("\n## Timeline\n\n| # | time | lanes | event | states after |\n|---|---|---|---|---|\n")
	for _, f := range tl.Frames {
		fmt.Fprintf(&b, "| %d | %s | %s → %s | %s | %s |\n", f.Seq, frameTime(f), tl.LaneName(f.From), tl.LaneName(f.To), f.Label, strings.Join(tl.States(f, Short), ", "))
	}
	whatIfMarkdown(&b, whatIf)
	_, err := io.WriteString(w, b.String())
	return err
}

func whatIfMarkdown(b *strings.Builder, whatIf []analyze.WhatIfCall) {
	if len(whatIf) == 0 {
		return
	}
	b.WriteString("\n## What the gateway would have done\n\n| call | recorded | gateway | why |\n|---|---|---|---|\n")
	for _, c := range whatIf {
		fmt.Fprintf(b, "| `%s` | %s | **%s** | %s |\n", c.CallID, c.Recorded, c.Action, c.Reason)
	}
}

// MarkdownWriter renders suspects as a Markdown report: a header that
// counts them, a summary table, then each suspect's five answers with
// evidence and the recommended fix, most severe first. The header counts
// what follows, so rows and sections are spooled to disk as suspects
// stream in (internal/spool) and written at Flush: memory holds one
// suspect, whatever their number.
type MarkdownWriter struct {
	w      io.Writer
	source string
	sp     *spool.Spool
	counts analyze.Counts
	n      int
	err    error
}

// NewMarkdownWriter writes the report of the log at source to w.
func NewMarkdownWriter(w io.Writer, source string) *MarkdownWriter {
	return &MarkdownWriter{w: w, source: source, sp: spool.New(), counts: analyze.Counts{}}
}

// Write adds one suspect. An error writing the spool is Flush's.
func (m *MarkdownWriter) Write(s *analyze.Suspect) {
	if m.err != nil {
		return
	}
	m.counts.Add(s)
	m.n++
	rank := s.Severity.Rank()
	row := fmt.Sprintf("| %s | %s | %s | `%s` | %d | %d | %s | `%s` |\n", s.Verdict.Glyph(), s.Verdict, s.Severity, s.Tool,
		s.NCalls(), s.NExecutions(), s.FirstAt.UTC().Format(time.RFC3339), s.ID)
	var sec strings.Builder
	suspectMarkdown(&sec, s)
	for stream, text := range map[string]string{"rows": row, "sections": sec.String()} {
		w, err := m.sp.Writer(stream, rank)
		if err == nil {
			_, err = io.WriteString(w, text)
		}
		if err != nil {
			m.err = err
			return
		}
	}
}

// Flush writes the report, stating the integrity of what it was computed
// from.
func (m *MarkdownWriter) Flush(in audit.Integrity) error {
	defer m.sp.Close()
	if m.err != nil {
		return fmt.Errorf("markdown report: %w", m.err)
	}
	bw := bufio.NewWriter(m.w)
	fmt.Fprintf(bw, "# Suspected duplicate actions\n\n%s\n\nSource: `%s`. %d suspects: %s.\n\n", integrityMarkdown(in), m.source, m.n, m.counts)
	if m.n > 0 {
		bw.WriteString("| | verdict | severity | tool | calls | executions | first call | suspect |\n|---|---|---|---|---|---|---|---|\n")
		for _, stream := range []string{"rows", "sections"} {
			rd, err := m.sp.Reader(stream)
			if err != nil {
				return err
			}
			if _, err := io.Copy(bw, rd); err != nil {
				return fmt.Errorf("markdown report: %w", err)
			}
		}
	}
	return bw.Flush()
}

// Close removes the spool; Flush closes it too.
func (m *MarkdownWriter) Close() error { return m.sp.Close() }

// SuspectsMarkdown renders suspects held in memory (a test's, a small
// store's) through a MarkdownWriter.
func SuspectsMarkdown(w io.Writer, source string, suspects []*analyze.Suspect, in audit.Integrity) error {
	m := NewMarkdownWriter(w, source)
	for _, s := range suspects {
		m.Write(s)
	}
	return m.Flush(in)
}

// suspectMarkdown renders one suspect's walk.
func suspectMarkdown(b *strings.Builder, s *analyze.Suspect) {
	fmt.Fprintf(b, "\n## %s %s: %s\n\n", s.Verdict.Glyph(), s.ID, s.Title)
	fmt.Fprintf(b, "`%s` on `%s %s`, contract `%s`, severity **%s**. %s\n\n", s.Tool, s.Method, s.Target, s.Contract, s.Severity, s.Summary)
	for _, q := range s.Questions {
		fmt.Fprintf(b, "%d. **%s** %s. %s", q.N, q.Question, strings.ToUpper(string(q.Answer)), q.Explanation)
		if len(q.Evidence) > 0 {
			fmt.Fprintf(b, " Evidence: %s.", EvidenceText(q))
		}
		b.WriteString("\n")
	}
	if len(s.Shown) > 0 {
		fmt.Fprintf(b, "\n**Two effects shown:** %s.\n", CitedText(s.Shown))
	}
	fmt.Fprintf(b, "\n**Recommended fix:** %s\n", s.Fix)
}

// CitedText lists evidence records: "#12 what (file:line record); #14 what".
func CitedText(ev []analyze.Evidence) string {
	out := make([]string, len(ev))
	for i, e := range ev {
		out[i] = fmt.Sprintf("#%d %s", e.Seq, e.What)
		if e.Source != "" {
			out[i] += " (" + e.Source + ")"
		}
	}
	return strings.Join(out, "; ")
}

// EvidenceText lists an answer's evidence records: "#12 what; #14 what
// (traces.jsonl:3 span 00f0…)".
func EvidenceText(q analyze.Answer) string { return CitedText(q.Evidence) }

func frameTime(f Frame) string {
	if f.Time == nil {
		return "not recorded"
	}
	return f.Time.UTC().Format(time.RFC3339Nano)
}

// Clock is a frame's time of day, "15:04:05.000", or "" when the log
// does not record it.
func Clock(f Frame) string {
	if f.Time == nil {
		return ""
	}
	return f.Time.UTC().Format("15:04:05.000")
}

// NearMissesMarkdown writes the near misses section of a suspects report.
func NearMissesMarkdown(w io.Writer, near []analyze.NearMiss, omitted int) error {
	if len(near) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Near misses\n\nCalls of one tool close together that asked for different effects: not suspects.\n\n| tool | first call | second call | what differs |\n|---|---|---|---|\n")
	for _, m := range near {
		fmt.Fprintf(&b, "| `%s` | `%s` | `%s` | %s |\n", m.Tool, m.First.ID, m.Second.ID, NearMissText(m))
	}
	if omitted > 0 {
		fmt.Fprintf(&b, "\n%d more not listed.\n", omitted)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// integrityMarkdown is a report's integrity line: what was proven about
// the data it was computed from, loud when that is nothing.
func integrityMarkdown(in audit.Integrity) string {
	if in.State != audit.IntegrityVerified {
		return "> **Integrity: " + in.Text + ".** Nothing below is proven by the signed log."
	}
	return "Integrity: " + in.Text + "."
}
