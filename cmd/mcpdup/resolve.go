package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mcpdup/mcpdup/activity"
)

// ResolveCmd records an operator's finding about an unknown outcome.
type ResolveCmd struct {
	Execution string `arg:"" help:"Execution id (act_...): the whole id, a unique prefix or suffix, or the short form screens show (act_…9VF4KC)." placeholder:"EXECUTION"`
	Verified  bool   `xor:"outcome" help:"The action took effect at the target."`
	Rejected  bool   `xor:"outcome" help:"The action did not take effect (a new call may act again)."`
	Note      string `required:"" help:"What you checked, in a sentence (required)."`
	Evidence  string `help:"A reference to the evidence: a ticket, a target record id, a URL."`
	Operator  string `env:"USER" help:"Who is resolving (default: $USER, else $LOGNAME, else the OS account)."`
	Output    string `short:"o" enum:"table,json" default:"table" help:"Output format: table or json."`
}

func (c *ResolveCmd) Help() string {
	return `Only executions in state unknown or pending_verification can be resolved,
and each only once. The resolution is appended to the tamper-evident log
and a signed checkpoint is written right after it.

Example:
  mcpdup resolve act_01JD8Z2K3M4N5P6Q7R8S9T0V1W --verified \
      --note "charge ch_9 is in the processor dashboard" --evidence https://dash.example/ch_9`
}

// Validate requires exactly one outcome.
func (c *ResolveCmd) Validate() error {
	if c.Verified == c.Rejected {
		return fmt.Errorf("give exactly one of --verified or --rejected")
	}
	return nil
}

func (c *ResolveCmd) outcome() activity.ResolutionOutcome {
	if c.Verified {
		return activity.ResolutionVerified
	}
	return activity.ResolutionRejected
}

func (c *ResolveCmd) Run(g *Globals) error {
	ctx := context.Background()
	if strings.TrimSpace(c.Note) == "" { // as a missing --note: a usage error, before the store is opened
		return &exitError{2, errors.New("--note is empty: say what you checked, in a sentence")}
	}
	s, err := g.openAsOperator(ctx, &c.Operator)
	if err != nil {
		return err
	}
	defer s.Close()
	id, err := s.FindExecutionID(ctx, c.Execution)
	if err != nil {
		return err
	}
	e, cp, err := s.Resolve(ctx, activity.Resolution{ExecutionID: id,
		Outcome: c.outcome(), Operator: c.Operator, Note: c.Note, Evidence: c.Evidence})
	if err != nil {
		return err
	}
	if c.Output == "json" {
		out := map[string]any{"execution_id": e.ID, "state": e.State, "operator": c.Operator, "sealed": cp != nil}
		if cp != nil {
			out["checkpoint_size"] = cp.Size
		}
		return writeJSON(g.stdout, out)
	}
	fmt.Fprintf(g.stdout, "%s is now %s (resolved by %s)\n", e.ID, e.State, c.Operator)
	if cp != nil {
		fmt.Fprintf(g.stdout, "sealed by checkpoint at size %d\n", cp.Size)
	} else {
		fmt.Fprintln(g.stderr, "warning: no signing key on this host: the resolution is chained but not yet sealed")
	}
	return nil
}
