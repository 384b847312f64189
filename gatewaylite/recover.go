package gatewaylite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// recoverInFlight settles, before any call is served, what gateways no
// longer alive left mid-flight. On a SQLite database this gateway holds
// the gateway lock, so no other gateway lives: every other replica's
// lease is claimed at once, with the executions no replica owns (written
// before leases). On PostgreSQL only leases that ran out are claimed;
// ownerless executions only when no other replica is alive; leases that
// ran out are claimed by the sweep once this replica's own renewals have
// held a whole TTL (claimsAllowed): one starting as the database returns
// from an outage would otherwise claim the live replicas that have not
// renewed yet.
func (g *Gateway) recoverInFlight(ctx context.Context) error {
	sole := !g.store.IsPostgres()
	n, err := g.recoverFrom(ctx, func(w *activity.Tx) ([]string, bool, error) {
		if sole {
			ids, err := w.UnclaimedLeases(g.lease.ID)
			return ids, true, err
		}
		live, err := w.LiveLeases(g.lease.ID)
		return nil, live == 0, err
	}, sole)
	if err != nil {
		return err
	}
	g.log.Info("recovered executions left in flight", "count", n)
	return nil
}

// recoverExpired claims the leases that ran out, one by one, and recovers
// their executions; it returns how many executions it recovered.
func (g *Gateway) recoverExpired(ctx context.Context) int {
	list, cancel := context.WithTimeout(ctx, max(g.lease.TTL/4, 10*time.Millisecond))
	ids, err := g.store.ExpiredLeases(list)
	cancel()
	if err != nil {
		g.log.Warn("list expired leases", "error", err)
		return 0
	}
	total := 0
	for _, id := range ids {
		if id == g.lease.ID {
			continue // ours ran out while we stalled: the renewal says whether it was claimed
		}
		n, err := g.recoverFrom(ctx, func(*activity.Tx) ([]string, bool, error) {
			if !g.claimsAllowed() { // the write waited: on a database that stalled?
				return nil, false, nil
			}
			return []string{id}, false, nil
		}, false)
		if err != nil {
			g.log.Error("recover replica", "replica", id, "error", err)
			continue
		}
		if n > 0 {
			g.log.Info("recovered a lapsed replica's executions", "replica", id, "count", n)
		}
		total += n
	}
	return total
}

// inFlight are the states a live gateway is responsible for moving on.
// Unknown is there for its contract's next step (block, look up).
var inFlight = []activity.State{activity.StateAccepted, activity.StateAuthorized, activity.StateDispatched,
	activity.StateSucceeded, activity.StateFailed, activity.StateUnknown}

// recoverFrom claims, in one write, the leases pick names (all of them
// whatever their age with sole; else only those that ran out) and
// settles the in-flight executions of the replicas it claimed, and with
// ownerless those no replica owns, as a restart always has:
//
//   - accepted or authorized: "dispatched" was never committed, so nothing
//     was sent: failed_before_dispatch (safe to retry);
//   - dispatched: the target may have acted: unknown, then per contract
//     (blocked tools go to pending_verification; lookup tools are asked in
//     the background);
//   - outcome observed but not delivered: completed_result_not_delivered,
//     so a retry gets the stored result.
//
// A claim and its recovery commit together, so each lapsed replica's
// executions are recovered exactly once, whoever else tries. Pending
// approvals of the recovered executions expire (whoever waited on them is
// gone); with sole, every pending approval does.
func (g *Gateway) recoverFrom(ctx context.Context, pick func(w *activity.Tx) (leases []string, ownerless bool, err error), sole bool) (int, error) {
	var lookups []activity.Execution
	var n int
	_, err := g.store.Write(ctx, func(w *activity.Tx) error {
		lookups, n = nil, 0
		ids, ownerless, err := pick(w)
		if err != nil {
			return err
		}
		var owners []string
		for _, id := range ids {
			ok, err := w.ClaimLease(id, g.lease.ID, sole)
			if err != nil {
				return err
			}
			if ok {
				owners = append(owners, id)
			}
		}
		if ownerless {
			owners = append(owners, "")
		}
		recovered := map[activity.ExecutionID]bool{}
		for _, owner := range owners {
			left, err := w.ExecutionsOf(owner, inFlight)
			if err != nil {
				return err
			}
			for _, e := range left {
				if e, err = g.recoverOne(w, e, owner); err != nil {
					return fmt.Errorf("execution %s: %w", e.ID, err)
				}
				recovered[e.ID] = true
				if e.State == activity.StateUnknown && e.Contract == activity.ContractRecoverableByLookup {
					lookups = append(lookups, e)
				}
			}
			n += len(left)
		}
		return g.expireApprovals(w, recovered, sole)
	})
	if err != nil {
		return 0, err
	}
	for _, e := range lookups {
		if spec := g.tools[e.Tool]; spec != nil {
			g.bg.Add(1)
			go func() {
				defer g.bg.Done()
				g.lookupUntilSettled(spec, e)
			}()
		}
	}
	return n, nil
}

