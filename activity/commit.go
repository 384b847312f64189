package activity

// Group commit: concurrent writes share one transaction and one fsync.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Write runs fn in a transaction and commits it durably before returning:
// when Write returns nil, every event fn wrote is on disk. If fn returns an
// error nothing it wrote is kept. Writers in other processes wait (BEGIN
// IMMEDIATE plus the busy timeout).
//
// Concurrent Writes share commits: a single committer runs each waiting fn
// in its own savepoint of one transaction and commits once, so sixteen
// callers pay for one fsync instead of sixteen. fn must only touch the
// store through w and must not call Write itself.
func (s *Store) Write(ctx context.Context, fn func(w *Tx) error) ([]Record, error) {
	return s.write(ctx, &writeReq{ctx: ctx, fn: fn, done: make(chan writeResult, 1)})
}

// WriteBulk is Write for a long import: rows are inserted many per
// statement on a goroutine of their own, only the first record appended
// is returned, and the transaction carries this write alone. (Shared with
// others, it would run in a savepoint, whose journal holds in memory the
// original of every page the import changes.)
func (s *Store) WriteBulk(ctx context.Context, fn func(w *Tx) error) ([]Record, error) {
	bulk := func(w *Tx) error {
		w.bulkMode()
		return fn(w)
	}
	return s.write(ctx, &writeReq{ctx: ctx, fn: bulk, bulk: true, done: make(chan writeResult, 1)})
}

// WriteAsync queues fn as Write does and returns at once; the channel
// receives Write's error once the write is committed durably (or
// refused). Writes are committed in the order they were queued, so a
// Write queued after this one returns only once this one is durable too.
// The gateway records an outcome this way: its answer need not wait for
// the fsync, and a crash before it leaves the execution dispatched, which
// recovery turns into unknown.
func (s *Store) WriteAsync(ctx context.Context, fn func(w *Tx) error) <-chan error {
	out := make(chan error, 1)
	// Once queued it is committed whatever becomes of ctx (an HTTP
	// request ends as soon as its answer is written).
	req := &writeReq{ctx: context.WithoutCancel(ctx), fn: fn, lazy: true, done: make(chan writeResult, 1)}
	if err := s.enqueue(ctx, req); err != nil {
		out <- err
		return out
	}
	go func() {
		_, err := s.finish(req.ctx, req)
		out <- err
	}()
	return out
}

func (s *Store) write(ctx context.Context, req *writeReq) ([]Record, error) {
	if err := s.enqueue(ctx, req); err != nil {
		return nil, err
	}
	return s.finish(ctx, req)
}

// enqueue hands a write to the committer.
func (s *Store) enqueue(ctx context.Context, req *writeReq) error {
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.writes <- req:
		return nil
	case <-s.closing:
		return ErrClosed
	}
}

// finish waits for a queued write's commit, then seals if one is due.
func (s *Store) finish(ctx context.Context, req *writeReq) ([]Record, error) {
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
	fn   func(*Tx) error
	bulk bool // WriteBulk: committed alone
	lazy bool // WriteAsync: no caller waits on it
	done chan writeResult
}

type writeResult struct {
	records  []Record
	resolved bool
	err      error
	// broken: the request failed and its savepoint could not be undone
	// or released, so what it wrote may still be in the transaction:
	// the whole batch is rolled back.
	broken bool
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
		if !first.bulk {
			batch, next = s.drain(batch)
			if next == nil && lazyOnly(batch) {
				batch, next = s.linger(batch)
			}
		}
		s.commitBatch(batch)
		s.resetWAL()
	}
}

// drain adds to batch the writes already waiting, up to maxBatch; a bulk
// write met on the way is returned to go alone, next.
func (s *Store) drain(batch []*writeReq) ([]*writeReq, *writeReq) {
	for len(batch) < maxBatch {
		select {
		case req := <-s.writes:
			if req.bulk {
				return batch, req
			}
			batch = append(batch, req)
		default:
			return batch, nil
		}
	}
	return batch, nil
}

// lazyLinger is how long a batch no caller waits on (outcomes queued
// behind their answers) waits for a write someone does wait on. An agent
// that got its answer sends its next call about then, and the two share
// one fsync instead of the next call's first write waiting behind the
// outcome's own.
const lazyLinger = 2 * time.Millisecond

// linger waits up to lazyLinger for a write a caller waits on, then adds
// it and whatever else is waiting to the batch.
func (s *Store) linger(batch []*writeReq) ([]*writeReq, *writeReq) {
	t := time.NewTimer(lazyLinger)
	defer t.Stop()
	for len(batch) < maxBatch {
		select {
		case req := <-s.writes:
			if req.bulk {
				return batch, req
			}
			batch = append(batch, req)
			if !req.lazy {
				return s.drain(batch)
			}
		case <-t.C:
			return batch, nil
		case <-s.closing:
			return batch, nil
		}
	}
	return batch, nil
}

