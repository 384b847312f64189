package activity

// Live decisions do not trust a table row alone. What the gateway acts on
// (the vault lock, a session grant, an approval decision, a stored result)
// is checked against the log record it came from, and that record is
// proven part of the signed log: a Merkle inclusion proof against the
// newest checkpoint this host's key verifies, or, in the unsealed tail,
// the chain from the newest signed record to it. A row someone edited
// behind the store's back then refuses the call instead of steering it.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// ErrUnproven is returned when a row a decision rests on does not match
// the signed log.
var ErrUnproven = errors.New("not proven by the signed log")

// maxProvenTail bounds the unsealed records a proof walks (the store seals
// every 1,000 records or 60 s; more means sealing stopped).
const maxProvenTail = 200_000

type provenLeaf struct {
	leaf tlog.Hash
}

// ProveRecord reads record seq, proves it part of the signed log and
// returns its decoded payload.
func (s *Store) ProveRecord(ctx context.Context, seq int64) (any, error) {
	var canonical []byte
	err := s.r.QueryRowContext(ctx, `SELECT canonical FROM audit_log WHERE seq = ?`, seq).Scan(&canonical)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("record %d: %w: the log has no such record", seq, ErrUnproven)
	}
	if err != nil {
		return nil, fmt.Errorf("record %d: %w", seq, err)
	}
	return s.proveCanonical(ctx, seq, canonical)
}

// proveCanonical proves bytes claimed for record seq and decodes them.
func (s *Store) proveCanonical(ctx context.Context, seq int64, canonical []byte) (any, error) {
	leaf := tlog.RecordHash(canonical)
	if p, ok := s.proven.Load(seq); !ok || p.(provenLeaf).leaf != leaf {
		final, err := s.prove(ctx, seq, leaf)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w: %v", seq, ErrUnproven, err)
		}
		if final { // the newest record is proven again once something commits to it
			s.proven.Store(seq, provenLeaf{leaf})
		}
	}
	rec, err := ParseRecord(canonical)
	if err != nil {
		return nil, fmt.Errorf("record %d: %w", seq, err)
	}
	if rec.Seq != seq {
		return nil, fmt.Errorf("record %d: %w: it claims seq %d", seq, ErrUnproven, rec.Seq)
	}
	return rec.Event()
}

