package activity

import (
	"context"
	"fmt"
	"time"
)

// Replicas on one PostgreSQL database record times, and compare a retry
// with the time its execution last changed (the attach window), across
// hosts. Each host's own clock made a retry on a host 90 minutes ahead a
// "late repeat" that acted again, and a few minutes' skew made the
// verifier's sealing-policy check fail an honest log. On PostgreSQL the
// store therefore keeps time by the database's clock: the host's clock
// plus an offset measured against the server at open and at every lease
// renewal. On SQLite the database is on this host: the offset is 0.

// Now is the store's clock: the database's on PostgreSQL, this host's
// otherwise. Everything the store records is stamped with it, and what
// compares with recorded times (the gateway's attach window) reads it.
func (s *Store) Now() time.Time {
	return s.opts.Now().Add(time.Duration(s.clockOffset.Load()))
}

// ClockOffset is how far the database's clock is ahead of this host's
// (0 on SQLite), as last measured.
func (s *Store) ClockOffset() time.Duration { return time.Duration(s.clockOffset.Load()) }

// nowMicros is the SQL for the database's clock in µs since 1970.
func (s *Store) nowMicros() string {
	if s.pg {
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)`
}

// measureClock reads the database's clock and sets the offset, taking
// the host's time halfway through the round trip.
func (s *Store) measureClock(ctx context.Context) error {
	if !s.pg {
		return nil
	}
	before := s.opts.Now()
	var us int64
	if err := s.r.QueryRowContext(ctx, `SELECT `+s.nowMicros()).Scan(&us); err != nil {
		return fmt.Errorf("read the database's clock: %w", err)
	}
	s.setClock(before, s.opts.Now(), us)
	return nil
}

// setClock records the offset of database time us, read between the
// host times before and after.
func (s *Store) setClock(before, after time.Time, us int64) {
	mid := before.Add(after.Sub(before) / 2)
	s.clockOffset.Store(int64(time.UnixMicro(us).Sub(mid)))
}
