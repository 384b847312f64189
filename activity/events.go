package activity

// Domain events: sources, runs and grants, calls, executions and their
// transitions, results, and events imported from other logs.

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpdup/mcpdup/activity/canon"
)

// AddSource records where the following records come from (an import
// marker, or a gateway announcing itself).
func (w *Tx) AddSource(src Source) (Source, error) {
	if src.ID == "" {
		src.ID = NewSourceID(w.now)
	}
	if src.ImportedAt.IsZero() {
		src.ImportedAt = w.now
	}
	src.ImportedAt = src.ImportedAt.UTC()
	if src.Format == "" {
		return src, errors.New("source: format is required")
	}
	rec, err := w.append(KindSource, src)
	if err != nil {
		return src, err
	}
	return src, w.exec(sourceInsert, args(sourceRow, src, rec.Seq)...)
}

// StartRun records an agent run in the Sessions log.
func (w *Tx) StartRun(run Run) (Run, error) {
	if run.ID == "" {
		run.ID = NewRunID(w.now)
	}
	if run.StartedAt.IsZero() {
		run.StartedAt = w.now
	}
	run.StartedAt = run.StartedAt.UTC()
	if run.Actor == "" || run.IdentifiedBy == "" {
		return run, fmt.Errorf("run %s: actor and identified_by are required", run.ID)
	}
	var err error
	if run.Detail, err = canonicalRaw(run.Detail); err != nil {
		return run, fmt.Errorf("run %s: detail: %w", run.ID, err)
	}
	rec, err := w.append(KindRun, run)
	if err != nil {
		return run, err
	}
	w.runs = append(w.runs, run.ID)
	if w.runsSeen == nil {
		w.runsSeen = map[RunID]bool{}
	}
	w.runsSeen[run.ID] = true
	return run, w.exec(runInsert, args(runRow, run, rec.Seq)...)
}

// EndRun records that a run ended.
func (w *Tx) EndRun(id RunID, at time.Time) error {
	if at.IsZero() {
		at = w.now
	}
	var ended sql.NullString
	if err := w.queryRow(`SELECT ended_at FROM runs WHERE id = ?`, string(id)).Scan(&ended); err != nil {
		return fmt.Errorf("end run %s: %w", id, notFound(err))
	}
	if ended.Valid {
		return fmt.Errorf("end run %s: already ended at %s", id, ended.String)
	}
	if _, err := w.append(KindRunEnd, RunEnd{RunID: id, At: at.UTC()}); err != nil {
		return err
	}
	return w.exec(`UPDATE runs SET ended_at = ? WHERE id = ?`, FormatTime(at), string(id))
}

// AddGrant records a grant held by a run.
func (w *Tx) AddGrant(g Grant) error {
	if g.GrantedAt.IsZero() {
		g.GrantedAt = w.now
	}
	g.GrantedAt = g.GrantedAt.UTC()
	if err := w.requireRun(g.RunID); err != nil {
		return fmt.Errorf("grant: %w", err)
	}
	rec, err := w.append(KindGrant, g)
	if err != nil {
		return err
	}
	return w.exec(grantInsert, args(grantRow, g, rec.Seq)...)
}

func (w *Tx) requireRun(id RunID) error {
	if id == "" {
		return nil
	}
	if _, ok := w.s.knownRuns.Load(id); ok || w.runsSeen[id] {
		return nil
	}
	var one int
	err := w.queryRow(`SELECT 1 FROM runs WHERE id = ?`, string(id)).Scan(&one)
	if err != nil {
		return fmt.Errorf("run %s: %w", id, notFound(err))
	}
	w.runs = append(w.runs, id)
	if w.runsSeen == nil {
		w.runsSeen = map[RunID]bool{}
	}
	w.runsSeen[id] = true
	return nil
}

