package activity

// Operator actions: resolutions of unknown outcomes, the vault lock, and
// approvals (asked by the gateway, answered by an operator).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Resolve records an operator's decision about an execution whose outcome
// is unknown or pending verification, and moves it to verified or
// rejected_by_operator. The store seals a checkpoint after the commit.
func (w *Tx) Resolve(r Resolution) (Execution, error) {
	e, err := w.Execution(r.ExecutionID)
	if err != nil {
		return e, err
	}
	if r.Outcome != ResolutionVerified && r.Outcome != ResolutionRejected {
		return e, fmt.Errorf("resolve %s: outcome must be verified or rejected, not %q", e.ID, r.Outcome)
	}
	if r.Operator == "" {
		return e, fmt.Errorf("resolve %s: operator is required", e.ID)
	}
	if strings.TrimSpace(r.Note) == "" {
		return e, fmt.Errorf("resolve %s: a note is required (what did you check?)", e.ID)
	}
	for field, v := range map[string]string{"operator": r.Operator, "evidence": r.Evidence} {
		if err := validateText(field, v); err != nil {
			return e, fmt.Errorf("resolve %s: %w", e.ID, err)
		}
	}
	if !e.State.OutcomeUnresolved() {
		return e, fmt.Errorf("resolve %s: its outcome is not unknown (state %s); only unknown or pending_verification executions are resolved", e.ID, e.State)
	}
	if err := CheckTransition(e.ID, e.Contract, e.State, r.Outcome.State()); err != nil {
		return e, err
	}
	if r.Source.IsZero() {
		if err := w.sealable("resolve " + string(e.ID)); err != nil {
			return e, err
		}
		if err := w.provenUnresolved(e); err != nil {
			return e, fmt.Errorf("resolve %s: %w: nothing was written; run mcpdup audit verify", e.ID, err)
		}
	}
	if r.At.IsZero() {
		r.At = w.now
	}
	r.At = r.At.UTC()
	rec, err := w.append(KindResolution, r)
	if err != nil {
		return e, err
	}
	if err := w.exec(resolutionIns, args(resolutionRow, r, rec.Seq)...); err != nil {
		return e, err
	}
	w.resolved = true
	return w.transition(e, Transition{ExecutionID: e.ID, From: e.State, To: r.Outcome.State(), At: Some(r.At),
		Reason: fmt.Sprintf("%s by %s: %s", r.Outcome, r.Operator, r.Note), Source: r.Source}, true)
}

// sealable refuses an operator's decision on a store that cannot seal it.
// The store seals a decision as soon as it commits it, so what the
// gateway and every reader act on rests on a signed record; one written
// without the key would stay unsealed, until whoever next opens the store
// with the key sealed it as though it had been checked (a forged
// resolution made valid by the next export).
func (w *Tx) sealable(what string) error {
	if w.s.signer != nil {
		return nil
	}
	return fmt.Errorf("%s: an operator's decision is sealed as it is written, and this host cannot sign for %s (%v): nothing was written; run it where the store's signing key is (--key-dir)", what, w.s.origin, w.s.keyErr)
}

