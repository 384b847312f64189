package activity

// The table check: every projection row of a snapshot compared with what
// its log implies (replay.go). The fast path compares one keyed digest per
// table, so it needs neither sorting nor memory per row; only a table
// whose digest differs is read again, row by row, to name what changed.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"math"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Problem codes of the table check.
const (
	ProblemChanged   = "row_changed"      // a row differs from what the log implies
	ProblemMissing   = "row_missing"      // the log implies a row the table lacks
	ProblemExtra     = "row_extra"        // a row no record explains
	ProblemResult    = "result_content"   // a stored result whose content is not its sha256 reference
	ProblemUnapplied = "record_unapplied" // a log record the model refuses, so no writer wrote it
	ProblemIndex     = "index_mismatch"   // an index holds other entries than its table's rows
)

// TableProblem is one difference between a table and the log.
type TableProblem struct {
	Table   string `json:"table"`
	Row     string `json:"row"`
	Seq     int64  `json:"seq"` // the log record the row should match; -1: none
	Code    string `json:"code"`
	Message string `json:"message"`
}

// TableReport is what the table check found.
type TableReport struct {
	Records  int64          `json:"records"` // log records replayed (the snapshot's size)
	Rows     int64          `json:"rows"`    // table rows compared
	Tables   []string       `json:"tables"`
	Problems []TableProblem `json:"problems"`
	Omitted  int            `json:"problems_omitted"`
}

// maxTableProblems bounds what a report keeps; the count goes on.
const maxTableProblems = 200

// maxDetailed is how many changed rows are read again column by column.
const maxDetailed = 50

// rowDigest is an order-free digest of a set of rows: the count and two
// sums of 64-bit hashes under seeds drawn for this check. A writer with
// the database cannot aim an edit at a sum whose seeds it never sees; the
// log itself is proven by SHA-256 and signatures, not by this.
type rowDigest struct {
	rows uint64
	a, b uint64
}

func (g *rowDigest) add(h *hasher, encoded []byte) {
	g.rows++
	g.a += maphash.Bytes(h.seedA, encoded)
	g.b += maphash.Bytes(h.seedB, encoded)
}

type hasher struct {
	seedA, seedB maphash.Seed
	buf          []byte
}

func newHasher(seedA, seedB maphash.Seed) *hasher { return &hasher{seedA: seedA, seedB: seedB} }

// sum hashes one row of values as SQLite hands them over (string, []byte,
// int64, float64, nil) or as argsRow builds them: the same bytes hashRow
// writes for the row the log implies.
func (h *hasher) sum(vals []any) (uint64, uint64) {
	b := h.buf[:0]
	for _, v := range vals {
		b = appendValue(b, v)
	}
	h.buf = b
	return maphash.Bytes(h.seedA, b), maphash.Bytes(h.seedB, b)
}

// The encoding of a row for its hash: a tag per value, then the value.
const (
	tagNull  = 0
	tagInt   = 1
	tagText  = 2
	tagFloat = 3
)

func appendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, tagNull)
	case int64:
		return appendInt(b, x)
	case string:
		return appendText(b, x)
	case []byte:
		return appendText(b, x)
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat), math.Float64bits(x))
	}
	return appendText(b, fmt.Sprint(v)) // no other type reaches a table
}

func appendInt(b []byte, n int64) []byte {
	return binary.LittleEndian.AppendUint64(append(b, tagInt), uint64(n))
}

func appendText[S string | []byte](b []byte, s S) []byte {
	return append(binary.AppendUvarint(append(b, tagText), uint64(len(s))), s...)
}

// hashRow builds a row straight into its hash encoding: replay hashes a
// million rows, and boxing each value first cost a third of its time.
type hashRow struct {
	buf, tmp []byte
}

func (h *hashRow) str(s string) { h.buf = appendText(h.buf, s) }
func (h *hashRow) strOrNull(s string) {
	if s == "" {
		h.null()
	} else {
		h.str(s)
	}
}
func (h *hashRow) int(n int64) { h.buf = appendInt(h.buf, n) }
func (h *hashRow) intOrNull(n int64) {
	if n == 0 {
		h.null()
	} else {
		h.int(n)
	}
}
func (h *hashRow) optInt(o Opt[int]) {
	if o.OK {
		h.int(int64(o.V))
	} else {
		h.null()
	}
}
func (h *hashRow) optStr(o Opt[string]) {
	if o.OK {
		h.str(o.V)
	} else {
		h.null()
	}
}
func (h *hashRow) time(t time.Time) {
	h.tmp = appendModelTime(h.tmp[:0], t)
	h.buf = appendText(h.buf, h.tmp)
}
func (h *hashRow) optTime(o Opt[time.Time]) {
	if o.OK {
		h.time(o.V)
	} else {
		h.null()
	}
}
func (h *hashRow) null() { h.buf = append(h.buf, tagNull) }

