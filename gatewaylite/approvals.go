package gatewaylite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// awaitApprovals waits for the approvals an accepted execution needs (an
// operator answers with `mcpdup approve` / `mcpdup deny` or the console),
// up to the configured timeout, then authorizes and dispatches it, or
// rejects it with the reason. An approval nobody answered in time expires.
// ours says this call dispatched it: only then does the caller send it
// (one settled elsewhere is never sent again from here).
func (g *Gateway) awaitApprovals(ctx context.Context, exec activity.Execution, ids []string) (next activity.Execution, ours bool) {
	deadline := time.Now().Add(g.cfg.ApprovalTimeout.Duration)
	var decided []activity.Approval
	for _, id := range ids {
		a, err := g.waitApproval(ctx, id, deadline)
		if err != nil {
			g.log.Error("approval", "approval", id, "error", err)
			a.State, a.Note = activity.ApprovalExpired, err.Error()
		}
		decided = append(decided, a)
		if a.State != activity.ApprovalApproved {
			break
		}
	}
	_, err := g.store.Write(ctx, func(w *activity.Tx) error {
		e, err := w.Execution(exec.ID)
		if err != nil {
			return err
		}
		if e.State != activity.StateAccepted {
			next = e // settled elsewhere (recovered, or taken over)
			return nil
		}
		var why []string
		for _, a := range decided {
			why = append(why, fmt.Sprintf("approval %s %s by %s%s", a.ID, a.State, a.Operator, noteText(a.Note)))
			if a.State != activity.ApprovalApproved {
				// A refusal sends nothing: recorded even by a replica
				// whose lease lapsed, so no retry can find it accepted.
				next, err = w.Transition(activity.Transition{ExecutionID: e.ID, From: activity.StateAccepted, To: activity.StateRejected,
					Reason: strings.Join(why, "; ")})
				return err
			}
		}
		if err := g.fence(w); err != nil {
			return err
		}
		next, err = g.authorizeAndDispatch(w, e, "", strings.Join(why, "; "))
		ours = err == nil && next.State == activity.StateDispatched
		return err
	})
	if err != nil {
		g.log.Error("record approval outcome", "execution", exec.ID, "error", err)
		if e, rerr := g.store.Execution(ctx, exec.ID); rerr == nil {
			return e, false
		}
		return exec, false
	}
	return next, ours
}

// approvalIDs are the ids of as.
func approvalIDs(as []activity.Approval) []string {
	ids := make([]string, len(as))
	for i, a := range as {
		ids[i] = a.ID
	}
	return ids
}

// approvalPoll is how often a waiting call reads its approval again when
// no commit signal woke it (a decision on PostgreSQL wakes it at once;
// on SQLite another process's decision is seen at the next read).
var approvalPoll = 100 * time.Millisecond

// waitApproval waits for one approval to be decided — woken by the
// store's commit signal, or reading it again every approvalPoll — or for
// the deadline to pass, when it records it as expired (unless an operator
// answered in the meantime).
func (g *Gateway) waitApproval(ctx context.Context, id string, deadline time.Time) (activity.Approval, error) {
	for {
		changed := g.store.Decided() // before the read: a decision after it wakes us
		a, err := g.store.ProvenApproval(ctx, id)
		if err != nil {
			return a, err
		}
		if a.State != activity.ApprovalPending {
			return a, nil
		}
		if time.Now().After(deadline) {
			_, err := g.store.Write(ctx, func(w *activity.Tx) error {
				_, err := w.DecideApproval(id, activity.ApprovalExpired, "gateway",
					fmt.Sprintf("no answer within %s", g.cfg.ApprovalTimeout.Duration))
				return err
			})
			if err != nil {
				// Decided by an operator at the last moment: read it.
				return g.store.ProvenApproval(ctx, id)
			}
			return g.store.ProvenApproval(ctx, id)
		}
		select {
		case <-changed:
		case <-time.After(min(approvalPoll, time.Until(deadline))):
		case <-g.stop:
			return a, fmt.Errorf("gateway stopping")
		}
	}
}

func noteText(n string) string {
	if n == "" {
		return ""
	}
	return ": " + n
}
