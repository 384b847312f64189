package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/mcpdup/mcpdup/activity"
)

// ApprovalsCmd lists approvals.
type ApprovalsCmd struct {
	All    bool   `help:"List decided approvals too, not only pending ones."`
	Output string `short:"o" enum:"table,json" default:"table" help:"Output format: table or json."`
	verifyFirst
}

func (c *ApprovalsCmd) Help() string {
	return `A gateway asks for approval when a new agent run needs its session grant
(session_grant = "ask") or a call uses a credential flagged
per_use_approval. The call waits (approval_timeout) for 'mcpdup approve' or
'mcpdup deny'. The list is checked against the signed log first, as every
view is (--no-verify skips it): the table ends with what that proved, and
on a tampered database the command exits 1 (with -o json, on stderr).

Example:
  mcpdup approvals --db ./gw.db`
}

func (c *ApprovalsCmd) Run(g *Globals) error {
	ctx := context.Background()
	s, err := g.openStore(ctx, readStore)
	if err != nil {
		return err
	}
	defer s.Close()
	verified := c.verifyBeside(ctx, s)
	as, err := s.Approvals(ctx, !c.All)
	if err != nil {
		return err
	}
	in, err := verified()
	if err != nil {
		return err
	}
	if c.Output == "json" {
		if as == nil {
			as = []activity.Approval{}
		}
		if err := writeJSON(g.stdout, as); err != nil {
			return err
		}
		return warnTampered(g, "approvals", in)
	}
	if err := writeApprovals(g, as); err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "\nintegrity: %s\n", in.Text)
	return warnTampered(g, "approvals", in)
}

func writeApprovals(g *Globals, as []activity.Approval) error {
	if len(as) == 0 {
		fmt.Fprintln(g.stdout, "no pending approvals")
		return nil
	}
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "APPROVAL\tKIND\tSTATE\tACTOR\tEXECUTION\tREQUESTED\tSUMMARY")
	for _, a := range as {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Kind, a.State, a.Actor, a.ExecutionID,
			a.RequestedAt.Format("2006-01-02T15:04:05Z"), a.Summary)
	}
	return w.Flush()
}

// ApproveCmd approves a pending approval.
type ApproveCmd struct {
	ID       string `arg:"" placeholder:"APPROVAL" help:"Approval id (apv_...), or a unique prefix or suffix of it."`
	Note     string `help:"Why (recorded)."`
	Operator string `env:"USER" help:"Who decides (default: $USER, else $LOGNAME, else the OS account)."`
}

func (c *ApproveCmd) Help() string {
	return `Example:
  mcpdup approve apv_01JD8Z2K3M4N5P6Q7R8S9T0V1W --note "refund checked against the order"`
}

func (c *ApproveCmd) Run(g *Globals) error {
	return decide(g, c.ID, activity.ApprovalApproved, c.Operator, c.Note)
}

// DenyCmd denies a pending approval.
type DenyCmd struct {
	ID       string `arg:"" placeholder:"APPROVAL" help:"Approval id (apv_...), or a unique prefix or suffix of it."`
	Note     string `required:"" help:"Why (recorded, and returned to the agent)."`
	Operator string `env:"USER" help:"Who decides (default: $USER, else $LOGNAME, else the OS account)."`
}

func (c *DenyCmd) Help() string {
	return `The waiting call is refused with the note; a retry of the same call gets
the same refusal, not a new approval.

Example:
  mcpdup deny apv_01JD8Z2K3M4N5P6Q7R8S9T0V1W --note "no refunds during the incident"`
}

func (c *DenyCmd) Run(g *Globals) error {
	return decide(g, c.ID, activity.ApprovalDenied, c.Operator, c.Note)
}

func decide(g *Globals, id string, state activity.ApprovalState, operator, note string) error {
	ctx := context.Background()
	s, err := g.openAsOperator(ctx, &operator)
	if err != nil {
		return err
	}
	defer s.Close()
	if id, err = s.FindApprovalID(ctx, id); err != nil {
		return err
	}
	a, err := s.DecideApproval(ctx, id, state, operator, note)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "%s %s by %s (%s for %s)\n", a.ID, a.State, a.Operator, a.Kind, a.ExecutionID)
	return nil
}