// SetVault locks or unlocks the vault, recording who and why.
func (w *Tx) SetVault(locked bool, operator, reason string) error {
	if operator == "" {
		return errors.New("vault: operator is required")
	}
	if err := w.sealable("vault"); err != nil {
		return err
	}
	ev := VaultEvent{Locked: locked, Operator: operator, Reason: reason, At: w.now}
	rec, err := w.append(KindVault, ev)
	if err != nil {
		return err
	}
	w.resolved = true
	if err := w.exec(`INSERT INTO meta(key, value) VALUES ('vault', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, vaultValue(ev)); err != nil {
		return err
	}
	w.vaultState = &vaultState{locked: locked, reason: vaultValue(ev), seq: rec.Seq} // what VaultLocked reads from now on
	return nil
}

// RequestApproval records a pending approval and returns it.
func (w *Tx) RequestApproval(a Approval) (Approval, error) {
	if a.ID == "" {
		a.ID = newID("apv_", w.now)
	}
	if a.Kind != ApprovalSession && a.Kind != ApprovalPerUse {
		return a, fmt.Errorf("approval: unknown kind %q", a.Kind)
	}
	a.State, a.RequestedAt, a.DecidedAt = ApprovalPending, w.now, Opt[time.Time]{}
	rec, err := w.append(KindApproval, a)
	if err != nil {
		return a, err
	}
	return a, w.putApproval(a, rec.Seq)
}

// answers says whether record a may follow prev, the approval as the
// records before it left it: a request comes once, and a decision answers
// a pending request, the one it names. Decisions are final. The writer and
// the table check's replay both hold records to it.
func (a Approval) answers(prev Approval) error {
	switch {
	case a.State == ApprovalPending:
		return errors.New("is requested a second time")
	case prev.State != ApprovalPending:
		return fmt.Errorf("is already %s: decisions are final", prev.State)
	case a.Kind != prev.Kind || a.ExecutionID != prev.ExecutionID || a.RunID != prev.RunID || a.CredentialRef != prev.CredentialRef:
		return errors.New("is answered by a decision that names another request")
	}
	return nil
}

// DecideApproval answers a pending approval. Answering one that is no
// longer pending is an error: decisions are final.
func (w *Tx) DecideApproval(id string, state ApprovalState, operator, note string) (Approval, error) {
	a, err := w.Approval(id)
	if err != nil {
		return a, err
	}
	if state != ApprovalApproved && state != ApprovalDenied && state != ApprovalExpired {
		return a, fmt.Errorf("approval %s: cannot decide %q", id, state)
	}
	decision := a
	decision.State = state
	if err := decision.answers(a); err != nil {
		return a, fmt.Errorf("approval %s %w", id, err)
	}
	if operator == "" {
		return a, fmt.Errorf("approval %s: operator is required", id)
	}
	if err := w.sealable("approval " + id); err != nil {
		return a, err
	}
	// What is signed below is the row: it must be what the log says, and
	// no later record may have answered it already.
	a, seq, err := w.provenApproval(id)
	if err != nil {
		return a, fmt.Errorf("%w: nothing was written; run mcpdup audit verify", err)
	}
	n, err := w.changedSince(seq, id, func(ev any) bool {
		x, ok := ev.(*Approval)
		return ok && x.ID == id
	})
	if err != nil {
		return a, err
	}
	if n > 0 {
		return a, fmt.Errorf("approval %s: %w: its row says pending, but record %d already answered it: nothing was written; run mcpdup audit verify", id, ErrUnproven, n)
	}
	a.State, a.DecidedAt, a.Operator, a.Note = state, Some(w.now), operator, note
	rec, err := w.append(KindApproval, a)
	if err != nil {
		return a, err
	}
	w.resolved = true
	if a.Kind == ApprovalSession && state == ApprovalApproved && a.RunID != "" {
		if err := w.AddGrant(Grant{RunID: a.RunID, Scope: "session", GrantedBy: "operator:" + operator}); err != nil {
			return a, err
		}
	}
	return a, w.putApproval(a, rec.Seq)
}

// DecideApproval answers a pending approval in its own transaction: the
// one path the CLI and the console use.
func (s *Store) DecideApproval(ctx context.Context, id string, state ApprovalState, operator, note string) (Approval, error) {
	var a Approval
	_, err := s.Write(ctx, func(w *Tx) error {
		var err error
		a, err = w.DecideApproval(id, state, operator, note)
		return err
	})
	return a, err
}

// Resolve records an operator resolution in its own transaction and seals
// a checkpoint over it. This is the one path the CLI and the console use.
// The returned checkpoint is nil when this host has no signing key: the
// resolution is then chained but unsealed until a host with the key seals.
func (s *Store) Resolve(ctx context.Context, r Resolution) (Execution, *Checkpoint, error) {
	var e Execution
	_, err := s.Write(ctx, func(w *Tx) error {
		var err error
		e, err = w.Resolve(r)
		return err
	})
	if err != nil {
		return e, nil, err
	}
	if s.signer == nil {
		return e, nil, nil
	}
	cp, err := s.LatestCheckpoint(ctx)
	return e, cp, err
}

// provenUnresolved holds an operator's resolution to the signed log: the
// execution's state must be what its newest record says, and no later
// record may have moved it (a row rolled back to unknown together with
// the seq it cites would otherwise be resolved a second time).
func (w *Tx) provenUnresolved(e Execution) error {
	seq, err := w.provenExecution(e)
	if err != nil {
		return err
	}
	n, err := w.changedSince(seq, string(e.ID), func(ev any) bool {
		switch x := ev.(type) {
		case *Transition:
			return x.ExecutionID == e.ID
		case *Resolution:
			return x.ExecutionID == e.ID
		}
		return false
	})
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("execution %s (%s): %w: record %d changed it since", e.ID, e.State, ErrUnproven, n)
	}
	return nil
}
