package activity

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// ErrReadOnly is returned when writing to a store opened read-only.
var ErrReadOnly = errors.New("store is read-only")

// Writer appends events inside one transaction. Each method validates the
// event against the model, appends it to the log and updates the tables,
// so the log and the tables cannot disagree.
type Writer struct {
	s        *Store
	tx       *sql.Tx
	ctx      context.Context
	now      time.Time
	head     tlog.Hash
	next     int64 // seq of the next record
	edge     Edge  // right edge of the tree, read through to the stored tree hashes
	loaded   bool
	records  []Record
	resolved bool // a resolution was written: seal after commit
	// execs caches executions read or changed in this transaction; dirty
	// ones have their projection row written by flush.
	execs map[ExecutionID]*execEntry
	runs  []RunID // runs known to exist, cached by the store on commit
	// bulk: a long import in one transaction. Records are not kept for
	// the caller and the execution cache is trimmed, so memory stays flat
	// however many records the transaction appends.
	bulk     bool
	runsSeen map[RunID]bool
	appended int64
	dirty    []*execEntry         // cached executions whose row flush must write
	txStmts  map[string]*sql.Stmt // bulk: statements prepared on this transaction
	// Rows waiting to be inserted many per statement (written before
	// anything reads their table, and at the end of the request).
	logRows, transitionRows, callRows, execRows rows
	ins                                         *inserter // bulk: runs the batched inserts
}

// rowsPerInsert is how many rows one INSERT carries at most (the widest
// table, executions, binds 35 values a row; SQLite allows 32,766). An
// import's CPU per 200k records, own export: 16 rows 8.6/8.2 s, 64 rows
// 7.5/6.9 s, 256 rows 6.7/6.4 s, 512 no better.
const rowsPerInsert = 256

// insertSQL is a table's INSERT, for 1 to rowsPerInsert rows.
// kind, idCol and lineCol name the row a failed insert was about: its id
// and, for imported rows, the source line (lineCol -1: none).
type insertSQL struct {
	prefix, tuple  string
	cols           int
	kind           string
	idCol, lineCol int
	byRows         [rowsPerInsert + 1]atomic.Pointer[string] // the INSERT for n rows, built on first use
}

func newInsertSQL(prefix, tuple, kind string, idCol, lineCol int) *insertSQL {
	return &insertSQL{prefix: prefix, tuple: tuple, cols: strings.Count(tuple, "?"), kind: kind, idCol: idCol, lineCol: lineCol}
}

// sqlFor returns the INSERT of n rows (1 to rowsPerInsert): every request
// writes a few rows per table, so the text is built once per count.
func (q *insertSQL) sqlFor(n int) string {
	if p := q.byRows[n].Load(); p != nil {
		return *p
	}
	text := q.prefix + strings.Repeat(q.tuple+",", n-1) + q.tuple
	q.byRows[n].Store(&text)
	return text
}

