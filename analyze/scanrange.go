package analyze

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// farFuture bounds a range left open at its end.
var farFuture = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// scanRange is Scan for the suspects whose first call was received
// between opts.From and opts.To: an incident's window in a long log. The
// range's calls are read through the received_at index, and each effect
// they asked for is cut into windows from its own calls (the effect
// index), exactly as a whole scan cuts it: a group's first call may lie in
// the range while the calls that decide where its window starts lie
// before it. The cost follows the range and its effects, not the log.
// Suspects come out in the order of their first calls.
func scanRange(ctx context.Context, s *activity.Store, opts Options, fn func(*Suspect) error) error {
	from, to := opts.From, opts.To
	if to.IsZero() {
		to = farFuture
	}
	if to.Before(from) {
		return fmt.Errorf("analysis range: %s is before %s", to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	names, err := loadSourceNames(ctx, s)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var keys []string
	near := opts.finder()
	var n int64
	err = s.ScanCallKeysBetween(ctx, from, to, func(k *activity.CallKey) error {
		if n++; opts.Progress != nil && n%8192 == 0 {
			opts.Progress(n)
		}
		if !seen[k.EffectKey] {
			seen[k.EffectKey] = true
			keys = append(keys, k.EffectKey)
		}
		if opts.NearMisses != nil {
			near.seeKey(opts, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var groups []*group
	for _, key := range keys {
		err := effectGroups(ctx, s, opts, key, func(g *group) error {
			if len(g.calls) >= 2 && !g.first.Before(from) && !g.first.After(to) {
				groups = append(groups, g)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	slices.SortFunc(groups, func(a, b *group) int {
		if c := a.first.Compare(b.first); c != 0 {
			return c
		}
		return cmp.Compare(a.calls[0].Seq, b.calls[0].Seq)
	})
	for batch := range slices.Chunk(groups, 256) {
		if err := analyseGroups(ctx, s, names, batch, fn); err != nil {
			return err
		}
	}
	return near.report(ctx, s, names, opts)
}
