package activity

// The projection tables, and the one rule for each row: which columns a
// table has and what a record puts in them. The writer inserts these rows
// and the table check (tablecheck.go) recomputes them from the log, so
// the two cannot drift apart.

import (
	"encoding/json"
	"strings"
	"time"
)

// table is a projection table: its columns in the order rows are built,
// the column that names a row, and the columns a later record may change
// (the rest are fixed by the record that created the row).
type table struct {
	name    string
	from    string // the SQL table and filter it reads, when not name
	cols    []string
	key     int      // index of the column that names a row
	seqCol  int      // index of the column holding the record that created it
	mutable []string // columns a later record may change
}

var (
	sourcesTable = &table{name: "sources", key: 0, seqCol: 8,
		cols: []string{"id", "format", "file", "sha256", "imported_at", "records", "skipped", "note", "seq", "content_sha256", "unsigned_from",
			"origin", "head", "content_size"}}
	runsTable = &table{name: "runs", key: 0, seqCol: 9, mutable: []string{"ended_at"},
		cols: []string{"id", "actor", "identified_by", "evidence", "started_at", "ended_at", "detail", "source_id", "source_line", "seq", "source_record"}}
	grantsTable = &table{name: "grants", key: 0, seqCol: 0,
		cols: []string{"seq", "run_id", "scope", "granted_by", "granted_at"}}
	callsTable = &table{name: "calls", key: 0, seqCol: 17,
		cols: []string{"id", "run_id", "actor", "method", "tool", "jsonrpc_id", "session_id", "stream_id", "event_id", "protocol_version",
			"received_at", "arguments", "disposition", "execution_id", "reason", "source_id", "source_line", "seq", "source_record"}}
	executionsTable = &table{name: "executions", key: 0, seqCol: 22,
		cols: []string{"id", "actor", "tool", "channel", "target", "method", "credential_ref", "arguments", "intent_scope", "effect_key",
			"fingerprint", "fingerprint_key_id", "run_id", "contract", "state", "created_by_call", "attach_window_ms", "idempotency_key",
			"accepted_at", "not_recorded", "source_id", "source_line", "seq", "updated_seq", "authorized_at", "rejected_at", "dispatched_at",
			"observed_at", "delivered_at", "resolved_at", "target_status", "exit_code", "result_ref", "error", "outcome", "created", "replayed",
			"source_record", "replica"},
		mutable: []string{"state", "authorized_at", "rejected_at", "dispatched_at", "observed_at", "delivered_at", "resolved_at",
			"target_status", "exit_code", "result_ref", "error", "outcome", "created", "replayed", "updated_seq", "replica"}}
	transitionsTable = &table{name: "transitions", key: 0, seqCol: 0,
		cols: []string{"seq", "execution_id", "from_state", "to_state", "at", "target_status", "exit_code", "result_ref", "reason", "call_id",
			"created", "replayed", "implied", "source_id", "source_line", "source_record", "shows", "replica"}}
	resolutionsTable = &table{name: "resolutions", key: 0, seqCol: 0,
		cols: []string{"seq", "execution_id", "outcome", "operator", "note", "evidence", "at"}}
	approvalsTable = &table{name: "approvals", key: 0, seqCol: 13, mutable: []string{"state", "decided_at", "operator", "note", "decided_seq"},
		cols: []string{"id", "kind", "state", "execution_id", "run_id", "actor", "tool", "credential_ref", "summary", "requested_at",
			"decided_at", "operator", "note", "seq", "decided_seq"}}
	// meta's origin (covered by the chain's genesis hash), created_at and
	// public_key (display only, never trusted) are in no record.
	metaTable = &table{name: "meta", from: "meta WHERE key NOT IN ('origin', 'created_at', 'public_key')", key: 0, seqCol: -1,
		cols: []string{"key", "value"}}
	// vaultIndexTable holds the records whose kind column says vault: the
	// gateway finds the newest vault record through it (prove.go), so a
	// kind edited to hide one is caught like any other row.
	vaultIndexTable = &table{name: "audit_log.kind", from: "audit_log WHERE kind = 'vault'", key: 0, seqCol: 0, cols: []string{"seq"}}
	// resultsTable is checked on its own: its content is not in the log,
	// only its sha256 reference is.
	resultsTable = &table{name: "results", key: 0, seqCol: -1, cols: []string{"ref", "content", "created_at"}}

	// checkedTables are the tables rebuilt from the log, in check order.
	checkedTables = []*table{sourcesTable, runsTable, grantsTable, callsTable, executionsTable, transitionsTable, resolutionsTable,
		approvalsTable, metaTable, vaultIndexTable}
)

// insertSQL is "INSERT INTO t(cols) VALUES (?,…)".
func (t *table) insertSQL() string { return t.insertPrefix() + t.tuple() }

func (t *table) insertPrefix() string {
	return "INSERT INTO " + t.name + "(" + strings.Join(t.cols, ", ") + ") VALUES "
}