var (
	logInsert = newInsertSQL(`INSERT INTO audit_log(seq, canonical, leaf_hash, tree_hashes, kind, t) VALUES `, `(?, ?, ?, ?, ?, ?)`,
		"record", 0, -1)
	transitionInsert = newInsertSQL(`INSERT INTO transitions(seq, execution_id, from_state, to_state, at, target_status, exit_code, result_ref, reason, call_id) VALUES `, `(?,?,?,?,?,?,?,?,?,?)`,
		"transition of", 1, -1)
	callInsert = newInsertSQL(`INSERT INTO calls(id, run_id, actor, method, tool, jsonrpc_id, session_id, stream_id, event_id, protocol_version, received_at, arguments, disposition, execution_id, reason, source_id, source_line, seq) VALUES `,
		`(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, "call", 0, 16)
	execInsert = newInsertSQL(`INSERT INTO executions(id, actor, tool, channel, target, method, credential_ref, arguments, intent_scope, effect_key, fingerprint, fingerprint_key_id,
		run_id, contract, state, created_by_call, attach_window_ms, idempotency_key, accepted_at, not_recorded, source_id, source_line, seq, updated_seq,
		authorized_at, rejected_at, dispatched_at, observed_at, delivered_at, resolved_at, target_status, exit_code, result_ref, error, outcome) VALUES `,
		`(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, "execution", 0, 21)
)

// rows buffers one table's inserts.
type rows struct {
	sql  *insertSQL
	args []any
	n    int
}

// insert adds a row to r, written many per statement when r fills up or
// the request ends (insertBuffered): one statement per row costs about
// twice as much per row in modernc/sqlite, and a gateway call appends
// several log and transition rows.
func (w *Writer) insert(r *rows, q *insertSQL, args ...any) error {
	r.sql = q
	r.args = append(r.args, args...)
	r.n++
	if r.n == rowsPerInsert {
		return w.insertRows(r)
	}
	return nil
}

// insertRows writes the rows r holds in one statement. If it fails (a
// duplicate id, say), the rows are tried one by one so the error names
// the row at fault; the statement that failed inserted nothing.
func (w *Writer) insertRows(r *rows) error {
	if r.n == 0 {
		return nil
	}
	table, args, n := r.sql, r.args, r.n
	q := table.sqlFor(n)
	write := func() error {
		err := w.execNow(q, args...)
		if err != nil {
			err = w.blameRow(table, args, n, err)
		}
		return err
	}
	if w.ins != nil {
		// The inserter owns args now; fill a new slice meanwhile.
		r.args, r.n = make([]any, 0, cap(args)), 0
		return w.ins.queue(write)
	}
	err := write()
	clear(r.args)
	r.args, r.n = r.args[:0], 0
	return err
}

// blameRow finds which of n rows a failed multi-row insert stumbled on.
func (w *Writer) blameRow(table *insertSQL, args []any, n int, err error) error {
	for i := range n {
		row := args[i*table.cols : (i+1)*table.cols]
		if rerr := w.execNow(table.sqlFor(1), row...); rerr != nil {
			re := &RowError{Row: fmt.Sprintf("%s %v", table.kind, row[table.idCol]), Err: rerr}
			if table.lineCol >= 0 {
				re.Line, _ = row[table.lineCol].(int64)
			}
			return re
		}
	}
	return err
}

// RowError is a row the store refused, named by its id; Line is the
// line of the imported file it came from, or 0.
type RowError struct {
	Row  string
	Line int64
	Err  error
}

func (e *RowError) Error() string { return e.Row + ": " + e.Err.Error() }
func (e *RowError) Unwrap() error { return e.Err }

// insertBuffered writes every buffered row.
func (w *Writer) insertBuffered() error {
	for _, r := range []*rows{&w.logRows, &w.transitionRows, &w.callRows} {
		if err := w.insertRows(r); err != nil {
			return err
		}
	}
	return nil
}

// Appended is how many records this writer has appended.
func (w *Writer) Appended() int64 { return w.appended }

// maxBulkCache is how many clean executions a bulk writer keeps cached.
const maxBulkCache = 4096

// bulkMode switches the writer to bulk mode for a long import: WriteBulk
// returns only the first record appended, and executions not changed
// since the last flush leave the cache.
func (w *Writer) bulkMode() {
	if !w.bulk {
		w.bulk = true
		w.ins = newInserter()
	}
}

// Sync writes every row the writer holds and waits for them: an error
// about one of them (a duplicate id, say) surfaces here rather than when
// the transaction ends. Write calls it after fn.
func (w *Writer) Sync() error {
	if err := w.insertBuffered(); err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return err
	}
	if w.ins != nil {
		return w.ins.sync()
	}
	return nil
}

// endBulk stops the inserter, after the inserts queued so far.
func (w *Writer) endBulk() error {
	if w.ins == nil {
		return nil
	}
	err := w.ins.stop()
	w.ins = nil
	return err
}

type execEntry struct {
	e         Execution
	dirty     bool
	seq       int64 // updated_seq to write
	insertSeq int64 // seq of the accepting record
	pending   bool  // accepted in this transaction, row not yet inserted
}

// Write runs fn in a transaction and commits it durably before returning:
// when Write returns nil, every event fn wrote is on disk. If fn returns an
// error nothing it wrote is kept. Writers in other processes wait (BEGIN
// IMMEDIATE plus the busy timeout).
//
// Concurrent Writes share commits: a single committer runs each waiting fn
// in its own savepoint of one transaction and commits once, so sixteen
// callers pay for one fsync instead of sixteen. fn must only touch the
// store through w and must not call Write itself.
func (s *Store) Write(ctx context.Context, fn func(w *Writer) error) ([]Record, error) {
	return s.write(ctx, &writeReq{ctx: ctx, fn: fn, done: make(chan writeResult, 1)})
}

// WriteBulk is Write for a long import: rows are inserted many per
// statement on a goroutine of their own, only the first record appended
// is returned, and the transaction carries this write alone. (Shared with
// others, it would run in a savepoint, whose journal holds in memory the
// original of every page the import changes.)
func (s *Store) WriteBulk(ctx context.Context, fn func(w *Writer) error) ([]Record, error) {
	bulk := func(w *Writer) error {
		w.bulkMode()
		return fn(w)
	}
	return s.write(ctx, &writeReq{ctx: ctx, fn: bulk, bulk: true, done: make(chan writeResult, 1)})
}

func (s *Store) write(ctx context.Context, req *writeReq) ([]Record, error) {
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case s.writes <- req:
	case <-s.closing:
		return nil, ErrClosed
	}
	res := <-req.done
	if res.err != nil {
		return nil, res.err
	}
	if s.signer != nil {
		reason := SealReason("")
		if res.resolved {
			reason = SealResolution
		}
		if _, err := s.sealIfDue(ctx, reason); err != nil {
			return res.records, err
		}
	}
	return res.records, nil
}

// ErrClosed is returned by writes to a closed store.
var ErrClosed = errors.New("store is closed")

