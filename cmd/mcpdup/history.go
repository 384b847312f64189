package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/internal/gctune"
	"github.com/mcpdup/mcpdup/report"
)

// HistoryCmd exports the lifecycle as a Jepsen-style history.
type HistoryCmd struct {
	Check  bool   `help:"Print the checker's counts instead of the operations."`
	Output string `short:"o" enum:"jsonl,json,table" default:"jsonl" help:"Operations as JSON lines (jsonl), one JSON document {operations, integrity} (json) or a table; with --check, the counts as json or a table."`
	verifyFirst
}

func (c *HistoryCmd) Help() string {
	return `Every dispatch is an invoke; its completion is ok (the target acted), fail
(it did not) or info (nobody knows: Jepsen's indeterminate operation). A
later status lookup, resend with the same key or operator resolution
settles an info and is marked recovered. The checker counts duplicated
effects (an effect performed by two executions), lost invocations (never
completed), recovered and still-unknown ones.

Exit 1 when the checker finds a duplicated effect or a lost invocation
(as analyze --fail-on does), so a script or a chaos run can gate on it.
The log and tables are verified beside it, as analyze does: the table and
--check end with the integrity line (json: an integrity field), and a
history computed from tables the signed log does not prove exits 1.

Examples:
  mcpdup history --db ./gw.db > history.jsonl
  mcpdup history --db ./gw.db -o table | less
  mcpdup history --db ./gw.db --check`
}

func (c *HistoryCmd) Run(g *Globals) error {
	defer gctune.Raise(analyze.GCPercent)()
	ctx := context.Background()
	s, err := g.openStore(ctx, readStore)
	if err != nil {
		return err
	}
	defer s.Close()
	verified := c.verifyBeside(ctx, s)
	if !c.Check {
		switch c.Output {
		case "table":
			err = writeOpsTable(ctx, g.stdout, s)
		case "json":
			err = writeOpsDocument(ctx, g.stdout, s)
		default:
			enc := json.NewEncoder(g.stdout)
			err = analyze.History(ctx, s, func(op analyze.Op) error { return enc.Encode(op) })
		}
		in, verr := verified()
		if err == nil {
			err = verr
		}
		switch {
		case err != nil:
		case c.Output == "table":
			_, err = fmt.Fprintf(g.stdout, "\nintegrity: %s\n", in.Text)
		case c.Output == "json":
			// The document's end: what verifying the log beside it proved.
			var b []byte
			if b, err = json.Marshal(in); err == nil {
				_, err = fmt.Fprintf(g.stdout, "\n],\n\"integrity\": %s\n}\n", b)
			}
		}
		if err != nil {
			return err
		}
		return warnTampered(g, "history", in)
	}
	res, err := analyze.Check(ctx, s)
	in, verr := verified()
	if err == nil {
		err = verr
	}
	if err != nil {
		return err
	}
	if c.Output == "json" {
		err = writeJSON(g.stdout, struct {
			analyze.CheckResult
			Integrity audit.Integrity `json:"integrity"`
		}{res, in})
	} else {
		writeCheckTable(g.stdout, res)
		_, err = fmt.Fprintf(g.stdout, "\nintegrity: %s\n", in.Text)
	}
	if err != nil {
		return err
	}
	if err := warnTampered(g, "history", in); err != nil {
		return err
	}
	// Like analyze --fail-on: a script (CI, a chaos run) reads the exit code.
	if res.Duplicated > 0 || res.Lost > 0 {
		fmt.Fprintf(g.stderr, "mcpdup history: %d duplicated effect(s), %d lost invocation(s)\n", res.Duplicated, res.Lost)
		return errSilent
	}
	return nil
}

// writeOpsDocument streams the operations as the first member of one JSON
// document, {"operations": [...], "integrity": ...}, whose end the caller
// writes once the log beside it is verified: as many operations as the
// log holds, never all in memory.
func writeOpsDocument(ctx context.Context, w io.Writer, s *activity.Store) error {
	if _, err := io.WriteString(w, "{\n\"operations\": ["); err != nil {
		return err
	}
	sep := "\n"
	return analyze.History(ctx, s, func(op analyze.Op) error {
		b, err := json.Marshal(op)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s%s", sep, b)
		sep = ",\n"
		return err
	})
}

func writeCheckTable(w io.Writer, res analyze.CheckResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range []struct {
		name string
		n    int
		what string
	}{
		{"invocations", res.Invocations, "dispatches (invoke)"},
		{"ok", res.OK, "the target acted"},
		{"fail", res.Fail, "it did not"},
		{"info", res.Info, "nobody knew at the time"},
		{"recovered", res.Recovered, "infos settled later (lookup, resend, operator)"},
		{"still unknown", res.StillUnknown, "last completion is info"},
		{"lost", res.Lost, "never completed, in a log that records outcomes"},
		{"outcome not recorded", res.OutcomeNotRecorded, "invoked, in a log that records no outcome (an MCP call a proxy passed on)"},
		{"duplicated", res.Duplicated, "effects the records show performed by two executions or more, intended or not (an agent's deliberate repeat, two processes: mcpdup analyze tells them apart)"},
		{"possibly duplicated", res.PossiblyDuplicated, "effects two executions or more may have performed (mcpdup analyze walks each)"},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", r.name, r.n, r.what)
	}
	tw.Flush()
	if len(res.Duplicates) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DUPLICATED EFFECT\tTOOL\tTARGET\tEXECUTIONS")
	for _, d := range res.Duplicates {
		ids := make([]string, len(d.Executions))
		for i, id := range d.Executions {
			ids[i] = string(id)
		}
		target := strings.TrimSpace(d.Method + " " + d.Target)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", report.ShortID(d.EffectKey), d.Tool, target, strings.Join(ids, ", "))
	}
	tw.Flush()
}

// writeOpsTable streams the history as fixed-width columns, so a long
// history is never held to align it.
func writeOpsTable(ctx context.Context, w io.Writer, s *activity.Store) error {
	fmt.Fprintf(w, "%-9s %-6s %-30s %-24s %-24s %s\n", "INDEX", "TYPE", "EXECUTION", "TOOL", "TIME", "NOTE")
	return analyze.History(ctx, s, func(op analyze.Op) error {
		at := ""
		if op.Time != nil {
			at = op.Time.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		var note []string
		if op.Recovered {
			note = append(note, "recovered")
		}
		if op.ReadOnly {
			note = append(note, "read")
		}
		_, err := fmt.Fprintf(w, "%-9d %-6s %-30s %-24s %-24s %s\n", op.Index, op.Type, op.Execution, cells(op.F, 24), at, strings.Join(note, " "))
		return err
	})
}

// cells cuts s to n runes, marking the cut.
func cells(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
