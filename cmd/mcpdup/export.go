package main

import (
	"context"
	"errors"
	"fmt"
	"io"

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
ends at a checkpoint. No key material is written. The export is verified
as it is written: a log that does not verify is still exported whole,
and the command says so and exits 1.

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
	// The export is verified as it is written, by the verifier its reader
	// will run: a log that does not verify is still exported whole (it is
	// the evidence), but the command says so and exits 1.
	pub, _ := s.PublicKey() // none: hashes and chain are still checked
	verified, feed := verifyStream(pub)
	sum, err := audit.Export(ctx, s, io.MultiWriter(w, feed))
	feed.Close()
	rep := <-verified
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
	if rep.err != nil {
		return fmt.Errorf("the export was written but could not be verified: %w", rep.err)
	}
	if rep.Tampered {
		first := ""
		if len(rep.Problems) > 0 {
			first = ", first: " + termsafe.Line(rep.Problems[0].Message)
		}
		return fmt.Errorf("the export was written, but the log it holds does not verify (%d problems%s): see mcpdup audit verify", len(rep.Problems)+rep.ProblemsOmitted, first)
	}
	return nil
}

type streamReport struct {
	*audit.Report
	err error
}

// verifyStream verifies, on a goroutine, the export written to feed; the
// report arrives once feed is closed. The reader is drained whatever the
// verifier does, so the export never blocks on it.
func verifyStream(pub string) (<-chan streamReport, io.WriteCloser) {
	pr, pw := io.Pipe()
	out := make(chan streamReport, 1)
	go func() {
		rep, err := audit.VerifyExport(pr, "the export", audit.Options{Key: pub, LogOnly: true})
		io.Copy(io.Discard, pr)
		if rep == nil {
			rep = &audit.Report{}
		}
		out <- streamReport{rep, err}
	}()
	return out, pw
}