type writeReq struct {
	ctx  context.Context
	fn   func(*Writer) error
	bulk bool // WriteBulk: committed alone
	done chan writeResult
}

type writeResult struct {
	records  []Record
	resolved bool
	err      error
}

// maxBatch bounds how many waiting writes one commit carries.
const maxBatch = 64

// commitLoop is the single committer. It exits when the store closes,
// after answering every write already queued.
func (s *Store) commitLoop() {
	defer s.committer.Done()
	var next *writeReq // a bulk write drained behind others: it goes alone, next
	for {
		first := next
		next = nil
		if first == nil {
			select {
			case first = <-s.writes:
			case <-s.closing:
				s.commitRemaining()
				return
			}
		}
		batch := []*writeReq{first}
	drain:
		for !first.bulk && len(batch) < maxBatch {
			select {
			case req := <-s.writes:
				if req.bulk {
					next = req
					break drain
				}
				batch = append(batch, req)
			default:
				break drain
			}
		}
		s.commitBatch(batch)
	}
}

// commitRemaining commits, one by one, the writes still waiting when the
// store closes.
func (s *Store) commitRemaining() {
	for {
		select {
		case req := <-s.writes:
			s.commitBatch([]*writeReq{req})
		default:
			return
		}
	}
}

// commitBatch runs each request in its own savepoint and commits once.
func (s *Store) commitBatch(batch []*writeReq) {
	results := make([]writeResult, len(batch))
	answer := func() {
		for i, req := range batch {
			req.done <- results[i]
		}
	}
	bg := context.Background()
	tx, err := s.w.BeginTx(bg, nil)
	if err != nil {
		for i := range results {
			results[i].err = fmt.Errorf("begin write: %w", err)
		}
		answer()
		return
	}
	defer tx.Rollback()
	chain := &Writer{s: s, tx: tx, ctx: bg} // carries head, next and edge between requests
	kept := 0
	for i, req := range batch {
		if err := req.ctx.Err(); err != nil {
			results[i].err = err
			continue
		}
		results[i] = s.runOne(tx, chain, req, i, len(batch) == 1)
		if results[i].err == nil {
			kept++
		}
	}
	if kept > 0 {
		if err := tx.Commit(); err != nil {
			for i := range results {
				if results[i].err == nil {
					results[i] = writeResult{err: fmt.Errorf("commit: %w", err)}
				}
			}
			answer()
			return
		}
		s.afterCommit(chain)
	}
	answer()
}

// runOne runs one request inside a savepoint of the batch transaction and
// carries the chain state forward only if it succeeds.
func (s *Store) runOne(tx *sql.Tx, chain *Writer, req *writeReq, i int, alone bool) writeResult {
	// A request alone in its batch needs no savepoint: on error the whole
	// transaction is rolled back. Savepoints copy every page they touch.
	sp := fmt.Sprintf("w%d", i)
	if !alone {
		if _, err := tx.Exec("SAVEPOINT " + sp); err != nil {
			return writeResult{err: fmt.Errorf("savepoint: %w", err)}
		}
	}
	// Statements must not see the caller's cancellation: SQLite answers an
	// interrupted write by rolling back the whole transaction, which here
	// holds other callers' writes too.
	w := &Writer{s: s, tx: tx, ctx: context.WithoutCancel(req.ctx), now: s.opts.Now().UTC(),
		head: chain.head, next: chain.next, edge: chain.edge, loaded: chain.loaded}
	err := req.fn(w)
	if err == nil {
		err = w.Sync()
	}
	if berr := w.endBulk(); err == nil {
		err = berr
	}
	if err != nil {
		if alone {
			return writeResult{err: err}
		}
		if _, rerr := tx.Exec("ROLLBACK TO " + sp); rerr != nil {
			return writeResult{err: errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rerr))}
		}
		tx.Exec("RELEASE " + sp)
		return writeResult{err: err}
	}
	if !alone {
		if _, err := tx.Exec("RELEASE " + sp); err != nil {
			return writeResult{err: fmt.Errorf("release savepoint: %w", err)}
		}
	}
	chain.head, chain.next, chain.edge, chain.loaded = w.head, w.next, w.edge, w.loaded
	chain.runs = append(chain.runs, w.runs...)
	if len(w.records) > 0 {
		chain.records = append(chain.records, w.records[0])
	}
	return writeResult{records: w.records, resolved: w.resolved}
}

// afterCommit updates what this process caches about the log.
func (s *Store) afterCommit(chain *Writer) {
	s.prepareNoted(context.Background())
	for _, id := range chain.runs {
		s.knownRuns.Store(id, true)
	}
	if chain.loaded {
		s.edgeMu.Lock()
		s.edge, s.edgeSize = chain.edge, chain.next
		s.edge.Fallback = nil
		s.edgeMu.Unlock()
	}
	if len(chain.records) > 0 {
		s.tail.noteWrite(chain.next, chain.records[0].Time)
	}
}