func (t *table) tuple() string {
	return "(" + strings.TrimSuffix(strings.Repeat("?,", len(t.cols)), ",") + ")"
}

// Statements built once.
var (
	sourceInsert    = sourcesTable.insertSQL()
	runInsert       = runsTable.insertSQL()
	grantInsert     = grantsTable.insertSQL()
	resolutionIns   = resolutionsTable.insertSQL()
	approvalInsert  = approvalsTable.insertSQL()
	approvalUpdate  = approvalsTable.updateSQL()
	executionUpdate = executionsTable.updateSQL()
)

// selectSQL reads every row, columns in row order.
func (t *table) selectSQL() string {
	from := t.name
	if t.from != "" {
		from = t.from
	}
	return "SELECT " + strings.Join(t.cols, ", ") + " FROM " + from
}

// updateSQL sets the mutable columns of the row named by the key.
func (t *table) updateSQL() string {
	set := make([]string, len(t.mutable))
	for i, c := range t.mutable {
		set[i] = c + " = ?"
	}
	return "UPDATE " + t.name + " SET " + strings.Join(set, ", ") + " WHERE " + t.cols[t.key] + " = ?"
}

// updateArgs are the values updateSQL binds, taken from a full row.
func (t *table) updateArgs(row []any) []any {
	args := make([]any, 0, len(t.mutable)+1)
	for _, c := range t.mutable {
		args = append(args, row[t.col(c)])
	}
	return append(args, row[t.key])
}

func (t *table) col(name string) int {
	for i, c := range t.cols {
		if c == name {
			return i
		}
	}
	panic("activity: table " + t.name + " has no column " + name)
}

// rowBuilder receives a row's values in column order: the writer's
// statement arguments (argsRow) or the table check's hash (hashRow), so
// one function per table says what its rows hold.
type rowBuilder interface {
	str(s string)       // TEXT NOT NULL
	strOrNull(s string) // NULL when empty
	int(n int64)
	intOrNull(n int64) // NULL when 0
	optInt(o Opt[int])
	optStr(o Opt[string])
	time(t time.Time)
	optTime(o Opt[time.Time])
	null()
}

func sourceRow(b rowBuilder, src Source, seq int64) {
	b.str(string(src.ID))
	b.str(src.Format)
	b.strOrNull(src.File)
	b.strOrNull(src.SHA256)
	b.time(src.ImportedAt)
	b.int(src.Records)
	b.int(src.Skipped)
	b.strOrNull(src.Note)
	b.int(seq)
	b.strOrNull(src.Content)
	b.intOrNull(src.UnsignedFrom)
	b.strOrNull(src.Origin)
	b.strOrNull(src.Head)
	b.intOrNull(src.ContentSize)
}

func runRow(b rowBuilder, run Run, seq int64) {
	b.str(string(run.ID))
	b.str(run.Actor)
	b.str(string(run.IdentifiedBy))
	b.str(run.Evidence)
	b.time(run.StartedAt)
	b.optTime(run.EndedAt)
	b.strOrNull(string(run.Detail))
	b.strOrNull(string(run.Source.Source))
	b.intOrNull(run.Source.Line)
	b.int(seq)
	b.strOrNull(run.Source.Record)
}

func grantRow(b rowBuilder, g Grant, seq int64) {
	b.int(seq)
	b.str(string(g.RunID))
	b.str(g.Scope)
	b.str(g.GrantedBy)
	b.time(g.GrantedAt)
}

func callRow(b rowBuilder, c Call, seq int64) {
	b.str(string(c.ID))
	b.strOrNull(string(c.RunID))
	b.str(c.Actor)
	b.str(c.Method)
	b.strOrNull(c.Tool)
	b.optStr(c.JSONRPCID)
	b.optStr(c.SessionID)
	b.optStr(c.StreamID)
	b.optStr(c.EventID)
	b.optStr(c.ProtocolVersion)
	b.time(c.ReceivedAt)
	b.strOrNull(string(c.Arguments))
	b.str(string(c.Disposition))
	b.strOrNull(string(c.ExecutionID))
	b.strOrNull(c.Reason)
	b.strOrNull(string(c.Source.Source))
	b.intOrNull(c.Source.Line)
	b.int(seq)
	b.strOrNull(c.Source.Record)
}

