package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
)

// ExportCmd writes the log as JSONL.
type ExportCmd struct {
	Output string `short:"o" required:"" placeholder:"FILE.jsonl" help:"File to write, or - for standard output."`
	Force  bool   `help:"Overwrite FILE if it exists."`
}

func (c *ExportCmd) Help() string {
	return `Writes a header line, then every record's stored bytes verbatim (one per
line), with each signed checkpoint right after the record it completes.
The log is sealed first when this host has the signing key, so the export
ends at a checkpoint. No key material is written.

'mcpdup audit verify --export FILE --key PUB' checks it with no database.

Example:
  mcpdup export --db ./incident.db -o incident.jsonl`
}

func (c *ExportCmd) Run(g *Globals) error {
	ctx := context.Background()
	s, err := g.openStore(ctx, writeStore)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Seal(ctx, activity.SealManual); err != nil && !errors.Is(err, activity.ErrNoKey) {
		return err
	}
	var w io.Writer = g.stdout
	var tmp *os.File
	if c.Output != "-" {
		if _, err := os.Stat(c.Output); err == nil && !c.Force {
			return fmt.Errorf("%s exists (use --force to overwrite)", c.Output)
		}
		// Write beside the target and rename, so a failed export never
		// leaves a plausible-looking partial file.
		tmp, err = os.CreateTemp(filepath.Dir(c.Output), ".mcpdup-export-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		w = tmp
	}
	sum, err := audit.Export(ctx, s, w)
	if err != nil {
		return err
	}
	if tmp != nil {
		if err := tmp.Sync(); err != nil {
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), c.Output); err != nil {
			return err
		}
	}
	unsealed := ""
	if sum.SealedSize < sum.Records {
		unsealed = fmt.Sprintf(", %d unsealed (no signing key on this host)", sum.Records-sum.SealedSize)
	}
	fmt.Fprintf(g.stderr, "exported %d records and %d checkpoints (%d bytes) from %s%s\n", sum.Records, sum.Checkpoints, sum.Bytes, sum.Origin, unsealed)
	return nil
}