// Records returns the records this transaction has appended so far.
func (w *Writer) Records() []Record { return w.records }

// Now is the time the transaction started, used for records that do not
// carry their own time.
func (w *Writer) Now() time.Time { return w.now }

// exec runs a statement after any inserts queued before it.
func (w *Writer) exec(query string, args ...any) error {
	if w.ins != nil {
		if err := w.ins.sync(); err != nil {
			return err
		}
	}
	return w.execNow(query, args...)
}

func (w *Writer) execNow(query string, args ...any) error {
	if stmt := w.txStmt(query); stmt != nil {
		_, err := stmt.ExecContext(w.ctx, args...)
		return err
	}
	if stmt := w.s.prepared(query); stmt != nil {
		_, err := w.tx.StmtContext(w.ctx, stmt).ExecContext(w.ctx, args...)
		return err
	}
	_, err := w.tx.ExecContext(w.ctx, query, args...)
	return err
}

// queryRow runs a query after any inserts queued before it, so it sees
// them. Should one have failed, the write fails when it ends (Sync).
func (w *Writer) queryRow(query string, args ...any) *sql.Row {
	if w.ins != nil {
		w.ins.sync()
	}
	if stmt := w.txStmt(query); stmt != nil {
		return stmt.QueryRowContext(w.ctx, args...)
	}
	if stmt := w.s.prepared(query); stmt != nil {
		return w.tx.StmtContext(w.ctx, stmt).QueryRowContext(w.ctx, args...)
	}
	return w.tx.QueryRowContext(w.ctx, query, args...)
}

// txStmt returns, for a bulk writer, query prepared on its transaction:
// one import is one long transaction, and re-parsing SQL for every record
// would cost more than the inserts. Others get nil.
func (w *Writer) txStmt(query string) *sql.Stmt {
	if !w.bulk {
		return nil
	}
	if st, ok := w.txStmts[query]; ok {
		return st
	}
	st, err := w.tx.PrepareContext(w.ctx, query)
	if err != nil {
		return nil // run it unprepared; the error shows there
	}
	if w.txStmts == nil {
		w.txStmts = map[string]*sql.Stmt{}
	}
	w.txStmts[query] = st
	return st
}

// prepared returns the writer connection's prepared statement for query,
// or nil the first time, when it notes the query to be prepared after the
// transaction: parsing SQL for every record costs more than the insert, and
// the single writer connection is busy while a transaction is open.
func (s *Store) prepared(query string) *sql.Stmt {
	if st, ok := s.stmts.Load(query); ok {
		if stmt, _ := st.(*sql.Stmt); stmt != nil {
			return stmt
		}
		return nil
	}
	s.stmts.Store(query, nil)
	return nil
}

// prepareNoted prepares the queries prepared() noted; called with the
// writer connection free.
func (s *Store) prepareNoted(ctx context.Context) {
	s.stmts.Range(func(k, v any) bool {
		if stmt, _ := v.(*sql.Stmt); stmt == nil {
			if st, err := s.w.PrepareContext(ctx, k.(string)); err == nil {
				s.stmts.Store(k, st)
			}
		}
		return true
	})
}

// append adds one record to the log: chain link, leaf and tree hashes.
func (w *Writer) append(kind Kind, data any) (Record, error) {
	if !w.loaded {
		if err := w.loadHead(); err != nil {
			return Record{}, err
		}
	}
	rec, err := EncodeRecord(w.next, w.head, w.now, kind, data)
	if err != nil {
		return Record{}, err
	}
	hashes, err := tlog.StoredHashesForRecordHash(rec.Seq, rec.Hash, &w.edge)
	if err != nil {
		return Record{}, fmt.Errorf("record %d: tree: %w", rec.Seq, err)
	}
	tree := make([]byte, 0, (len(hashes)-1)*tlog.HashSize)
	for _, h := range hashes[1:] {
		tree = append(tree, h[:]...)
	}
	if err := w.insert(&w.logRows, logInsert, rec.Seq, rec.Bytes, rec.Hash[:], tree, string(kind), FormatTime(rec.Time)); err != nil {
		return Record{}, fmt.Errorf("record %d: %w", rec.Seq, err)
	}
	w.edge.Add(rec.Seq, hashes)
	w.head, w.next = rec.Hash, rec.Seq+1
	w.appended++
	if !w.bulk || len(w.records) == 0 {
		w.records = append(w.records, rec)
	}
	return rec, nil
}

// loadHead reads the last record inside the transaction and re-hashes its
// bytes: the chain continues from what is stored, never from a cached hash
// that could have been altered.
func (w *Writer) loadHead() error {
	var seq int64
	var canonical []byte
	err := w.queryRow(`SELECT seq, canonical FROM audit_log ORDER BY seq DESC LIMIT 1`).Scan(&seq, &canonical)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		w.head, w.next = GenesisHash(w.s.origin), 0
	case err != nil:
		return fmt.Errorf("read log head: %w", err)
	default:
		w.head, w.next = tlog.RecordHash(canonical), seq+1
	}
	// Reuse the edge this process left after its last commit if the log
	// has not moved since; otherwise read what is needed from the log.
	w.s.edgeMu.Lock()
	if w.s.edgeSize == w.next {
		w.edge = w.s.edge
	}
	w.s.edgeMu.Unlock()
	w.edge.Fallback = tlog.HashReaderFunc(w.readHashes)
	w.loaded = true
	return nil
}

