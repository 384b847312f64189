package analyze

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// DefaultWindow groups calls whose tool's attach window is not recorded
// (most imported logs): two calls for the same effect within an hour are
// a suspect.
const DefaultWindow = time.Hour

// Options tune an analysis.
type Options struct {
	// Window overrides every group's window; zero uses the tool's recorded
	// attach window, else DefaultWindow.
	Window time.Duration
	// Progress, if set, is called now and then with calls read so far.
	Progress func(calls int64)
}

// EffectKey names the requested effect independently of who asked: tool,
// target, method and canonical arguments, hashed the same way for every
// source. (The gateway's fingerprint also covers actor and scope; grouping
// by effect lets question 1 tell two processes apart.)
func EffectKey(tool, target, method string, arguments []byte) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(tool), []byte(target), []byte(method), arguments} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return "eff:" + hex.EncodeToString(h.Sum(nil))[:24]
}

// group is calls for one effect inside one window.
type group struct {
	key    string
	first  time.Time
	window time.Duration
	calls  []CallRef
	tool   string
	target string
	method string
}

// CallRef is a call as a suspect lists it.
type CallRef struct {
	ID          activity.CallID      `json:"id"`
	Actor       string               `json:"actor"`
	RunID       activity.RunID       `json:"run_id,omitempty"`
	ReceivedAt  time.Time            `json:"received_at"`
	Disposition activity.Disposition `json:"disposition"`
	ExecutionID activity.ExecutionID `json:"execution_id"`
}

// Scan streams the store's calls in time order, groups them by effect
// within each group's window, and calls fn with every group of two or
// more calls, analysed. Memory holds only the groups still open.
func Scan(ctx context.Context, s *activity.Store, opts Options, fn func(*Suspect) error) error {
	open := map[string]*group{}
	var n int64
	var lastSweep time.Time
	emit := func(g *group) error {
		if len(g.calls) < 2 {
			return nil
		}
		sus, err := analyseGroup(ctx, s, g)
		if err != nil {
			return fmt.Errorf("suspect %s: %w", g.key, err)
		}
		return fn(sus)
	}
	// sweep closes groups whose window has passed, oldest first so the
	// suspects come out in time order.
	sweep := func(now time.Time, all bool) error {
		var done []*group
		for k, g := range open {
			if all || now.Sub(g.first) > g.window {
				done = append(done, g)
				delete(open, k)
			}
		}
		sort.Slice(done, func(i, j int) bool { return done[i].first.Before(done[j].first) })
		for _, g := range done {
			if err := emit(g); err != nil {
				return err
			}
		}
		return nil
	}
	err := s.ScanCalls(ctx, func(r *activity.CallRow) error {
		n++
		if opts.Progress != nil && n%8192 == 0 {
			opts.Progress(n)
		}
		key := EffectKey(r.Tool, r.Target, r.Method, r.Arguments)
		window := opts.Window
		if window == 0 {
			window = DefaultWindow
			if r.Window.OK && r.Window.V > 0 {
				window = r.Window.V
			}
		}
		g := open[key]
		if g != nil && r.ReceivedAt.Sub(g.first) > g.window {
			delete(open, key)
			if err := emit(g); err != nil {
				return err
			}
			g = nil
		}
		if g == nil {
			g = &group{key: key, first: r.ReceivedAt, window: window, tool: r.Tool, target: r.Target, method: r.Method}
			open[key] = g
		}
		g.calls = append(g.calls, CallRef{ID: r.ID, Actor: r.Actor, RunID: r.RunID, ReceivedAt: r.ReceivedAt,
			Disposition: r.Disposition, ExecutionID: r.ExecutionID})
		if r.ReceivedAt.Sub(lastSweep) > time.Minute {
			lastSweep = r.ReceivedAt
			return sweep(r.ReceivedAt, false)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return sweep(time.Time{}, true)
}

// All collects every suspect (for small stores and tests).
func All(ctx context.Context, s *activity.Store, opts Options) ([]*Suspect, error) {
	var out []*Suspect
	err := Scan(ctx, s, opts, func(sus *Suspect) error {
		out = append(out, sus)
		return nil
	})
	return out, err
}

// Find returns the suspect with this id.
func Find(ctx context.Context, s *activity.Store, opts Options, id string) (*Suspect, error) {
	var found *Suspect
	errFound := errors.New("found")
	err := Scan(ctx, s, opts, func(sus *Suspect) error {
		if sus.ID == id {
			found = sus
			return errFound
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return nil, err
	}
	if found == nil {
		return nil, fmt.Errorf("suspect %s: %w", id, activity.ErrNotFound)
	}
	return found, nil
}
