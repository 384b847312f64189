package activity

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNotFound is wrapped by lookups that find nothing.
var ErrNotFound = errors.New("not found")

const executionSelect = `SELECT id, actor, tool, channel, target, method, credential_ref, arguments, intent_scope,
	fingerprint, fingerprint_key_id, run_id, contract, state, created_by_call, idempotency_key, target_status, exit_code,
	result_ref, error, accepted_at, authorized_at, rejected_at, dispatched_at, observed_at, delivered_at, resolved_at,
	not_recorded, source_id, source_line, outcome, attach_window_ms, created, replayed, source_record, seq, replica FROM executions`

type rowScanner interface{ Scan(dest ...any) error }

func scanExecution(row rowScanner, id ExecutionID) (Execution, error) {
	var (
		e                                              Execution
		args, notRecorded                              string
		fp, fpKey, runID, byCall, idemKey, resRef, msg sql.NullString
		status, exit, srcLine, window                  sql.NullInt64
		srcID, outcome, created, replayed, srcRecord   sql.NullString
		replica                                        sql.NullString
		times                                          [7]sql.NullString
	)
	err := row.Scan(&e.ID, &e.Actor, &e.Tool, &e.Channel, &e.Target, &e.Method, &e.CredentialRef, &args, &e.IntentScope,
		&fp, &fpKey, &runID, &e.Contract, &e.State, &byCall, &idemKey, &status, &exit, &resRef, &msg,
		&times[0], &times[1], &times[2], &times[3], &times[4], &times[5], &times[6], &notRecorded, &srcID, &srcLine, &outcome, &window,
		&created, &replayed, &srcRecord, &e.Seq, &replica)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("execution %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("read execution %s: %w", id, err)
	}
	e.Arguments = json.RawMessage(args)
	e.Fingerprint, e.FingerprintKeyID, e.RunID = fp.String, fpKey.String, RunID(runID.String)
	e.CreatedByCall, e.ResultRef, e.Error = CallID(byCall.String), resRef.String, msg.String
	e.IdempotencyKey = Opt[string]{idemKey.String, idemKey.Valid}
	e.TargetStatus = Opt[int]{int(status.Int64), status.Valid}
	e.ExitCode = Opt[int]{int(exit.Int64), exit.Valid}
	dst := []*Opt[time.Time]{&e.Times.Accepted, &e.Times.Authorized, &e.Times.Rejected, &e.Times.Dispatched,
		&e.Times.Observed, &e.Times.Delivered, &e.Times.Resolved}
	for i, t := range times {
		if *dst[i], err = parseOptTime(t); err != nil {
			return e, fmt.Errorf("read execution %s: %w", e.ID, err)
		}
	}
	e.NotRecorded = appendFacts(e.NotRecorded, notRecorded)
	e.Source = Provenance{SourceID(srcID.String), srcLine.Int64, srcRecord.String}
	e.Outcome = Outcome(outcome.String)
	e.Created, e.Replayed, e.Replica = created.String, replayed.String, replica.String
	if window.Valid {
		e.Window = Some(time.Duration(window.Int64) * time.Millisecond)
	}
	return e, nil
}

func parseOptTime(s sql.NullString) (Opt[time.Time], error) {
	if !s.Valid {
		return Opt[time.Time]{}, nil
	}
	t, err := parseTime(s.String)
	if err != nil {
		return Opt[time.Time]{}, err
	}
	return Some(t), nil
}

// parseTime reads a time the store wrote (TimeFormat). The analysis
// parses one for every call and step it reads, and time.Parse, which
// must find its way through a layout, was a tenth of a scan's time: a
// string in exactly TimeFormat's shape is read digit by digit, anything
// else by time.Parse (which names what is wrong).
func parseTime(s string) (time.Time, error) {
	if t, ok := parseStoreTime(s); ok {
		return t, nil
	}
	return time.Parse(TimeFormat, s)
}

// parseStoreTime reads "2006-01-02T15:04:05.000000000Z" and nothing
// else; ok is false for any other shape and for out-of-range fields.
func parseStoreTime(s string) (t time.Time, ok bool) {
	if len(s) != len(TimeFormat) || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != '.' || s[29] != 'Z' {
		return time.Time{}, false
	}
	num := func(from, to int) int {
		n := 0
		for i := from; i < to; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, sec, nsec := num(11, 13), num(14, 16), num(17, 19), num(20, 29)
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 || nsec < 0 {
		return time.Time{}, false
	}
	t = time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // February 30th and the like: time.Date would roll over
		return time.Time{}, false
	}
	return t, true
}

// Execution reads one execution with the calls that attached to it.
func (s *Store) Execution(ctx context.Context, id ExecutionID) (Execution, error) {
	e, err := scanExecution(s.queryRow(ctx, executionSelect+` WHERE id = ?`, string(id)), id)
	if err != nil {
		return e, err
	}
	rows, err := s.query(ctx, `SELECT id FROM calls WHERE execution_id = ? AND disposition = ? ORDER BY seq`,
		string(id), string(DispositionAttached))
	if err != nil {
		return e, err
	}
	defer rows.Close()
	for rows.Next() {
		var c CallID
		if err := rows.Scan(&c); err != nil {
			return e, err
		}
		e.Attached = append(e.Attached, c)
	}
	return e, rows.Err()
}