// readHashes reads stored tree hashes with a prepared query.
func (w *Writer) readHashes(indexes []int64) ([]tlog.Hash, error) {
	if err := w.insertRows(&w.logRows); err != nil {
		return nil, err
	}
	return readStoredHashes(indexes, func(seq int64) ([]byte, []byte, error) {
		var leaf, tree []byte
		err := w.queryRow(`SELECT leaf_hash, tree_hashes FROM audit_log WHERE seq = ?`, seq).Scan(&leaf, &tree)
		return leaf, tree, err
	})
}

// readStoredHashes resolves tlog stored-hash indexes against the log: the
// node at (level, k) was completed by record ((k+1) << level) - 1, which
// keeps its leaf in leaf_hash and its level ≥ 1 nodes in tree_hashes.
func readStoredHashes(indexes []int64, row func(seq int64) (leaf, tree []byte, err error)) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		level, k := tlog.SplitStoredHashIndex(idx)
		seq := (k+1)<<uint(level) - 1
		leaf, tree, err := row(seq)
		if err != nil {
			return nil, fmt.Errorf("tree hash of record %d level %d: %w", seq, level, notFound(err))
		}
		b := leaf
		if level > 0 {
			if len(tree) < level*tlog.HashSize {
				return nil, fmt.Errorf("record %d: tree hashes cut short", seq)
			}
			b = tree[(level-1)*tlog.HashSize : level*tlog.HashSize]
		}
		if len(b) != tlog.HashSize {
			return nil, fmt.Errorf("record %d: tree hash has %d bytes", seq, len(b))
		}
		out[i] = tlog.Hash(b)
	}
	return out, nil
}

// txHashReader reads stored tree hashes inside a transaction.
type txHashReader struct {
	ctx context.Context
	q   interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}
}

func (r txHashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	return readStoredHashes(indexes, func(seq int64) ([]byte, []byte, error) {
		var leaf, tree []byte
		err := r.q.QueryRowContext(r.ctx, `SELECT leaf_hash, tree_hashes FROM audit_log WHERE seq = ?`, seq).Scan(&leaf, &tree)
		return leaf, tree, err
	})
}

// AddSource records where the following records come from (an import
// marker, or a gateway announcing itself).
func (w *Writer) AddSource(src Source) (Source, error) {
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
	return src, w.exec(`INSERT INTO sources(id, format, file, sha256, imported_at, records, skipped, note, seq) VALUES (?,?,?,?,?,?,?,?,?)`,
		src.ID, src.Format, nullString(src.File), nullString(src.SHA256), FormatTime(src.ImportedAt),
		src.Records, src.Skipped, nullString(src.Note), rec.Seq)
}

// StartRun records an agent run in the Sessions log.
func (w *Writer) StartRun(run Run) (Run, error) {
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
	rec, err := w.append(KindRun, run)
	if err != nil {
		return run, err
	}
	w.runs = append(w.runs, run.ID)
	if w.runsSeen == nil {
		w.runsSeen = map[RunID]bool{}
	}
	w.runsSeen[run.ID] = true
	return run, w.exec(`INSERT INTO runs(id, actor, identified_by, evidence, started_at, ended_at, detail, source_id, source_line, seq) VALUES (?,?,?,?,?,?,?,?,?,?)`,
		run.ID, run.Actor, string(run.IdentifiedBy), run.Evidence, FormatTime(run.StartedAt), nullTime(run.EndedAt),
		nullBytes(run.Detail), nullString(string(run.Source.Source)), nullInt(run.Source.Line), rec.Seq)
}

