package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpdup/mcpdup/analyze"
)

// HistoryCmd exports the lifecycle as a Jepsen-style history.
type HistoryCmd struct {
	Check  bool   `help:"Print the checker's counts instead of the operations."`
	Output string `short:"o" enum:"jsonl,json,table" default:"jsonl" help:"Operations as JSON lines; with --check, json or table."`
}

func (c *HistoryCmd) Help() string {
	return `Every dispatch is an invoke; its completion is ok (the target acted), fail
(it did not) or info (nobody knows: Jepsen's indeterminate operation). A
later status lookup, resend with the same key or operator resolution
settles an info and is marked recovered. The checker counts duplicated
effects (an effect performed by two executions), lost invocations (never
completed), recovered and still-unknown ones.

Examples:
  mcpdup history --db ./gw.db > history.jsonl
  mcpdup history --db ./gw.db --check`
}

func (c *HistoryCmd) Run(g *Globals) error {
	ctx := context.Background()
	s, err := g.openStore(ctx, readStore)
	if err != nil {
		return err
	}
	defer s.Close()
	if c.Check {
		res, err := analyze.Check(ctx, s)
		if err != nil {
			return err
		}
		if c.Output == "json" {
			return writeJSON(g.stdout, res)
		}
		fmt.Fprintf(g.stdout, "invocations %d\nok %d\nfail %d\ninfo %d\nduplicated %d\nlost %d\nrecovered %d\nstill unknown %d\n",
			res.Invocations, res.OK, res.Fail, res.Info, res.Duplicated, res.Lost, res.Recovered, res.StillUnknown)
		for _, e := range res.DuplicatedEffects {
			fmt.Fprintf(g.stdout, "duplicated effect %s\n", e)
		}
		return nil
	}
	enc := json.NewEncoder(g.stdout)
	return analyze.History(ctx, s, func(op analyze.Op) error { return enc.Encode(op) })
}
