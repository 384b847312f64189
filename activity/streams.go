package activity

// MCP event streams replicas share: a 2025-era client that lost an SSE
// response resumes it with Last-Event-ID, and the load balancer may send
// that GET to another replica than the one that served the call. The
// gateway's event store writes every event here (gatewaylite/events.go),
// so any replica can replay it. Operational state, outside the signed log
// (the call and its outcome are in the log); events are deleted with
// their session, or after EventRetention.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// EventRetention is how long a session's events are kept after it was
// opened, if nobody closes it first.
const EventRetention = 24 * time.Hour

// ErrNoStream says a session or stream is not (or no longer) stored.
var ErrNoStream = errors.New("no such stream (closed, expired, or never opened)")

// maxReplayBytes bounds what one replay reads: a stream is one call's
// answer and its notifications.
const maxReplayBytes = 64 << 20

// StreamSession is the stored session a stream belongs to.
type StreamSession struct {
	Actor, Replica string
}

// OpenStream records a stream of session, opened by replica for actor.
func (s *Store) OpenStream(ctx context.Context, session, stream, actor, replica string) error {
	_, err := s.opsDB().ExecContext(ctx, `INSERT OR IGNORE INTO mcp_sessions(id, actor, replica, opened_ms) VALUES (?, ?, ?, `+s.nowMS()+`)`,
		session, actor, replica)
	if err != nil {
		return fmt.Errorf("open stream %s/%s: %w", session, stream, err)
	}
	return nil
}

// AppendEvent stores event idx of a stream. The index is the caller's
// (the SDK's own count of the stream's events), so one that could not be
// stored leaves a gap EventsAfter reports, rather than shifting the rest.
func (s *Store) AppendEvent(ctx context.Context, session, stream string, idx int, data []byte) error {
	if data == nil {
		data = []byte{} // the priming event: no data, but an index
	}
	_, err := s.opsDB().ExecContext(ctx, `INSERT INTO mcp_events(session_id, stream_id, idx, data, at_ms) VALUES (?, ?, ?, ?, `+s.nowMS()+`)`,
		session, stream, idx, data)
	if err != nil {
		return fmt.Errorf("append event to %s/%s: %w", session, stream, err)
	}
	return nil
}

// Session returns the stored session, or ErrNoStream.
func (s *Store) Session(ctx context.Context, session string) (StreamSession, error) {
	var ss StreamSession
	err := s.r.QueryRowContext(ctx, `SELECT actor, replica FROM mcp_sessions WHERE id = ? AND closed = 0`, session).Scan(&ss.Actor, &ss.Replica)
	if errors.Is(err, sql.ErrNoRows) {
		return ss, ErrNoStream
	}
	return ss, err
}

// EventsAfter returns the events of a stream after index (index -1: all),
// in order, with the index of the last one (index when there are none).
func (s *Store) EventsAfter(ctx context.Context, session, stream string, index int) ([][]byte, int, error) {
	if _, err := s.Session(ctx, session); err != nil {
		return nil, index, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT idx, data FROM mcp_events WHERE session_id = ? AND stream_id = ? AND idx > ? ORDER BY idx`,
		session, stream, index)
	if err != nil {
		return nil, index, fmt.Errorf("events of %s/%s: %w", session, stream, err)
	}
	defer rows.Close()
	var out [][]byte
	total := 0
	last := index
	for rows.Next() {
		var idx int
		var data []byte
		if err := rows.Scan(&idx, &data); err != nil {
			return nil, index, err
		}
		if idx != last+1 {
			return nil, index, fmt.Errorf("events of %s/%s: event %d was dropped", session, stream, last+1)
		}
		if total += len(data); total > maxReplayBytes {
			return nil, index, fmt.Errorf("events of %s/%s: more than %d bytes to replay", session, stream, maxReplayBytes)
		}
		out, last = append(out, data), idx
	}
	return out, last, rows.Err()
}

// CloseSession forgets a session's events.
func (s *Store) CloseSession(ctx context.Context, session string) error {
	db := s.opsDB()
	if _, err := db.ExecContext(ctx, `DELETE FROM mcp_events WHERE session_id = ?`, session); err != nil {
		return fmt.Errorf("close session %s: %w", session, err)
	}
	_, err := db.ExecContext(ctx, `UPDATE mcp_sessions SET closed = 1 WHERE id = ?`, session)
	return err
}

// PurgeStreams deletes the sessions opened more than EventRetention ago,
// and their events.
func (s *Store) PurgeStreams(ctx context.Context) error {
	db := s.opsDB()
	cut := `(` + s.nowMS() + ` - ?)`
	ms := EventRetention.Milliseconds()
	if _, err := db.ExecContext(ctx, `DELETE FROM mcp_events WHERE session_id IN (SELECT id FROM mcp_sessions WHERE opened_ms < `+cut+`)`, ms); err != nil {
		return fmt.Errorf("purge streams: %w", err)
	}
	_, err := db.ExecContext(ctx, `DELETE FROM mcp_sessions WHERE opened_ms < `+cut, ms)
	return err
}
