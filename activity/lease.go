package activity

// Leases: every gateway replica holds one while it lives. An execution
// records the replica that took it in hand (Execution.Replica); when a
// replica's lease runs out unrenewed, another claims it, once, under the
// write lock, and recovers that replica's executions as a restart would.
// Renewals do not take the write lock (a long import holding it must not
// let a live replica's lease lapse); a claim and a renewal of the same
// lease are ordered by the row itself, so exactly one of them wins.
// Times are the database's clock, so replicas on hosts whose clocks
// disagree still agree on when a lease ran out.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// ErrLeaseLost says this replica's lease was claimed by another replica,
// which recovered its executions: it must not dispatch anything more.
var ErrLeaseLost = errors.New("this gateway replica's lease ran out and another replica recovered its executions")

// Lease is a replica's lease, as its holder knows it.
type Lease struct {
	ID   string        // the replica, unique to one process's life
	Name string        // the configured name, or the host name
	TTL  time.Duration // how long it lasts unrenewed
}

// LeaseInfo is a replica's lease as the store holds it.
type LeaseInfo struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	PID         int       `json:"pid"`
	StartedAt   time.Time `json:"started_at"`
	Expires     time.Time `json:"expires"` // by the database's clock
	Ended       bool      `json:"ended"`   // shut down cleanly
	RecoveredBy string    `json:"recovered_by,omitempty"`
}

// nowMS is the SQL for the database's clock in milliseconds since 1970.
func (s *Store) nowMS() string {
	if s.pg {
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
}

// opsDB is where operational rows (event streams, a new lease) are
// written outside the write lock.
func (s *Store) opsDB() *sql.DB {
	if s.ops != nil {
		return s.ops
	}
	return s.w
}

// renewDB is where leases are renewed: on PostgreSQL a connection of its
// own, so a renewal never queues behind streams' writes.
func (s *Store) renewDB() *sql.DB {
	if s.renew != nil {
		return s.renew
	}
	return s.w
}

// StartLease records a new replica whose lease runs out ttl from now.
func (s *Store) StartLease(ctx context.Context, name string, ttl time.Duration) (Lease, error) {
	if s.opts.ReadOnly {
		return Lease{}, ErrReadOnly
	}
	if ttl <= 0 {
		return Lease{}, fmt.Errorf("lease ttl %v: must be positive", ttl)
	}
	if name == "" {
		name, _ = os.Hostname()
	}
	l := Lease{ID: newID("gw", s.Now()), Name: name, TTL: ttl}
	_, err := s.opsDB().ExecContext(ctx, `INSERT INTO replicas(id, name, pid, started_at, renewed_ms, expires_ms)
		VALUES (?, ?, ?, ?, `+s.nowMS()+`, `+s.nowMS()+` + ?)`, l.ID, name, os.Getpid(), FormatTime(s.Now()), ttl.Milliseconds())
	if err != nil {
		return Lease{}, fmt.Errorf("start lease: %w", err)
	}
	return l, nil
}

// RenewLease extends l by its TTL from now, or says ErrLeaseLost when
// another replica has claimed it.
// On PostgreSQL it measures the store's clock offset as it goes.
func (s *Store) RenewLease(ctx context.Context, l Lease) error {
	before := s.opts.Now()
	var us int64
	err := s.renewDB().QueryRowContext(ctx, `UPDATE replicas SET renewed_ms = `+s.nowMS()+`, expires_ms = `+s.nowMS()+` + ?
		WHERE id = ? AND recovered_by IS NULL AND ended_at IS NULL RETURNING `+s.nowMicros(), l.TTL.Milliseconds(), l.ID).Scan(&us)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("renew lease %s: %w", l.ID, err)
	}
	if s.pg {
		s.setClock(before, s.opts.Now(), us)
	}
	return nil
}

// EndLease ends l at a clean shutdown: it runs out now, so whatever it
// left in flight is recovered at once.
func (s *Store) EndLease(ctx context.Context, l Lease) error {
	_, err := s.renewDB().ExecContext(ctx, `UPDATE replicas SET ended_at = ?, expires_ms = `+s.nowMS()+`
		WHERE id = ? AND recovered_by IS NULL AND ended_at IS NULL`, FormatTime(s.Now()), l.ID)
	if err != nil {
		return fmt.Errorf("end lease %s: %w", l.ID, err)
	}
	return nil
}