// ExecutionFilter selects executions; zero fields match everything.
type ExecutionFilter struct {
	States []State
	Actor  string
	Tool   string
	Live   bool // only executions the live gateway created (not imported)
	// TargetEnds keeps executions whose target ends with it (a request to
	// what another created: /v1/vms/vm-72).
	TargetEnds string
	Methods    []string // only these methods
	AfterSeq   int64    // only executions accepted after this log record
	Newest     bool     // newest first
	Limit      int      // 0: no limit
}

// Executions lists executions, oldest first.
func (s *Store) Executions(ctx context.Context, f ExecutionFilter) ([]Execution, error) {
	var where []string
	var args []any
	if len(f.States) > 0 {
		where = append(where, "state IN (?"+strings.Repeat(",?", len(f.States)-1)+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	if f.Actor != "" {
		where = append(where, "actor = ?")
		args = append(args, f.Actor)
	}
	if f.Tool != "" {
		where = append(where, "tool = ?")
		args = append(args, f.Tool)
	}
	if f.Live {
		where = append(where, "source_id IS NULL")
	}
	if f.TargetEnds != "" {
		where = append(where, "upper(target) LIKE upper(?) ESCAPE '\\'") // SQLite's LIKE ignores ASCII case; PostgreSQL's does not
		args = append(args, "%"+likeEscape.Replace(f.TargetEnds))
	}
	if len(f.Methods) > 0 {
		where = append(where, "method IN (?"+strings.Repeat(",?", len(f.Methods)-1)+")")
		for _, m := range f.Methods {
			args = append(args, m)
		}
	}
	if f.AfterSeq > 0 {
		where = append(where, "seq > ?")
		args = append(args, f.AfterSeq)
	}
	q := executionSelect
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq"
	if f.Newest {
		q += " DESC"
	}
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return queryAll(ctx, s, "list executions", scanAnyExecution, q, args...)
}

func scanAnyExecution(row rowScanner) (Execution, error) { return scanExecution(row, "") }

// queryAll runs q and scans every row; what names the query in its error.
func queryAll[T any](ctx context.Context, s *Store, what string, scan func(rowScanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

const callSelect = `SELECT seq, id, run_id, actor, method, tool, jsonrpc_id, session_id, stream_id, event_id, protocol_version,
	received_at, arguments, disposition, execution_id, reason, source_id, source_line, source_record FROM calls`

func scanCall(row rowScanner) (Call, error) {
	var (
		c                                      Call
		run, tool, rpc, sess, stream, ev, prot sql.NullString
		args, exec, reason, src, record        sql.NullString
		line                                   sql.NullInt64
		received                               string
	)
	if err := row.Scan(&c.Seq, &c.ID, &run, &c.Actor, &c.Method, &tool, &rpc, &sess, &stream, &ev, &prot, &received,
		&args, &c.Disposition, &exec, &reason, &src, &line, &record); err != nil {
		return c, err
	}
	c.RunID, c.Tool, c.ExecutionID, c.Reason = RunID(run.String), tool.String, ExecutionID(exec.String), reason.String
	c.JSONRPCID, c.SessionID = Opt[string]{rpc.String, rpc.Valid}, Opt[string]{sess.String, sess.Valid}
	c.StreamID, c.EventID = Opt[string]{stream.String, stream.Valid}, Opt[string]{ev.String, ev.Valid}
	c.ProtocolVersion = Opt[string]{prot.String, prot.Valid}
	if args.Valid {
		c.Arguments = json.RawMessage(args.String)
	}
	c.Source = Provenance{SourceID(src.String), line.Int64, record.String}
	var err error
	c.ReceivedAt, err = parseTime(received)
	return c, err
}

// CallsOf returns the calls that created or attached to an execution, in
// order.
func (s *Store) CallsOf(ctx context.Context, id ExecutionID) ([]Call, error) {
	return queryAll(ctx, s, "calls of "+string(id), scanCall, callSelect+` WHERE execution_id = ? ORDER BY seq`, string(id))
}

// Run reads one agent run with its grants.
func (s *Store) Run(ctx context.Context, id RunID) (Run, error) {
	var r Run
	var started string
	var ended, detail, src, record sql.NullString
	var line sql.NullInt64
	err := s.queryRow(ctx, `SELECT seq, id, actor, identified_by, evidence, started_at, ended_at, detail, source_id, source_line, source_record
		FROM runs WHERE id = ?`, string(id)).Scan(&r.Seq, &r.ID, &r.Actor, &r.IdentifiedBy, &r.Evidence, &started, &ended, &detail, &src, &line, &record)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, err
	}
	if r.StartedAt, err = parseTime(started); err != nil {
		return r, err
	}
	if r.EndedAt, err = parseOptTime(ended); err != nil {
		return r, err
	}
	if detail.Valid {
		r.Detail = json.RawMessage(detail.String)
	}
	r.Source = Provenance{SourceID(src.String), line.Int64, record.String}
	rows, err := s.query(ctx, `SELECT scope, granted_by, granted_at FROM grants WHERE run_id = ? ORDER BY seq`, string(id))
	if err != nil {
		return r, err
	}
	defer rows.Close()
	for rows.Next() {
		g := Grant{RunID: id}
		var at string
		if err := rows.Scan(&g.Scope, &g.GrantedBy, &at); err != nil {
			return r, err
		}
		if g.GrantedAt, err = parseTime(at); err != nil {
			return r, err
		}
		r.Grants = append(r.Grants, g)
	}
	return r, rows.Err()
}

const transitionSelect = `SELECT seq, execution_id, from_state, to_state, at, target_status, exit_code, result_ref, reason, call_id,
	created, replayed, implied, source_id, source_line, source_record, shows, replica FROM transitions`

func scanTransition(row rowScanner) (Transition, error) {
	var (
		t                              Transition
		from, at, ref, why, call       sql.NullString
		created, replayed, src, record sql.NullString
		shows, replica                 sql.NullString
		status, exit, line             sql.NullInt64
		implied                        int
	)
	if err := row.Scan(&t.Seq, &t.ExecutionID, &from, &t.To, &at, &status, &exit, &ref, &why, &call,
		&created, &replayed, &implied, &src, &line, &record, &shows, &replica); err != nil {
		return t, err
	}
	if shows.Valid {
		if err := json.Unmarshal([]byte(shows.String), &t.Shows); err != nil {
			return t, fmt.Errorf("transition %d: shows: %w", t.Seq, err)
		}
	}
	t.Created, t.Replayed, t.Implied, t.Replica = created.String, replayed.String, implied != 0, replica.String
	t.Source = Provenance{SourceID(src.String), line.Int64, record.String}
	t.From, t.ResultRef, t.Reason, t.CallID = State(from.String), ref.String, why.String, CallID(call.String)
	t.TargetStatus = Opt[int]{int(status.Int64), status.Valid}
	t.ExitCode = Opt[int]{int(exit.Int64), exit.Valid}
	var err error
	t.At, err = parseOptTime(at)
	return t, err
}

// Transitions returns an execution's recorded lifecycle, in order.
func (s *Store) Transitions(ctx context.Context, id ExecutionID) ([]Transition, error) {
	m, err := s.TransitionsOf(ctx, []ExecutionID{id})
	if err != nil {
		return nil, fmt.Errorf("transitions of %s: %w", id, err)
	}
	return m[id], nil
}

// ListingsAfter returns the first few answers, recorded after the log
// record after, whose listing (Transition.Shows) holds every one of the
// created ids: what a later read showed of them.
func (s *Store) ListingsAfter(ctx context.Context, after int64, created ...string) ([]Transition, error) {
	q := transitionSelect + ` WHERE seq > ? AND shows IS NOT NULL`
	args := []any{after}
	for _, c := range created {
		last, _ := json.Marshal(c[strings.LastIndexByte(c, '/')+1:])
		q += ` AND shows LIKE ? ESCAPE '\'`
		args = append(args, "%"+likeEscape.Replace(string(last))+"%")
	}
	rows, err := s.query(ctx, q+` ORDER BY seq LIMIT 16`, args...)
	if err != nil {
		return nil, fmt.Errorf("listings after %d: %w", after, err)
	}
	defer rows.Close()
	var out []Transition
	for rows.Next() {
		t, err := scanTransition(rows)
		if err != nil {
			return nil, err
		}
		if listsAll(t.Shows, created) { // LIKE only narrows; Lists decides
			out = append(out, t)
		}
	}
	return out, rows.Err()
}

func listsAll(shown, created []string) bool {
	for _, c := range created {
		if !Lists(shown, c) {
			return false
		}
	}
	return true
}

var likeEscape = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

// Resolutions returns operator resolutions, newest first.
func (s *Store) Resolutions(ctx context.Context, id ExecutionID) ([]Resolution, error) {
	q := `SELECT seq, execution_id, outcome, operator, note, evidence, at FROM resolutions`
	var args []any
	if id != "" {
		q += ` WHERE execution_id = ?`
		args = append(args, string(id))
	}
	rows, err := s.query(ctx, q+` ORDER BY seq DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("resolutions: %w", err)
	}
	defer rows.Close()
	var out []Resolution
	for rows.Next() {
		var r Resolution
		var ev sql.NullString
		var at string
		if err := rows.Scan(&r.Seq, &r.ExecutionID, &r.Outcome, &r.Operator, &r.Note, &ev, &at); err != nil {
			return nil, err
		}
		r.Evidence = ev.String
		if r.At, err = parseTime(at); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ImportedRequests returns what imports other than except read under
// this request id: at most 64, none for an id shorter than MinRequestID.
// A request ends at its latest step but an operator's (a resolution, days
// later, is no part of what the proxy saw).
func (s *Store) ImportedRequests(ctx context.Context, id string, except SourceID) ([]ImportedRequest, error) {
	if len(id) < MinRequestID {
		return nil, nil
	}
	return queryAll(ctx, s, "requests imported under a request id", scanImportedRequest, `SELECT c.received_at, e.method, e.target, COALESCE(e.target_status, 0),
			(SELECT MAX(t.at) FROM transitions t WHERE t.execution_id = e.id
				AND t.to_state NOT IN ('pending_verification', 'verified', 'rejected_by_operator'))
		FROM calls c JOIN executions e ON e.id = c.execution_id
		WHERE c.jsonrpc_id = ? AND c.source_id IS NOT NULL AND length(c.jsonrpc_id) >= 16 AND c.source_id <> ? LIMIT 64`, id, string(except))
}

func scanImportedRequest(row rowScanner) (ImportedRequest, error) {
	var r ImportedRequest
	var start string
	var end sql.NullString
	if err := row.Scan(&start, &r.Method, &r.Target, &r.Status, &end); err != nil {
		return r, err
	}
	var err error
	if r.Start, err = parseTime(start); err != nil {
		return r, err
	}
	r.End = r.Start
	if end.Valid {
		if t, err := parseTime(end.String); err == nil && t.After(r.Start) {
			r.End = t
		}
	}
	return r, nil
}

// AnyImportedRequestID reports whether an import holds a call under a
// request id of MinRequestID or more: until one does, no import need ask
// ImportedRequests.
func (s *Store) AnyImportedRequestID(ctx context.Context) (bool, error) {
	var id string
	err := s.queryRow(ctx, `SELECT jsonrpc_id FROM calls WHERE source_id IS NOT NULL AND length(jsonrpc_id) >= 16 ORDER BY jsonrpc_id LIMIT 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ShorterSources returns the newest imports (at most 4096) of this
// format whose content is shorter than size bytes: the ones a file of
// that size may be a longer copy of (Source.ContentSize). All are tried
// in one read of the file, so many pods' logs imported are no reason to
// miss the one that grew.
func (s *Store) ShorterSources(ctx context.Context, format string, size int64) ([]Source, error) {
	return queryAll(ctx, s, "shorter sources", scanSource, sourceSelect+`
		WHERE format = ? AND content_size > 0 AND content_size < ? ORDER BY seq DESC LIMIT 4096`, format, size)
}

// SourceBySHA256 finds the import of a file with this sha256, or of the
// same content (Source.Content) however packaged, or returns ErrNotFound.
func (s *Store) SourceBySHA256(ctx context.Context, sum, content string) (Source, error) {
	rows, err := s.query(ctx, sourceSelect+`
		WHERE sha256 = ? OR (content_sha256 = ? AND ? != '') ORDER BY seq LIMIT 1`, sum, content, content)
	if err != nil {
		return Source{}, fmt.Errorf("sources: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Source{}, err
		}
		return Source{}, ErrNotFound
	}
	return scanSource(rows)
}

// sourceSelect reads the sources columns scanSource scans.
const sourceSelect = `SELECT id, format, file, sha256, imported_at, records, skipped, note, unsigned_from, origin, head, content_sha256, content_size FROM sources`

func scanSource(row rowScanner) (Source, error) {
	var src Source
	var file, sha, note, origin, head, content sql.NullString
	var unsigned, size sql.NullInt64
	var at string
	if err := row.Scan(&src.ID, &src.Format, &file, &sha, &at, &src.Records, &src.Skipped, &note, &unsigned, &origin, &head, &content, &size); err != nil {
		return Source{}, err
	}
	src.File, src.SHA256, src.Note, src.UnsignedFrom = file.String, sha.String, note.String, unsigned.Int64
	src.Origin, src.Head, src.Content, src.ContentSize = origin.String, head.String, content.String, size.Int64
	var err error
	src.ImportedAt, err = parseTime(at)
	return src, err
}

// Sources lists the import sources (and gateway announcements), oldest
// first.
func (s *Store) Sources(ctx context.Context) ([]Source, error) {
	return queryAll(ctx, s, "sources", scanSource, sourceSelect+` ORDER BY seq`)
}

// Result returns stored result content by reference, refused when the
// content is not what the reference names.
func (s *Store) Result(ctx context.Context, ref string) ([]byte, error) {
	var b []byte
	err := s.queryRow(ctx, `SELECT content FROM results WHERE ref = ?`, ref).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("result %s: not found", ref)
	}
	if err != nil {
		return nil, err
	}
	return b, checkResult(ref, b)
}

// LatestFingerprintKey is the key id the newest execution a gateway
// accepted was fingerprinted with, or "" when there is none.
func (s *Store) LatestFingerprintKey(ctx context.Context) (string, error) {
	var id sql.NullString
	err := s.queryRow(ctx, `SELECT fingerprint_key_id FROM executions WHERE source_id IS NULL AND fingerprint_key_id IS NOT NULL ORDER BY seq DESC LIMIT 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read executions: %w", err)
	}
	return id.String, nil
}

// Vault reports whether the vault is locked, and the last lock or unlock
// note ("locked by alice: incident 4711").
func (s *Store) Vault(ctx context.Context) (bool, string, error) {
	var v string
	err := s.queryRow(ctx, `SELECT value FROM meta WHERE key = 'vault'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return false, "unlocked", nil
	}
	if err != nil {
		return false, "", err
	}
	return strings.HasPrefix(v, "locked"), v, nil
}

const approvalSelect = `SELECT id, kind, state, execution_id, run_id, actor, tool, credential_ref, summary, requested_at, decided_at, operator, note, seq, decided_seq FROM approvals`

func scanApproval(row rowScanner) (Approval, error) {
	var a Approval
	var exec, run, tool, cred, summary, decided, operator, note sql.NullString
	var requested string
	var decidedSeq sql.NullInt64
	err := row.Scan(&a.ID, &a.Kind, &a.State, &exec, &run, &a.Actor, &tool, &cred, &summary, &requested, &decided, &operator, &note, &a.Seq, &decidedSeq)
	a.DecidedSeq = decidedSeq.Int64
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("approval: %w", ErrNotFound)
	}
	if err != nil {
		return a, err
	}
	a.ExecutionID, a.RunID, a.Tool, a.CredentialRef = ExecutionID(exec.String), RunID(run.String), tool.String, cred.String
	a.Summary, a.Operator, a.Note = summary.String, operator.String, note.String
	if a.RequestedAt, err = parseTime(requested); err != nil {
		return a, err
	}
	a.DecidedAt, err = parseOptTime(decided)
	return a, err
}

// Approval reads one approval.
func (s *Store) Approval(ctx context.Context, id string) (Approval, error) {
	a, err := scanApproval(s.queryRow(ctx, approvalSelect+` WHERE id = ?`, id))
	if err != nil {
		return a, fmt.Errorf("approval %s: %w", id, err)
	}
	return a, nil
}

// Approvals lists approvals, oldest first; pendingOnly keeps the ones
// still waiting.
func (s *Store) Approvals(ctx context.Context, pendingOnly bool) ([]Approval, error) {
	q := approvalSelect
	if pendingOnly {
		q += ` WHERE state = 'pending'`
	}
	return queryAll(ctx, s, "approvals", scanApproval, q+` ORDER BY seq`)
}

// Stats counts what the store holds.
type Stats struct {
	Records     int64           `json:"records"`
	Checkpoints int64           `json:"checkpoints"`
	SealedSize  int64           `json:"sealed_size"`
	Runs        int64           `json:"runs"`
	Calls       int64           `json:"calls"`
	Executions  int64           `json:"executions"`
	ByState     map[State]int64 `json:"by_state"`
	Resolutions int64           `json:"resolutions"`
	Sources     int64           `json:"sources"`
	PageSize    int64           `json:"page_size"` // bytes, fixed when the database was created
}

// Stats reads the counts shown in status bars and `mcpdup status`.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByState: map[State]int64{}}
	err := s.queryRow(ctx, `SELECT
		(SELECT COALESCE(MAX(seq)+1, 0) FROM audit_log),
		(SELECT COUNT(*) FROM audit_checkpoint),
		(SELECT COALESCE(MAX(size), 0) FROM audit_checkpoint),
		(SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM calls), (SELECT COUNT(*) FROM executions),
		(SELECT COUNT(*) FROM resolutions), (SELECT COUNT(*) FROM sources),
		`+s.pageSizeSQL()).Scan(
		&st.Records, &st.Checkpoints, &st.SealedSize, &st.Runs, &st.Calls, &st.Executions, &st.Resolutions, &st.Sources, &st.PageSize)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	rows, err := s.query(ctx, `SELECT state, COUNT(*) FROM executions GROUP BY state`)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var state State
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			return st, err
		}
		st.ByState[state] = n
	}
	return st, rows.Err()
}

