package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/internal/termsafe"
)

// AuditCmd groups the log integrity commands.
type AuditCmd struct {
	Verify     VerifyCmd     `cmd:"" help:"Check the log for tampering (exit 0 clean, 1 tampered, 2 usage or I/O error)."`
	Checkpoint CheckpointCmd `cmd:"" help:"Seal the log now and print the newest signed checkpoint, to keep elsewhere."`
	Key        KeyCmd        `cmd:"" help:"Print the log's public key, to pin with --key."`
}

// VerifyCmd checks a database or an export.
type VerifyCmd struct {
	Export            string `placeholder:"FILE" help:"Verify an export file instead of a database (no database needed)." type:"existingfile"`
	Key               string `placeholder:"PUB" help:"Pinned public key: the key text or a .pub file. Without it the key is read from this host's key directory and reported as not pinned."`
	TrustedCheckpoint string `placeholder:"FILE" help:"A signed checkpoint kept outside the log; detects rollback and rewritten history." type:"existingfile"`
	Output            string `short:"o" enum:"table,json" default:"table" help:"Output format: table or json."`
	LogOnly           bool   `help:"Prove the log only, not the tables rebuilt from it (about half the time; the report says the tables were not checked)."`
	Witness           string `placeholder:"FILE" help:"Witness file whose newest checkpoint is trusted (default: the one the store appends to, in the key directory); --no-witness skips it."`
	NoWitness         bool   `help:"Do not read the witness file."`
}

func (c *VerifyCmd) Help() string {
	return `Checks, in order: seq gaps, chain links, record hashes recomputed from the
stored bytes (never trusting stored hashes), checkpoint signatures against
the pinned key and origin, checkpoint roots against the recomputed Merkle
tree, truncation below the newest checkpoint, rollback or fork against a
checkpoint kept elsewhere, and (for a database) that every table the
console, the analysis and the gateway read is exactly what the log
implies: each row rebuilt from the records by the writer's own rules and
state machine, each stored result against its sha256. It says what it
could not check, such as an unsealed tail or a key that was not pinned.

Exit status: 0 no tampering found, 1 tampering found, 2 usage or I/O
error, or no key to check the signatures with (nothing verified).

Examples:
  mcpdup audit verify --db ./incident.db --key ./keys/team.pub
  mcpdup audit verify --export fixtures/audit/sample.jsonl --key fixtures/audit/sample.pub
  mcpdup audit verify --db ./incident.db --trusted-checkpoint ticket-4711.checkpoint -o json`
}

func (c *VerifyCmd) Run(g *Globals) error {
	rep, err := c.verify(g)
	if err != nil {
		return &exitError{2, err}
	}
	if c.Output == "json" {
		err = writeJSON(g.stdout, rep)
	} else {
		err = rep.WriteText(g.stdout)
	}
	if err != nil {
		return &exitError{2, err}
	}
	if rep.Tampered {
		return &exitError{1, errSilent}
	}
	if rep.Result == audit.ResultUnsigned {
		return &exitError{2, errors.New("no key to check the log's signatures: pass --key (mcpdup audit key on the host that signs it), or run where its key directory is")}
	}
	return nil
}

