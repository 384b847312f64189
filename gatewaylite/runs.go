package gatewaylite

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// runInfo is the agent run a call belongs to and the intent scope it
// implies.
type runInfo struct {
	id           activity.RunID
	identifiedBy activity.RunIdentification
	// strong is true when the agent named its run (_meta run id): the
	// scope is that run. Weak evidence (an MCP session, a token) does not
	// survive a reconnect or a gateway restart, so the scope is the actor
	// and matching relies on the tool's window.
	strong bool
	scope  string
}

// runTracker identifies agent runs and records them in the Sessions log.
type runTracker struct {
	g     *Gateway
	mu    sync.Mutex
	known map[string]*trackedRun
}

type trackedRun struct {
	id       activity.RunID
	lastSeen time.Time
}

func newRunTracker(g *Gateway) *runTracker {
	return &runTracker{g: g, known: map[string]*trackedRun{}}
}

// identify finds or starts the run a call belongs to, strongest evidence
// first: an explicit run id in _meta, then the MCP session (legacy era),
// then the bearer token with an idle timeout.
func (t *runTracker) identify(ctx context.Context, ci callInfo, meta map[string]any) (runInfo, error) {
	by, evidence := activity.RunByToken, "bearer token of "+ci.actor
	if id, ok := meta[MetaRunID].(string); ok && id != "" {
		by, evidence = activity.RunByMetaID, id
	} else if ci.session != "" {
		by, evidence = activity.RunBySession, ci.session
	}
	info := runInfo{identifiedBy: by, strong: by == activity.RunByMetaID}
	key := ci.actor + "\x00" + string(by) + "\x00" + evidence
	now := t.g.now()

	t.mu.Lock()
	defer t.mu.Unlock()
	tr := t.known[key]
	if tr != nil && by == activity.RunByToken && now.Sub(tr.lastSeen) > t.g.cfg.RunIdleTimeout.Duration {
		if err := t.end(ctx, tr.id, tr.lastSeen); err != nil {
			return info, err
		}
		delete(t.known, key)
		tr = nil
	}
	if tr == nil {
		id, err := t.start(ctx, ci.actor, by, evidence)
		if err != nil {
			return info, err
		}
		tr = &trackedRun{id: id}
		t.known[key] = tr
	}
	tr.lastSeen = now
	info.id = tr.id
	if info.strong {
		info.scope = "run:" + evidence
	} else {
		info.scope = "actor:" + ci.actor
	}
	return info, nil
}

// start continues a named run recorded earlier (an agent that survived a
// gateway restart) or records a new one with its session grant.
func (t *runTracker) start(ctx context.Context, actor string, by activity.RunIdentification, evidence string) (activity.RunID, error) {
	var id activity.RunID
	_, err := t.g.store.Write(ctx, func(w *activity.Tx) error {
		if by == activity.RunByMetaID {
			prior, err := w.FindRun(actor, by, evidence)
			if err != nil {
				return err
			}
			if prior != nil {
				id = prior.ID
				return nil
			}
		}
		run, err := w.StartRun(activity.Run{Actor: actor, IdentifiedBy: by, Evidence: evidence})
		if err != nil {
			return err
		}
		id = run.ID
		if t.g.cfg.SessionGrant == "ask" {
			return nil // the first call asks an operator (authorize)
		}
		return w.AddGrant(activity.Grant{RunID: run.ID, Scope: "session", GrantedBy: "policy:auto"})
	})
	if err != nil {
		return "", fmt.Errorf("start run: %w", err)
	}
	return id, nil
}

func (t *runTracker) end(ctx context.Context, id activity.RunID, at time.Time) error {
	_, err := t.g.store.Write(ctx, func(w *activity.Tx) error { return w.EndRun(id, at) })
	return err
}