// CallRow is a call joined with the effect of the execution it created
// or attached to: what a suspect lists of its calls.
type CallRow struct {
	Seq         int64 // the call's log record
	ID          CallID
	RunID       RunID
	Actor       string
	ReceivedAt  time.Time
	Disposition Disposition
	ExecutionID ExecutionID
	EffectKey   string
	Window      Opt[time.Duration]
	Reason      string
	Tool        string
	Source      Provenance // where an imported call came from
}

// CallKey is a call as suspect detection first reads it: when it came,
// the effect it asked for and the execution it joined. Every call of the
// log is read this way; the rest of a call (CallRow) is read only for the
// few that share an effect with another (CallRowsOf): in modernc/sqlite
// each column read costs a lock round trip and a copy, so the whole row of
// every call cost the analysis more than its grouping.
type CallKey struct {
	Seq         int64 // the call's log record
	ReceivedAt  time.Time
	ExecutionID ExecutionID
	EffectKey   string
	Window      Opt[time.Duration]
	Tool        string
}

const callKeySelect = `SELECT c.seq, c.received_at, c.execution_id, e.effect_key, e.attach_window_ms, c.tool `

// ScanCallKeys streams every call that created or attached to an
// execution, in the order they were received. The key passed to fn is
// reused: copy what you keep.
func (s *Store) ScanCallKeys(ctx context.Context, fn func(*CallKey) error) error {
	return s.scanCallKeys(ctx, callKeySelect+`FROM calls c JOIN executions e ON e.id = c.execution_id ORDER BY c.received_at, c.seq`, nil, fn)
}

