package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/gatewaylite"
	"github.com/mcpdup/mcpdup/internal/gctune"
)

// GatewayCmd serves the MCP gateway.
type GatewayCmd struct {
	Config   string `required:"" placeholder:"FILE" help:"Gateway configuration (TOML; see README.md)." type:"existingfile"`
	Listen   string `placeholder:"ADDR" help:"Override the configuration's listen address."`
	LogLevel string `enum:"debug,info,warn,error" default:"info" env:"MCPDUP_LOG_LEVEL" help:"Log level on stderr: info is a line per call; debug adds each transition (never arguments or secrets)."`
}

func (c *GatewayCmd) Help() string {
	return `Serves MCP over Streamable HTTP at http://ADDR/mcp for both protocol eras
(2025-03-26 … 2025-11-25 with sessions and resumable streams; 2026-07-28
stateless). Every call is authenticated by bearer token, gets an execution
id and fingerprint, and is recorded in the database before each step; a
retry of the same intent attaches to the existing execution.

Tools reach HTTP APIs (Idempotency-Key = execution id), SSH hosts (a pinned
host key; commands under "mcpdup marker run" so a dropped session is
recovered from the host's record) and upstream MCP servers.

Stops cleanly on SIGINT or SIGTERM: in-flight calls finish, the log is
sealed.

Several replicas may share one PostgreSQL database (--db postgres://…):
each holds a lease, and the executions a replica that stopped renewing it
left in flight are recovered by another. A replica whose lease another
recovered exits 1.

Examples:
  DEPLOY_API_TOKEN=... MCPDUP_TOKEN_DEPLOYER=... mcpdup gateway --config gateway.toml --db ./gw.db
  mcpdup gateway --config gateway.toml --listen 127.0.0.1:8932 --db postgres://mcpdup@db.internal/mcpdup`
}

func (c *GatewayCmd) Run(g *Globals) error {
	cfg, err := gatewaylite.LoadConfig(c.Config)
	if err != nil {
		return err
	}
	if c.Listen != "" {
		cfg.Listen = c.Listen
	}
	if g.DB == "" && cfg.DB != "" { // --db and MCPDUP_DB come first
		g.DB = cfg.DB
	}
	defer gctune.Raise(gatewaylite.GCPercent)()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The lock first: opening for writing seals a crashed writer's tail,
	// which must not happen to a gateway that is alive.
	lock, err := gatewaylite.LockDatabase(g.dbPath())
	if err != nil {
		return err
	}
	store, err := g.openStore(ctx, createStore)
	if err != nil {
		lock.Release()
		return err
	}
	defer store.Close()
	var level slog.Level
	level.UnmarshalText([]byte(c.LogLevel))
	logger := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level}))
	gw, err := gatewaylite.New(ctx, cfg, store, gatewaylite.Options{KeyDir: g.keyDir(), Logger: logger, Version: version, Lock: lock})
	if err != nil {
		lock.Release()
		return err
	}
	defer gw.Close()
	ln, err := gw.Listen()
	if err != nil {
		return err
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
		logger.Warn("listening on a non-loopback address: anyone who can reach it must still present a bearer token", "addr", ln.Addr())
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", gw.Handler())
	srv := gw.Server(mux)
	fmt.Fprintf(g.stderr, "mcpdup gateway listening on http://%s/mcp (database %s)\n", ln.Addr(), store.Path())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-gw.Lost():
		srv.Close()
		return fmt.Errorf("gateway replica %s lost its lease (silent past lease_ttl %v): another replica recovered its executions", gw.Replica(), cfg.LeaseTTL.Duration)
	case <-ctx.Done():
	}
	stop() // a second signal ends the process at once
	logger.Info("shutting down: finishing in-flight calls (a second signal stops at once)")
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// LockCmd locks the vault: the gateway refuses every call.
type LockCmd struct {
	Reason   string `required:"" help:"Why (recorded in the log)."`
	Operator string `env:"USER" help:"Who is locking (default: $USER, else $LOGNAME, else the OS account)."`
}

func (c *LockCmd) Help() string {
	return `While the vault is locked, every tools/call is refused (recorded as a
rejected execution with the reason) and nothing reaches a target. A
running gateway sees the change at once.

Example:
  mcpdup lock --reason "incident 4711: duplicate deploys under investigation"`
}

func (c *LockCmd) Run(g *Globals) error { return setVault(g, true, c.Operator, c.Reason) }

// UnlockCmd unlocks the vault.
type UnlockCmd struct {
	Reason   string `required:"" help:"Why (recorded in the log)."`
	Operator string `env:"USER" help:"Who is unlocking (default: $USER, else $LOGNAME, else the OS account)."`
}

func (c *UnlockCmd) Help() string {
	return `Example:
  mcpdup unlock --reason "incident 4711 resolved"`
}

func (c *UnlockCmd) Run(g *Globals) error { return setVault(g, false, c.Operator, c.Reason) }

func setVault(g *Globals, locked bool, operator, reason string) error {
	ctx := context.Background()
	s, err := g.openAsOperator(ctx, &operator)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Write(ctx, func(w *activity.Tx) error { return w.SetVault(locked, operator, reason) }); err != nil {
		return err
	}
	_, note, err := s.Vault(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "vault %s\n", note)
	return nil
}