func (c *VerifyCmd) verify(g *Globals) (*audit.Report, error) {
	ctx := context.Background()
	opts := audit.Options{LogOnly: c.LogOnly}
	if c.TrustedCheckpoint != "" {
		b, err := os.ReadFile(c.TrustedCheckpoint)
		if err != nil {
			return nil, err
		}
		opts.Trusted = b
	}
	prog := newProgress(g.stderr, "verifying")
	defer prog.done()
	opts.Progress = prog.update

	if c.Export != "" {
		hdr, err := audit.ReadExportHeader(c.Export)
		if err != nil {
			return nil, err
		}
		if badPub, err := c.resolveKey(g, hdr.Origin, &opts); err != nil || badPub != nil {
			return nil, errors.Join(err, badPub)
		}
		return audit.VerifyExportFile(c.Export, opts)
	}
	s, err := g.openStore(ctx, readStore)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	badPub, err := c.resolveKey(g, s.Origin(), &opts)
	if err != nil {
		return nil, err
	}
	if pk, err := s.PublicKey(); err == nil && c.Key == "" {
		// The host's signing key speaks for it, as it does for analyze
		// and report: a .pub beside it that is not its public half was
		// replaced, and is said so rather than trusted.
		if badPub != nil || (opts.Key != "" && opts.Key != pk) {
			_, pub := activity.KeyFiles(g.keyDir(), s.Origin())
			fmt.Fprintf(g.stderr, "mcpdup audit verify: %s is not the public half of this host's signing key for %s: it was replaced; verifying with the signing key's\n", pub, s.Origin())
		}
		opts.Key = pk
	} else if badPub != nil {
		return nil, badPub
	}
	if !c.NoWitness {
		witness := c.Witness
		if witness == "" {
			witness = s.WitnessPath()
		}
		if err := audit.UseWitness(witness, &opts); err != nil {
			return nil, err
		}
	}
	return audit.VerifyStore(ctx, s, opts)
}

// resolveKey pins --key, or falls back to this host's public key file for
// the origin (reported as not pinned). A key stored inside the database or
// export is never used.
// A host .pub file that is no key for origin is returned as badPub, not
// as an error: the host's signing key, when present, speaks instead.
func (c *VerifyCmd) resolveKey(g *Globals, origin string, opts *audit.Options) (badPub, err error) {
	if c.Key != "" {
		_, vkey, err := activity.ReadVerifierKey(c.Key)
		if err != nil {
			return nil, err
		}
		opts.Key, opts.KeyPinned = vkey, true
		return nil, nil
	}
	_, pub := activity.KeyFiles(g.keyDir(), origin)
	if _, err := os.Stat(pub); err != nil {
		return nil, nil // no key: signatures are reported as not checked
	}
	_, vkey, err := activity.ReadVerifierKey(pub)
	if err != nil {
		return fmt.Errorf("%s: %w", pub, err), nil
	}
	opts.Key = vkey
	return nil, nil
}

// CheckpointCmd seals and prints the newest checkpoint.
type CheckpointCmd struct {
	Output string `short:"o" enum:"note,json" default:"note" help:"Output format: note (the signed checkpoint exactly as stored, what --trusted-checkpoint reads) or json."`
	outFile
}

func (c *CheckpointCmd) Help() string {
	return `Seals any unsealed records, then prints the newest signed checkpoint
(origin, size, Merkle root and signature). Keep it outside this host, in a
ticket or with a teammate: 'audit verify --trusted-checkpoint' then detects
a log that was rolled back or rewritten, even by someone holding the key.

Examples:
  mcpdup audit checkpoint --db ./incident.db -f ticket-4711.checkpoint
  mcpdup audit checkpoint --db ./incident.db -o json`
}

func (c *CheckpointCmd) Run(g *Globals) error {
	ctx := context.Background()
	s, err := g.openStore(ctx, writeStore)
	if err != nil {
		return err
	}
	defer s.Close()
	w, commit, discard, err := c.open(g.stdout) // first: a refused file must not have sealed anything
	if err != nil {
		return err
	}
	defer discard()
	cp, err := s.Seal(ctx, activity.SealManual)
	if err != nil {
		return err
	}
	if cp.Size == 0 {
		return errors.New("the log is empty: nothing to checkpoint")
	}
	if c.Output == "json" {
		err = writeJSON(w, map[string]any{"origin": cp.Origin, "size": cp.Size, "root_hash": cp.Root.String(),
			"created_at": cp.CreatedAt.UTC().Format(time.RFC3339Nano), "reason": cp.Reason, "note": string(cp.Note)})
	} else {
		if sw, ok := w.(*termsafe.Writer); ok {
			w = sw.Raw // the signed note must stay byte for byte
		}
		_, err = w.Write(cp.Note)
	}
	if err != nil {
		return err
	}
	if err := commit(); err != nil {
		return err
	}
	if c.toFile() {
		fmt.Fprintf(g.stderr, "wrote checkpoint at size %d to %s\n", cp.Size, c.File)
	}
	return nil
}