// ScanCallKeysOfEffect is ScanCallKeys for the calls of one effect key:
// through the executions_by_effect index, so one suspect is rebuilt
// without reading the whole log.
func (s *Store) ScanCallKeysOfEffect(ctx context.Context, key string, fn func(*CallKey) error) error {
	return s.scanCallKeys(ctx, callKeySelect+`FROM executions e JOIN calls c ON c.execution_id = e.id WHERE e.effect_key = ? ORDER BY c.received_at, c.seq`,
		[]any{key}, fn)
}

// ScanCallKeysOfEffectFrom is ScanCallKeysOfEffect for the calls
// received at or after from, of the effect's executions accepted at or
// after record fromSeq: the index is ranged by the accepting record, so
// the last window of an effect called all day is read without its
// history.
func (s *Store) ScanCallKeysOfEffectFrom(ctx context.Context, key string, fromSeq int64, from time.Time, fn func(*CallKey) error) error {
	return s.scanCallKeys(ctx, callKeySelect+`FROM executions e JOIN calls c ON c.execution_id = e.id
		WHERE e.effect_key = ? AND e.seq >= ? AND c.received_at >= ? ORDER BY c.received_at, c.seq`,
		[]any{key, fromSeq, from.UTC().Format(TimeFormat)}, fn)
}