// prove ties leaf, claimed for record seq, to the newest signed root.
func (s *Store) prove(ctx context.Context, seq int64, leaf tlog.Hash) (final bool, err error) {
	size, root, err := s.signedRoot(ctx)
	if err != nil {
		return false, err
	}
	hashes := txHashReader{ctx: ctx, q: s.r}
	if seq < size {
		proof, err := tlog.ProveRecord(size, seq, hashes)
		if err != nil {
			return false, fmt.Errorf("inclusion proof: %w", err)
		}
		if err := tlog.CheckRecord(proof, size, root, seq, leaf); err != nil {
			return false, fmt.Errorf("not in the tree the newest checkpoint signs: %w", err)
		}
		return true, nil
	}
	if seq-size > maxProvenTail {
		return false, fmt.Errorf("%d unsealed records before it: the log is not being sealed", seq-size)
	}
	// The unsealed tail: from the newest signed record (proven above) or
	// the genesis, each record's prev is the hash of the one before, up to
	// the record after seq, the first that commits to seq's bytes. The
	// newest record has none yet: its chain is checked, its own bytes are
	// not provable until the next record or checkpoint (an operator's
	// decision is sealed right after its commit, so only for that moment).
	prev := GenesisHash(s.origin)
	from := int64(0)
	if size > 0 {
		var last []byte
		if err := s.r.QueryRowContext(ctx, `SELECT canonical FROM audit_log WHERE seq = ?`, size-1).Scan(&last); err != nil {
			return false, fmt.Errorf("record %d: %w", size-1, notFound(err))
		}
		if _, err := s.prove(ctx, size-1, tlog.RecordHash(last)); err != nil {
			return false, err
		}
		prev, from = tlog.RecordHash(last), size
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, canonical FROM audit_log WHERE seq >= ? AND seq <= ? ORDER BY seq`, from, seq+1)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	want := from
	for rows.Next() {
		var n int64
		var b sql.RawBytes
		if err := rows.Scan(&n, &b); err != nil {
			return false, err
		}
		linked, p, err := ParseHead(b)
		switch {
		case err != nil:
			return false, fmt.Errorf("record %d: %w", n, err)
		case n != want || linked != n:
			return false, fmt.Errorf("record %d is missing from the chain", want)
		case p != prev:
			return false, fmt.Errorf("record %d does not chain to the one before it", n)
		}
		if n == seq && tlog.RecordHash(b) != leaf {
			return false, errors.New("its bytes changed")
		}
		prev, want = tlog.RecordHash(b), n+1
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	if want != seq+1 && want != seq+2 {
		return false, fmt.Errorf("record %d is missing from the chain", want)
	}
	return want == seq+2, nil
}

// SignedSize is how many records the newest checkpoint this host's key
// verifies covers: records at or past it are proven by their chain
// alone, not yet by a signature.
func (s *Store) SignedSize(ctx context.Context) (int64, error) {
	size, _, err := s.signedRoot(ctx)
	return size, err
}

// signedRoot is the newest checkpoint whose signature this host's key
// verifies.
func (s *Store) signedRoot(ctx context.Context) (int64, tlog.Hash, error) {
	if s.vkey == "" {
		return 0, tlog.Hash{}, fmt.Errorf("no key on this host to check the log's signatures (%v)", s.keyErr)
	}
	// The witness file first: a checkpoint is committed before it is
	// witnessed, so one witnessed now is in any read of the database that
	// starts later. Read the other way round, a seal between the two
	// reads looked like a removed checkpoint, and a live call was refused.
	w, err := s.witness.read(s.WitnessPath())
	if err != nil {
		return 0, tlog.Hash{}, err
	}
	cp, err := s.LatestCheckpoint(ctx)
	if err != nil {
		return 0, tlog.Hash{}, err
	}
	dbSize := int64(0)
	if cp != nil {
		dbSize = cp.Size
	}
	if err := s.checkWitnessed(w, dbSize); err != nil {
		return 0, tlog.Hash{}, err
	}
	if cp == nil {
		return 0, tlog.Hash{}, nil // nothing sealed yet: the chain from genesis
	}
	if v, ok := s.rootCache.Load(string(cp.Note)); ok {
		r := v.(signedTree)
		return r.size, r.root, nil
	}
	verifier, err := note.NewVerifier(s.vkey)
	if err != nil {
		return 0, tlog.Hash{}, err
	}
	n, err := note.Open(cp.Note, note.VerifierList(verifier))
	if err != nil {
		return 0, tlog.Hash{}, fmt.Errorf("newest checkpoint: %w", err)
	}
	origin, size, root, err := ParseCheckpointText(n.Text)
	if err != nil {
		return 0, tlog.Hash{}, err
	}
	if origin != s.origin {
		return 0, tlog.Hash{}, fmt.Errorf("newest checkpoint is of log %q", origin)
	}
	s.rootCache.Store(string(cp.Note), signedTree{size, root})
	return size, root, nil
}

type signedTree struct {
	size int64
	root tlog.Hash
}

// VaultLocked reports whether the vault is locked, and the lock's note,
// as the newest vault record of this database says, proven; the meta row
// must agree with it.
func (w *Tx) VaultLocked() (bool, string, error) {
	if w.vaultMoved {
		if st := w.vaultState; st != nil {
			return st.locked, st.reason, nil // what this request set
		}
	} else if w.shared != nil {
		if st := w.shared.vaultLocked(); st != nil {
			return st.locked, st.reason, nil
		}
	}
	locked, reason, err := w.vaultLocked()
	if err == nil && !w.vaultMoved {
		w.vaultState = &vaultState{locked: locked, reason: reason}
	}
	return locked, reason, err
}

// vaultLocked reads the vault's state and proves it.
func (w *Tx) vaultLocked() (bool, string, error) {
	var v string
	err := w.queryRow(`SELECT value FROM meta WHERE key = 'vault'`).Scan(&v)
	hasRow := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, "", err
	}
	ev, seq, err := w.lastVaultRecord()
	if err != nil {
		return false, "", err
	}
	switch {
	case ev == nil && hasRow:
		return false, "", fmt.Errorf("vault row %q: %w: no vault record says so", v, ErrUnproven)
	case ev == nil:
		return false, "", nil
	case !hasRow || v != vaultValue(*ev):
		return false, "", fmt.Errorf("vault row %q: %w: record %d says %q", v, ErrUnproven, seq, vaultValue(*ev))
	}
	return ev.Locked, v, nil
}

// lastVaultRecord is the newest vault event of this database (not one
// imported from another log), proven.
func (w *Tx) lastVaultRecord() (*VaultEvent, int64, error) {
	rows, err := w.query(`SELECT seq, canonical FROM audit_log WHERE kind = 'vault' ORDER BY seq DESC`)
	if err != nil {
		return nil, 0, err
	}
	type rec struct {
		seq int64
		b   []byte
	}
	var recs []rec
	for rows.Next() {
		var r rec
		if err := rows.Scan(&r.seq, &r.b); err != nil {
			rows.Close()
			return nil, 0, err
		}
		recs = append(recs, r)
		ev, err := decodeVault(r.b)
		if err != nil || ev.Source.IsZero() {
			break // the newest of this database's own: enough
		}
	}
	rows.Close()
	for _, r := range recs {
		ev, err := decodeVault(r.b)
		if err != nil {
			return nil, 0, fmt.Errorf("vault record %d: %w", r.seq, err)
		}
		if !ev.Source.IsZero() {
			continue
		}
		got, err := w.s.proveCanonical(w.ctx, r.seq, r.b)
		if err != nil {
			return nil, 0, err
		}
		proven, ok := got.(*VaultEvent)
		if !ok {
			return nil, 0, fmt.Errorf("record %d: %w: it is not a vault event", r.seq, ErrUnproven)
		}
		// The kind column that finds vault records is a cache: a newer one
		// this process already saw must not vanish from it.
		if seen := w.s.vaultSeen.Load(); r.seq < seen {
			return nil, 0, fmt.Errorf("vault record %d: %w: this gateway already saw vault record %d, which no longer reads as one", r.seq, ErrUnproven, seen)
		}
		w.s.vaultSeen.Store(r.seq)
		return proven, r.seq, nil
	}
	return nil, 0, nil
}

func decodeVault(b []byte) (*VaultEvent, error) {
	rec, err := ParseRecord(b)
	if err != nil {
		return nil, err
	}
	if rec.Kind != KindVault {
		return nil, fmt.Errorf("%w: a %s record indexed as a vault event", ErrUnproven, rec.Kind)
	}
	ev, err := rec.Event()
	if err != nil {
		return nil, err
	}
	return ev.(*VaultEvent), nil
}

// HasGrant reports whether a run holds a grant of this scope: a grants
// row whose record, proven, says so.
func (w *Tx) HasGrant(run RunID, scope string) (bool, error) {
	var seq int64
	err := w.queryRow(`SELECT seq FROM grants WHERE run_id = ? AND scope = ? ORDER BY seq LIMIT 1`, string(run), scope).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	got, err := w.s.ProveRecord(w.ctx, seq)
	if err != nil {
		return false, fmt.Errorf("grant of %s to run %s: %w", scope, run, err)
	}
	if g, ok := got.(*Grant); !ok || g.RunID != run || g.Scope != scope {
		return false, fmt.Errorf("grant of %s to run %s: %w: record %d is not that grant", scope, run, ErrUnproven, seq)
	}
	return true, nil
}

// ProvenApproval reads an approval and checks it against the record that
// last changed it: its request, or its decision.
func (s *Store) ProvenApproval(ctx context.Context, id string) (Approval, error) {
	a, seq, err := s.approvalRow(ctx, id)
	if err != nil {
		return a, err
	}
	// The record is read on a connection of its own, with the row's
	// released: several calls waiting on approvals, each holding one of
	// the pool's connections while asking for a second, held them all,
	// and the gateway stopped.
	got, err := s.ProveRecord(ctx, seq)
	if err != nil {
		return a, fmt.Errorf("approval %s: %w", id, err)
	}
	if !sameApproval(a, got) {
		return a, fmt.Errorf("approval %s (%s by %q): %w: record %d says otherwise", id, a.State, a.Operator, ErrUnproven, seq)
	}
	return a, nil
}

// sameApproval says whether row a is what record got says, field by
// field (the seqs are the table's own).
func sameApproval(a Approval, got any) bool {
	r, ok := got.(*Approval)
	return ok && r.ID == a.ID && r.Kind == a.Kind && r.State == a.State && r.ExecutionID == a.ExecutionID &&
		r.RunID == a.RunID && r.Actor == a.Actor && r.Tool == a.Tool && r.CredentialRef == a.CredentialRef &&
		r.Summary == a.Summary && r.RequestedAt.Equal(a.RequestedAt) && r.DecidedAt.OK == a.DecidedAt.OK &&
		r.DecidedAt.V.Equal(a.DecidedAt.V) && r.Operator == a.Operator && r.Note == a.Note
}

// approvalRow reads an approval's row and the record it rests on (its
// decision's, else its request's) in one read: a decision committed
// between two reads would pair the decided row with its request.
func (s *Store) approvalRow(ctx context.Context, id string) (Approval, int64, error) {
	tx, err := s.r.BeginTx(ctx, s.readTx())
	if err != nil {
		return Approval{}, 0, err
	}
	defer tx.Rollback()
	var seq int64
	var decided sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT seq, decided_seq FROM approvals WHERE id = ?`, id).Scan(&seq, &decided); err != nil {
		return Approval{}, 0, fmt.Errorf("approval %s: %w", id, notFound(err))
	}
	a, err := scanApproval(tx.QueryRowContext(ctx, approvalSelect+` WHERE id = ?`, id))
	if err != nil {
		return a, 0, fmt.Errorf("approval %s: %w", id, err)
	}
	if decided.Valid {
		seq = decided.Int64
	}
	return a, seq, nil
}