// KeyCmd prints the public key.
type KeyCmd struct{}

func (c *KeyCmd) Help() string {
	return `Prints the verifier key (name+hash+key) of this host's signing key for
the database's log. Pin it with 'audit verify --key'.

Example:
  mcpdup audit key --db ./incident.db > incident.pub`
}

func (c *KeyCmd) Run(g *Globals) error {
	ctx := context.Background()
	s, err := g.openStore(ctx, readStore)
	if err != nil {
		return err
	}
	defer s.Close()
	pub, err := s.PublicKey()
	if err != nil {
		return err
	}
	fmt.Fprintln(g.stdout, strings.TrimSpace(pub))
	return nil
}

// verifyFirst is the flag of every command whose output is computed from
// the tables: they state what a verification proved about them.
type verifyFirst struct {
	NoVerify bool `help:"Skip verifying the log and tables first; the output then says the integrity was not checked."`
}

// proveRecords is the flag of the commands that show one suspect: prove
// only what they show, instead of the whole log.
type proveRecords struct {
	VerifyRecords bool `help:"Prove only the log records this suspect rests on (a few dozen Merkle proofs, at any log size) instead of verifying the whole log and tables; it cannot see a row deleted elsewhere."`
}

// integrityOf states the integrity of what shows sus: its records proven
// one by one with --verify-records, else as v.integrity does.
func (p proveRecords) integrityOf(ctx context.Context, s *activity.Store, v verifyFirst, sus *analyze.Suspect) (audit.Integrity, error) {
	if !p.VerifyRecords || v.NoVerify || sus == nil {
		return v.integrity(ctx, s)
	}
	if _, err := s.PublicKey(); err != nil {
		return audit.NotChecked("no key on this host to check the log's signatures"), nil
	}
	proof, err := analyze.Prove(ctx, s, sus)
	if err != nil {
		return audit.Integrity{}, fmt.Errorf("prove %s: %w", sus.ID, err)
	}
	return audit.RecordsProven(proof.Records, proof.Unsealed, proof.Problems), nil
}

// verifyBeside verifies s on a goroutine of its own, beside the command's
// own reading of it; the function returned waits for what it proved.
func (v verifyFirst) verifyBeside(ctx context.Context, s *activity.Store) func() (audit.Integrity, error) {
	done := make(chan struct{})
	var in audit.Integrity
	var err error
	go func() {
		defer close(done)
		in, err = v.integrity(ctx, s)
	}()
	return func() (audit.Integrity, error) {
		<-done
		return in, err
	}
}

// integrity verifies s, log and tables, with this host's key (so "key not
// pinned"; audit verify --key pins one), for the integrity line.
func (v verifyFirst) integrity(ctx context.Context, s *activity.Store) (audit.Integrity, error) {
	if v.NoVerify {
		return audit.NotChecked("--no-verify"), nil
	}
	opts := audit.Options{}
	if pub, err := s.PublicKey(); err == nil {
		opts.Key = pub
	}
	if err := audit.UseWitness(s.WitnessPath(), &opts); err != nil {
		return audit.Integrity{}, err
	}
	rep, err := audit.VerifyStore(ctx, s, opts)
	if err != nil {
		return audit.Integrity{}, fmt.Errorf("verify %s: %w", s.Path(), err)
	}
	return rep.Integrity(), nil
}

// warnTampered says on stderr that what was just printed rests on a
// tampered database, and makes the command fail.
func warnTampered(g *Globals, cmd string, in audit.Integrity) error {
	if in.State != audit.IntegrityTampered {
		return nil
	}
	fmt.Fprintf(g.stderr, "mcpdup %s: %s: the output above was computed from tables the signed log does not prove\n", cmd, in.Text)
	return &exitError{1, errSilent}
}