// Leases lists every replica's lease, newest first.
func (s *Store) Leases(ctx context.Context) ([]LeaseInfo, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, name, pid, started_at, expires_ms, ended_at IS NOT NULL, recovered_by
		FROM replicas ORDER BY started_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("leases: %w", err)
	}
	defer rows.Close()
	var out []LeaseInfo
	for rows.Next() {
		var l LeaseInfo
		var started string
		var expires int64
		var by sql.NullString
		if err := rows.Scan(&l.ID, &l.Name, &l.PID, &started, &expires, &l.Ended, &by); err != nil {
			return nil, fmt.Errorf("leases: %w", err)
		}
		l.StartedAt, _ = parseTime(started)
		l.Expires, l.RecoveredBy = time.UnixMilli(expires).UTC(), by.String
		out = append(out, l)
	}
	return out, rows.Err()
}

// ExpiredLeases lists the replicas whose leases ran out and that nobody
// has recovered yet.
func (s *Store) ExpiredLeases(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM replicas WHERE recovered_by IS NULL AND expires_ms < `+s.nowMS()+` ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("expired leases: %w", err)
	}
	return scanIDs(rows)
}

// scanIDs reads a one-column result of ids, and closes it.
func scanIDs(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// ClaimLease makes replica by the one that recovers replica id's
// executions: true at most once for any lease, and only once it has run
// out (or whatever its age, with anyAge: a caller that knows no other
// process lives, as the holder of a SQLite database's gateway lock does).
// The claim commits with the recovery the caller writes in the same Tx.
func (w *Tx) ClaimLease(id, by string, anyAge bool) (bool, error) {
	q := `UPDATE replicas SET recovered_by = ?, recovered_at = ? WHERE id = ? AND recovered_by IS NULL AND id <> ?`
	if !anyAge {
		q += ` AND expires_ms < ` + w.s.nowMS()
	}
	res, err := w.tx.ExecContext(w.ctx, q, by, FormatTime(w.now), id, by)
	if err != nil {
		return false, fmt.Errorf("claim lease %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// UnclaimedLeases lists, inside the transaction, every lease but except's
// that nobody has recovered (live or not).
func (w *Tx) UnclaimedLeases(except string) ([]string, error) {
	rows, err := w.tx.QueryContext(w.ctx, `SELECT id FROM replicas WHERE recovered_by IS NULL AND id <> ? ORDER BY id`, except)
	if err != nil {
		return nil, fmt.Errorf("leases: %w", err)
	}
	return scanIDs(rows)
}

// LiveLeases counts, inside the transaction, the leases other than
// except's that have neither run out nor been claimed.
func (w *Tx) LiveLeases(except string) (int, error) {
	var n int
	err := w.queryRow(`SELECT COUNT(*) FROM replicas WHERE recovered_by IS NULL AND id <> ? AND expires_ms >= `+w.s.nowMS(), except).Scan(&n)
	return n, err
}

// HoldsLease fails with ErrLeaseLost unless replica id's lease is still
// its own and running: not claimed, not ended, not run out (a replica
// that stalled that long is taken for dead, and any other may claim it
// now). Checked under the write lock before anything is dispatched: a
// claim commits under that lock too, so no dispatch follows a recovery of
// its replica.
func (w *Tx) HoldsLease(id string) error {
	var live bool
	err := w.queryRow(`SELECT recovered_by IS NULL AND ended_at IS NULL AND expires_ms >= `+w.s.nowMS()+` FROM replicas WHERE id = ?`, id).Scan(&live)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrLeaseLost
	case err != nil:
		return fmt.Errorf("check lease %s: %w", id, err)
	case !live:
		return ErrLeaseLost
	}
	return nil
}

// ExecutionsOf returns, inside the transaction, the live executions in
// one of states that replica took in hand; replica "" means those no
// replica owns (written before replicas held leases).
func (w *Tx) ExecutionsOf(replica string, states []State) ([]Execution, error) {
	if err := w.flush(); err != nil {
		return nil, err
	}
	q := executionSelect + ` WHERE source_id IS NULL AND replica = ?`
	args := []any{replica}
	if replica == "" {
		q, args = executionSelect+` WHERE source_id IS NULL AND replica IS NULL`, nil
	}
	q += ` AND state IN (?` + strings.Repeat(",?", len(states)-1) + `) ORDER BY seq`
	for _, st := range states {
		args = append(args, string(st))
	}
	rows, err := w.tx.QueryContext(w.ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("executions of %q: %w", replica, err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		e, err := scanExecution(rows, "")
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
