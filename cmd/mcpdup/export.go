package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/internal/termsafe"
)

// ExportCmd writes the log as JSONL.
type ExportCmd struct {
	Output string `short:"o" enum:"jsonl" default:"jsonl" help:"Output format: jsonl (the only one: records verbatim, checkpoints in place)."`
	outFile
}

func (c *ExportCmd) Help() string {
	return `Writes a header line, then every record's stored bytes verbatim (one per
line), with each signed checkpoint right after the record it completes.
The log is sealed first when this host has the signing key, so the export
ends at a checkpoint. No key material is written.

'mcpdup audit verify --export FILE --key PUB' checks it with no database.

Examples:
  mcpdup export --db ./incident.db -f incident.jsonl
  mcpdup export --db ./incident.db | gzip > incident.jsonl.gz`
}

func (c *ExportCmd) Run(g *Globals) error {
	ctx := context.Background()
	s, err := g.openStore(ctx, writeStore)
	if err != nil {
		return err
	}
	defer s.Close()
	// The output first: a refused file must not have sealed anything.
	w, commit, discard, err := c.open(g.stdout)
	if err != nil {
		return err
	}
	defer discard()
	if _, err := s.Seal(ctx, activity.SealManual); err != nil && !errors.Is(err, activity.ErrNoKey) {
		return err
	}
	if !c.toFile() {
		if sw, ok := w.(*termsafe.Writer); ok {
			w = sw.Raw // the records are bytes to keep exact, not text
		}
	}
	sum, err := audit.Export(ctx, s, w)
	if err != nil {
		return err
	}
	if err := commit(); err != nil {
		return err
	}
	unsealed := ""
	if sum.SealedSize < sum.Records {
		unsealed = fmt.Sprintf(", %d unsealed (no signing key on this host)", sum.Records-sum.SealedSize)
	}
	fmt.Fprintf(g.stderr, "exported %d records and %d checkpoints (%d bytes) from %s%s\n", sum.Records, sum.Checkpoints, sum.Bytes, sum.Origin, unsealed)
	return nil
}