// digestSink sums the rows replay finishes, per table.
type digestSink struct {
	h   *hasher
	row hashRow
	per map[*table]*rowDigest
}

func (d *digestSink) begin(*table) rowBuilder {
	d.row.buf = d.row.buf[:0]
	return &d.row
}

func (d *digestSink) end(t *table) { d.per[t].add(d.h, d.row.buf) }

func newDigestSink(h *hasher) *digestSink {
	d := &digestSink{h: h, per: map[*table]*rowDigest{}}
	for _, t := range checkedTables {
		d.per[t] = &rowDigest{}
	}
	return d
}

// Snapshot is one consistent read of a store: every table and the log as
// of one commit (a read transaction; SQLite's WAL keeps it stable while a
// gateway goes on writing).
type Snapshot struct {
	tx   *sql.Tx
	Size int64 // log records it holds
	pg   bool
}

// Snapshot begins a read transaction and fixes it with a first read.
func (s *Store) Snapshot(ctx context.Context) (*Snapshot, error) {
	tx, err := s.r.BeginTx(ctx, s.readTx())
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	sn := &Snapshot{tx: tx, pg: s.pg}
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq)+1, 0) FROM audit_log`).Scan(&sn.Size); err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return sn, nil
}

// Close ends the read transaction.
func (sn *Snapshot) Close() error { return sn.tx.Rollback() }

// scan calls fn with every row of t (columns in row order). vals is reused.
func (sn *Snapshot) scan(ctx context.Context, t *table, fn func(vals []any) error) error {
	q := t.selectSQL()
	rows, err := sn.tx.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("read %s: %w", t.name, err)
	}
	defer rows.Close()
	vals := make([]any, len(t.cols))
	ptrs := make([]any, len(t.cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("read %s: %w", t.name, err)
		}
		if err := fn(vals); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ScanLog streams the snapshot's records in order; the bytes passed to fn
// are valid only during the call.
func (sn *Snapshot) ScanLog(ctx context.Context, fn func(seq int64, canonical []byte) error) error {
	rows, err := sn.tx.QueryContext(ctx, `SELECT seq, canonical FROM audit_log ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var canonical sql.RawBytes
		if err := rows.Scan(&seq, &canonical); err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		if err := fn(seq, canonical); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Checkpoints are the snapshot's stored checkpoints, unverified, by size.
func (sn *Snapshot) Checkpoints(ctx context.Context) ([]StoredCheckpoint, error) {
	return readCheckpoints(ctx, sn.tx, -1)
}

// tableScan is what reading the tables found: their digests, the refs of
// the stored results, and problems found on the way (a result whose
// content is not its reference).
type tableScan struct {
	per      map[*table]*rowDigest
	results  []string
	problems []TableProblem
	rows     int64
	err      error
}

func (sn *Snapshot) scanTables(ctx context.Context, h *hasher) tableScan {
	out := tableScan{per: map[*table]*rowDigest{}}
	for _, t := range checkedTables {
		g := &rowDigest{}
		out.per[t] = g
		out.err = sn.scan(ctx, t, func(vals []any) error {
			buf := h.buf[:0]
			for _, v := range vals {
				buf = appendValue(buf, v)
			}
			h.buf = buf
			g.add(h, buf)
			return nil
		})
		if out.err != nil {
			return out
		}
		out.rows += int64(g.rows)
	}
	out.err = sn.scan(ctx, resultsTable, func(vals []any) error {
		ref, _ := vals[0].(string)
		content := asBytes(vals[1])
		sum := sha256.Sum256(content)
		if ref != "sha256:"+hex.EncodeToString(sum[:]) {
			out.problems = append(out.problems, TableProblem{Table: "results", Row: ref, Seq: -1, Code: ProblemResult,
				Message: fmt.Sprintf("results row %s holds %d bytes whose sha256 is %x…: a retry would receive content nobody stored", display(ref), len(content), sum[:6])})
		}
		out.results = append(out.results, ref)
		out.rows++
		return nil
	})
	return out
}

func asBytes(v any) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	return nil
}

// TableCheck compares a snapshot's tables with its log. Feed it the log's
// records in order with Add (the verifier reading the log anyway hands
// them over); the tables are read meanwhile on the snapshot.
type TableCheck struct {
	snap    *Snapshot
	ctx     context.Context
	seedA   maphash.Seed
	seedB   maphash.Seed
	want    *digestSink
	replay  *replay
	batches chan *recordBatch
	free    chan *recordBatch
	cur     *recordBatch
	done    sync.WaitGroup
	scanned chan tableScan
	fed     int64
}

