package activity

// Batched inserts: rows buffered per table and written many per
// statement.

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// rowsPerInsert is how many rows one INSERT carries at most (the widest
// table, executions, binds 38 values a row; SQLite allows 32,766). An
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
	// The INSERT for n rows, built on first use: [0] SQLite's, [1]
	// PostgreSQL's.
	byRows [2][rowsPerInsert + 1]atomic.Pointer[string]
}

func newInsertSQL(prefix, tuple, kind string, idCol, lineCol int) *insertSQL {
	return &insertSQL{prefix: prefix, tuple: tuple, cols: strings.Count(tuple, "?"), kind: kind, idCol: idCol, lineCol: lineCol}
}

// sqlFor returns the INSERT of n rows (1 to rowsPerInsert): every request
// writes a few rows per table, so the text is built once per count.
//
// On SQLite it is INSERT OR FAIL. A plain INSERT of many rows may stop at
// one, so SQLite keeps a statement journal to undo the rows before it: a
// copy of every page the statement touches (15% of an import's CPU, half
// its system time). A failed insert fails its request or its import,
// which is undone whole anyway, and changes() says at which row it
// stopped (blameRow).
func (q *insertSQL) sqlFor(n int, pg bool) string {
	e, verb := 0, "INSERT OR FAIL"
	if pg {
		e, verb = 1, "INSERT"
	}
	if p := q.byRows[e][n].Load(); p != nil {
		return *p
	}
	text := verb + strings.TrimPrefix(q.prefix, "INSERT") + strings.Repeat(q.tuple+",", n-1) + q.tuple
	q.byRows[e][n].Store(&text)
	return text
}

var (
	logInsert = newInsertSQL(`INSERT INTO audit_log(seq, canonical, leaf_hash, tree_hashes, kind, t) VALUES `, `(?, ?, ?, ?, ?, ?)`,
		"record", 0, -1)
	transitionInsert = newInsertSQL(transitionsTable.insertPrefix(), transitionsTable.tuple(), "transition of", 1, -1)
	callInsert       = newInsertSQL(callsTable.insertPrefix(), callsTable.tuple(), "call", 0, callsTable.col("source_line"))
	execInsert       = newInsertSQL(executionsTable.insertPrefix(), executionsTable.tuple(), "execution", 0, executionsTable.col("source_line"))
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
func (w *Tx) insert(r *rows, q *insertSQL, args ...any) error {
	r.sql = q
	r.args = append(r.args, args...)
	r.n++
	if r.n == rowsPerInsert {
		return w.insertRows(r)
	}
	return nil
}

// insertRows writes the rows r holds in one statement. If it fails (a
// duplicate id, say), the error names the row at fault (blameRow).
func (w *Tx) insertRows(r *rows) error {
	if r.n == 0 {
		return nil
	}
	table, args, n := r.sql, r.args, r.n
	q := table.sqlFor(n, w.s.pg)
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
// On SQLite the insert stopped there (OR FAIL), the rows before it
// written: changes() counts them. Asked of the transaction directly, as
// the next statement: this may run in the bulk inserter's own job.
func (w *Tx) blameRow(table *insertSQL, args []any, n int, err error) error {
	if w.s.pg {
		if re, ok := pgRowBlame(err, table, args, n); ok {
			return re
		}
		return err
	}
	var i int
	if cerr := w.tx.QueryRowContext(w.ctx, `SELECT changes()`).Scan(&i); cerr != nil || i < 0 || i >= n {
		return err
	}
	row := args[i*table.cols : (i+1)*table.cols]
	re := &RowError{Row: fmt.Sprintf("%s %v", table.kind, row[table.idCol]), Err: err}
	if table.lineCol >= 0 {
		re.Line, _ = row[table.lineCol].(int64)
	}
	return re
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
func (w *Tx) insertBuffered() error {
	for _, r := range []*rows{&w.logRows, &w.transitionRows, &w.callRows} {
		if err := w.insertRows(r); err != nil {
			return err
		}
	}
	return nil
}