// executionRow is an execution's row as it stands: accepted by record
// seq, last changed by record updated.
func executionRow(b rowBuilder, e Execution, seq, updated int64) {
	b.str(string(e.ID))
	b.str(e.Actor)
	b.str(e.Tool)
	b.str(string(e.Channel))
	b.str(e.Target)
	b.str(e.Method)
	b.str(e.CredentialRef)
	b.str(string(e.Arguments))
	b.str(e.IntentScope)
	b.str(e.EffectKey())
	b.strOrNull(e.Fingerprint)
	b.strOrNull(e.FingerprintKeyID)
	b.strOrNull(string(e.RunID))
	b.str(string(e.Contract))
	b.str(string(e.State))
	b.strOrNull(string(e.CreatedByCall))
	if e.Window.OK {
		b.int(e.Window.V.Milliseconds())
	} else {
		b.null()
	}
	b.optStr(e.IdempotencyKey)
	b.optTime(e.Times.Accepted)
	b.str(joinFacts(e.NotRecorded))
	b.strOrNull(string(e.Source.Source))
	b.intOrNull(e.Source.Line)
	b.int(seq)
	b.int(updated)
	b.optTime(e.Times.Authorized)
	b.optTime(e.Times.Rejected)
	b.optTime(e.Times.Dispatched)
	b.optTime(e.Times.Observed)
	b.optTime(e.Times.Delivered)
	b.optTime(e.Times.Resolved)
	b.optInt(e.TargetStatus)
	b.optInt(e.ExitCode)
	b.strOrNull(e.ResultRef)
	b.strOrNull(e.Error)
	b.strOrNull(string(e.Outcome))
	b.strOrNull(e.Created)
	b.strOrNull(e.Replayed)
	b.strOrNull(e.Source.Record)
	b.strOrNull(e.Replica)
}

func transitionRow(b rowBuilder, t Transition, seq int64) {
	b.int(seq)
	b.str(string(t.ExecutionID))
	b.strOrNull(string(t.From))
	b.str(string(t.To))
	b.optTime(t.At)
	b.optInt(t.TargetStatus)
	b.optInt(t.ExitCode)
	b.strOrNull(t.ResultRef)
	b.strOrNull(t.Reason)
	b.strOrNull(string(t.CallID))
	b.strOrNull(t.Created)
	b.strOrNull(t.Replayed)
	if t.Implied {
		b.int(1)
	} else {
		b.int(0)
	}
	b.strOrNull(string(t.Source.Source))
	b.intOrNull(t.Source.Line)
	b.strOrNull(t.Source.Record)
	b.strOrNull(jsonList(t.Shows))
	b.strOrNull(t.Replica)
}

func resolutionRow(b rowBuilder, r Resolution, seq int64) {
	b.int(seq)
	b.str(string(r.ExecutionID))
	b.str(string(r.Outcome))
	b.str(r.Operator)
	b.str(r.Note)
	b.strOrNull(r.Evidence)
	b.time(r.At)
}

// approvalRow is an approval's row: requested by record seq, decided by
// record decided.
func approvalRow(b rowBuilder, a Approval, seq, decided int64) {
	b.str(a.ID)
	b.str(string(a.Kind))
	b.str(string(a.State))
	b.strOrNull(string(a.ExecutionID))
	b.strOrNull(string(a.RunID))
	b.str(a.Actor)
	b.strOrNull(a.Tool)
	b.strOrNull(a.CredentialRef)
	b.strOrNull(a.Summary)
	b.time(a.RequestedAt)
	if a.State == ApprovalPending {
		b.null()
	} else {
		b.optTime(a.DecidedAt)
	}
	b.strOrNull(a.Operator)
	b.strOrNull(a.Note)
	b.int(seq)
	if a.State == ApprovalPending {
		b.null()
	} else {
		b.int(decided)
	}
}

func metaRow(b rowBuilder, key, value string) {
	b.str(key)
	b.str(value)
}

// argsRow builds a row as statement arguments.
type argsRow struct{ vals []any }

func (a *argsRow) str(s string) { a.vals = append(a.vals, s) }
func (a *argsRow) strOrNull(s string) {
	if s == "" {
		a.null()
	} else {
		a.str(s)
	}
}
func (a *argsRow) int(n int64) { a.vals = append(a.vals, n) }
func (a *argsRow) intOrNull(n int64) {
	if n == 0 {
		a.null()
	} else {
		a.int(n)
	}
}
func (a *argsRow) optInt(o Opt[int]) {
	if o.OK {
		a.int(int64(o.V))
	} else {
		a.null()
	}
}
func (a *argsRow) optStr(o Opt[string]) {
	if o.OK {
		a.str(o.V)
	} else {
		a.null()
	}
}
func (a *argsRow) time(t time.Time) { a.str(FormatTime(t)) }
func (a *argsRow) optTime(o Opt[time.Time]) {
	if o.OK {
		a.time(o.V)
	} else {
		a.null()
	}
}
func (a *argsRow) null() { a.vals = append(a.vals, nil) }

// args runs a row function into statement arguments.
func args[T any](row func(rowBuilder, T, int64), v T, seq int64) []any {
	var a argsRow
	row(&a, v, seq)
	return a.vals
}

// jsonList is a list as a JSON array, or "" (NULL) when it is empty.
func jsonList(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	b, _ := json.Marshal(ss) // a []string always marshals
	return string(b)
}

func joinFacts(fs []Fact) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ",")
}

// vaultValue is what meta's vault row says after a vault event.
func vaultValue(ev VaultEvent) string {
	state := "unlocked"
	if ev.Locked {
		state = "locked"
	}
	return state + " by " + ev.Operator + ": " + ev.Reason
}