// lazyOnly reports whether no caller waits on any write of batch.
func lazyOnly(batch []*writeReq) bool {
	for _, req := range batch {
		if !req.lazy {
			return false
		}
	}
	return true
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
	bg := s.hard
	cached := !s.pg && !batch[0].bulk // a bulk write goes alone
	if !cached {
		s.wc.drop()
	}
	committed := false
	defer func() {
		if !committed {
			s.wc.drop() // what it staged, and what it may have changed
		}
	}()
	tx, err := s.w.BeginTx(bg, nil)
	if err != nil {
		for i := range results {
			results[i].err = fmt.Errorf("begin write: %w", err)
		}
		answer()
		return
	}
	defer tx.Rollback()
	if err := s.lockWrites(bg, tx); err != nil {
		for i := range results {
			results[i].err = err
		}
		answer()
		return
	}
	chain := &Tx{s: s, tx: tx, ctx: bg} // carries head, next and edge between requests
	if cached {
		s.wc.begin(s, tx)
		chain.shared = &s.wc
	}
	kept := 0
	for i, req := range batch {
		if err := req.ctx.Err(); err != nil {
			results[i].err = err
			continue
		}
		results[i] = s.runOne(tx, chain, req, i, len(batch) == 1)
		if results[i].broken {
			for j := range results {
				if j != i {
					results[j] = writeResult{err: fmt.Errorf("not written: the batch it shared was rolled back (%w)", results[i].err)}
				}
			}
			answer()
			return
		}
		if results[i].err == nil {
			kept++
		}
	}
	if kept > 0 {
		if s.pg && decided(results) {
			// Delivered at commit, to every store that LISTENs.
			if _, err := tx.Exec(`SELECT pg_notify('` + notifyChannel + `', '')`); err != nil {
				for i := range results {
					if results[i].err == nil {
						results[i] = writeResult{err: fmt.Errorf("notify: %w", err)}
					}
				}
				answer()
				return
			}
		}
		if err := tx.Commit(); err != nil {
			for i := range results {
				if results[i].err == nil {
					results[i] = writeResult{err: fmt.Errorf("commit: %w", err)}
				}
			}
			answer()
			return
		}
		committed = true
		if cached {
			s.wc.commit(s)
		}
		s.afterCommit(chain)
		if decided(results) {
			s.signal()
		}
	}
	answer()
}

// runOne runs one request inside a savepoint of the batch transaction and
// carries the chain state forward only if it succeeds.
func (s *Store) runOne(tx *sql.Tx, chain *Tx, req *writeReq, i int, alone bool) writeResult {
	// A request alone in its batch needs no savepoint: on error the whole
	// transaction is rolled back. Savepoints copy every page they touch.
	sp := fmt.Sprintf("w%d", i)
	if !alone {
		if err := s.execIn(tx, "SAVEPOINT "+sp); err != nil {
			return writeResult{err: fmt.Errorf("savepoint: %w", err)}
		}
	}
	// Statements must not see the caller's cancellation: SQLite answers an
	// interrupted write by rolling back the whole transaction, which here
	// holds other callers' writes too.
	w := &Tx{s: s, tx: tx, ctx: context.WithoutCancel(req.ctx), now: s.Now().UTC(),
		head: chain.head, next: chain.next, edge: chain.edge, loaded: chain.loaded, shared: chain.shared}
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
			return writeResult{err: errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rerr)), broken: true}
		}
		tx.Exec("RELEASE " + sp)
		return writeResult{err: err}
	}
	if !alone {
		if err := s.execIn(tx, "RELEASE "+sp); err != nil {
			return writeResult{err: fmt.Errorf("release savepoint: %w", err), broken: true}
		}
	}
	chain.head, chain.next, chain.edge, chain.loaded = w.head, w.next, w.edge, w.loaded
	if w.shared != nil {
		w.shared.stage(w)
	}
	chain.runs = append(chain.runs, w.runs...)
	if len(w.records) > 0 {
		chain.records = append(chain.records, w.records[0])
	}
	return writeResult{records: w.records, resolved: w.resolved}
}

// execIn runs a statement of the committer's own (a savepoint's) in tx,
// prepared once on SQLite: a batch of sixteen writes runs 32 of them,
// and parsing each cost more than running it.
func (s *Store) execIn(tx *sql.Tx, query string) error {
	if !s.pg {
		if stmt := s.prepared(query); stmt != nil {
			_, err := tx.Stmt(stmt).Exec()
			return err
		}
	}
	_, err := tx.Exec(query)
	return err
}

// decided reports whether a batch carries an operator's decision.
func decided(results []writeResult) bool {
	for _, r := range results {
		if r.err == nil && r.resolved {
			return true
		}
	}
	return false
}

// afterCommit updates what this process caches about the log.
func (s *Store) afterCommit(chain *Tx) {
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
