package activity

// Reads inside a write transaction: what the gateway decides on sees the
// transaction's own writes.

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
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

// ImportedRun returns the newest run an import recorded under this
// identity (actor, how it was identified, the evidence), or "": one agent
// process whose traces an exporter wrote to several files is one run,
// whichever file came first.
func (w *Tx) ImportedRun(actor string, by RunIdentification, evidence string) (RunID, error) {
	var id string
	err := w.queryRow(`SELECT id FROM runs WHERE actor = ? AND identified_by = ? AND evidence = ? AND source_id IS NOT NULL
		ORDER BY seq DESC LIMIT 1`, actor, string(by), evidence).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return RunID(id), err
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
	if w.shared != nil {
		if e, ok := w.shared.execution(id); ok {
			w.cache(e, false, 0)
			return e, nil
		}
	}
	e, err := scanExecution(w.queryRow(executionSelect+` WHERE id = ?`, string(id)), id)
	if err == nil {
		w.cache(e, false, 0)
	}
	return e, err
}

// KnownCall returns the source a call was already imported from, or "":
// a call of a source of this format whose record id is one of records
// (the spans of one tool call: "span 00f067aa0ba902b7") and whose facts
// are the same (actor, tool, time, arguments). An id alone is not enough:
// a log that reuses an id for other content holds another record, and it
// is imported. Only earlier imports are looked at (the file being
// imported is the decoder's to deduplicate), so nothing is flushed for it.
func (w *Tx) KnownCall(format string, c Call, records []string) (SourceID, error) {
	if len(records) == 0 || len(records) > 64 {
		return "", nil
	}
	args, err := canonicalRaw(c.Arguments)
	if err != nil {
		return "", fmt.Errorf("call %s: arguments: %w", records[0], err)
	}
	var tool, arguments any
	if c.Tool != "" {
		tool = c.Tool
	}
	if len(args) > 0 {
		arguments = string(args)
	}
	q := `SELECT c.source_id FROM calls c JOIN sources s ON s.id = c.source_id
		WHERE c.source_record IN (?` + strings.Repeat(",?", len(records)-1) + `) AND s.format = ? AND c.actor = ? AND c.tool IS ?
		AND c.received_at = ? AND c.arguments IS ? LIMIT 1`
	bind := make([]any, 0, len(records)+5)
	for _, r := range records {
		bind = append(bind, r)
	}
	bind = append(bind, format, c.Actor, tool, FormatTime(c.ReceivedAt.UTC()), arguments)
	var src string
	err = w.queryRow(q, bind...).Scan(&src)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return SourceID(src), err
}

// ImportedFormat reports whether any earlier import was of this format:
// when none was, an importer need not look for records it already holds.
func (w *Tx) ImportedFormat(format string) (bool, error) {
	var one int
	err := w.queryRow(`SELECT 1 FROM sources WHERE format = ? LIMIT 1`, format).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// MinRequestID is the shortest request id taken for one a proxy gave a
// request: x-request-id is a UUID, nginx's $request_id 32 hex digits.
// Shorter ids (JSON-RPC's 1, 2, 3 …) repeat across sessions. The index
// calls_request_id holds imported calls' ids this long.
const MinRequestID = 16

// ImportedRequest is a request an import read under a request id: when
// its call was received, the latest time its execution shows (its start,
// when the log showed no end), and what it asked.
type ImportedRequest struct {
	Start, End     time.Time
	Method, Target string
	Status         int // the target's status, 0 if none was recorded
}

// ImportedRequests is Store.ImportedRequests, for an import in progress:
// it reads what other imports committed, on a reader connection, not in
// this transaction. An import asks for each of its lines, and each ask
// inside the transaction waited for the import's queued inserts (a 50k-line
// import into a store holding another took 1.8× as long; 1.3× this way).
func (w *Tx) ImportedRequests(id string, except SourceID) ([]ImportedRequest, error) {
	return w.s.ImportedRequests(w.ctx, id, except)
}

// AnyImportedRequestID is Store.AnyImportedRequestID, read as
// ImportedRequests reads.
func (w *Tx) AnyImportedRequestID() (bool, error) {
	return w.s.AnyImportedRequestID(w.ctx)
}

// ImportedHead is where the newest import of an mcpdup export of this
// origin ended in that log (Source.Head, "<seq>:<record hash>"), or "".
func (w *Tx) ImportedHead(origin string) (SourceID, string, error) {
	var id, head string
	err := w.queryRow(`SELECT id, head FROM sources WHERE origin = ? AND head IS NOT NULL ORDER BY seq DESC LIMIT 1`, origin).Scan(&id, &head)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	}
	return SourceID(id), head, err
}

// PendingApprovals lists, inside the transaction, the approvals nobody
// has answered yet.
func (w *Tx) PendingApprovals() ([]Approval, error) {
	return w.approvals(`WHERE state = 'pending' ORDER BY seq`)
}

// ApprovalsOf lists, inside the transaction, the approvals an execution
// waited on, in log order.
func (w *Tx) ApprovalsOf(id ExecutionID) ([]Approval, error) {
	return w.approvals(`WHERE execution_id = ? ORDER BY seq`, string(id))
}

func (w *Tx) approvals(where string, args ...any) ([]Approval, error) {
	rows, err := w.tx.QueryContext(w.ctx, approvalSelect+` `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	defer rows.Close()
	var out []Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// RunLastSeen returns, inside the transaction, when a run was last heard
// from: its newest call, or its start.
func (w *Tx) RunLastSeen(r Run) (time.Time, error) {
	var last sql.NullString
	if err := w.queryRow(`SELECT MAX(received_at) FROM calls WHERE run_id = ?`, string(r.ID)).Scan(&last); err != nil {
		return time.Time{}, fmt.Errorf("run %s: last call: %w", r.ID, err)
	}
	if !last.Valid {
		return r.StartedAt, nil
	}
	t, err := parseTime(last.String)
	if err != nil || t.Before(r.StartedAt) { // a call received just before its run was recorded
		return r.StartedAt, err
	}
	return t, nil
}

// RunIdentifiedBy returns, inside the transaction, how a run was
// identified ("" for a run not stored).
func (w *Tx) RunIdentifiedBy(id RunID) (RunIdentification, error) {
	var by string
	err := w.queryRow(`SELECT identified_by FROM runs WHERE id = ?`, string(id)).Scan(&by)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return RunIdentification(by), err
}