// FirstAccepted returns the oldest record that accepted one of these
// executions, or -1 when none of them is stored.
func (s *Store) FirstAccepted(ctx context.Context, ids []ExecutionID) (int64, error) {
	in, args := inList(ids)
	var seq sql.NullInt64
	if err := s.queryRow(ctx, `SELECT MIN(seq) FROM executions WHERE id IN `+in, args...).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read executions: %w", err)
	}
	if !seq.Valid {
		return -1, nil
	}
	return seq.Int64, nil
}

// FirstCallsReceived returns when the first call of each execution was
// received (executions without a call are left out).
func (s *Store) FirstCallsReceived(ctx context.Context, ids []ExecutionID) (map[ExecutionID]time.Time, error) {
	in, args := inList(ids)
	rows, err := s.query(ctx, `SELECT execution_id, MIN(received_at) FROM calls WHERE execution_id IN `+in+` GROUP BY execution_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read first calls: %w", err)
	}
	defer rows.Close()
	out := make(map[ExecutionID]time.Time, len(ids))
	for rows.Next() {
		var id, received string
		if err := rows.Scan(&id, &received); err != nil {
			return nil, fmt.Errorf("read first calls: %w", err)
		}
		t, err := parseTime(received)
		if err != nil {
			return nil, fmt.Errorf("execution %s: first call: received_at: %w", id, err)
		}
		out[ExecutionID(id)] = t
	}
	return out, rows.Err()
}

// ScanCallKeysBetween is ScanCallKeys for the calls received from one
// time to another (both included), through the received_at index.
func (s *Store) ScanCallKeysBetween(ctx context.Context, from, to time.Time, fn func(*CallKey) error) error {
	return s.scanCallKeys(ctx, callKeySelect+`FROM calls c JOIN executions e ON e.id = c.execution_id WHERE c.received_at BETWEEN ? AND ?
		ORDER BY c.received_at, c.seq`, []any{from.UTC().Format(TimeFormat), to.UTC().Format(TimeFormat)}, fn)
}

func (s *Store) scanCallKeys(ctx context.Context, q string, args []any, fn func(*CallKey) error) error {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("scan calls: %w", err)
	}
	defer rows.Close()
	var k CallKey
	for rows.Next() {
		var tool sql.NullString
		var window sql.NullInt64
		var received string
		if err := rows.Scan(&k.Seq, &received, &k.ExecutionID, &k.EffectKey, &window, &tool); err != nil {
			return fmt.Errorf("scan calls: %w", err)
		}
		k.Tool = tool.String
		k.Window = Opt[time.Duration]{time.Duration(window.Int64) * time.Millisecond, window.Valid}
		if k.ReceivedAt, err = parseTime(received); err != nil {
			return fmt.Errorf("call record %d: received_at: %w", k.Seq, err)
		}
		if err := fn(&k); err != nil {
			return err
		}
	}
	return rows.Err()
}

// CallRowsOf returns the calls that created or attached to these
// executions, whole but for the execution's EffectKey and Window (the
// caller holds them), in one query: joining every call with its
// execution again was a tenth of the analysis's time.
func (s *Store) CallRowsOf(ctx context.Context, ids []ExecutionID) ([]CallRow, error) {
	in, args := inList(ids)
	var out []CallRow
	err := s.scanCalls(ctx, withoutEffect+`FROM calls c WHERE c.execution_id IN `+in, args, func(r *CallRow) error {
		out = append(out, *r)
		return nil
	})
	return out, err
}

// ScanCalls streams every call that created or attached to an execution,
// whole, in the order they were received. The row passed to fn is
// reused: copy what you keep.
func (s *Store) ScanCalls(ctx context.Context, fn func(*CallRow) error) error {
	return s.scanCalls(ctx, withEffect+`FROM calls c JOIN executions e ON e.id = c.execution_id ORDER BY c.received_at, c.seq`, nil, fn)
}

// ScanCallsBetween streams, whole and in the order they were received,
// the calls received from one time to another (both included) that
// created or attached to an execution: through the received_at index, so
// a short range of a long log costs only its own calls.
func (s *Store) ScanCallsBetween(ctx context.Context, from, to time.Time, fn func(*CallRow) error) error {
	return s.scanCalls(ctx, withEffect+`FROM calls c JOIN executions e ON e.id = c.execution_id WHERE c.received_at BETWEEN ? AND ?
		ORDER BY c.received_at, c.seq`, []any{from.UTC().Format(TimeFormat), to.UTC().Format(TimeFormat)}, fn)
}

// CallEffect returns the effect key of the execution a call created or
// attached to, and the call's log record; ErrNotFound when there is no
// such call (or it has none).
func (s *Store) CallEffect(ctx context.Context, id CallID) (key string, seq int64, err error) {
	err = s.queryRow(ctx, `SELECT e.effect_key, c.seq FROM calls c JOIN executions e ON e.id = c.execution_id WHERE c.id = ?`, string(id)).Scan(&key, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, fmt.Errorf("call %s: %w", id, ErrNotFound)
	}
	return key, seq, err
}

// The end of scanCalls' columns: the execution's effect and window, or
// none (an empty key, no window) where the caller holds them.
const (
	withEffect    = `e.effect_key, e.attach_window_ms `
	withoutEffect = `'', NULL `
)

// scanCalls reads calls whole; rest is withEffect or withoutEffect and
// the query's FROM.
func (s *Store) scanCalls(ctx context.Context, rest string, args []any, fn func(*CallRow) error) error {
	rows, err := s.query(ctx, `SELECT c.seq, c.id, c.run_id, c.actor, c.received_at, c.disposition, c.execution_id, c.reason,
		c.tool, c.source_id, c.source_line, c.source_record, `+rest, args...)
	if err != nil {
		return fmt.Errorf("scan calls: %w", err)
	}
	defer rows.Close()
	var r CallRow
	for rows.Next() {
		var run, reason, tool, src, record sql.NullString
		var window, line sql.NullInt64
		var received string
		if err := rows.Scan(&r.Seq, &r.ID, &run, &r.Actor, &received, &r.Disposition, &r.ExecutionID, &reason,
			&tool, &src, &line, &record, &r.EffectKey, &window); err != nil {
			return fmt.Errorf("scan calls: %w", err)
		}
		r.RunID, r.Reason, r.Tool = RunID(run.String), reason.String, tool.String
		r.Source = Provenance{SourceID(src.String), line.Int64, record.String}
		r.Window = Opt[time.Duration]{time.Duration(window.Int64) * time.Millisecond, window.Valid}
		if r.ReceivedAt, err = parseTime(received); err != nil {
			return fmt.Errorf("call %s: received_at: %w", r.ID, err)
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// inList returns "(?,?,...)" and the ids as query arguments.
func inList[T ~string](ids []T) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = string(id)
	}
	return "(?" + strings.Repeat(",?", max(len(ids)-1, 0)) + ")", args
}

// ExecutionsByID reads several executions in one query (without their
// attached calls), keyed by id.
func (s *Store) ExecutionsByID(ctx context.Context, ids []ExecutionID) (map[ExecutionID]Execution, error) {
	in, args := inList(ids)
	rows, err := s.query(ctx, executionSelect+` WHERE id IN `+in, args...)
	if err != nil {
		return nil, fmt.Errorf("read executions: %w", err)
	}
	defer rows.Close()
	out := make(map[ExecutionID]Execution, len(ids))
	for rows.Next() {
		e, err := scanExecution(rows, "")
		if err != nil {
			return nil, err
		}
		out[e.ID] = e
	}
	return out, rows.Err()
}

// TransitionsOf returns the transitions of several executions, in log
// order, in one query.
func (s *Store) TransitionsOf(ctx context.Context, ids []ExecutionID) (map[ExecutionID][]Transition, error) {
	in, args := inList(ids)
	rows, err := s.query(ctx, transitionSelect+` WHERE execution_id IN `+in+` ORDER BY seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("transitions: %w", err)
	}
	defer rows.Close()
	out := make(map[ExecutionID][]Transition, len(ids))
	for rows.Next() {
		t, err := scanTransition(rows)
		if err != nil {
			return nil, err
		}
		out[t.ExecutionID] = append(out[t.ExecutionID], t)
	}
	return out, rows.Err()
}

