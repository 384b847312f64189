package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/importers"
)

// ImportCmd reads activity logs into the database.
type ImportCmd struct {
	Files             []string `arg:"" name:"FILE" type:"path" help:"Files to import (gzip, zlib and zstd read as is). A missing or unreadable one is refused, the others imported (exit 1)."`
	Format            string   `default:"auto" enum:"${format_enum}" help:"Format of every FILE: auto (detect from content), ${formats}."`
	Mapping           string   `placeholder:"FILE" type:"existingfile" help:"Read every FILE as JSON Lines through this mapping file (JSON Pointers per field; see README)."`
	SkipBad           bool     `help:"Skip malformed records (counted, the first ones listed) instead of refusing the file."`
	DryRun            bool     `help:"Read and check everything, report what would be imported, write nothing."`
	Key               string   `placeholder:"PUB" help:"Pinned public key that checks an mcpdup export's signatures (key text or .pub file). Without it this host's key for the export's origin is used, reported as not pinned."`
	TrustedCheckpoint string   `placeholder:"FILE" type:"existingfile" help:"A signed checkpoint of the exporting log kept elsewhere: an mcpdup export that rolls it back or forks it is refused."`
	AllowUnsealed     bool     `help:"Import an mcpdup export's records that no verified checkpoint signs (refused otherwise); they are marked unsigned and the analysis says so."`
	Output            string   `short:"o" enum:"table,json" default:"table" help:"Output format: table or json."`
}

func (c *ImportCmd) Help() string {
	return `Each file is imported whole, in one transaction, or not at all: a
malformed record names the file, line and field and nothing of that file is
written (--skip-bad skips such records and counts them). A file imported
before (same sha256) adds nothing and says so; an access log that grew
since it was imported adds only its new lines (a grown mcp-log or
sallyport log is refused: its calls pair with answers across lines). A
log copied while it was being written ends mid-line: a last line with no
line end that does not read is named (a JSON format's file is refused
unless --skip-bad; a text format's line is passed over), and read whole
when the grown log is imported again. Every imported row keeps
its source, file and line; what a format does not record (delivery,
authorization, which process called…) is marked "not recorded", so the
analysis answers "unknown" rather than guessing.

An mcpdup export's chain, tree and signatures are verified as it is
read; an altered export is refused and nothing of it is kept. Only records
a checkpoint signs are imported: an unsealed tail, or an export whose key
this host does not have (pass --key), is refused unless --allow-unsealed,
which imports those records marked unsigned.

Examples:
  mcpdup import --db ./incident.db incident.jsonl
  mcpdup import --db ./incident.db sallyport-activity.jsonl traces.jsonl.gz -o json
  mcpdup import --db ./incident.db --skip-bad noisy.jsonl
  mcpdup import --db ./incident.db --mapping acme.toml acme-audit.jsonl`
}

func (c *ImportCmd) Run(g *Globals) error {
	ctx := context.Background()
	opts := importers.Options{Format: c.Format, SkipBad: c.SkipBad, DryRun: c.DryRun, ExportKey: c.exportKey(g), AllowUnsealed: c.AllowUnsealed}
	var s *activity.Store
	var err error
	if c.DryRun {
		var done func()
		s, opts.SeenIn, done, err = dryRunStores(ctx, g)
		if err != nil {
			return err
		}
		defer done()
	} else if anyReadable(c.Files) {
		if s, err = g.openStore(ctx, importStore); err != nil {
			return err
		}
		defer s.Close()
	}
	// else: no file can be read, and each says why below; no database or
	// key is created for nothing (a typo'd path left an empty one that the
	// next analyze called verified).
	if c.TrustedCheckpoint != "" {
		b, err := os.ReadFile(c.TrustedCheckpoint)
		if err != nil {
			return &exitError{2, err}
		}
		opts.TrustedCheckpoint = b
	}
	if c.Mapping != "" {
		m, err := importers.LoadMapping(c.Mapping)
		if err != nil {
			return &exitError{2, err}
		}
		opts.Mapping = m
	}
	var reports []importers.FileReport
	failed, unsealed := 0, 0
	var prog *progress
	begin := func(f string) func(done, total int64) {
		prog.done()
		if prog = newProgress(g.stderr, "importing "+f); prog != nil {
			prog.bytes = true
		}
		return prog.update
	}
	// OTLP files given together are read as one stream (a trace the
	// collector split across files is one trace).
	importers.ImportFiles(ctx, s, c.Files, opts, begin, func(rep importers.FileReport, err error) {
		prog.done()
		switch {
		case errors.Is(err, importers.ErrNotSealed):
			unsealed++
			fmt.Fprintf(g.stderr, "mcpdup: %v\n", err)
			reports = append(reports, rep)
		case err != nil:
			failed++
			fmt.Fprintf(g.stderr, "mcpdup: %v\n", err)
			reports = append(reports, importers.FileReport{File: rep.File, Refused: err.Error()}) // -o json lists every file
		default:
			reports = append(reports, rep)
		}
	})
	if c.Output == "json" {
		if reports == nil {
			reports = []importers.FileReport{}
		}
		if err := writeJSON(g.stdout, reports); err != nil {
			return err
		}
	} else if err := writeImportTable(g, reports); err != nil {
		return err
	}
	switch {
	case failed > 0 && unsealed > 0:
		return &exitError{1, fmt.Errorf("%d of %d files not imported (nothing of them was written); %d imported but not sealed (run mcpdup audit verify)", failed, len(c.Files), unsealed)}
	case failed > 0:
		return &exitError{1, fmt.Errorf("%d of %d files not imported (nothing of them was written)", failed, len(c.Files))}
	case unsealed > 0:
		return &exitError{1, fmt.Errorf("%d of %d files imported but not sealed: their records are in the log, no checkpoint signs them (run mcpdup audit verify)", unsealed, len(c.Files))}
	}
	return nil
}