// ProvenResult reads the result an execution's answer names, checked
// twice: the reference against the proven transition that recorded it,
// and the content against the reference.
func (s *Store) ProvenResult(ctx context.Context, e Execution) ([]byte, error) {
	var seq int64
	err := s.queryRow(ctx, `SELECT seq FROM transitions WHERE execution_id = ? AND result_ref = ? ORDER BY seq LIMIT 1`,
		string(e.ID), e.ResultRef).Scan(&seq)
	if err != nil {
		return nil, fmt.Errorf("result of %s: %w: no transition records %s (%v)", e.ID, ErrUnproven, e.ResultRef, notFound(err))
	}
	got, err := s.ProveRecord(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("result of %s: %w", e.ID, err)
	}
	if t, ok := got.(*Transition); !ok || t.ExecutionID != e.ID || t.ResultRef != e.ResultRef {
		return nil, fmt.Errorf("result of %s: %w: record %d does not name %s", e.ID, ErrUnproven, seq, e.ResultRef)
	}
	return s.Result(ctx, e.ResultRef)
}

// checkResult holds content to its reference.
func checkResult(ref string, content []byte) error {
	sum := sha256.Sum256(content)
	if want := "sha256:" + hex.EncodeToString(sum[:]); !bytes.Equal([]byte(ref), []byte(want)) {
		return fmt.Errorf("result %s: %w: its content hashes to %s", ref, ErrUnproven, want)
	}
	return nil
}

