package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
)

// StatusCmd summarises a database.
type StatusCmd struct {
	Output string `short:"o" enum:"table,json" default:"table" help:"Output format: table or json."`
	verifyFirst
}

func (c *StatusCmd) Help() string {
	return `Shows the log's size and sealing, executions by state, and every
execution whose outcome is unknown or awaiting verification (the queue
'mcpdup resolve' works on). Like every view it first verifies the log and
the tables it counts (--no-verify skips that), and says what that proved;
on a tampered database it exits 1.

Example:
  mcpdup status --db ./incident.db -o json`
}

type statusOutput struct {
	DB        string               `json:"db"`
	Origin    string               `json:"origin"`
	Stats     activity.Stats       `json:"stats"`
	Unsealed  int64                `json:"unsealed"`
	CanSeal   bool                 `json:"can_seal"`
	Pending   []activity.Execution `json:"pending"`
	KeyStatus string               `json:"key_status"`
	// Vault: while it is locked the gateway refuses every call.
	Vault statusVault `json:"vault"`
	// Integrity is what verifying the log and tables proved.
	Integrity audit.Integrity `json:"integrity"`
}

// statusVault is the vault's state and its last lock or unlock note.
type statusVault struct {
	Locked bool   `json:"locked"`
	Note   string `json:"note"`
}

func (c *StatusCmd) Run(g *Globals) error {
	ctx := context.Background()
	s, err := g.openStore(ctx, readStore)
	if err != nil {
		return err
	}
	defer s.Close()
	verified := c.verifyBeside(ctx, s)
	st, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	pending, err := s.Executions(ctx, activity.ExecutionFilter{States: []activity.State{activity.StateUnknown, activity.StatePendingVerification}})
	if err != nil {
		return err
	}
	out := statusOutput{DB: s.Path(), Origin: s.Origin(), Stats: st, Unsealed: max(st.Records-st.SealedSize, 0), Pending: pending}
	if out.Pending == nil {
		out.Pending = []activity.Execution{}
	}
	if out.Vault.Locked, out.Vault.Note, err = s.Vault(ctx); err != nil {
		return err
	}
	if _, err := s.PublicKey(); err != nil {
		out.KeyStatus = err.Error()
	} else {
		out.CanSeal, out.KeyStatus = true, "signing key present"
	}
	if out.Integrity, err = verified(); err != nil {
		return err
	}
	if c.Output == "json" {
		if err := writeJSON(g.stdout, out); err != nil {
			return err
		}
		return warnTampered(g, "status", out.Integrity)
	}
	if err := c.writeTable(g, out, st, pending); err != nil {
		return err
	}
	return warnTampered(g, "status", out.Integrity)
}

func (c *StatusCmd) writeTable(g *Globals, out statusOutput, st activity.Stats, pending []activity.Execution) error {
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "database\t%s (%d-byte pages)\n", out.DB, st.PageSize)
	fmt.Fprintf(w, "origin\t%s\n", out.Origin)
	fmt.Fprintf(w, "integrity\t%s\n", out.Integrity.Text)
	if st.SealedSize > st.Records {
		// status reads what the database says; a checkpoint past the end
		// means records were removed (audit verify proves it).
		fmt.Fprintf(w, "log\t%d records, %d checkpoints, the newest covering %d: records were removed from the end (run mcpdup audit verify)\n", st.Records, st.Checkpoints, st.SealedSize)
	} else {
		fmt.Fprintf(w, "log\t%d records, %d checkpoints, sealed through %d, %d unsealed\n", st.Records, st.Checkpoints, st.SealedSize, out.Unsealed)
	}
	fmt.Fprintf(w, "signing key\t%s\n", out.KeyStatus)
	if out.Vault.Locked {
		fmt.Fprintf(w, "vault\tLOCKED: the gateway refuses every call (%s; mcpdup unlock to lift it)\n", out.Vault.Note)
	} else {
		fmt.Fprintf(w, "vault\t%s\n", out.Vault.Note)
	}
	fmt.Fprintf(w, "activity\t%d runs, %d calls, %d executions, %d resolutions, %d sources\n", st.Runs, st.Calls, st.Executions, st.Resolutions, st.Sources)
	for _, state := range activity.States {
		if n := st.ByState[state]; n > 0 {
			fmt.Fprintf(w, "  %s\t%d\n", state, n)
		}
	}
	w.Flush()
	if len(pending) == 0 {
		fmt.Fprintln(g.stdout, "\nno executions await verification")
		return nil
	}
	fmt.Fprintf(g.stdout, "\n%d execution(s) with an unknown outcome:\n", len(pending))
	w = tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "EXECUTION\tSTATE\tTOOL\tACTOR\tDISPATCHED\tCONTRACT")
	for _, e := range pending {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.State, e.Tool, e.Actor, optTime(e.Times.Dispatched), e.Contract)
	}
	return w.Flush()
}

func optTime(o activity.Opt[time.Time]) string {
	if !o.OK {
		return activity.NotRecorded
	}
	return o.V.UTC().Format(time.RFC3339)
}
