package activity

// Reads inside a write transaction: what the gateway decides on sees the
// transaction's own writes.

import (
	"database/sql"
	"errors"
)

// FindRun returns the newest run of actor identified by the given kind of
// evidence with this value, or nil: an agent that sends the same run id
// after a gateway restart continues the same run. A run imported from
// another log is never found: its grants were that log's, not this one's.
func (w *Tx) FindRun(actor string, by RunIdentification, evidence string) (*Run, error) {
	var r Run
	var started string
	err := w.queryRow(`SELECT id, started_at FROM runs WHERE actor = ? AND identified_by = ? AND evidence = ? AND ended_at IS NULL AND source_id IS NULL
		ORDER BY seq DESC LIMIT 1`, actor, string(by), evidence).Scan(&r.ID, &started)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.Actor, r.IdentifiedBy, r.Evidence = actor, by, evidence
	r.StartedAt, err = parseTime(started)
	return &r, err
}

// Approval reads one approval inside the transaction.
func (w *Tx) Approval(id string) (Approval, error) {
	return scanApproval(w.queryRow(approvalSelect+` WHERE id = ?`, id))
}

// PendingApproval returns the pending approval of this kind for a run, if
// any: a second call of the run waits on it instead of asking again.
func (w *Tx) PendingApproval(run RunID, kind ApprovalKind) (*Approval, error) {
	a, err := scanApproval(w.queryRow(approvalSelect+` WHERE run_id = ? AND kind = ? AND state = 'pending' ORDER BY seq DESC LIMIT 1`,
		string(run), string(kind)))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return &a, err
}

// LatestMatch returns the newest live (not imported) execution with this
// fingerprint, actor and intent scope, or nil. Called inside the write
// transaction, so no other writer can create a match between this read
// and the caller's decision.
func (w *Tx) LatestMatch(fingerprint, actor, scope string) (*Execution, error) {
	if err := w.flush(); err != nil {
		return nil, err
	}
	e, err := scanExecution(w.queryRow(executionSelect+` WHERE fingerprint = ? AND actor = ? AND intent_scope = ? AND source_id IS NULL
		ORDER BY seq DESC LIMIT 1`, fingerprint, actor, scope), "")
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// Execution reads an execution inside the transaction.
func (w *Tx) Execution(id ExecutionID) (Execution, error) {
	if ent, ok := w.execs[id]; ok {
		return ent.e, nil
	}
	e, err := scanExecution(w.queryRow(executionSelect+` WHERE id = ?`, string(id)), id)
	if err == nil {
		w.cache(e, false, 0)
	}
	return e, err
}