type recordBatch struct {
	seqs  []int64
	recs  [][]byte
	arena []byte
}

// StartTableCheck begins reading the snapshot's tables.
func (sn *Snapshot) StartTableCheck(ctx context.Context) *TableCheck {
	c := &TableCheck{snap: sn, ctx: ctx, seedA: maphash.MakeSeed(), seedB: maphash.MakeSeed(),
		batches: make(chan *recordBatch, 4), free: make(chan *recordBatch, 6), scanned: make(chan tableScan, 1)}
	c.want = newDigestSink(newHasher(c.seedA, c.seedB))
	c.replay = newReplay(c.want)
	for range cap(c.free) {
		c.free <- &recordBatch{}
	}
	c.cur = <-c.free
	go func() { c.scanned <- sn.scanTables(ctx, newHasher(c.seedA, c.seedB)) }()
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		for b := range c.batches {
			for i, seq := range b.seqs {
				c.replay.add(seq, b.recs[i])
			}
			b.seqs, b.recs, b.arena = b.seqs[:0], b.recs[:0], b.arena[:0]
			c.free <- b
		}
	}()
	return c
}

// Add replays one log record; records at or past the snapshot's size (a
// writer appended them after it was taken) are not its tables' business.
func (c *TableCheck) Add(seq int64, canonical []byte) {
	if seq >= c.snap.Size || seq < c.fed {
		return // out of order: the verifier reports it
	}
	c.fed = seq + 1 // past a gap the verifier reports, replay goes on
	b := c.cur
	if need := len(b.arena) + len(canonical); need > cap(b.arena) {
		// Earlier slices keep pointing into the old arena, alive until
		// the batch is replayed.
		b.arena = make([]byte, 0, max(2*cap(b.arena), need, 256<<10))
	}
	start := len(b.arena)
	b.arena = append(b.arena, canonical...)
	b.seqs = append(b.seqs, seq)
	b.recs = append(b.recs, b.arena[start:len(b.arena):len(b.arena)])
	if len(b.seqs) == 512 {
		c.batches <- b
		c.cur = <-c.free
	}
}

// Finish waits for the replay and the table reads, compares them and,
// for a table that differs, finds its rows.
func (c *TableCheck) Finish() (*TableReport, error) {
	if len(c.cur.seqs) > 0 {
		c.batches <- c.cur
	}
	close(c.batches)
	c.done.Wait()
	got := <-c.scanned
	if got.err != nil {
		return nil, got.err
	}
	p := c.replay
	rep := &TableReport{Records: p.records, Rows: got.rows}
	p.finish()
	rep.add(p.problems...)
	rep.add(got.problems...)
	stored := map[string]bool{}
	for _, ref := range got.results {
		stored[ref] = true
		if _, named := p.refs[ref]; !named {
			rep.add(TableProblem{Table: "results", Row: ref, Seq: -1, Code: ProblemExtra,
				Message: fmt.Sprintf("results row %s is named by no record in the log", display(ref))})
		}
	}
	for _, ref := range sortedKeys(p.refs) {
		if p.refs[ref] && !stored[ref] {
			rep.add(TableProblem{Table: "results", Row: ref, Seq: -1, Code: ProblemMissing,
				Message: fmt.Sprintf("results row %s is missing: a live execution's answer names it", display(ref))})
		}
	}
	for _, t := range checkedTables {
		rep.Tables = append(rep.Tables, t.name)
		if *got.per[t] == *c.want.per[t] {
			continue
		}
		found, err := c.snap.diagnose(c.ctx, t, c.seedA, c.seedB)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 { // the digests differ, so something does
			found = []TableProblem{{Table: t.name, Seq: -1, Code: ProblemChanged,
				Message: fmt.Sprintf("%s differs from what the log implies (%d rows, the log implies %d)", t.name, got.per[t].rows, c.want.per[t].rows)}}
		}
		rep.add(found...)
	}
	rep.Tables = append(rep.Tables, resultsTable.name)
	if !c.snap.pg {
		rowsOf := map[string]int64{}
		for _, t := range checkedTables {
			if t.from == "" { // the table read whole
				rowsOf[t.name] = int64(got.per[t].rows)
			}
		}
		found, err := c.snap.checkIndexes(c.ctx, rowsOf)
		if err != nil {
			return nil, err
		}
		rep.add(found...)
	}
	return rep, nil
}

