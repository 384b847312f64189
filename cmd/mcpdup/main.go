// Command mcpdup stops AI-agent tool calls from acting twice and helps
// on-call engineers find out whether they did. This file wires the
// command line; each command lives in its own file and calls the packages
// that do the work.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"runtime/debug"

	"github.com/alecthomas/kong"
	"github.com/willabides/kongplete"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/internal/termsafe"
)

// version is set at build time with -ldflags "-X main.version=...";
// otherwise buildVersion reads what the Go toolchain stamped.
var version = "dev"

// buildVersion is version, or the module version and VCS revision the
// toolchain recorded in the binary (go build in a checkout stamps them).
func buildVersion() string {
	if version != "dev" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	v := bi.Main.Version
	var rev, modified string
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.modified":
			modified = st.Value
		}
	}
	if v == "" || v == "(devel)" {
		v = "devel"
		if rev != "" {
			v += " " + rev[:min(12, len(rev))]
			if modified == "true" {
				v += "+dirty"
			}
		}
	}
	return v + " (" + bi.GoVersion + ")"
}

// Globals are the flags every command shares.
type Globals struct {
	DB     string `name:"db" env:"MCPDUP_DB" placeholder:"PATH|URL" help:"SQLite database file, or a postgres:// URL that several gateways share (default: ${default_db})."`
	KeyDir string `name:"key-dir" env:"MCPDUP_KEY_DIR" placeholder:"DIR" help:"Directory of signing keys, kept outside the database (default: ${default_key_dir})." type:"path"`

	stdout, stderr io.Writer
}

// dbPath returns --db, $MCPDUP_DB or the default: a file path made
// absolute (~ expanded), or a postgres:// URL as given.
func (g *Globals) dbPath() string {
	if g.DB == "" {
		return activity.DefaultDB()
	}
	if activity.IsPostgres(g.DB) {
		return g.DB
	}
	return kong.ExpandPath(g.DB)
}