// ProvenExecution checks an execution the gateway is about to act on (a
// retry's match) against the record that last changed it: the row's state
// must be what that signed record says. A row rewritten to look finished
// or never dispatched would otherwise let a retry act a second time.
// What this cannot see: a row rolled back to an earlier state together
// with its updated_seq, or a row hidden from the match; proving an absence
// would mean reading every later record. audit verify finds both.
func (w *Tx) ProvenExecution(e Execution) error {
	_, err := w.provenExecution(e)
	return err
}

// provenExecution is ProvenExecution, returning the record it rests on.
func (w *Tx) provenExecution(e Execution) (int64, error) {
	var updated int64
	var state string
	if err := w.queryRow(`SELECT updated_seq, state FROM executions WHERE id = ?`, string(e.ID)).Scan(&updated, &state); err != nil {
		return 0, fmt.Errorf("execution %s: %w", e.ID, notFound(err))
	}
	got, err := w.provenOrOwn(updated)
	if err != nil {
		return 0, fmt.Errorf("execution %s: %w", e.ID, err)
	}
	ok := false
	switch r := got.(type) {
	case *Transition:
		ok = r.ExecutionID == e.ID && string(r.To) == state
	case *Execution:
		ok = r.ID == e.ID && state == string(StateAccepted)
	}
	if !ok || state != string(e.State) {
		return 0, fmt.Errorf("execution %s (%s): %w: record %d says otherwise", e.ID, state, ErrUnproven, updated)
	}
	return updated, nil
}

