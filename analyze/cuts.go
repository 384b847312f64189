package analyze

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// EffectCuts remembers, between the live rebuilds of one console, where
// each effect's last group starts, so a rebuild reads an effect's calls
// from there on instead of its whole history. An effect called every
// minute for 100,000 calls cost 0.76 s a rebuild read whole
// (BenchmarkRebuildHotEffect), once a second.
//
// The groups before the last one cannot change while every new call of
// the effect comes no earlier than the last group's first call and no
// execution with a call before it is touched: groups are cut in the
// order calls were received, each from its first call's window. Anything
// else (an older log imported, a resolution of an old execution) reads
// the effect whole again, and cuts it anew. One EffectCuts serves one
// Options; a new load starts a new one.
type EffectCuts struct {
	mu   sync.Mutex
	cuts map[string]effectCut
}

// NewEffectCuts returns an empty EffectCuts.
func NewEffectCuts() *EffectCuts { return &EffectCuts{cuts: map[string]effectCut{}} }

// effectCut is one effect's: its last group, and the suspects before it.
type effectCut struct {
	tail    time.Time // the last group's first call
	fromSeq int64     // the oldest accepting record of the executions with a call from tail on
	before  []string  // the suspects of the groups before the last, in order
}

// tail is where a rebuild of key may start reading: ok false means from
// the beginning. touched are the key's touched executions: those of its
// new calls among them, so a new call before the tail has a touched
// execution first called before it.
func (c *EffectCuts) tail(ctx context.Context, s *activity.Store, key string, touched []activity.Execution) (effectCut, bool, error) {
	if c == nil {
		return effectCut{}, false, nil
	}
	c.mu.Lock()
	cut, ok := c.cuts[key]
	c.mu.Unlock()
	if !ok {
		return effectCut{}, false, nil
	}
	if len(touched) == 0 {
		return cut, true, nil
	}
	ids := make([]activity.ExecutionID, len(touched))
	for i, e := range touched {
		ids[i] = e.ID
	}
	firsts := map[activity.ExecutionID]time.Time{}
	for chunk := range slices.Chunk(ids, maxBatchIDs) {
		got, err := s.FirstCallsReceived(ctx, chunk)
		if err != nil {
			return effectCut{}, false, err
		}
		for id, t := range got {
			firsts[id] = t
		}
	}
	for _, e := range touched {
		first, called := firsts[e.ID]
		if called && first.Before(cut.tail) {
			return effectCut{}, false, nil // a group before the last changed
		}
		if called {
			cut.fromSeq = min(cut.fromSeq, e.Seq) // an older execution called again
		}
	}
	return cut, true, nil
}

// remember keeps key's cut: its last group, the suspects before it.
func (c *EffectCuts) remember(ctx context.Context, s *activity.Store, key string, last *group, before []string) error {
	if c == nil {
		return nil
	}
	if last == nil {
		c.mu.Lock()
		delete(c.cuts, key)
		c.mu.Unlock()
		return nil
	}
	// A last group can hold thousands of calls (an effect called every
	// second, an hour's window): each execution once, its seq alone.
	seen := make(map[activity.ExecutionID]bool, len(last.calls))
	var ids []activity.ExecutionID
	for _, call := range last.calls {
		if !seen[call.ExecutionID] {
			seen[call.ExecutionID] = true
			ids = append(ids, call.ExecutionID)
		}
	}
	cut := effectCut{tail: last.first, fromSeq: -1, before: before}
	for chunk := range slices.Chunk(ids, maxBatchIDs) {
		seq, err := s.FirstAccepted(ctx, chunk)
		if err != nil {
			return err
		}
		if seq >= 0 && (cut.fromSeq < 0 || seq < cut.fromSeq) {
			cut.fromSeq = seq
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cut.fromSeq < 0 {
		delete(c.cuts, key) // its executions are gone: read it whole next time
		return nil
	}
	c.cuts[key] = cut
	return nil
}