// ApprovalsOf returns the approvals several executions waited on, in log
// order, in one query.
func (s *Store) ApprovalsOf(ctx context.Context, ids []ExecutionID) (map[ExecutionID][]Approval, error) {
	in, args := inList(ids)
	as, err := queryAll(ctx, s, "approvals", scanApproval, approvalSelect+` WHERE execution_id IN `+in+` ORDER BY seq`, args...)
	if err != nil {
		return nil, err
	}
	out := map[ExecutionID][]Approval{}
	for _, a := range as {
		out[a.ExecutionID] = append(out[a.ExecutionID], a)
	}
	return out, nil
}

// CallsOfAll returns the calls of several executions, in log order, in
// one query.
func (s *Store) CallsOfAll(ctx context.Context, ids []ExecutionID) ([]Call, error) {
	in, args := inList(ids)
	return queryAll(ctx, s, "calls", scanCall, callSelect+` WHERE execution_id IN `+in+` ORDER BY seq`, args...)
}

// Record reads one log record by seq, decoded (for citing evidence).
func (s *Store) Record(ctx context.Context, seq int64) (Record, error) {
	var b []byte
	err := s.queryRow(ctx, `SELECT canonical FROM audit_log WHERE seq = ?`, seq).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("record %d: %w", seq, ErrNotFound)
	}
	if err != nil {
		return Record{}, err
	}
	return DecodeRecord(b)
}

