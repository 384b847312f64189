package gatewaylite

// This gateway among replicas on one database: the lease it holds, the
// fence every dispatch passes, and the sweep that recovers replicas whose
// leases ran out (recover.go).

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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
	// healthySince is when its renewals last began to go through (unix
	// ns; 0 while they fail), renewed when the last one went through:
	// claimsAllowed.
	healthySince, renewed atomic.Int64
}

// startLease takes this process's lease.
func (g *Gateway) startLease(ctx context.Context) error {
	l, err := g.store.StartLease(ctx, g.cfg.Replica, g.cfg.LeaseTTL.Duration)
	if err != nil {
		return err
	}
	g.lease, g.lost = l, make(chan struct{})
	now := time.Now().UnixNano()
	g.healthySince.Store(now)
	g.renewed.Store(now)
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
		var err error
		if failRenewal != nil {
			err = failRenewal(g.lease.ID)
		}
		if err == nil {
			err = g.store.RenewLease(ctx, g.lease)
		}
		cancel()
		if errors.Is(err, activity.ErrLeaseLost) {
			g.log.Error("lease lost: another replica recovered this one's executions; refusing every call from now on", "replica", g.lease.ID)
			g.lostOnce.Do(func() { close(g.lost) })
			return
		}
		if err != nil {
			g.healthySince.Store(0)
			g.log.Warn("renew lease", "replica", g.lease.ID, "error", err)
			continue
		}
		// A renewal later than half a TTL after the one before means this
		// process stalled (paused, swapped out): others may have lapsed
		// beside it, so it waits a whole TTL again before claiming.
		now := time.Now().UnixNano()
		if prev := g.renewed.Swap(now); time.Duration(now-prev) > g.lease.TTL/2 {
			g.healthySince.Store(now)
		} else {
			g.healthySince.CompareAndSwap(0, now)
		}
	}
}

// claimsAllowed reports whether this replica may claim others' lapsed
// leases: only once its own renewals have gone through for a whole TTL.
// After the database was away longer than a TTL every lease has run out,
// the live replicas' with the dead ones'; the first to renew claimed the
// others before they could renew, and they stopped (a healthy replica
// killed). A live one renews within a quarter TTL of the database's
// return: a whole TTL later, a lease still lapsed is a dead replica's.
//
// Its last renewal must also be recent (within half a TTL): a claim that
// began before the database or this process stalled, and goes on after,
// rests on health it no longer knows it has. Checked again inside each
// claiming write (recoverExpired).
func (g *Gateway) claimsAllowed() bool {
	since, last := g.healthySince.Load(), g.renewed.Load()
	return since != 0 && time.Since(time.Unix(0, since)) >= g.lease.TTL && time.Since(time.Unix(0, last)) < g.lease.TTL/2
}

// failRenewal, set by a test, fails a replica's lease renewals while it
// returns an error (the database away).
var failRenewal func(replica string) error

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
		if g.claimsAllowed() {
			g.recoverExpired(ctx)
		}
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
