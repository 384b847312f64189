package gatewaylite

import (
	"context"
	"fmt"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// recoverInFlight settles executions a previous gateway process left
// mid-flight, before any new call is served:
//
//   - accepted or authorized: "dispatched" was never committed, so nothing
//     was sent: failed_before_dispatch (safe to retry);
//   - dispatched: the target may have acted: unknown, then per contract
//     (blocked tools go to pending_verification; lookup tools are asked in
//     the background);
//   - outcome observed but not delivered: completed_result_not_delivered,
//     so a retry gets the stored result.
//
// One gateway process per database: another live gateway's in-flight
// executions would be misread as abandoned.
func (g *Gateway) recoverInFlight(ctx context.Context) error {
	left, err := g.store.Executions(ctx, activity.ExecutionFilter{Live: true, States: []activity.State{
		activity.StateAccepted, activity.StateAuthorized, activity.StateDispatched,
		activity.StateSucceeded, activity.StateFailed, activity.StateUnknown,
	}})
	if err != nil {
		return err
	}
	var lookups []activity.Execution
	for _, e := range left {
		var to activity.State
		var why string
		switch e.State {
		case activity.StateAccepted, activity.StateAuthorized:
			to, why = activity.StateFailedBefore, "the gateway stopped before dispatching it: nothing was sent"
		case activity.StateDispatched:
			to, why = activity.StateUnknown, "the gateway stopped while it was in flight: the target may have acted"
		case activity.StateSucceeded, activity.StateFailed:
			to, why = activity.StateNotDelivered, "the gateway stopped before the result was delivered"
		}
		if to != "" {
			next, err := g.transition(ctx, e, to, why)
			if err != nil {
				return fmt.Errorf("execution %s: %w", e.ID, err)
			}
			e = next
		}
		if e.State != activity.StateUnknown {
			continue
		}
		switch e.Contract {
		case activity.ContractRecoverableByLookup:
			lookups = append(lookups, e)
		case activity.ContractBlockedAfterUnknown:
			g.block(ctx, e)
		}
		// repeatable_with_key stays unknown: the agent's retry resends it
		// with the same Idempotency-Key. read_only stays unknown too: a read
		// changed nothing, so nobody needs to verify it and the next
		// identical read simply runs.
	}
	// Whoever waited on a pending approval died with the process.
	pending, err := g.store.Approvals(ctx, true)
	if err != nil {
		return err
	}
	for _, a := range pending {
		if _, err := g.store.DecideApproval(ctx, a.ID, activity.ApprovalExpired, "gateway", "the gateway restarted while it waited"); err != nil {
			return fmt.Errorf("approval %s: %w", a.ID, err)
		}
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
	g.log.Info("recovered executions left in flight", "count", len(left))
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
