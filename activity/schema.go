package activity

import (
	"crypto/sha256"
	"encoding/hex"
)

// migrations are applied in order; PRAGMA user_version records how many ran.
// Never edit a released migration: append a new one. SCHEMA.md documents
// the result for people querying with sqlite3.
var migrations = []string{
	// 1: the log, its tree and checkpoints, and the model projected from it.
	`
CREATE TABLE meta(
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;

CREATE TABLE audit_log(
	seq         INTEGER PRIMARY KEY, -- 0, 1, 2 ... with no gaps; the Merkle leaf index
	canonical   BLOB NOT NULL,       -- the record bytes, hashed as stored
	leaf_hash   BLOB NOT NULL,       -- SHA-256(0x00 || canonical); a cache, verify recomputes it
	tree_hashes BLOB NOT NULL,       -- the Merkle subtrees this record completed, levels 1.. (32 bytes each); a cache
	kind        TEXT NOT NULL,
	t           TEXT NOT NULL
) STRICT;

CREATE TABLE audit_checkpoint(
	size       INTEGER PRIMARY KEY, -- records covered
	note       TEXT NOT NULL,       -- signed note: origin, size, base64 root, signature
	created_at TEXT NOT NULL,
	reason     TEXT NOT NULL        -- resolution | records | interval | shutdown | manual
) STRICT;

CREATE TABLE sources(
	id          TEXT PRIMARY KEY,
	format      TEXT NOT NULL,
	file        TEXT,
	sha256      TEXT,
	imported_at TEXT NOT NULL,
	records     INTEGER NOT NULL,
	skipped     INTEGER NOT NULL,
	note        TEXT,
	seq         INTEGER NOT NULL
) STRICT;
CREATE INDEX sources_sha256 ON sources(sha256);

CREATE TABLE runs(
	id            TEXT PRIMARY KEY,
	actor         TEXT NOT NULL,
	identified_by TEXT NOT NULL,
	evidence      TEXT NOT NULL,
	started_at    TEXT NOT NULL,
	ended_at      TEXT,
	detail        TEXT,
	source_id     TEXT,
	source_line   INTEGER,
	seq           INTEGER NOT NULL
) STRICT;

CREATE TABLE grants(
	seq        INTEGER PRIMARY KEY,
	run_id     TEXT NOT NULL,
	scope      TEXT NOT NULL,
	granted_by TEXT NOT NULL,
	granted_at TEXT NOT NULL
) STRICT;
CREATE INDEX grants_run ON grants(run_id);

CREATE TABLE calls(
	id               TEXT PRIMARY KEY,
	run_id           TEXT,
	actor            TEXT NOT NULL,
	method           TEXT NOT NULL,
	tool             TEXT,
	jsonrpc_id       TEXT,          -- NULL: not recorded
	session_id       TEXT,
	stream_id        TEXT,
	event_id         TEXT,
	protocol_version TEXT,
	received_at      TEXT NOT NULL,
	arguments        TEXT,
	disposition      TEXT NOT NULL,
	execution_id     TEXT,
	reason           TEXT,
	source_id        TEXT,
	source_line      INTEGER,
	seq              INTEGER NOT NULL
) STRICT;
CREATE INDEX calls_execution ON calls(execution_id);
CREATE INDEX calls_received ON calls(received_at, seq);

CREATE TABLE executions(
	id                 TEXT PRIMARY KEY,
	actor              TEXT NOT NULL,
	tool               TEXT NOT NULL,
	channel            TEXT NOT NULL,
	target             TEXT NOT NULL,
	method             TEXT NOT NULL,
	credential_ref     TEXT NOT NULL,
	arguments          TEXT NOT NULL,
	intent_scope       TEXT NOT NULL,
	effect_key         TEXT NOT NULL,  -- hash of tool, target, method, arguments: the effect, whoever asked
	fingerprint        TEXT,
	fingerprint_key_id TEXT,
	run_id             TEXT,
	contract           TEXT NOT NULL,
	state              TEXT NOT NULL,
	created_by_call    TEXT,
	attach_window_ms   INTEGER,     -- the tool's attach window; NULL: not recorded
	idempotency_key    TEXT,        -- NULL: not recorded; '' none sent
	target_status      INTEGER,
	exit_code          INTEGER,
	result_ref         TEXT,
	error              TEXT,
	accepted_at        TEXT,
	authorized_at      TEXT,
	rejected_at        TEXT,
	dispatched_at      TEXT,
	observed_at        TEXT,
	delivered_at       TEXT,
	resolved_at        TEXT,
	outcome            TEXT,        -- success | failure once observed; kept after delivery
	not_recorded       TEXT NOT NULL DEFAULT '',  -- comma-separated facts the source cannot show
	source_id          TEXT,
	source_line        INTEGER,
	seq                INTEGER NOT NULL,          -- record that accepted it
	updated_seq        INTEGER NOT NULL           -- record of the latest transition
) STRICT;
CREATE INDEX executions_match ON executions(fingerprint, actor, intent_scope);
CREATE INDEX executions_state ON executions(state);
-- Covers the analysis scan's join from calls, so it never reads the rows.
CREATE INDEX executions_effect ON executions(id, effect_key, attach_window_ms);
-- At most one unresolved live execution per intent. The gateway matches
-- retries inside a write transaction; this index makes the store itself
-- refuse a second accepted/dispatched/unknown execution of the same
-- fingerprint, actor and scope, whatever the caller does. Imported rows
-- (source_id set) are exempt: they record what happened.
CREATE UNIQUE INDEX executions_one_unresolved ON executions(fingerprint, actor, intent_scope)
	WHERE source_id IS NULL AND fingerprint IS NOT NULL
	  AND state IN ('accepted', 'authorized', 'dispatched', 'unknown', 'pending_verification');

CREATE TABLE transitions(
	seq           INTEGER PRIMARY KEY,
	execution_id  TEXT NOT NULL,
	from_state    TEXT,
	to_state      TEXT NOT NULL,
	at            TEXT,
	target_status INTEGER,
	exit_code     INTEGER,
	result_ref    TEXT,
	reason        TEXT,
	call_id       TEXT
) STRICT;
CREATE INDEX transitions_execution ON transitions(execution_id, seq);

CREATE TABLE resolutions(
	seq          INTEGER PRIMARY KEY,
	execution_id TEXT NOT NULL,
	outcome      TEXT NOT NULL,
	operator     TEXT NOT NULL,
	note         TEXT NOT NULL,
	evidence     TEXT,
	at           TEXT NOT NULL
) STRICT;
CREATE INDEX resolutions_execution ON resolutions(execution_id);

CREATE TABLE approvals(
	id             TEXT PRIMARY KEY,
	kind           TEXT NOT NULL,   -- session | per_use
	state          TEXT NOT NULL,   -- pending | approved | denied | expired
	execution_id   TEXT,
	run_id         TEXT,
	actor          TEXT NOT NULL,
	tool           TEXT,
	credential_ref TEXT,
	summary        TEXT,
	requested_at   TEXT NOT NULL,
	decided_at     TEXT,
	operator       TEXT,
	note           TEXT,
	seq            INTEGER NOT NULL,  -- record of the request
	decided_seq    INTEGER            -- record of the decision
) STRICT;
CREATE INDEX approvals_state ON approvals(state);
CREATE INDEX approvals_run ON approvals(run_id, kind, state);

CREATE TABLE results(
	ref        TEXT PRIMARY KEY,    -- sha256:<hex> of content
	content    BLOB NOT NULL,
	created_at TEXT NOT NULL
) STRICT;

-- Defence in depth only: triggers can be dropped, which is why audit verify
-- recomputes everything from the stored bytes.
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_checkpoint_no_update BEFORE UPDATE ON audit_checkpoint BEGIN SELECT RAISE(ABORT, 'audit_checkpoint is append-only'); END;
CREATE TRIGGER audit_checkpoint_no_delete BEFORE DELETE ON audit_checkpoint BEGIN SELECT RAISE(ABORT, 'audit_checkpoint is append-only'); END;
CREATE TRIGGER transitions_no_update BEFORE UPDATE ON transitions BEGIN SELECT RAISE(ABORT, 'transitions is append-only'); END;
CREATE TRIGGER transitions_no_delete BEFORE DELETE ON transitions BEGIN SELECT RAISE(ABORT, 'transitions is append-only'); END;
CREATE TRIGGER resolutions_no_update BEFORE UPDATE ON resolutions BEGIN SELECT RAISE(ABORT, 'resolutions is append-only'); END;
CREATE TRIGGER resolutions_no_delete BEFORE DELETE ON resolutions BEGIN SELECT RAISE(ABORT, 'resolutions is append-only'); END;
`,
	// 2: the gateway reads the newest execution of an intent on every call;
	// with seq in the index that is one seek instead of a sort.
	`
DROP INDEX executions_match;
CREATE INDEX executions_match ON executions(fingerprint, actor, intent_scope, seq);
`,
	// 3: what a target's answer shows (what it created; that it replayed
	// an earlier answer), steps an importer only implies, and provenance
	// finer than a line (the span, entry or message inside it).
	`
ALTER TABLE executions ADD COLUMN created TEXT;
ALTER TABLE executions ADD COLUMN replayed TEXT;
ALTER TABLE executions ADD COLUMN source_record TEXT;
ALTER TABLE transitions ADD COLUMN created TEXT;
ALTER TABLE transitions ADD COLUMN replayed TEXT;
ALTER TABLE transitions ADD COLUMN implied INTEGER NOT NULL DEFAULT 0;
ALTER TABLE transitions ADD COLUMN source_id TEXT;
ALTER TABLE transitions ADD COLUMN source_line INTEGER;
ALTER TABLE transitions ADD COLUMN source_record TEXT;
ALTER TABLE calls ADD COLUMN source_record TEXT;
ALTER TABLE runs ADD COLUMN source_record TEXT;
`,
	// 4: the ids a read's answer lists, as a JSON array.
	`
ALTER TABLE transitions ADD COLUMN shows TEXT;
`,
	// 5: the gateway finds the newest vault record on every call, to
	// check the vault row against it (prove.go).
	`
CREATE INDEX audit_log_vault ON audit_log(seq) WHERE kind = 'vault';
`,
	// 6: a source's content identity (Source.Content).
	`
ALTER TABLE sources ADD COLUMN content_sha256 TEXT;
CREATE INDEX sources_content ON sources(content_sha256);
`,
	// 7: read-only executions are exempt from the one-unresolved rule:
	// a read has no effect to duplicate, so concurrent identical reads
	// each run and a read left unknown by a crash never blocks the next.
	`
DROP INDEX executions_one_unresolved;
CREATE UNIQUE INDEX executions_one_unresolved ON executions(fingerprint, actor, intent_scope)
	WHERE source_id IS NULL AND fingerprint IS NOT NULL AND contract <> 'read_only'
	  AND state IN ('accepted', 'authorized', 'dispatched', 'unknown', 'pending_verification');
`,
	// 8: a suspect's timeline shows the approvals its executions waited on.
	`
CREATE INDEX approvals_execution ON approvals(execution_id);
`,
	// 9: an import finds a record it already holds from another file by
	// the record's own id (an OTLP span exported again in another batch).
	// Partial: the gateway's calls have no source record and pay nothing.
	// It also records from which line an import's records are unsigned
	// (Source.UnsignedFrom).
	`
CREATE INDEX calls_source_record ON calls(source_record) WHERE source_record IS NOT NULL;
ALTER TABLE sources ADD COLUMN unsigned_from INTEGER;
`,
	// 10: a suspect is found from its first call: the calls of one effect
	// are read through this index (analyze.Find), not by a scan of all.
	`
CREATE INDEX executions_by_effect ON executions(effect_key, seq);
`,
	// 11: the console lists the newest executions every second in live
	// mode: without this index each listing sorted the whole table (1.5 s
	// at 166k executions). Appends only ever touch its right edge.
	`
CREATE INDEX executions_seq ON executions(seq);
`,
	// 12: where an import of an mcpdup export ended in its log
	// (Source.Origin, Source.Head), so a longer export of the same log
	// continues it instead of failing on ids it already holds.
	`
ALTER TABLE sources ADD COLUMN origin TEXT;
ALTER TABLE sources ADD COLUMN head TEXT;
CREATE INDEX sources_origin ON sources(origin, seq) WHERE origin IS NOT NULL;
`,
	// 13: gateway replicas. An execution records the replica that took it
	// in hand (accepted, dispatched); each replica holds a lease, renewed
	// while it lives, and the executions of one whose lease ran out are
	// recovered once, by another (lease.go). The leases are operational
	// state, outside the signed log: the recoveries they cause are in it.
	`
ALTER TABLE executions ADD COLUMN replica TEXT;
ALTER TABLE transitions ADD COLUMN replica TEXT;
CREATE INDEX executions_replica ON executions(replica, state) WHERE replica IS NOT NULL;
CREATE TABLE replicas(
	id           TEXT PRIMARY KEY,
	name         TEXT NOT NULL,     -- the configured name, or the host
	pid          INTEGER NOT NULL,
	started_at   TEXT NOT NULL,
	renewed_ms   INTEGER NOT NULL,  -- the database's clock, ms since 1970, at the last renewal
	expires_ms   INTEGER NOT NULL,  -- the lease runs out then, unless renewed
	ended_at     TEXT,              -- a clean shutdown
	recovered_by TEXT,              -- the replica that recovered its executions
	recovered_at TEXT
) STRICT;
`,
	// 14: MCP event streams replicas share, so a 2025-era SSE resumption
	// that reaches another replica gets its events (streams.go).
	// Operational, outside the signed log.
	`
CREATE TABLE mcp_sessions(
	id        TEXT PRIMARY KEY,
	actor     TEXT NOT NULL,     -- only this actor may resume its streams
	replica   TEXT NOT NULL,     -- the replica that serves the session
	opened_ms INTEGER NOT NULL,  -- the database's clock
	closed    INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE TABLE mcp_events(
	session_id TEXT NOT NULL,
	stream_id  TEXT NOT NULL,
	idx        INTEGER NOT NULL,  -- 0, 1, … per stream: the SDK's event index
	data       BLOB NOT NULL,
	at_ms      INTEGER NOT NULL,
	PRIMARY KEY(session_id, stream_id, idx)
) STRICT;
`,
	// 15: a run identified by its token is one run on every replica while
	// the token is heard from within the idle timeout; its last call is
	// found through this index (Tx.RunLastSeen).
	// Also: the open runs FindRun looks for inside the write lock, and the
	// sessions PurgeStreams drops by age.
	`
CREATE INDEX calls_run ON calls(run_id, received_at) WHERE run_id IS NOT NULL;
CREATE INDEX runs_open ON runs(actor, identified_by, evidence, seq) WHERE ended_at IS NULL AND source_id IS NULL;
CREATE INDEX IF NOT EXISTS mcp_sessions_opened ON mcp_sessions(opened_ms);
`,
	// 16: executions_effect was meant to answer the analysis's join of
	// calls with their executions' effects from the index alone; without
	// statistics (mcpdup never runs ANALYZE) SQLite's planner takes the
	// primary key's index instead, so the index was a page more in every
	// gateway commit, read by nothing.
	`
DROP INDEX IF EXISTS executions_effect;
`,
	// 17: a request two proxies logged, in files imported apart, is one
	// send (the importers' hop rule): an import finds the other file's
	// line by the proxy's request id (Tx.ImportedRequests). Partial on
	// MinRequestID: the gateway's calls (no source) and short JSON-RPC
	// ids pay nothing. And a log that grew since it was imported is
	// known by its first Source.ContentSize bytes (Store.ShorterSources).
	`
CREATE INDEX calls_request_id ON calls(jsonrpc_id) WHERE source_id IS NOT NULL AND length(jsonrpc_id) >= 16;
ALTER TABLE sources ADD COLUMN content_size INTEGER;
`,
	// 18: executions_one_unresolved names its states as OR terms, the
	// same rule: SQLite evaluates a partial index's IN list through an
	// ephemeral table it builds and drops on every row it inserts or
	// updates, which doubled the cost of each state change of an
	// execution (BenchmarkPartialIndexWhere).
	`
DROP INDEX executions_one_unresolved;
CREATE UNIQUE INDEX executions_one_unresolved ON executions(fingerprint, actor, intent_scope)
	WHERE source_id IS NULL AND fingerprint IS NOT NULL AND contract <> 'read_only'
	  AND (state = 'accepted' OR state = 'authorized' OR state = 'dispatched' OR state = 'unknown' OR state = 'pending_verification');
`,
}

// UnresolvedStates are the states executions_one_unresolved covers: an
// execution in one of them always answers a matching retry, whatever its
// age (read-only executions excepted: a read has nothing to duplicate).
var UnresolvedStates = []State{StateAccepted, StateAuthorized, StateDispatched, StateUnknown, StatePendingVerification}

// SchemaVersion is the schema this build reads and writes.
var SchemaVersion = len(migrations)

// SchemaID identifies the exact schema text (for caches of generated
// databases, which must not outlive a schema change).
func SchemaID() string {
	h := sha256.New()
	for _, m := range migrations {
		h.Write([]byte(m))
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
