package main

import (
	"context"
	"fmt"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/gatewaylite"
)

// InitCmd creates a database and its signing key.
type InitCmd struct {
	Origin   string `help:"Name of the new log (also the signing key's name); default mcpdup.local/<ulid>." placeholder:"NAME"`
	PageSize int    `default:"4096" help:"Page size of a new database, in bytes: 4096 suits a gateway (each commit writes whole pages), 16384 a database filled by imports (what mcpdup import gives one it creates). An existing database keeps its own." placeholder:"BYTES"`
	Output   string `short:"o" enum:"table,json" default:"table" help:"Output format: table or json."`
}

func (c *InitCmd) Help() string {
	return `Creates the database (0600, WAL), an Ed25519 signing key for its log and
the gateway's fingerprint key in the key directory (0600, never stored in
the database; every gateway of one database needs the same directory's
keys). Running it on an existing database only prints its details.

Copy the printed public key somewhere this host cannot change (a team
repository, a runbook): 'mcpdup audit verify --key' pins it.

Example:
  mcpdup init --db ./incident.db
  mcpdup init --db ./incident.db --page-size 16384   # for large imports`
}

func (c *InitCmd) Run(g *Globals) error {
	ctx := context.Background()
	s, err := activity.Open(ctx, g.dbPath(), activity.Options{KeyDir: g.keyDir(), Origin: c.Origin, PageSize: c.PageSize})
	if err != nil {
		return err
	}
	defer s.Close()
	// The fingerprint key too, so that a key directory copied to each
	// replica now holds it (the first gateway created it, after the copy).
	if _, err := gatewaylite.LoadFingerprinter(g.keyDir()); err != nil {
		return err
	}
	pub, keyErr := s.PublicKey()
	priv, pubFile := activity.KeyFiles(g.keyDir(), s.Origin())
	if c.Output == "json" {
		out := map[string]any{"db": s.Path(), "origin": s.Origin(), "public_key": pub, "public_key_file": pubFile, "private_key_file": priv}
		if keyErr != nil {
			out["key_error"] = keyErr.Error()
		}
		return writeJSON(g.stdout, out)
	}
	fmt.Fprintf(g.stdout, "database     %s\norigin       %s\n", s.Path(), s.Origin())
	if keyErr != nil {
		fmt.Fprintf(g.stdout, "signing key  none on this host (%v): records will stay unsealed here\n", keyErr)
		return nil
	}
	fmt.Fprintf(g.stdout, "signing key  %s (0600; never copy it into the database or an export)\npublic key   %s\n\n", priv, pub)
	fmt.Fprintf(g.stdout, "Keep the public key off this host, then verify with:\n  mcpdup audit verify --db %s --key '%s'\n", s.Path(), pub)
	return nil
}
