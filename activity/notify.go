package activity

// Decision signals: a waiter learns at once that an operator's decision
// (a resolution, the vault, an approval's answer) was committed, instead
// of polling. A commit of this store that carries one signals; on
// PostgreSQL it also NOTIFYs, and every store that waits LISTENs, so a
// decision made in the console or the CLI reaches a gateway replica that
// waits on it as it commits. Other commits signal nothing: a busy gateway
// would otherwise wake every waiter at every commit.

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyChannel is the PostgreSQL channel decisions are announced on.
const notifyChannel = "mcpdup_decisions"

// commitSignal hands out a channel closed at the next signal.
type commitSignal struct {
	mu        sync.Mutex
	ch        chan struct{}
	listening bool
	closed    bool
	cancel    context.CancelFunc
	listener  sync.WaitGroup
}

// Decided returns a channel closed at the next operator's decision the
// store learns of: its own, and on PostgreSQL any process's. Take it
// before reading what the decision would change, then wait on it (with a
// timeout: a lost connection, or another process's decision on SQLite,
// is seen at the next read).
func (s *Store) Decided() <-chan struct{} {
	s.sig.mu.Lock()
	defer s.sig.mu.Unlock()
	if s.pg && !s.sig.listening && !s.sig.closed {
		s.sig.listening = true
		ctx, cancel := context.WithCancel(context.Background())
		s.sig.cancel = cancel
		s.sig.listener.Add(1)
		go func() {
			defer s.sig.listener.Done()
			s.listen(ctx)
		}()
	}
	if s.sig.ch == nil {
		s.sig.ch = make(chan struct{})
	}
	return s.sig.ch
}

// signal wakes everyone waiting on Decided.
func (s *Store) signal() {
	s.sig.mu.Lock()
	if s.sig.ch != nil {
		close(s.sig.ch)
		s.sig.ch = nil
	}
	s.sig.mu.Unlock()
}

// listen LISTENs for decisions until ctx ends, reconnecting after a lost
// connection.
func (s *Store) listen(ctx context.Context) {
	for ctx.Err() == nil {
		conn, err := pgx.Connect(ctx, s.dsn)
		if err == nil {
			if _, err = conn.Exec(ctx, "LISTEN "+notifyChannel); err == nil {
				s.signal() // anything decided while not listening is read now
				for {
					if _, err = conn.WaitForNotification(ctx); err != nil {
						break
					}
					s.signal()
				}
			}
			conn.Close(context.Background())
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// stopListening ends the listener at Close, and waits for it.
func (s *Store) stopListening() {
	s.sig.mu.Lock()
	s.sig.closed = true
	if s.sig.cancel != nil {
		s.sig.cancel()
	}
	s.sig.mu.Unlock()
	s.sig.listener.Wait()
}
