package gatewaylite

import (
	"context"
	"fmt"

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
		case activity.ContractBlockedAfterUnknown, activity.ContractReadOnly:
			g.block(ctx, e)
		}
		// repeatable_with_key stays unknown: the agent's retry resends it
		// with the same Idempotency-Key.
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
	if len(lookups) > 0 {
		g.bg.Add(1)
		go func() {
			defer g.bg.Done()
			for _, e := range lookups {
				if spec := g.tools[e.Tool]; spec != nil {
					g.lookup(context.Background(), spec, e)
				}
			}
		}()
	}
	g.log.Info("recovered executions left in flight", "count", len(left))
	return nil
}
