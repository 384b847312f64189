package main

import (
	"fmt"
	"os"

	"github.com/mcpdup/mcpdup/marker"
)

// MarkerCmd is the helper that runs on an SSH host.
type MarkerCmd struct {
	Run    MarkerRunCmd    `cmd:"" help:"Run a command once under a durable marker keyed by execution id."`
	Status MarkerStatusCmd `cmd:"" help:"Read a marker: absent, running, lost or done (exit code, output)."`
}

// MarkerRunCmd runs one command under a marker.
type MarkerRunCmd struct {
	ID      string   `required:"" help:"The execution id; a marker id runs at most once."`
	Dir     string   `required:"" help:"Directory of markers on this host (created 0700)."`
	Workdir string   `help:"Working directory of the command."`
	Command []string `arg:"" passthrough:"" name:"CMD" help:"The command and its arguments, after --; run directly, never through a shell."`
}

func (c *MarkerRunCmd) Help() string {
	return `Runs on the host an SSH tool reaches (the gateway sends this binary's
command line). Before the command starts it claims the id (an exclusive
create) and records the start (pid, time) durably: written to a temporary
file, synced, renamed. When the command ends it records the exit code, the
first 64 KiB of its output and a SHA-256 of all of it. A second run of the
same id is refused before anything runs (exit 125). Hang-ups are ignored:
a dropped SSH session does not stop the command or its record.

Exit status: the command's, or 125 when the marker refused or failed.

Example:
  mcpdup marker run --id act_01JD8XK7Q2 --dir ~/.mcpdup/markers -- ./migrate.sh --apply`
}

func (c *MarkerRunCmd) Run(g *Globals) error {
	argv := c.Command
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	code, err := marker.Run(c.Dir, c.ID, c.Workdir, argv, os.Stdout, os.Stderr)
	if err != nil {
		return &exitError{125, err}
	}
	if code != 0 {
		return &exitError{code, errSilent}
	}
	return nil
}

// MarkerStatusCmd reads a marker back.
type MarkerStatusCmd struct {
	ID     string `required:"" help:"The execution id."`
	Dir    string `required:"" help:"Directory of markers on this host."`
	Output string `short:"o" enum:"table,json" default:"table" help:"Output format: table or json."`
}

func (c *MarkerStatusCmd) Help() string {
	return `States: absent (never started: safe to send), running (started, its
process is still there), lost (started, the process is gone and recorded
no end: verify by hand), done (exit code and output recorded).

Example:
  mcpdup marker status --id act_01JD8XK7Q2 --dir ~/.mcpdup/markers -o json`
}

func (c *MarkerStatusCmd) Run(g *Globals) error {
	rec, err := marker.Status(c.Dir, c.ID)
	if err != nil {
		return &exitError{2, err}
	}
	if c.Output == "json" {
		return writeJSON(g.stdout, rec)
	}
	fmt.Fprintf(g.stdout, "%s: %s\n", rec.ID, rec.State)
	switch rec.State {
	case marker.Done:
		fmt.Fprintf(g.stdout, "exit code %d, finished %s, output sha256 %s\n", *rec.ExitCode, rec.FinishedAt.Format("2006-01-02T15:04:05Z"), rec.OutputSHA256)
	case marker.Running, marker.Lost:
		if rec.PID > 0 {
			fmt.Fprintf(g.stdout, "pid %d, started %s\n", rec.PID, rec.StartedAt.Format("2006-01-02T15:04:05Z"))
		}
	}
	return nil
}
