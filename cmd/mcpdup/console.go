package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/demo"
	"github.com/mcpdup/mcpdup/importers"
	"github.com/mcpdup/mcpdup/report"
	"github.com/mcpdup/mcpdup/tui"
)

// ConsoleCmd opens the interactive console.
type ConsoleCmd struct {
	Files    []string      `arg:"" optional:"" name:"FILE" type:"existingfile" help:"Log files to import first (as mcpdup import does)."`
	Operator string        `env:"USER" help:"Who resolves (recorded with each resolution; default: $USER, else $LOGNAME, else the OS account)."`
	NoLive   bool          `help:"Do not watch the database for new activity."`
	Window   time.Duration `help:"Grouping window, as for mcpdup analyze."`
}

// Validate refuses a negative window.
func (c *ConsoleCmd) Validate() error { return checkWindow(c.Window) }

func (c *ConsoleCmd) Help() string {
	return `Views (tab, or 1-4): suspects (sort with s, filter with /), a suspect's five
questions walked one at a time (enter) with its swimlane timeline and a
step-by-step replay (p), the pending queue (v verified, x rejected, a/d for
approvals: note, then y/N), executions (p replays a time range) and
sessions. The status bar shows
counts and whether the log verifies. While a gateway writes to the same
database, new activity appears by itself. ? lists the keys of each view;
q quits.

Files given are imported first, each whole or not at all, exactly as
'mcpdup import' does; i imports another from inside the console.

Examples:
  mcpdup console --db ./incident.db
  mcpdup console --db ./incident.db sallyport-activity.jsonl traces.jsonl.gz`
}

func (c *ConsoleCmd) Run(g *Globals) error {
	// Looking needs no name; the console asks for one the first time an
	// action records it, if none is found here.
	c.Operator = operatorName(c.Operator)
	if !interactive() {
		return &exitError{code: 2, err: errors.New("console needs a terminal on stdin and stdout (scripts use mcpdup analyze, status and resolve)")}
	}
	mode := writeStore
	if len(c.Files) > 0 {
		mode = importStore // importing into a new database is fine
	}
	s, err := g.openStore(context.Background(), mode)
	if err != nil {
		return err
	}
	defer s.Close()
	var failed error
	importers.ImportFiles(context.Background(), s, c.Files, importers.Options{}, nil, func(rep importers.FileReport, err error) {
		switch {
		case failed != nil:
		case errors.Is(err, importers.ErrNotSealed):
			failed = fmt.Errorf("%w (its records are in the log, unsigned; the console was not opened: run mcpdup audit verify)", err)
		case err != nil:
			failed = fmt.Errorf("%w (nothing of it was imported; the console was not opened)", err)
		default:
			fmt.Fprintln(g.stderr, rep.Summary())
		}
	})
	if failed != nil {
		return failed
	}
	return runConsole(s, tui.Options{Operator: c.Operator, Poll: pollFor(c.NoLive), Analysis: analyze.Options{Window: c.Window}})
}

func pollFor(off bool) time.Duration {
	if off {
		return -1
	}
	return 0
}

// interactive reports whether stdin and stdout are a terminal.
func interactive() bool {
	return isTerminal(os.Stdin) && isTerminal(os.Stdout)
}

// runConsole runs the console on s; i in it imports with the same code as
// mcpdup import.
func runConsole(s *activity.Store, opts tui.Options) error {
	opts.Import = consoleImport(s)
	opts.ImportFormats = importers.Formats()
	p := tea.NewProgram(tui.New(s, opts), tea.WithAltScreen())
	_, err := p.Run()
	return err
}

// DemoCmd runs the scripted incident and opens the console on it.
type DemoCmd struct {
	NoConsole bool   `help:"Build the demo database and stop; print how to open it."`
	Operator  string `env:"USER" help:"Who resolves in the console (default: $USER, else $LOGNAME, else the OS account; else the console asks)."`
}

