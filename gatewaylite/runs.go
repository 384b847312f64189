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
	// sweepAt: once known holds this many, runs idle past the idle
	// timeout are forgotten (a named run or a token's is found again in
	// the store; a session back after that long starts a new run), so
	// distinct run ids and sessions never accumulate for the process's
	// life.
	sweepAt int
}

// minSweep is the fewest runs known before a sweep.
const minSweep = 1024

// sweep forgets the runs idle past the idle timeout.
func (t *runTracker) sweep(now time.Time) {
	for k, tr := range t.known {
		if now.Sub(tr.lastSeen) > t.g.cfg.RunIdleTimeout.Duration {
			delete(t.known, k)
		}
	}
	t.sweepAt = max(minSweep, 2*len(t.known))
}

type trackedRun struct {
	id       activity.RunID
	lastSeen time.Time
}

func newRunTracker(g *Gateway) *runTracker {
	return &runTracker{g: g, known: map[string]*trackedRun{}, sweepAt: minSweep}
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
		// Silent here; another replica may have heard from it since:
		// start decides from the store.
		delete(t.known, key)
		tr = nil
	}
	if tr == nil {
		id, err := t.start(ctx, ci.actor, by, evidence)
		if err != nil {
			return info, err
		}
		tr = &trackedRun{id: id, lastSeen: now}
		t.known[key] = tr
		if len(t.known) >= t.sweepAt {
			t.sweep(now)
		}
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

// start continues a run recorded earlier — a named run (an agent that
// survived a gateway restart), or a token's run another replica (or this
// gateway before a restart) heard from within the idle timeout — or
// records a new one with its session grant. Under the write lock, so
// replicas seeing a token at once start one run.
func (t *runTracker) start(ctx context.Context, actor string, by activity.RunIdentification, evidence string) (activity.RunID, error) {
	var id activity.RunID
	_, err := t.g.store.Write(ctx, func(w *activity.Tx) error {
		if by == activity.RunByMetaID || by == activity.RunByToken {
			prior, err := w.FindRun(actor, by, evidence)
			if err != nil {
				return err
			}
			if prior != nil && by == activity.RunByToken {
				last, err := w.RunLastSeen(*prior)
				if err != nil {
					return err
				}
				if t.g.now().Sub(last) > t.g.cfg.RunIdleTimeout.Duration {
					if err := w.EndRun(prior.ID, last); err != nil {
						return err
					}
					prior = nil
				}
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