// EndRun records that a run ended.
func (w *Writer) EndRun(id RunID, at time.Time) error {
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
func (w *Writer) AddGrant(g Grant) error {
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
	return w.exec(`INSERT INTO grants(seq, run_id, scope, granted_by, granted_at) VALUES (?,?,?,?,?)`,
		rec.Seq, string(g.RunID), g.Scope, g.GrantedBy, FormatTime(g.GrantedAt))
}

func (w *Writer) requireRun(id RunID) error {
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
func (w *Writer) RecordCall(c Call) (Call, error) {
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
	if c.Disposition == DispositionAttached {
		if _, err := w.Execution(c.ExecutionID); err != nil {
			return c, fmt.Errorf("call %s attaches to %w", c.ID, err)
		}
	}
	rec, err := w.append(KindCall, c)
	if err != nil {
		return c, err
	}
	return c, w.insert(&w.callRows, callInsert,
		string(c.ID), nullString(string(c.RunID)), c.Actor, c.Method, nullString(c.Tool), nullOpt(c.JSONRPCID), nullOpt(c.SessionID),
		nullOpt(c.StreamID), nullOpt(c.EventID), nullOpt(c.ProtocolVersion), FormatTime(c.ReceivedAt), nullBytes(c.Arguments),
		string(c.Disposition), nullString(string(c.ExecutionID)), nullString(c.Reason),
		nullString(string(c.Source.Source)), nullInt(c.Source.Line), rec.Seq)
}

// Accept records a new execution in state accepted. Its identity (action,
// fingerprint, contract) is fixed from here on.
func (w *Writer) Accept(e Execution) (Execution, error) {
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
	w.cache(e, true, rec.Seq)
	ent := w.execs[e.ID]
	ent.insertSeq, ent.pending = rec.Seq, true
	return e, w.insertTransition(rec.Seq, Transition{ExecutionID: e.ID, To: StateAccepted, At: e.Times.Accepted, CallID: e.CreatedByCall})
}

// insertExecution adds the projection row of an execution accepted in
// this transaction to the rows flush inserts.
func (w *Writer) insertExecution(ent *execEntry) error {
	e := ent.e
	var window any
	if e.Window.OK {
		window = e.Window.V.Milliseconds()
	}
	return w.insert(&w.execRows, execInsert,
		string(e.ID), e.Actor, e.Tool, string(e.Channel), e.Target, e.Method, e.CredentialRef, string(e.Arguments), e.IntentScope, e.EffectKey(),
		nullString(e.Fingerprint), nullString(e.FingerprintKeyID), nullString(string(e.RunID)), string(e.Contract), string(e.State),
		nullString(string(e.CreatedByCall)), window, nullOpt(e.IdempotencyKey), nullTime(e.Times.Accepted), joinFacts(e.NotRecorded),
		nullString(string(e.Source.Source)), nullInt(e.Source.Line), ent.insertSeq, ent.seq,
		nullTime(e.Times.Authorized), nullTime(e.Times.Rejected), nullTime(e.Times.Dispatched), nullTime(e.Times.Observed),
		nullTime(e.Times.Delivered), nullTime(e.Times.Resolved), nullOptInt(e.TargetStatus), nullOptInt(e.ExitCode),
		nullString(e.ResultRef), nullString(e.Error), nullString(string(e.Outcome)))
}

func (w *Writer) cache(e Execution, dirty bool, seq int64) {
	if w.execs == nil {
		w.execs = map[ExecutionID]*execEntry{}
	}
	ent := w.execs[e.ID]
	if ent == nil {
		ent = &execEntry{}
		w.execs[e.ID] = ent
	}
	ent.e, ent.seq = e, seq
	if dirty && !ent.dirty {
		ent.dirty = true
		w.dirty = append(w.dirty, ent)
	}
}

// maxBulkDirty is how many imported executions may wait for flush.
const maxBulkDirty = 1024

// flush writes the projection rows of executions changed in this
// transaction: several transitions of one execution cost one UPDATE, and
// one accepted in it is inserted once, in its latest state, many rows per
// statement.
func (w *Writer) flush() error {
	for _, ent := range w.dirty {
		if ent.dirty && ent.pending {
			if err := w.insertExecution(ent); err != nil {
				return err
			}
			ent.dirty, ent.pending = false, false
		}
	}
	if err := w.insertRows(&w.execRows); err != nil {
		return err
	}
	for _, ent := range w.dirty {
		if !ent.dirty {
			continue
		}
		e := ent.e
		err := w.exec(`UPDATE executions SET state=?, authorized_at=?, rejected_at=?, dispatched_at=?, observed_at=?, delivered_at=?, resolved_at=?,
			target_status=?, exit_code=?, result_ref=?, error=?, outcome=?, updated_seq=? WHERE id=?`,
			string(e.State), nullTime(e.Times.Authorized), nullTime(e.Times.Rejected), nullTime(e.Times.Dispatched), nullTime(e.Times.Observed),
			nullTime(e.Times.Delivered), nullTime(e.Times.Resolved), nullOptInt(e.TargetStatus), nullOptInt(e.ExitCode),
			nullString(e.ResultRef), nullString(e.Error), nullString(string(e.Outcome)), ent.seq, string(e.ID))
		if err != nil {
			return fmt.Errorf("execution %s: %w", e.ID, err)
		}
		ent.dirty = false
	}
	w.dirty = w.dirty[:0]
	if w.bulk && len(w.execs) > maxBulkCache {
		for id, ent := range w.execs {
			if !ent.dirty {
				delete(w.execs, id)
			}
		}
	}
	return nil
}

// Transition moves an execution to another state, checked against the
// state machine, and returns the execution as it now is.
func (w *Writer) Transition(t Transition) (Execution, error) {
	e, err := w.Execution(t.ExecutionID)
	if err != nil {
		return e, err
	}
	return w.transition(e, t, false)
}

// transition applies t to e (Execution.Apply) and records it. Only an
// operator's resolution (byOperator) settles an outcome as verified or
// rejected_by_operator.
func (w *Writer) transition(e Execution, t Transition, byOperator bool) (Execution, error) {
	if t.At.OK {
		t.At.V = t.At.V.UTC()
	} else if e.Source.IsZero() {
		t.At = Some(w.now) // live records always know when
	}
	if t.From == "" {
		t.From = e.State
	}
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

func (w *Writer) insertTransition(seq int64, t Transition) error {
	return w.insert(&w.transitionRows, transitionInsert,
		seq, string(t.ExecutionID), nullString(string(t.From)), string(t.To), nullTime(t.At), nullOptInt(t.TargetStatus),
		nullOptInt(t.ExitCode), nullString(t.ResultRef), nullString(t.Reason), nullString(string(t.CallID)))
}

// Resolve records an operator's decision about an execution whose outcome
// is unknown or pending verification, and moves it to verified or
// rejected_by_operator. The store seals a checkpoint after the commit.
func (w *Writer) Resolve(r Resolution) (Execution, error) {
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
	if r.At.IsZero() {
		r.At = w.now
	}
	r.At = r.At.UTC()
	rec, err := w.append(KindResolution, r)
	if err != nil {
		return e, err
	}
	if err := w.exec(`INSERT INTO resolutions(seq, execution_id, outcome, operator, note, evidence, at) VALUES (?,?,?,?,?,?,?)`,
		rec.Seq, string(r.ExecutionID), string(r.Outcome), r.Operator, r.Note, nullString(r.Evidence), FormatTime(r.At)); err != nil {
		return e, err
	}
	w.resolved = true
	return w.transition(e, Transition{ExecutionID: e.ID, From: e.State, To: r.Outcome.State(), At: Some(r.At),
		Reason: fmt.Sprintf("%s by %s: %s", r.Outcome, r.Operator, r.Note)}, true)
}

// PutResult stores a target's result content and returns its reference, so
// a retry can be answered without touching the target again.
func (w *Writer) PutResult(content []byte) (string, error) {
	sum := sha256.Sum256(content)
	ref := "sha256:" + hex.EncodeToString(sum[:])
	err := w.exec(`INSERT OR IGNORE INTO results(ref, content, created_at) VALUES (?,?,?)`, ref, content, FormatTime(w.now))
	return ref, err
}

// SetVault locks or unlocks the vault, recording who and why.
func (w *Writer) SetVault(locked bool, operator, reason string) error {
	if operator == "" {
		return errors.New("vault: operator is required")
	}
	ev := VaultEvent{Locked: locked, Operator: operator, Reason: reason, At: w.now}
	if _, err := w.append(KindVault, ev); err != nil {
		return err
	}
	state := "unlocked"
	if locked {
		state = "locked"
	}
	return w.exec(`INSERT INTO meta(key, value) VALUES ('vault', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
		state+" by "+operator+": "+reason)
}

// ImportVault records a vault event another log recorded, with its own
// time. It does not change this database's vault.
func (w *Writer) ImportVault(ev VaultEvent) error {
	if ev.Operator == "" || ev.At.IsZero() {
		return errors.New("vault event: operator and time are required")
	}
	ev.At = ev.At.UTC()
	_, err := w.append(KindVault, ev)
	return err
}

// ImportApproval records an approval exactly as another log recorded it:
// a request, or a decision with its own times. A decision updates the row
// of its request, or creates it when the request is not in this log.
func (w *Writer) ImportApproval(a Approval) error {
	if a.ID == "" || a.RequestedAt.IsZero() {
		return errors.New("approval: id and requested_at are required")
	}
	if a.Kind != ApprovalSession && a.Kind != ApprovalPerUse {
		return fmt.Errorf("approval %s: unknown kind %q", a.ID, a.Kind)
	}
	rec, err := w.append(KindApproval, a)
	if err != nil {
		return err
	}
	var decidedAt, decidedSeq any
	if a.State != ApprovalPending {
		decidedSeq = rec.Seq
		if a.DecidedAt.OK {
			decidedAt = FormatTime(a.DecidedAt.V)
		}
	}
	return w.exec(`INSERT INTO approvals(id, kind, state, execution_id, run_id, actor, tool, credential_ref, summary, requested_at, seq, decided_at, operator, note, decided_seq)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET state = excluded.state, decided_at = excluded.decided_at, operator = excluded.operator, note = excluded.note, decided_seq = excluded.decided_seq`,
		a.ID, string(a.Kind), string(a.State), nullString(string(a.ExecutionID)), nullString(string(a.RunID)), a.Actor, nullString(a.Tool),
		nullString(a.CredentialRef), nullString(a.Summary), FormatTime(a.RequestedAt), rec.Seq, decidedAt, nullString(a.Operator), nullString(a.Note), decidedSeq)
}

// VaultLocked reports whether the vault is locked, and the lock's note.
func (w *Writer) VaultLocked() (bool, string, error) {
	var v string
	err := w.queryRow(`SELECT value FROM meta WHERE key = 'vault'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	return strings.HasPrefix(v, "locked"), v, nil
}

// FindRun returns the newest run of actor identified by the given kind of
// evidence with this value, or nil: an agent that sends the same run id
// after a gateway restart continues the same run.
func (w *Writer) FindRun(actor string, by RunIdentification, evidence string) (*Run, error) {
	var r Run
	var started string
	err := w.queryRow(`SELECT id, started_at FROM runs WHERE actor = ? AND identified_by = ? AND evidence = ? AND ended_at IS NULL
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

// RequestApproval records a pending approval and returns it.
func (w *Writer) RequestApproval(a Approval) (Approval, error) {
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
	return a, w.exec(`INSERT INTO approvals(id, kind, state, execution_id, run_id, actor, tool, credential_ref, summary, requested_at, seq)
		VALUES (?,?,?,?,?,?,?,?,?,?,?)`, a.ID, string(a.Kind), string(a.State), nullString(string(a.ExecutionID)), nullString(string(a.RunID)),
		a.Actor, nullString(a.Tool), nullString(a.CredentialRef), nullString(a.Summary), FormatTime(a.RequestedAt), rec.Seq)
}

// DecideApproval answers a pending approval. Answering one that is no
// longer pending is an error: decisions are final.
func (w *Writer) DecideApproval(id string, state ApprovalState, operator, note string) (Approval, error) {
	a, err := w.Approval(id)
	if err != nil {
		return a, err
	}
	if a.State != ApprovalPending {
		return a, fmt.Errorf("approval %s is already %s", id, a.State)
	}
	if state != ApprovalApproved && state != ApprovalDenied && state != ApprovalExpired {
		return a, fmt.Errorf("approval %s: cannot decide %q", id, state)
	}
	if operator == "" {
		return a, fmt.Errorf("approval %s: operator is required", id)
	}
	a.State, a.DecidedAt, a.Operator, a.Note = state, Some(w.now), operator, note
	rec, err := w.append(KindApproval, a)
	if err != nil {
		return a, err
	}
	if a.Kind == ApprovalSession && state == ApprovalApproved && a.RunID != "" {
		if err := w.AddGrant(Grant{RunID: a.RunID, Scope: "session", GrantedBy: "operator:" + operator}); err != nil {
			return a, err
		}
	}
	return a, w.exec(`UPDATE approvals SET state = ?, decided_at = ?, operator = ?, note = ?, decided_seq = ? WHERE id = ?`,
		string(a.State), FormatTime(w.now), operator, nullString(note), rec.Seq, id)
}

// Approval reads one approval inside the transaction.
func (w *Writer) Approval(id string) (Approval, error) {
	return scanApproval(w.queryRow(approvalSelect+` WHERE id = ?`, id))
}

// PendingApproval returns the pending approval of this kind for a run, if
// any: a second call of the run waits on it instead of asking again.
func (w *Writer) PendingApproval(run RunID, kind ApprovalKind) (*Approval, error) {
	a, err := scanApproval(w.queryRow(approvalSelect+` WHERE run_id = ? AND kind = ? AND state = 'pending' ORDER BY seq DESC LIMIT 1`,
		string(run), string(kind)))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return &a, err
}

// HasGrant reports whether a run holds a grant of this scope.
func (w *Writer) HasGrant(run RunID, scope string) (bool, error) {
	var one int
	err := w.queryRow(`SELECT 1 FROM grants WHERE run_id = ? AND scope = ? LIMIT 1`, string(run), scope).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// LatestMatch returns the newest live (not imported) execution with this
// fingerprint, actor and intent scope, or nil. Called inside the write
// transaction, so no other writer can create a match between this read
// and the caller's decision.
func (w *Writer) LatestMatch(fingerprint, actor, scope string) (*Execution, error) {
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
func (w *Writer) Execution(id ExecutionID) (Execution, error) {
	if ent, ok := w.execs[id]; ok {
		return ent.e, nil
	}
	e, err := scanExecution(w.queryRow(executionSelect+` WHERE id = ?`, string(id)), id)
	if err == nil {
		w.cache(e, false, 0)
	}
	return e, err
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

func joinFacts(fs []Fact) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ",")
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func nullInt(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

func nullOpt(o Opt[string]) any {
	if !o.OK {
		return nil
	}
	return o.V
}

func nullOptInt(o Opt[int]) any {
	if !o.OK {
		return nil
	}
	return o.V
}

func nullTime(o Opt[time.Time]) any {
	if !o.OK {
		return nil
	}
	return FormatTime(o.V)
}

// DecideApproval answers a pending approval in its own transaction: the
// one path the CLI and the console use.
func (s *Store) DecideApproval(ctx context.Context, id string, state ApprovalState, operator, note string) (Approval, error) {
	var a Approval
	_, err := s.Write(ctx, func(w *Writer) error {
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
	_, err := s.Write(ctx, func(w *Writer) error {
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