func (c *DemoCmd) Help() string {
	return `One command, no setup: starts the real embedded gateway, a local target API
that acts and counts its effects, fault proxies and agents with a naive
retry layer (all on loopback, stopped afterwards), runs a scripted
incident that produces every verdict and a few pending verifications, then
opens the console on the result. Without --db it writes to a new temporary
directory (its own signing key included) and says where.

Examples:
  mcpdup demo
  mcpdup demo --db ./demo.db --no-console && mcpdup console --db ./demo.db`
}

func (c *DemoCmd) Run(g *Globals) error {
	ctx := context.Background()
	db, keyDir := "", g.KeyDir
	if g.DB != "" {
		db = g.dbPath()
	}
	if db == "" {
		dir, err := os.MkdirTemp("", "mcpdup-demo-")
		if err != nil {
			return err
		}
		db = filepath.Join(dir, "demo.db")
		if keyDir == "" {
			keyDir = filepath.Join(dir, "keys")
		}
	}
	if keyDir == "" {
		keyDir = g.keyDir()
	}
	if err := demoTargetFree(ctx, db, keyDir); err != nil {
		return err
	}
	s, err := activity.Open(ctx, db, activity.Options{KeyDir: keyDir})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(g.stderr, "mcpdup demo: running a scripted incident into %s\n", shown(db))
	err = demo.Run(ctx, s, keyDir, func(step string) { fmt.Fprintf(g.stderr, "  %s\n", step) })
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if _, err := s.Seal(ctx, activity.SealManual); err != nil {
		return err
	}
	again := fmt.Sprintf("%s console --db %s --key-dir %s", selfCommand(), shown(db), keyDir)
	if c.NoConsole {
		fmt.Fprintf(g.stderr, "done. Open it with:\n  %s\n", again)
		return nil
	}
	if !interactive() {
		// No terminal (a pipe, CI): show what the console would open on.
		table := report.NewTableWriter(g.stdout, false, report.SortSeverity)
		if err := analyze.Scan(ctx, s, analyze.Options{}, func(sus *analyze.Suspect) error { table.Write(sus); return nil }); err != nil {
			return err
		}
		if err := table.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(g.stderr, "no terminal here, so no console. In a terminal, open it with:\n  %s\n", again)
		return nil
	}
	operator := operatorName(c.Operator)
	if err := runConsole(s, tui.Options{Operator: operator}); err != nil {
		return err
	}
	fmt.Fprintf(g.stderr, "the demo database stays at %s; open it again with:\n  %s\n", shown(db), again)
	return nil
}

// demoTargetFree refuses a database that already holds anything: the demo
// writes a new one, and a signed log cannot be taken back. A PostgreSQL
// database must exist and be empty (no mcpdup schema).
func demoTargetFree(ctx context.Context, db, keyDir string) error {
	if !activity.IsPostgres(db) {
		if _, err := os.Stat(db); err == nil {
			return fmt.Errorf("%s exists: the demo writes a new database (remove it or pick another --db)", db)
		}
		return nil
	}
	s, err := activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keyDir})
	switch {
	case errors.Is(err, activity.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	s.Close()
	return fmt.Errorf("%s holds an mcpdup log: the demo writes into an empty database (create another, or pick a file)", shown(db))
}

// selfCommand is how to run this binary again: "mcpdup" when that is what
// the shell finds, the binary's own path otherwise, and "go run
// ./cmd/mcpdup" when it was built by go run (a temporary binary that is
// gone once it exits).
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "mcpdup"
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/mcpdup"
	}
	if onPath, err := exec.LookPath("mcpdup"); err == nil {
		if a, b := filepath.Clean(onPath), filepath.Clean(exe); a == b {
			return "mcpdup"
		}
	}
	return exe
}

// consoleImport is what i runs in the console: mcpdup import's code; a
// file whose format cannot be detected makes the console ask for it.
func consoleImport(s *activity.Store) tui.Import {
	return func(ctx context.Context, path, format string) (string, bool, error) {
		rep, err := importers.Import(ctx, s, path, importers.Options{Format: format})
		var unknown *importers.UnknownFormatError
		if errors.As(err, &unknown) {
			return "", false, fmt.Errorf("%s: %w", unknown.Why, tui.ErrFormatNeeded)
		}
		return rep.Summary(), !rep.AlreadyImported, err
	}
}
