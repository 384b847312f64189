package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/gatewaylite"
	"github.com/mcpdup/mcpdup/internal/termsafe"
	"github.com/mcpdup/mcpdup/report"
)

// ReplayCmd prints a suspect's or a time range's timeline.
type ReplayCmd struct {
	Suspect string        `arg:"" optional:"" placeholder:"SUSPECT" help:"Suspect id (sus_..., from mcpdup analyze): whole, a unique prefix or suffix, or the short form (sus_…9VF4KC)."`
	From    time.Time     `placeholder:"TIME" help:"Replay everything from this time (RFC 3339) instead of a suspect."`
	To      time.Time     `placeholder:"TIME" help:"... up to this time (default: now)."`
	WhatIf  string        `placeholder:"CONFIG" type:"existingfile" help:"Also run the suspect's calls through the gateway's matching under this gateway configuration's contracts."`
	Window  time.Duration `help:"Grouping window, as for mcpdup analyze."`
	Output  string        `short:"o" enum:"table,json" default:"table" help:"Output format: table or json."`
	verifyFirst
	proveRecords
}

func (c *ReplayCmd) Help() string {
	return `Prints every event in order (calls, lifecycle steps) with the state of each
execution after it: the sequence behind a suspect, or behind any time range.
With --what-if, says for each call what the gateway would have done under
the given contracts (attached, returned the stored result, blocked, resent
with the same key, or dispatched a new execution), using the gateway's own
decision function.

Examples:
  mcpdup replay sus_01JD8Z2K3M4N5P6Q7R8S9T0V1W --db ./incident.db
  mcpdup replay sus_01JD8Z2K3M4N5P6Q7R8S9T0V1W --what-if gateway.toml
  mcpdup replay --from 2026-11-30T09:00:00Z --to 2026-11-30T09:05:00Z -o json`
}

// Validate needs a suspect or a range, not both.
func (c *ReplayCmd) Validate() error {
	switch {
	case c.Suspect == "" && c.From.IsZero():
		return errors.New("give a suspect id, or --from TIME (with an optional --to) for a time range")
	case c.Suspect != "" && !c.From.IsZero():
		return errors.New("give a suspect id or --from (with an optional --to), not both")
	}
	if err := checkRange(c.From, c.To); err != nil {
		return err
	}
	if err := checkWindow(c.Window); err != nil {
		return err
	}
	if c.WhatIf != "" && c.Suspect == "" {
		return errors.New("--what-if replays a suspect's calls: give a suspect id")
	}
	return nil
}

func (c *ReplayCmd) Run(g *Globals) error {
	ctx := context.Background()
	s, err := g.openStore(ctx, readStore)
	if err != nil {
		return err
	}
	defer s.Close()
	var tl *report.Timeline
	var whatIf []analyze.WhatIfCall
	var sus *analyze.Suspect
	if c.Suspect != "" {
		sus, err = analyze.Find(ctx, s, analyze.Options{Window: c.Window}, c.Suspect)
		if err != nil {
			return err
		}
		tl = report.SuspectTimeline(sus)
		if whatIf, err = whatIfUnder(sus, c.WhatIf); err != nil {
			return err
		}
	} else {
		to := c.To
		if to.IsZero() {
			to = time.Now()
		}
		if tl, err = report.RangeTimeline(ctx, s, c.From, to); err != nil {
			return err
		}
	}
	in, err := c.integrityOf(ctx, s, c.verifyFirst, sus)
	if err != nil {
		return err
	}
	if c.Output == "json" {
		if whatIf == nil {
			whatIf = []analyze.WhatIfCall{}
		}
		err = writeJSON(g.stdout, map[string]any{"timeline": tl, "what_if": whatIf, "integrity": in})
	} else {
		err = report.TimelineTable(g.stdout, tl, whatIf, in)
	}
	if err != nil {
		return err
	}
	return warnTampered(g, "replay", in)
}

// ReportCmd writes a post-incident report for one suspect.
type ReportCmd struct {
	Suspect string `arg:"" placeholder:"SUSPECT" help:"Suspect id (sus_..., from mcpdup analyze): whole, a unique prefix or suffix, or the short form (sus_…9VF4KC)."`
	Output  string `short:"o" enum:"md,markdown,html" default:"md" help:"Format: md (markdown) or html (self-contained, inline SVG timeline)."`
	outFile
	WhatIf string        `placeholder:"CONFIG" type:"existingfile" help:"Include what the gateway would have done under this configuration."`
	Window time.Duration `help:"Grouping window, as for mcpdup analyze."`
	verifyFirst
	proveRecords
}

func (c *ReportCmd) Help() string {
	return `The verdict, the five answers with the log records that prove them, the
recommended fix, and the timeline (a sequence diagram with agent, gateway
and target lanes in HTML). The HTML page needs no network and no script.

Examples:
  mcpdup report sus_01JD8Z2K3M4N5P6Q7R8S9T0V1W -o html -f incident-4711.html
  mcpdup report sus_01JD8Z2K3M4N5P6Q7R8S9T0V1W > incident-4711.md`
}

// Validate refuses a negative window.
func (c *ReportCmd) Validate() error { return checkWindow(c.Window) }

func (c *ReportCmd) Run(g *Globals) error {
	ctx := context.Background()
	s, err := g.openStore(ctx, readStore)
	if err != nil {
		return err
	}
	defer s.Close()
	sus, err := analyze.Find(ctx, s, analyze.Options{Window: c.Window}, c.Suspect)
	if errors.Is(err, activity.ErrNotFound) {
		return fmt.Errorf("no suspect %s in %s (list them with mcpdup analyze)", c.Suspect, s.Path())
	}
	if err != nil {
		return err
	}
	whatIf, err := whatIfUnder(sus, c.WhatIf)
	if err != nil {
		return err
	}
	out, commit, discard, err := c.open(g.stdout)
	if err != nil {
		return err
	}
	defer discard()
	// A report file is read in a terminal or a browser: hostile text in it
	// (an OSC sequence, a BiDi override) is escaped there too.
	safe := termsafe.NewWriter(out)
	out = safe
	in, err := c.integrityOf(ctx, s, c.verifyFirst, sus)
	if err != nil {
		return err
	}
	tl := report.SuspectTimeline(sus)
	if c.Output == "html" {
		err = report.HTML(out, sus, tl, whatIf, in)
	} else {
		err = report.Markdown(out, sus, tl, whatIf, in)
	}
	if err != nil {
		return err
	}
	if err := safe.Flush(); err != nil {
		return err
	}
	if err := commit(); err != nil {
		return err
	}
	if c.toFile() {
		fmt.Fprintf(g.stderr, "wrote %s\n", c.File)
	}
	return warnTampered(g, "report", in)
}

// whatIfUnder runs a suspect's calls through the gateway's decision under
// the contracts of the gateway configuration at path (none when empty).
func whatIfUnder(sus *analyze.Suspect, path string) ([]analyze.WhatIfCall, error) {
	if path == "" {
		return nil, nil
	}
	cfg, err := gatewaylite.LoadContracts(path)
	if err != nil {
		return nil, err
	}
	return analyze.WhatIf(sus, cfg.Contract)
}