// provenApproval reads an approval inside the transaction and proves it
// as ProvenApproval does.
func (w *Tx) provenApproval(id string) (Approval, int64, error) {
	a, err := w.Approval(id)
	if err != nil {
		return a, 0, fmt.Errorf("approval %s: %w", id, err)
	}
	seq := a.Seq
	if a.DecidedSeq != 0 {
		seq = a.DecidedSeq
	}
	got, err := w.provenOrOwn(seq)
	if err != nil {
		return a, 0, fmt.Errorf("approval %s: %w", id, err)
	}
	if !sameApproval(a, got) {
		return a, 0, fmt.Errorf("approval %s (%s by %q): %w: record %d says otherwise", id, a.State, a.Operator, ErrUnproven, seq)
	}
	return a, seq, nil
}

// changedSince returns the first record after seq that changed what id
// names (changes says which do), or 0. A row rolled back together with
// the seq it cites passes the record check; an operator's decision on it
// would contradict one already signed (an approval answered twice, an
// execution resolved again). The log is read, not a table: proving an
// absence means reading every later record, so this is for decisions,
// not for the gateway's every call.
func (w *Tx) changedSince(seq int64, id string, changes func(ev any) bool) (int64, error) {
	if err := w.flush(); err != nil {
		return 0, err
	}
	if err := w.insertBuffered(); err != nil {
		return 0, err
	}
	rows, err := w.query(`SELECT seq, canonical FROM audit_log WHERE seq > ? ORDER BY seq`, seq)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	needle := []byte(id)
	for rows.Next() {
		var n int64
		var b sql.RawBytes
		if err := rows.Scan(&n, &b); err != nil {
			return 0, err
		}
		if !bytes.Contains(b, needle) {
			continue
		}
		rec, err := ParseRecord(b)
		if err != nil {
			return 0, fmt.Errorf("record %d: %w", n, err)
		}
		ev, err := rec.Event()
		if err != nil {
			return 0, fmt.Errorf("record %d: %w", n, err)
		}
		if changes(ev) {
			return n, nil
		}
	}
	return 0, rows.Err()
}

// provenOrOwn decodes record seq: proven part of the signed log when it
// is committed, or, when it is not committed yet (an earlier request of
// this same group commit wrote it), as this process wrote it: nobody but
// this transaction can have put it there.
func (w *Tx) provenOrOwn(seq int64) (any, error) {
	if err := w.flush(); err != nil {
		return nil, err
	}
	if err := w.insertBuffered(); err != nil {
		return nil, err
	}
	var canonical []byte
	if err := w.queryRow(`SELECT canonical FROM audit_log WHERE seq = ?`, seq).Scan(&canonical); err != nil {
		return nil, fmt.Errorf("record %d: %w: the log has no such record", seq, ErrUnproven)
	}
	var one int
	err := w.s.r.QueryRowContext(w.ctx, `SELECT 1 FROM audit_log WHERE seq = ?`, seq).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		rec, err := ParseRecord(canonical)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", seq, err)
		}
		return rec.Event()
	}
	if err != nil {
		return nil, err
	}
	return w.s.proveCanonical(w.ctx, seq, canonical)
}