// RecordCall records a protocol call. A call that attaches to an execution
// names it; the execution must exist.
func (w *Tx) RecordCall(c Call) (Call, error) {
	if c.ReceivedAt.IsZero() {
		c.ReceivedAt = w.now
	}
	c.ReceivedAt = c.ReceivedAt.UTC()
	if c.ID == "" {
		// From the call's own time, like an execution's: ids then grow
		// with the log, and an import appends to the id index instead of
		// scattering one transaction's calls over it at random.
		c.ID = NewCallID(c.ReceivedAt)
	}
	if c.Method == "" || c.Disposition == "" {
		return c, fmt.Errorf("call %s: method and disposition are required", c.ID)
	}
	if err := w.requireRun(c.RunID); err != nil {
		return c, fmt.Errorf("call %s: %w", c.ID, err)
	}
	c.Tool = RedactText(c.Tool)
	var err error
	if c.Arguments, err = canonicalRaw(c.Arguments); err != nil {
		return c, fmt.Errorf("call %s: arguments: %w", c.ID, err)
	}
	if c.Disposition == DispositionAttached {
		if _, err := w.Execution(c.ExecutionID); err != nil {
			return c, fmt.Errorf("call %s attaches to %w", c.ID, err)
		}
	}
	rec, err := w.append(KindCall, c)
	if err != nil {
		return c, err
	}
	return c, w.insert(&w.callRows, callInsert, args(callRow, c, rec.Seq)...)
}

// Accept records a new execution in state accepted. Its identity (action,
// fingerprint, contract) is fixed from here on.
func (w *Tx) Accept(e Execution) (Execution, error) {
	if e.ID == "" {
		e.ID = NewExecutionID(w.now)
	}
	if e.State == "" {
		e.State = StateAccepted
	}
	if e.State != StateAccepted {
		return e, fmt.Errorf("execution %s: a new execution starts in state accepted, not %s", e.ID, e.State)
	}
	if e.Contract == "" {
		e.Contract = ContractBlockedAfterUnknown
	}
	if _, err := ParseContract(string(e.Contract)); err != nil {
		return e, fmt.Errorf("execution %s: %w", e.ID, err)
	}
	if e.Tool == "" || e.Actor == "" || e.Channel == "" {
		return e, fmt.Errorf("execution %s: actor, tool and channel are required", e.ID)
	}
	if len(e.Arguments) == 0 {
		e.Arguments = []byte("{}")
	}
	e.Target, e.Tool = RedactText(e.Target), RedactText(e.Tool)
	var err error
	if e.Arguments, err = canonicalRaw(e.Arguments); err != nil {
		return e, fmt.Errorf("execution %s: arguments: %w", e.ID, err)
	}
	if !e.Times.Accepted.OK && e.Source.IsZero() {
		e.Times.Accepted = Some(w.now) // live records always know when
	}
	if err := w.requireRun(e.RunID); err != nil {
		return e, fmt.Errorf("execution %s: %w", e.ID, err)
	}
	e.Attached = nil
	rec, err := w.append(KindExecution, e)
	if err != nil {
		return e, err
	}
	// The unique index on unresolved live executions reads the rows: write
	// the states this transaction changed before inserting another.
	// Imported executions are exempt from it; a bulk writer flushes them
	// in batches.
	if e.Source.IsZero() || len(w.dirty) >= maxBulkDirty {
		if err := w.flush(); err != nil {
			return e, err
		}
	}
	// The row itself is inserted by flush, with the state the request
	// leaves it in: accepting and dispatching in one request is one INSERT.
	e.Seq = rec.Seq // as a read of its row says
	w.cache(e, true, rec.Seq)
	ent := w.execs[e.ID]
	ent.insertSeq, ent.pending = rec.Seq, true
	return e, w.insertTransition(rec.Seq, Transition{ExecutionID: e.ID, To: StateAccepted, At: e.Times.Accepted, CallID: e.CreatedByCall})
}

// Transition moves an execution to another state, checked against the
// state machine, and returns the execution as it now is.
func (w *Tx) Transition(t Transition) (Execution, error) {
	e, err := w.Execution(t.ExecutionID)
	if err != nil {
		return e, err
	}
	return w.transition(e, t, false)
}

