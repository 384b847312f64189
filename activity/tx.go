package activity

// Tx, the store's write transaction, and its SQL plumbing: statements on
// the transaction, bulk mode, and the NULL helpers the tables share.

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// ErrReadOnly is returned when writing to a store opened read-only.
var ErrReadOnly = errors.New("store is read-only")

// Tx is one write transaction of the store (Store.Write hands it to its
// function). Each method validates an event against the model, appends it
// to the log and updates the tables, so the log and the tables cannot
// disagree; reads through it see the transaction's own writes.
type Tx struct {
	s       *Store
	tx      *sql.Tx
	ctx     context.Context
	now     time.Time
	head    tlog.Hash
	next    int64 // seq of the next record
	edge    Edge  // right edge of the tree, read through to the stored tree hashes
	loaded  bool
	records []Record
	// resolved: an operator's decision was written (a resolution, the
	// vault, an approval's answer): seal right after the commit, so the
	// gateway's check of it (prove.go) never rests on an unsigned last
	// record, which nothing after it yet commits to.
	resolved bool
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
	// shared is the committer's cache (writercache.go), or nil (PostgreSQL,
	// bulk). vaultState is the vault state this request proved or set;
	// vaultMoved, that it appended a vault record.
	shared     *writerCache
	vaultState *vaultState
	vaultMoved bool
}

// Appended is how many records this writer has appended.
func (w *Tx) Appended() int64 { return w.appended }

// maxBulkCache is how many clean executions a bulk writer keeps cached.
const maxBulkCache = 4096

// bulkMode switches the transaction to bulk mode for a long import: WriteBulk
// returns only the first record appended, and executions not changed
// since the last flush leave the cache.
func (w *Tx) bulkMode() {
	if !w.bulk {
		w.bulk = true
		w.ins = newInserter()
	}
}

// Sync writes every row the transaction holds and waits for them: an error
// about one of them (a duplicate id, say) surfaces here rather than when
// the transaction ends. Write calls it after fn.
func (w *Tx) Sync() error {
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
func (w *Tx) endBulk() error {
	if w.ins == nil {
		return nil
	}
	err := w.ins.stop()
	w.ins = nil
	return err
}

// Records returns the records this transaction has appended so far.
func (w *Tx) Records() []Record { return w.records }

// Now is the time the transaction started, used for records that do not
// carry their own time.
func (w *Tx) Now() time.Time { return w.now }

// exec runs a statement after any inserts queued before it.
func (w *Tx) exec(query string, args ...any) error {
	if w.ins != nil {
		if err := w.ins.sync(); err != nil {
			return err
		}
	}
	return w.execNow(query, args...)
}

func (w *Tx) execNow(query string, args ...any) error {
	if stmt := w.stmt(query); stmt != nil {
		_, err := stmt.ExecContext(w.ctx, args...)
		return err
	}
	_, err := w.tx.ExecContext(w.ctx, query, args...)
	return err
}

// queryRow runs a query after any inserts queued before it, so it sees
// them. Should one have failed, the write fails when it ends (Sync).
func (w *Tx) queryRow(query string, args ...any) *sql.Row {
	if w.ins != nil {
		w.ins.sync()
	}
	if stmt := w.stmt(query); stmt != nil {
		return stmt.QueryRowContext(w.ctx, args...)
	}
	return w.tx.QueryRowContext(w.ctx, query, args...)
}

// query runs a query returning rows, after any inserts queued before it,
// through the writer's prepared statement once there is one.
func (w *Tx) query(query string, args ...any) (*sql.Rows, error) {
	if w.ins != nil {
		if err := w.ins.sync(); err != nil {
			return nil, err
		}
	}
	if stmt := w.stmt(query); stmt != nil {
		return stmt.QueryContext(w.ctx, args...)
	}
	return w.tx.QueryContext(w.ctx, query, args...)
}

// stmt is query prepared for this transaction (the bulk writer's own, or
// the writer connection's bound to it), or nil the first time: run it
// unprepared then.
func (w *Tx) stmt(query string) *sql.Stmt {
	if stmt := w.txStmt(query); stmt != nil {
		return stmt
	}
	if stmt := w.s.prepared(query); stmt != nil {
		return w.tx.StmtContext(w.ctx, stmt)
	}
	return nil
}

// txStmt returns, for a bulk writer, query prepared on its transaction:
// one import is one long transaction, and re-parsing SQL for every record
// would cost more than the inserts. Others get nil.
func (w *Tx) txStmt(query string) *sql.Stmt {
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

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}
