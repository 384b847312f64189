package gatewaylite

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// TestRunTrackerForgetsIdleRuns: the runs an agent names (or sessions)
// are forgotten once idle past the idle timeout, when enough are known,
// so a flood of distinct run ids never grows the process for its life;
// the runs still in use are kept.
func TestRunTrackerForgetsIdleRuns(t *testing.T) {
	now := time.Now()
	g := &Gateway{cfg: &Config{RunIdleTimeout: Duration{30 * time.Minute}}}
	tr := newRunTracker(g)
	inUse := 0
	for i := range 3 * minSweep {
		seen := now.Add(-time.Hour) // idle
		if i%10 == 0 {
			seen, inUse = now.Add(-time.Minute), inUse+1 // in use
		}
		tr.known[fmt.Sprint(i)] = &trackedRun{id: activity.RunID(fmt.Sprint(i)), lastSeen: seen}
	}
	tr.sweep(now)
	if n := len(tr.known); n != inUse {
		t.Fatalf("%d runs kept after the sweep, want the %d in use", n, inUse)
	}
	if tr.sweepAt < minSweep {
		t.Fatalf("next sweep at %d", tr.sweepAt)
	}
}

// TestMetaIDsBounded: a run id or intent scope an agent names is refused
// when longer than maxMetaID or holding control characters.
func TestMetaIDsBounded(t *testing.T) {
	for _, c := range []struct {
		meta map[string]any
		ok   bool
	}{
		{map[string]any{MetaRunID: "run-7f3a"}, true},
		{map[string]any{MetaRunID: string(make([]byte, maxMetaID+1))}, false},
		{map[string]any{MetaIntentScope: fmt.Sprintf("%0300d", 1)}, false},
		{map[string]any{MetaRunID: "a\nb"}, false},
		{map[string]any{MetaRunID: "run\x1b[2J"}, false}, // an ESC: it was let through
		{map[string]any{MetaIntentScope: "a\tb"}, false},
		{map[string]any{MetaRunID: "run-é-7f3a"}, true},
		{nil, true},
	} {
		if err := checkMetaIDs(c.meta); (err == nil) != c.ok {
			t.Errorf("%v: %v", c.meta, err)
		}
	}
}