// partialWhere is a partial index's condition in its CREATE INDEX text.
var partialWhere = regexp.MustCompile(`(?is)\)\s*WHERE\s+(.+)$`)

// checkIndexes counts every index's entries against the rows of its
// table that belong in it (SQLite). The rows are what the table check
// compares with the log, but readers find them through indexes: an index
// rebuilt without a row (writable_schema) made analyze drop a suspect and
// say "verified". A count catches an entry missing or extra, not one
// whose key was edited in place (PRAGMA integrity_check does). rowsOf is
// what the table check's scan counted, so only a partial index's rows
// are counted again; audit_log's vault index is a checked table itself.
func (sn *Snapshot) checkIndexes(ctx context.Context, rowsOf map[string]int64) ([]TableProblem, error) {
	rows, err := sn.tx.QueryContext(ctx, `SELECT name, tbl_name, COALESCE(sql, '') FROM sqlite_master WHERE type = 'index' AND tbl_name <> 'audit_log' ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read indexes: %w", err)
	}
	type index struct{ name, table, where string }
	var idx []index
	for rows.Next() {
		var x index
		var text string
		if err := rows.Scan(&x.name, &x.table, &text); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read indexes: %w", err)
		}
		x.where = "1"
		if m := partialWhere.FindStringSubmatch(text); m != nil {
			x.where = m[1]
		}
		idx = append(idx, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read indexes: %w", err)
	}
	var out []TableProblem
	for _, x := range idx {
		var inIndex, inTable int64
		q := func(how string) string {
			return fmt.Sprintf(`SELECT count(*) FROM %q %s WHERE %s`, x.table, how, x.where)
		}
		if err := sn.tx.QueryRowContext(ctx, q(fmt.Sprintf("INDEXED BY %q", x.name))).Scan(&inIndex); err != nil {
			return nil, fmt.Errorf("count index %s: %w", x.name, err)
		}
		if n, ok := rowsOf[x.table]; ok && x.where == "1" {
			inTable = n
		} else if err := sn.tx.QueryRowContext(ctx, q("NOT INDEXED")).Scan(&inTable); err != nil {
			return nil, fmt.Errorf("count %s: %w", x.table, err)
		}
		if inIndex != inTable {
			out = append(out, TableProblem{Table: x.table, Row: x.name, Seq: -1, Code: ProblemIndex, Message: fmt.Sprintf(
				"index %s of %s holds %d entries, the table %d rows that belong in it: the index was altered behind the database's back (readers that use it miss rows, or see rows that are gone); REINDEX %s rebuilds it",
				x.name, x.table, inIndex, inTable, x.name)})
		}
	}
	return out, nil
}

func (r *TableReport) add(ps ...TableProblem) {
	for _, p := range ps {
		if len(r.Problems) >= maxTableProblems {
			r.Omitted++
			continue
		}
		r.Problems = append(r.Problems, p)
	}
}

// keyedSink keeps, for one table, each expected row's hash by its key.
type keyedSink struct {
	t    *table
	h    *hasher
	args argsRow
	rows map[string]keyedRow
	keep map[string][]any // rows kept whole, for the keys asked
}

func (k *keyedSink) begin(*table) rowBuilder {
	k.args.vals = k.args.vals[:0]
	return &k.args
}

func (k *keyedSink) end(t *table) { k.row(t, k.args.vals) }

type keyedRow struct {
	a, b uint64
	seq  int64
}

func (k *keyedSink) row(t *table, vals []any) {
	if t != k.t {
		return
	}
	key := keyText(vals[t.key])
	if k.keep != nil {
		if _, ok := k.keep[key]; ok {
			k.keep[key] = append([]any(nil), vals...)
		}
		return
	}
	a, b := k.h.sum(vals)
	k.rows[key] = keyedRow{a, b, rowSeq(t, vals)}
}

func keyText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return fmt.Sprint(v)
}

// rowSeq is the log record a row should match: the latest that changed
// it where later records may (an execution's last transition, an
// approval's decision), else the one that created it.
func rowSeq(t *table, vals []any) int64 {
	for _, c := range []string{"updated_seq", "decided_seq"} {
		for i, name := range t.cols {
			if name == c {
				if n, ok := vals[i].(int64); ok {
					return n
				}
			}
		}
	}
	if t.seqCol >= 0 {
		if n, ok := vals[t.seqCol].(int64); ok {
			return n
		}
	}
	return -1
}

// diagnose replays the log again, keeping table t's rows by key, and
// compares them with the table row by row: missing, extra and changed
// rows, and for the first changed ones which columns.
func (sn *Snapshot) diagnose(ctx context.Context, t *table, seedA, seedB maphash.Seed) ([]TableProblem, error) {
	want := &keyedSink{t: t, h: newHasher(seedA, seedB), rows: map[string]keyedRow{}}
	if err := sn.replayInto(ctx, want); err != nil {
		return nil, err
	}
	h := newHasher(seedA, seedB)
	var out []TableProblem
	changed := map[string][]any{}
	err := sn.scan(ctx, t, func(vals []any) error {
		key := keyText(vals[t.key])
		w, ok := want.rows[key]
		switch {
		case !ok:
			out = append(out, TableProblem{Table: t.name, Row: key, Seq: -1, Code: ProblemExtra,
				Message: fmt.Sprintf("%s row %s is in no log record", t.name, display(key))})
			return nil
		case w.seq == -2:
			out = append(out, TableProblem{Table: t.name, Row: key, Seq: -1, Code: ProblemExtra,
				Message: fmt.Sprintf("%s row %s appears twice", t.name, display(key))})
			return nil
		}
		if a, b := h.sum(vals); a != w.a || b != w.b {
			if len(changed) < maxDetailed {
				changed[key] = append([]any(nil), vals...)
			} else {
				out = append(out, TableProblem{Table: t.name, Row: key, Seq: w.seq, Code: ProblemChanged,
					Message: fmt.Sprintf("%s row %s differs from log record %d", t.name, display(key), w.seq)})
			}
		}
		want.rows[key] = keyedRow{seq: -2} // seen
		return nil
	})
	if err != nil {
		return nil, err
	}
	for key, w := range want.rows {
		if w.seq != -2 {
			out = append(out, TableProblem{Table: t.name, Row: key, Seq: w.seq, Code: ProblemMissing,
				Message: fmt.Sprintf("%s row %s is missing: log record %d implies it", t.name, display(key), w.seq)})
		}
	}
	slices.SortFunc(out, func(a, b TableProblem) int { return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Row, b.Row)) })
	if len(changed) == 0 {
		return out, nil
	}
	keep := &keyedSink{t: t, keep: map[string][]any{}}
	for key := range changed {
		keep.keep[key] = nil
	}
	if err := sn.replayInto(ctx, keep); err != nil {
		return nil, err
	}
	for _, key := range sortedKeys(changed) {
		got := changed[key]
		wantRow := keep.keep[key]
		out = append(out, TableProblem{Table: t.name, Row: key, Seq: rowSeq(t, wantRow), Code: ProblemChanged,
			Message: fmt.Sprintf("%s row %s differs from log record %d: %s", t.name, display(key), rowSeq(t, wantRow), columnDiff(t, got, wantRow))})
	}
	return out, nil
}

// replayInto replays the snapshot's log into sink.
func (sn *Snapshot) replayInto(ctx context.Context, sink rowSink) error {
	p := newReplay(sink)
	err := sn.ScanLog(ctx, func(seq int64, canonical []byte) error {
		p.add(seq, canonical)
		return nil
	})
	if err != nil {
		return err
	}
	p.finish()
	return nil
}

// columnDiff names the columns where a row differs from the log's.
func columnDiff(t *table, got, want []any) string {
	var out string
	h := newHasher(maphash.MakeSeed(), maphash.MakeSeed())
	for i, c := range t.cols {
		if want == nil {
			break
		}
		ga, _ := h.sum(got[i : i+1])
		wa, _ := h.sum(want[i : i+1])
		if ga == wa {
			continue
		}
		if out != "" {
			out += "; "
		}
		out += fmt.Sprintf("%s is %s, the log says %s", c, shown(got[i]), shown(want[i]))
	}
	if out == "" {
		out = "a value's type differs"
	}
	return out
}

// shown renders a value for a message: quoted (so control characters are
// escaped, never sent to a terminal raw) and cut short.
func shown(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case int64, int:
		return fmt.Sprint(x)
	}
	return display(keyText(v))
}

// display quotes s for a message, at most 80 runes of it.
func display(s string) string {
	if utf8.RuneCountInString(s) > 80 {
		r := []rune(s)
		return strconv.Quote(string(r[:80])) + "…"
	}
	return strconv.Quote(s)
}

// CheckTables compares the store's tables with its log on a snapshot of
// its own, reading the log itself (audit verify shares its read instead).
func (s *Store) CheckTables(ctx context.Context) (*TableReport, error) {
	sn, err := s.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer sn.Close()
	c := sn.StartTableCheck(ctx)
	err = s.ScanLog(ctx, 0, func(seq int64, canonical, _ []byte) error {
		c.Add(seq, canonical)
		return nil
	})
	if err != nil {
		c.Finish()
		return nil, err
	}
	return c.Finish()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
