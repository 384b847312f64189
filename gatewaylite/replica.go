package gatewaylite

// This gateway among replicas on one database: the lease it holds, the
// fence every dispatch passes, and the sweep that recovers replicas whose
// leases ran out (recover.go).

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// DefaultLeaseTTL is how long a replica's lease lasts unrenewed. It is
// renewed every quarter of that; a replica silent for longer is taken for
// dead and its executions are recovered by another.
const DefaultLeaseTTL = 10 * time.Second

// replica is this gateway's lease and what becomes of it.
type replica struct {
	lease    activity.Lease
	lost     chan struct{} // closed when another replica claimed the lease
	lostOnce sync.Once
}

// startLease takes this process's lease.
func (g *Gateway) startLease(ctx context.Context) error {
	l, err := g.store.StartLease(ctx, g.cfg.Replica, g.cfg.LeaseTTL.Duration)
	if err != nil {
		return err
	}
	g.lease, g.lost = l, make(chan struct{})
	return nil
}

// keepLease renews the lease every quarter of its TTL until the gateway
// closes or the lease is lost. It does nothing else, and renews on a
// connection of its own without the write lock: nothing another process
// holds (a long import's transaction) delays it.
func (g *Gateway) keepLease() {
	defer g.bg.Done()
	tick := time.NewTicker(max(g.lease.TTL/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-tick.C:
		}
		// Within a quarter TTL: a renewal stuck on a dead connection must
		// not outlast what is left of the lease; the next tick tries again.
		ctx, cancel := context.WithTimeout(context.Background(), max(g.lease.TTL/4, 10*time.Millisecond))
		err := g.store.RenewLease(ctx, g.lease)
		cancel()
		if errors.Is(err, activity.ErrLeaseLost) {
			g.log.Error("lease lost: another replica recovered this one's executions; refusing every call from now on", "replica", g.lease.ID)
			g.lostOnce.Do(func() { close(g.lost) })
			return
		}
		if err != nil {
			g.log.Warn("renew lease", "replica", g.lease.ID, "error", err)
		}
	}
}

// sweep recovers, every quarter of the lease TTL, the replicas whose
// leases ran out, and drops old event streams every minute (PostgreSQL:
// on SQLite the gateway lock leaves no other replica to recover).
func (g *Gateway) sweep() {
	defer g.bg.Done()
	tick := time.NewTicker(max(g.lease.TTL/4, 10*time.Millisecond))
	defer tick.Stop()
	purged := time.Now()
	for {
		select {
		case <-g.stop:
			return
		case <-g.lost:
			return
		case <-tick.C:
		}
		ctx := context.Background()
		g.recoverExpired(ctx)
		if time.Since(purged) > time.Minute {
			purged = time.Now()
			if err := g.store.PurgeStreams(ctx); err != nil {
				g.log.Warn("purge old event streams", "error", err)
			}
		}
	}
}

// Lost is closed once another replica has claimed this gateway's lease
// (it was silent past lease_ttl): it dispatches nothing any more, and its
// process should exit.
func (g *Gateway) Lost() <-chan struct{} { return g.lost }

// Replica is this gateway's replica id, as executions record it.
func (g *Gateway) Replica() string { return g.lease.ID }

// fence refuses, inside a write about to commit "dispatched", unless this
// gateway's lease is still its own: a claim commits under the same write
// lock, so nothing is dispatched by a replica after its recovery. On
// SQLite the gateway lock already says no other gateway lives to claim
// it, and the query is saved.
func (g *Gateway) fence(w *activity.Tx) error {
	if !g.store.IsPostgres() {
		return nil
	}
	return w.HoldsLease(g.lease.ID)
}

// endLease ends the lease at a clean shutdown.
func (g *Gateway) endLease() error {
	if g.lease.ID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return g.store.EndLease(ctx, g.lease)
}