// transition applies t to e (Execution.Apply) and records it. Only an
// operator's resolution (byOperator) settles an outcome as verified or
// rejected_by_operator.
func (w *Tx) transition(e Execution, t Transition, byOperator bool) (Execution, error) {
	if t.At.OK {
		t.At.V = t.At.V.UTC()
	} else if e.Source.IsZero() {
		t.At = Some(w.now) // live records always know when
	}
	if t.From == "" {
		t.From = e.State
	}
	t.Reason = RedactText(t.Reason)
	next := e
	if err := next.Apply(t); err != nil {
		return e, err
	}
	if !byOperator && (t.To == StateVerified || t.To == StateRejectedByOperator) {
		return e, fmt.Errorf("execution %s: %s is set by an operator resolution (Resolve), not a transition", e.ID, t.To)
	}
	rec, err := w.append(KindTransition, t)
	if err != nil {
		return e, err
	}
	if err := w.insertTransition(rec.Seq, t); err != nil {
		return e, err
	}
	w.cache(next, true, rec.Seq)
	return next, nil
}

func (w *Tx) insertTransition(seq int64, t Transition) error {
	return w.insert(&w.transitionRows, transitionInsert, args(transitionRow, t, seq)...)
}

// ResultRef is the reference PutResult stores content under.
func ResultRef(content []byte) string {
	sum := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// PutResult stores a target's result content and returns its reference, so
// a retry can be answered without touching the target again.
func (w *Tx) PutResult(content []byte) (string, error) {
	ref := ResultRef(content)
	err := w.exec(`INSERT OR IGNORE INTO results(ref, content, created_at) VALUES (?,?,?)`, ref, content, FormatTime(w.now))
	return ref, err
}

// ImportVault records a vault event another log recorded, with its own
// time. It does not change this database's vault.
func (w *Tx) ImportVault(ev VaultEvent) error {
	if ev.Operator == "" || ev.At.IsZero() || ev.Source.IsZero() {
		return errors.New("vault event: operator, time and source are required")
	}
	ev.At = ev.At.UTC()
	_, err := w.append(KindVault, ev)
	return err
}

// ImportApproval records an approval exactly as another log recorded it:
// a request, or a decision with its own times. A decision updates the row
// of its request, or creates it when the request is not in this log.
func (w *Tx) ImportApproval(a Approval) error {
	if a.ID == "" || a.RequestedAt.IsZero() {
		return errors.New("approval: id and requested_at are required")
	}
	if a.Kind != ApprovalSession && a.Kind != ApprovalPerUse {
		return fmt.Errorf("approval %s: unknown kind %q", a.ID, a.Kind)
	}
	switch prev, err := w.Approval(a.ID); {
	case err == nil:
		if err := a.answers(prev); err != nil {
			return fmt.Errorf("approval %s %w", a.ID, err)
		}
	case !errors.Is(err, ErrNotFound):
		return fmt.Errorf("approval %s: %w", a.ID, err)
	}
	rec, err := w.append(KindApproval, a)
	if err != nil {
		return err
	}
	return w.putApproval(a, rec.Seq)
}

// putApproval writes what an approval record says: a request (or a
// decision whose request is not in this log) is a new row; a decision
// changes its request's row. The one rule the table check replays.
func (w *Tx) putApproval(a Approval, seq int64) error {
	var b argsRow
	approvalRow(&b, a, seq, seq)
	row := b.vals
	if a.State == ApprovalPending {
		return w.exec(approvalInsert, row...)
	}
	var one int
	switch err := w.queryRow(`SELECT 1 FROM approvals WHERE id = ?`, a.ID).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return w.exec(approvalInsert, row...)
	case err != nil:
		return fmt.Errorf("approval %s: %w", a.ID, err)
	}
	return w.exec(approvalUpdate, approvalsTable.updateArgs(row)...)
}

// canonicalRaw is embedded JSON in the canonical form the record will hold,
// so the table row says byte for byte what the log says (the table check
// compares them). Already canonical input, the usual case, is returned as
// is.
func canonicalRaw(b json.RawMessage) (json.RawMessage, error) {
	if len(b) == 0 {
		return b, nil
	}
	c, err := canon.Transform(b)
	if err != nil {
		return b, err
	}
	if bytes.Equal(c, b) {
		return b, nil
	}
	return c, nil
}
