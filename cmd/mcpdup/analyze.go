package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/internal/gctune"
	"github.com/mcpdup/mcpdup/report"
)

// AnalyzeCmd finds suspected duplicates and walks the five questions.
type AnalyzeCmd struct {
	Output    string        `short:"o" enum:"table,json,markdown,md" default:"table" help:"Output format: table, json or markdown (md)."`
	Questions bool          `short:"q" help:"With -o table, print each suspect's five answers."`
	Window    time.Duration `help:"Group calls within this window instead of each tool's recorded attach window (default for logs that record none: 1h)."`
	FailOn    string        `enum:"none,duplicate,risk,unknown" default:"none" help:"Exit 1 if a suspect is at least this bad: duplicate; risk (also duplicate_risk); unknown (also insufficient_evidence)."`
	Sort      string        `enum:"severity,time" default:"severity" help:"Order: severity (most severe first, as the console; ties oldest first) or time (by first call)."`
	From      time.Time     `placeholder:"TIME" help:"Only suspects whose first call came at or after this time (RFC 3339): an incident's window, analysed without reading the rest of the log."`
	To        time.Time     `placeholder:"TIME" help:"... and at or before this time."`
	verifyFirst
}

func (c *AnalyzeCmd) Help() string {
	return `Groups calls that request the same effect (tool, target, method and
canonical arguments) close in time, and for every group of two or more
answers, in order: one agent process or two? was the first call authorized
and dispatched? did the target answer? did delivery fail after the action
finished? did the second call reuse the execution or create a new attempt?
Each answer cites log records (#seq) and says "unknown" when the records
are silent. Verdicts: duplicate, duplicate_risk, two_processes,
insufficient_evidence, intentional_repeat, one_action_refused,
one_action_first_no_effect, one_action_attached, harmless_read_only.

Examples:
  mcpdup analyze --db ./incident.db -q
  mcpdup analyze --db ./incident.db --sort time
  mcpdup analyze --db ./incident.db -o markdown > suspects.md
  mcpdup analyze --db ./ci.db --fail-on risk        # CI: exit 1 on duplicates or risks
  mcpdup analyze --db ./incident.db --from 2026-11-30T09:00:00Z --to 2026-11-30T09:15:00Z`
}

var failOn = map[string][]analyze.Verdict{
	"duplicate": {analyze.VerdictDuplicate},
	"risk":      {analyze.VerdictDuplicate, analyze.VerdictDuplicateRisk},
	"unknown":   {analyze.VerdictDuplicate, analyze.VerdictDuplicateRisk, analyze.VerdictInsufficient},
}

// windowText names the window a range's analysis covers.
func (c *AnalyzeCmd) windowText() string {
	switch {
	case c.From.IsZero() && c.To.IsZero():
		return ""
	case c.To.IsZero():
		return " (first call from " + c.From.UTC().Format(time.RFC3339Nano) + ")"
	case c.From.IsZero():
		return " (first call up to " + c.To.UTC().Format(time.RFC3339Nano) + ")"
	}
	return " (first call from " + c.From.UTC().Format(time.RFC3339Nano) + " to " + c.To.UTC().Format(time.RFC3339Nano) + ")"
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Validate refuses a range that ends before it starts, and a negative
// window.
func (c *AnalyzeCmd) Validate() error {
	if err := checkRange(c.From, c.To); err != nil {
		return err
	}
	return checkWindow(c.Window)
}

// checkRange refuses a --from/--to range that ends before it starts.
func checkRange(from, to time.Time) error {
	if !from.IsZero() && !to.IsZero() && to.Before(from) {
		return fmt.Errorf("--to %s is before --from %s", to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	return nil
}

// checkWindow refuses a negative --window: no call would group with
// another, and a CI gate would pass on nothing.
func checkWindow(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--window %s is negative: give a positive duration (or none, for each tool's recorded attach window)", d)
	}
	return nil
}

func (c *AnalyzeCmd) Run(g *Globals) error {
	if c.Output == "md" { // report's name for it
		c.Output = "markdown"
	}
	defer gctune.Raise(analyze.GCPercent)()
	ctx := context.Background()
	s, err := g.openStore(ctx, readStore)
	if err != nil {
		return err
	}
	defer s.Close()
	// The log and tables are verified beside the analysis; the output
	// ends with what that proved (exit 1 if they were tampered with).
	verified := c.verifyBeside(ctx, s)
	prog := newProgress(g.stderr, "analysing")
	var near []analyze.NearMiss
	var nearOmitted int
	opts := analyze.Options{Window: c.Window, From: c.From, To: c.To, Progress: func(n int64) { prog.update(n, 0) },
		NearMisses: func(found []analyze.NearMiss, omitted int) { near, nearOmitted = found, omitted }}
	counts := analyze.Counts{}
	table := report.NewTableWriter(g.stdout, c.Questions, c.Sort)
	defer table.Close()
	md := report.NewMarkdownWriter(g.stdout, s.Path()) // most severe first, whatever --sort
	defer md.Close()
	var spool *suspectSpool // -o json: suspects go to disk as they stream, not into memory
	if c.Output == "json" {
		spool = newSuspectSpool(c.Sort == report.SortSeverity)
		defer spool.close()
	}
	err = analyze.Scan(ctx, s, opts, func(sus *analyze.Suspect) error {
		counts.Add(sus)
		switch c.Output {
		case "table":
			table.Write(sus)
		case "json":
			return spool.add(sus)
		case "markdown":
			md.Write(sus)
		}
		return nil
	})
	prog.done()
	in, verr := verified()
	if err == nil {
		err = verr
	}
	if err != nil {
		return err
	}
	switch c.Output {
	case "json":
		if near == nil {
			near = []analyze.NearMiss{}
		}
		fields := [][2]any{{"counts", counts}, {"total", counts.Total()},
			{"near_misses", near}, {"near_misses_omitted", nearOmitted}, {"integrity", in}}
		if !c.From.IsZero() || !c.To.IsZero() { // what the document covers: suspects whose first call came in the window
			fields = append(fields, [2]any{"window", map[string]*time.Time{"from": timeOrNil(c.From), "to": timeOrNil(c.To)}})
		}
		err = spool.writeDocument(g.stdout, s.Path(), fields)
	case "markdown":
		if err = md.Flush(in); err == nil {
			err = report.NearMissesMarkdown(g.stdout, near, nearOmitted)
		}
	default:
		if err = table.Flush(); err == nil {
			fmt.Fprintf(g.stdout, "\n%s%s: %s\nintegrity: %s\n", countOf(counts.Total(), "suspect"), c.windowText(), counts, in.Text)
			err = report.NearMissesTable(g.stdout, near, nearOmitted)
		}
	}
	if err != nil {
		return err
	}
	if err := warnTampered(g, "analyze", in); err != nil {
		return err
	}
	for _, v := range failOn[c.FailOn] {
		if counts[v] > 0 {
			fmt.Fprintf(g.stderr, "mcpdup analyze: %d %s (--fail-on %s)\n", counts[v], v, c.FailOn)
			return &exitError{1, errSilent}
		}
	}
	return nil
}

// countOf writes n things, in the singular for one ("1 suspect").
func countOf(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}