// dbExists says whether there is a database to read: a file, or (not
// known before connecting) a PostgreSQL database.
func (g *Globals) dbExists() (bool, error) {
	path := g.dbPath()
	if activity.IsPostgres(path) {
		return true, nil
	}
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// storeMode says how a command opens the database.
type storeMode int

const (
	readStore   storeMode = iota // read-only; the database must exist
	writeStore                   // read-write; the database must exist
	createStore                  // read-write; created if missing (init, gateway)
	importStore                  // read-write; created if missing with pages for imports
)

// openStore opens the database for a command. Only init, gateway and
// imports create one: a typo in --db elsewhere must not leave an empty
// database behind. A database an import creates gets larger pages
// (activity.ImportPageSize).
func (g *Globals) openStore(ctx context.Context, mode storeMode) (*activity.Store, error) {
	path := g.dbPath()
	noDB := func() error { return &exitError{code: 2, err: missingDB(shown(path))} }
	if fi, err := os.Stat(path); err == nil && !activity.IsPostgres(path) && !fi.Mode().IsRegular() {
		// A --db that names a directory: a usage error, as a missing file is.
		return nil, &exitError{code: 2, err: fmt.Errorf("--db %s is not a database file (a %s): give the file's path", shown(path), map[bool]string{true: "directory", false: "special file"}[fi.IsDir()])}
	}
	if mode == writeStore || mode == readStore {
		if ok, err := g.dbExists(); err != nil {
			return nil, fmt.Errorf("open %s: %w", shown(path), err)
		} else if !ok {
			return nil, noDB()
		}
	}
	opts := activity.Options{ReadOnly: mode == readStore, KeyDir: g.keyDir()}
	if mode == importStore {
		opts.PageSize = activity.ImportPageSize
	}
	s, err := activity.Open(ctx, path, opts)
	if errors.Is(err, activity.ErrNotExist) {
		return nil, noDB()
	}
	if err == nil && s.Recovered() > 0 {
		g.sayRecovered(s)
	}
	return s, err
}

// sayRecovered says what Open sealed that an earlier writer had left
// unsealed, operator decisions loudest: the store seals one as it writes
// it, so one found unsealed was written without the key or by a writer
// that crashed in between, and is now signed as though it had been.
func (g *Globals) sayRecovered(s *activity.Store) {
	fmt.Fprintf(g.stderr, "mcpdup: sealed %d records an earlier writer left unsealed (it stopped without sealing: a crash?); checkpoint reason \"recovery\"\n", s.Recovered())
	if d := s.RecoveredDecisions(); len(d) > 0 {
		fmt.Fprintf(g.stderr, "mcpdup: WARNING: %d of them are operator decisions (records %v) written without a seal: the store seals a decision as it writes it and writes none without the key; check them (mcpdup audit verify names them)\n", len(d), d)
	}
}

// missingDB says where no database is, and what makes one; it is
// activity.ErrNotExist to errors.Is.
type missingDB string

func (m missingDB) Error() string {
	return fmt.Sprintf("no database at %s: mcpdup demo builds one with a scripted incident, mcpdup import FILE builds one from a log, mcpdup gateway records into one (or give --db)", string(m))
}

func (m missingDB) Is(target error) bool { return target == activity.ErrNotExist }

// shown is a database path or URL fit to print: a URL's password is
// left out.
func shown(db string) string {
	if activity.IsPostgres(db) {
		return activity.RedactURL(db)
	}
	return db
}

// operatorName is who acts, as git finds an author: the flag (which kong
// fills from $USER), then $LOGNAME, then the OS account. "" when none
// names anyone (a container's exec shell, cron).
func operatorName(flag string) string {
	if flag != "" {
		return flag
	}
	if n := os.Getenv("LOGNAME"); n != "" {
		return n
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return ""
}

// requireOperator settles *op, for commands that record who acts.
func requireOperator(op *string) error {
	if *op = operatorName(*op); *op == "" {
		return &exitError{code: 2, err: errors.New("who is acting? give --operator NAME (neither $USER, $LOGNAME nor the OS account names you)")}
	}
	return nil
}

// openAsOperator opens the store for writing on behalf of *operator,
// settled first: every operator action (resolve, approve, deny, lock,
// unlock) names who took it.
func (g *Globals) openAsOperator(ctx context.Context, operator *string) (*activity.Store, error) {
	if err := requireOperator(operator); err != nil {
		return nil, err
	}
	return g.openStore(ctx, writeStore)
}

func (g *Globals) keyDir() string {
	if g.KeyDir != "" {
		return g.KeyDir
	}
	return activity.DefaultKeyDir()
}

// CLI is the command tree.
type CLI struct {
	Globals

	Version kong.VersionFlag `help:"Print the version and exit."`

	Demo       DemoCmd       `cmd:"" help:"Run a scripted incident through the real gateway and open the console on it."`
	Console    ConsoleCmd    `cmd:"" help:"Open the interactive console: suspects, the five-question walk, replay, the pending queue."`
	Marker     MarkerCmd     `cmd:"" help:"The SSH host helper: run a command once under a durable marker, and read markers back."`
	Import     ImportCmd     `cmd:"" help:"Import activity logs: mcpdup exports and other systems' logs (${formats})."`
	Gateway    GatewayCmd    `cmd:"" help:"Serve the MCP gateway: every tool call gets an execution identity and a durable lifecycle."`
	Analyze    AnalyzeCmd    `cmd:"" help:"Find suspected duplicate actions and walk the five questions for each."`
	Replay     ReplayCmd     `cmd:"" help:"Replay a suspect's (or a time range's) events with each execution's state; what the gateway would have done."`
	Report     ReportCmd     `cmd:"" help:"Write a post-incident report for a suspect (Markdown or self-contained HTML)."`
	History    HistoryCmd    `cmd:"" help:"Export the lifecycle as a Jepsen-style history (invoke/ok/fail/info), or check it."`
	Approvals  ApprovalsCmd  `cmd:"" help:"List approvals the gateway is waiting for."`
	Approve    ApproveCmd    `cmd:"" help:"Approve a pending approval: the waiting call proceeds."`
	Deny       DenyCmd       `cmd:"" help:"Deny a pending approval: the waiting call is refused."`
	Lock       LockCmd       `cmd:"" help:"Lock the vault: the gateway refuses every call until unlocked."`
	Unlock     UnlockCmd     `cmd:"" help:"Unlock the vault."`
	Init       InitCmd       `cmd:"" help:"Create a database and its signing key, and print the public key to keep elsewhere."`
	Status     StatusCmd     `cmd:"" help:"Summarise a database: log size, sealing, executions by state, pending verifications."`
	Resolve    ResolveCmd    `cmd:"" help:"Mark an execution whose outcome is unknown as verified or rejected."`
	Export     ExportCmd     `cmd:"" help:"Write the whole log, byte for byte, with its checkpoints, as JSONL."`
	Audit      AuditCmd      `cmd:"" help:"Verify the tamper-evident log; print keys and checkpoints."`
	Completion CompletionCmd `cmd:"" help:"Print the shell snippet that enables tab completion."`
}

// exitError carries an exit code other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

// errSilent exits non-zero without printing: the command already said why.
var errSilent = errors.New("")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args and runs the command, returning the exit code: 0 ok,
// 1 failure (or, for audit verify, tampering found), 2 usage or I/O error.
func run(args []string, stdout, stderr io.Writer) int {
	var cli CLI
	// Everything a command prints as text is neutralised on the way out:
	// tool names, arguments, notes and imported fields are hostile until
	// checked (JSON output bypasses it and stays exact).
	out, errOut := termsafe.NewWriter(stdout), termsafe.NewWriter(stderr)
	defer out.Flush()
	defer errOut.Flush()
	cli.stdout, cli.stderr = out, errOut
	stdout, stderr = out, errOut
	exitCode := -1
	parser, err := kong.New(&cli,
		kong.Name("mcpdup"),
		kong.Description("mcpdup records what AI-agent tool calls did, proves the record was not altered, and helps resolve calls whose outcome is unknown."),
		kong.UsageOnError(),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exitCode = code }),
		kong.Vars{
			"version":         "mcpdup " + buildVersion(),
			"default_db":      "$XDG_DATA_HOME/mcpdup/mcpdup.db",
			"default_key_dir": "$XDG_CONFIG_HOME/mcpdup/keys",
			"formats":         formatList(),
			"format_enum":     formatEnum(),
		},
	)
	if err != nil {
		fmt.Fprintln(stderr, "mcpdup:", err)
		return 2
	}
	kongplete.Complete(parser, kongplete.WithExitFunc(func(code int) { exitCode = code }))
	if exitCode >= 0 {
		return exitCode // answered a completion request
	}
	if len(args) == 0 {
		return firstRun(parser, &cli.Globals, stdout)
	}
	ctx, err := parser.Parse(args)
	if exitCode >= 0 {
		return exitCode // --help or --version
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcpdup: %v\n", err)
		fmt.Fprintf(stderr, "run '%s --help' for usage\n", usagePath(err))
		return 2
	}
	err = ctx.Run(&cli.Globals)
	if exitCode >= 0 {
		return exitCode
	}
	if err == nil {
		return 0
	}
	if err != errSilent && err.Error() != "" {
		fmt.Fprintf(stderr, "mcpdup: %v\n", err)
	}
	var coder kong.ExitCoder
	if errors.As(err, &coder) {
		return coder.ExitCode()
	}
	return 1
}