// query runs a read through a statement prepared once on the reader pool:
// the analysis issues the same few queries thousands of times, and parsing
// SQL costs more than running these.
func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.readStmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (s *Store) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := s.readStmt(ctx, q)
	if err != nil {
		return s.r.QueryRowContext(ctx, q, args...) // carries the same error to Scan
	}
	return st.QueryRowContext(ctx, args...)
}

func (s *Store) readStmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := s.rstmts.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.r.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.rstmts.LoadOrStore(q, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// TransitionRow is a transition with what history and replay need to know
// about its execution.
type TransitionRow struct {
	Transition
	Contract  Contract
	Tool      string
	Actor     string
	RunID     RunID
	EffectKey string
	// What the execution's row says, for the history checker's effect
	// rule (the analysis's): the record that accepted it, the key it was
	// sent with, what its source does not record, and what its answer
	// showed it created or replayed.
	ExecSeq                   int64
	Window                    Opt[time.Duration] // the tool's attach window, when recorded
	IdempotencyKey            Opt[string]
	NotRecorded               []Fact
	ExecCreated, ExecReplayed string
}

// ScanTransitions streams every transition in log order, optionally only
// those between from and to (log seqs, inclusive; 0 and -1 mean open).
func (s *Store) ScanTransitions(ctx context.Context, from, to int64, fn func(*TransitionRow) error) error {
	if to < 0 {
		to = 1<<62 - 1
	}
	rows, err := s.query(ctx, transitionRowSelect+` WHERE t.seq BETWEEN ? AND ? ORDER BY t.seq`, from, to)
	if err != nil {
		return fmt.Errorf("scan transitions: %w", err)
	}
	return scanTransitionRows(rows, fn)
}

// ScanTransitionsByEffect streams every transition grouped by the effect
// its execution requested, then by execution, each in log order: what a
// fold over effects needs to hold only one group at a time. The
// executions are read in executions_by_effect's order, so SQLite sorts
// only each execution's few transitions, not the whole history.
func (s *Store) ScanTransitionsByEffect(ctx context.Context, fn func(*TransitionRow) error) error {
	rows, err := s.query(ctx, transitionRowSelect+` ORDER BY e.effect_key, e.seq, t.seq`)
	if err != nil {
		return fmt.Errorf("scan transitions: %w", err)
	}
	return scanTransitionRows(rows, fn)
}

const transitionRowSelect = `SELECT t.seq, t.execution_id, t.from_state, t.to_state, t.at, t.target_status, t.exit_code, t.result_ref, t.reason, t.call_id,
		t.implied, e.contract, e.tool, e.actor, e.run_id, e.effect_key, e.seq, e.idempotency_key, e.not_recorded, e.created, e.replayed, e.attach_window_ms
		FROM transitions t JOIN executions e ON e.id = t.execution_id`

// scanTransitionRows reads rows of transitionRowSelect into one reused row.
func scanTransitionRows(rows *sql.Rows, fn func(*TransitionRow) error) error {
	defer rows.Close()
	var r TransitionRow
	for rows.Next() {
		var (
			from, at, ref, why, call, run, key, created, replayed sql.NullString
			status, exit, window                                  sql.NullInt64
			implied                                               int
			notRecorded                                           string
		)
		if err := rows.Scan(&r.Seq, &r.ExecutionID, &from, &r.To, &at, &status, &exit, &ref, &why, &call,
			&implied, &r.Contract, &r.Tool, &r.Actor, &run, &r.EffectKey, &r.ExecSeq, &key, &notRecorded, &created, &replayed, &window); err != nil {
			return fmt.Errorf("scan transitions: %w", err)
		}
		r.IdempotencyKey = Opt[string]{key.String, key.Valid}
		r.Window = Opt[time.Duration]{time.Duration(window.Int64) * time.Millisecond, window.Valid}
		r.ExecCreated, r.ExecReplayed = created.String, replayed.String
		r.NotRecorded = appendFacts(r.NotRecorded[:0], notRecorded)
		r.From, r.ResultRef, r.Reason, r.CallID, r.RunID = State(from.String), ref.String, why.String, CallID(call.String), RunID(run.String)
		r.Implied = implied != 0
		r.TargetStatus = Opt[int]{int(status.Int64), status.Valid}
		r.ExitCode = Opt[int]{int(exit.Int64), exit.Valid}
		var err error
		if r.At, err = parseOptTime(at); err != nil {
			return err
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// appendFacts appends the facts of a not_recorded column (comma-separated).
func appendFacts(dst []Fact, col string) []Fact {
	for _, f := range strings.Split(col, ",") {
		if f != "" {
			dst = append(dst, Fact(f))
		}
	}
	return dst
}

// Runs lists agent runs, newest first, at most limit (0: all).
func (s *Store) Runs(ctx context.Context, limit int) ([]Run, error) {
	q := `SELECT seq, id, actor, identified_by, evidence, started_at, ended_at, source_id, source_line, source_record FROM runs ORDER BY seq DESC`
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
		var started string
		var ended, src, record sql.NullString
		var line sql.NullInt64
		if err := rows.Scan(&r.Seq, &r.ID, &r.Actor, &r.IdentifiedBy, &r.Evidence, &started, &ended, &src, &line, &record); err != nil {
			return nil, err
		}
		r.Source = Provenance{SourceID(src.String), line.Int64, record.String}
		if r.StartedAt, err = parseTime(started); err != nil {
			return nil, err
		}
		if r.EndedAt, err = parseOptTime(ended); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