// recoverOne moves one abandoned execution on, inside the recovering
// write. owner is the replica that abandoned it ("" none recorded).
func (g *Gateway) recoverOne(w *activity.Tx, e activity.Execution, owner string) (activity.Execution, error) {
	gone := "the gateway stopped"
	if owner != "" && owner != g.lease.ID {
		gone = "gateway replica " + owner + " stopped renewing its lease"
	}
	var to activity.State
	var why string
	switch e.State {
	case activity.StateAccepted, activity.StateAuthorized:
		to, why = activity.StateFailedBefore, gone+" before dispatching it: nothing was sent"
		// An operator's refusal stands for every retry: one answered
		// while nobody recorded it rejects the execution, where failed
		// before dispatch would let a retry ask again.
		if refusal, err := refusedApproval(w, e); err != nil {
			return e, err
		} else if refusal != "" && e.State == activity.StateAccepted {
			to, why = activity.StateRejected, refusal+"; recorded after "+gone
		}
	case activity.StateDispatched:
		to, why = activity.StateUnknown, gone+" while it was in flight: the target may have acted"
	case activity.StateSucceeded, activity.StateFailed:
		to, why = activity.StateNotDelivered, gone+" before the result was delivered"
	}
	var err error
	if to != "" {
		if e, err = w.Transition(activity.Transition{ExecutionID: e.ID, From: e.State, To: to, Reason: why + "; recovered by " + g.lease.ID}); err != nil {
			return e, err
		}
	}
	// repeatable_with_key stays unknown: the agent's retry resends it with
	// the same Idempotency-Key. read_only stays unknown too: a read changed
	// nothing, so nobody needs to verify it and the next identical read
	// simply runs.
	if e.State == activity.StateUnknown && e.Contract == activity.ContractBlockedAfterUnknown {
		e, err = w.Transition(activity.Transition{ExecutionID: e.ID, From: activity.StateUnknown, To: activity.StatePendingVerification,
			Reason: blockReason(e.Contract)})
	}
	return e, err
}

// expireApprovals expires the pending approvals whoever waited on died
// with: those of the recovered executions, or with sole every one.
func (g *Gateway) expireApprovals(w *activity.Tx, recovered map[activity.ExecutionID]bool, sole bool) error {
	if !sole && len(recovered) == 0 {
		return nil
	}
	pending, err := w.PendingApprovals()
	if err != nil {
		return err
	}
	for _, a := range pending {
		if !sole && !recovered[a.ExecutionID] {
			continue
		}
		// A session approval belongs to its run: a named or token run is
		// every replica's, and a live replica's call may wait on it too (it
		// stands until answered or a waiter's approval_timeout). A run
		// known by its MCP session died with its replica.
		if !sole && a.Kind == activity.ApprovalSession {
			if by, err := w.RunIdentifiedBy(a.RunID); err != nil {
				return err
			} else if by != activity.RunBySession {
				continue
			}
		}
		why := "the gateway restarted while it waited"
		if !sole {
			why = "the gateway replica that waited on it stopped renewing its lease"
		}
		if _, err := w.DecideApproval(a.ID, activity.ApprovalExpired, "gateway", why); errors.Is(err, activity.ErrUnproven) {
			// A row the log does not prove is left as it is (no call acts
			// on it: ProvenApproval refuses it too); the rest recovers.
			g.log.Error("approval left pending: its row is not what the signed log says; run mcpdup audit verify", "approval", a.ID, "error", err)
		} else if err != nil {
			return fmt.Errorf("approval %s: %w", a.ID, err)
		}
	}
	return nil
}

// Recovery keeps asking while the answer is "still running" or the target
// is unreachable: first after lookupFirst, doubling up to lookupMax, for
// lookupFor in all. After that the execution stays unknown for the
// agent's retry (which asks again) or an operator.
var (
	lookupFirst = 500 * time.Millisecond
	lookupMax   = 30 * time.Second
	lookupFor   = 15 * time.Minute
)

// lookupUntilSettled asks a recoverable_by_lookup tool what became of an
// execution a previous process left unknown, until it is settled, the
// gateway closes, or lookupFor passes.
func (g *Gateway) lookupUntilSettled(spec *toolSpec, e activity.Execution) {
	deadline := time.Now().Add(lookupFor)
	wait := lookupFirst
	for {
		next := g.lookup(context.Background(), spec, e, nil)
		if next.State != activity.StateUnknown {
			return
		}
		// Another path (the agent's retry) may have settled it meanwhile.
		if cur, err := g.store.Execution(context.Background(), e.ID); err != nil || cur.State != activity.StateUnknown {
			return
		}
		if time.Now().Add(wait).After(deadline) {
			g.log.Info("status lookup gave up; the execution stays unknown", "execution", e.ID)
			return
		}
		select {
		case <-g.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, lookupMax)
	}
}

// refusedApproval names the denial or expiry among the approvals e
// waited on, or "".
func refusedApproval(w *activity.Tx, e activity.Execution) (string, error) {
	as, err := w.ApprovalsOf(e.ID)
	if err != nil {
		return "", err
	}
	for _, a := range as {
		if a.State == activity.ApprovalDenied || a.State == activity.ApprovalExpired {
			return fmt.Sprintf("approval %s %s by %s%s", a.ID, a.State, a.Operator, noteText(a.Note)), nil
		}
	}
	return "", nil
}