// firstRun is bare mcpdup: the commands, and where to start. With no
// database yet, that is the demo or an import.
func firstRun(parser *kong.Kong, g *Globals, w io.Writer) int {
	ctx, err := kong.Trace(parser, nil)
	if err == nil {
		ctx.PrintUsage(true)
	}
	db := shown(g.dbPath())
	fmt.Fprintln(w)
	if ok, _ := g.dbExists(); !ok {
		fmt.Fprintf(w, "No database yet at %s. To start:\n", db)
		fmt.Fprintln(w, "  mcpdup demo                       a scripted incident in a fresh database, opened in the console (no setup)")
		fmt.Fprintln(w, "  mcpdup import FILE...             import activity logs (Sallyport, OTLP, HAR, MCP logs, Envoy, nginx, Traefik, Kong, mcpdup exports)")
		fmt.Fprintln(w, "  mcpdup gateway --config FILE      serve the MCP gateway, recording into it")
		return 0
	}
	fmt.Fprintf(w, "Database %s. Next:\n", db)
	fmt.Fprintln(w, "  mcpdup console                    the interactive console")
	fmt.Fprintln(w, "  mcpdup analyze                    suspected duplicates, most severe first")
	fmt.Fprintln(w, "  mcpdup status                     counts, and what awaits an operator")
	return 0
}

// usagePath is the command whose --help a usage error points to: the
// command it was about ("mcpdup replay"), or mcpdup itself.
func usagePath(err error) string {
	var pe *kong.ParseError
	if errors.As(err, &pe) && pe.Context != nil {
		if n := pe.Context.Selected(); n != nil {
			return n.FullPath()
		}
	}
	return "mcpdup"
}