func writeImportTable(g *Globals, reports []importers.FileReport) error {
	if len(reports) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tFORMAT\tRESULT\tRUNS\tCALLS\tEXECUTIONS\tSKIPPED\tNOISE\tSOURCE")
	for _, r := range reports {
		result := "imported"
		switch {
		case r.Refused != "":
			fmt.Fprintf(tw, "%s\t-\trefused\t-\t-\t-\t-\t-\t-\n", r.File)
			continue
		case r.NotSealed != "":
			result = "imported, not sealed"
		case r.AlreadyImported:
			result = "already imported"
		case r.Source == "":
			result = "dry run: would import"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.File, r.Format, result, r.Runs, r.Calls, r.Executions, r.Skipped, r.Noise, r.Source)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range reports {
		if r.Note != "" {
			fmt.Fprintf(g.stdout, "\n%s: %s\n", r.File, r.Note)
		}
		if nr := r.NotRecordedText(); nr != "" {
			fmt.Fprintf(g.stdout, "  imported without (not recorded): %s\n", nr)
		}
		for _, e := range r.Errors {
			fmt.Fprintf(g.stdout, "  skipped %s\n", e)
		}
		if more := r.Skipped - int64(len(r.Errors)); more > 0 {
			fmt.Fprintf(g.stdout, "  … and %d more skipped\n", more)
		}
	}
	return nil
}

// exportKey resolves the key for an export's origin the way audit verify
// does: --key pinned, else this host's key file, else none.
func (c *ImportCmd) exportKey(g *Globals) func(origin string) (string, bool, error) {
	return func(origin string) (string, bool, error) {
		if c.Key != "" {
			_, vkey, err := activity.ReadVerifierKey(c.Key)
			return vkey, true, err
		}
		_, pub := activity.KeyFiles(g.keyDir(), origin)
		if _, err := os.Stat(pub); err != nil {
			return "", false, nil
		}
		_, vkey, err := activity.ReadVerifierKey(pub)
		return vkey, false, err
	}
}

func formatList() string { return strings.Join(importers.Formats(), ", ") }

// formatEnum is what --format accepts: a name no importer has is a usage
// error (exit 2), checked before any file is read.
func formatEnum() string { return "auto," + strings.Join(importers.Formats(), ",") }

// dryRunStores gives a dry run a scratch store to import into (a fresh
// database with its own keys in a temporary directory, removed when it
// closes) and, when --db exists, that database opened read-only to look
// re-imports up in. Nothing is created or written at --db or in the key
// directory: opening the real store for writing would migrate its
// schema, create keys or seal a tail an earlier writer left.
func dryRunStores(ctx context.Context, g *Globals) (scratch, seen *activity.Store, done func(), err error) {
	dir, err := os.MkdirTemp("", "mcpdup-dry-run-")
	if err != nil {
		return nil, nil, nil, err
	}
	scratch, err = activity.Open(ctx, filepath.Join(dir, "dry-run.db"), activity.Options{KeyDir: filepath.Join(dir, "keys"), PageSize: activity.ImportPageSize})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	if ok, _ := g.dbExists(); ok {
		seen, err = g.openStore(ctx, readStore)
		if errors.Is(err, activity.ErrNotExist) {
			seen, err = nil, nil // an empty PostgreSQL database: nothing imported yet
		}
		if err != nil {
			scratch.Close()
			os.RemoveAll(dir)
			return nil, nil, nil, err
		}
	}
	return scratch, seen, func() {
		scratch.Close()
		if seen != nil {
			seen.Close()
		}
		os.RemoveAll(dir)
	}, nil
}

// anyReadable reports whether one of paths is a file that can be opened:
// an import of none of them writes nothing, and needs no store.
func anyReadable(paths []string) bool {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		fi, err := f.Stat()
		f.Close()
		if err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}
