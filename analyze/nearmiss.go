package analyze

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// NearMiss is two calls of one tool close in time that asked for
// different effects (other arguments, another target): not a suspect,
// shown so an engineer sees why two similar-looking calls were not
// grouped.
type NearMiss struct {
	Tool    string   `json:"tool"`
	First   CallRef  `json:"first"`
	Second  CallRef  `json:"second"`
	Differs []string `json:"differs"` // what tells them apart: "arguments.customer: cus_77 vs cus_78"
}

// maxNearMisses bounds the near misses one analysis names: a busy log has
// many calls of one tool with other arguments, and past a few hundred a
// list stops being read.
const maxNearMisses = 200

// NearMissFinder follows each tool's latest call, in the order calls
// were received, and collects each call whose tool's previous call inside
// the window asked for another effect. Scan feeds one every call
// (Options.Finder); live mode then feeds the same one the calls of new
// records (Touched.Calls), so its near misses stay those of a scan.
type NearMissFinder struct {
	last    map[string]CallRef // tool → its latest call
	lastKey map[string]string  // tool → that call's effect key
	found   []NearMiss
	omitted int
	behind  bool // a call came before its tool's latest
}

// NewNearMissFinder returns a finder that has seen no call.
func NewNearMissFinder() *NearMissFinder {
	return &NearMissFinder{last: map[string]CallRef{}, lastKey: map[string]string{}}
}

// See follows one call. A call received before its tool's latest (an
// older log imported later) is passed over, and the finder is then
// Behind: the near misses it would make are in the history it has left
// behind.
func (n *NearMissFinder) See(opts Options, k *activity.CallKey) {
	n.see(k, keyRef(k), windowOf(opts, k))
}

// Found reports how many candidates the finder holds (it keeps the first
// 2×maxNearMisses; past them the named list cannot change).
func (n *NearMissFinder) Found() int { return len(n.found) }

// Behind reports whether a call came out of order: only a finder fed the
// whole log again (FindNearMisses) names the near misses now.
func (n *NearMissFinder) Behind() bool { return n.behind }

// FindNearMisses feeds a new finder every call of the log, by their keys
// (no suspect is analysed).
func FindNearMisses(ctx context.Context, s *activity.Store, opts Options) (*NearMissFinder, error) {
	n := NewNearMissFinder()
	err := s.ScanCallKeys(ctx, func(k *activity.CallKey) error {
		n.See(opts, k)
		return nil
	})
	return n, err
}

func (n *NearMissFinder) see(r *activity.CallKey, c CallRef, window time.Duration) {
	if r.Tool == "" {
		return
	}
	prev, ok := n.last[r.Tool]
	if ok && c.ReceivedAt.Before(prev.ReceivedAt) {
		n.behind = true
		return
	}
	if ok && n.lastKey[r.Tool] != r.EffectKey && c.ReceivedAt.Sub(prev.ReceivedAt) <= window {
		if len(n.found) < maxNearMisses*2 {
			n.found = append(n.found, NearMiss{Tool: r.Tool, First: prev, Second: c})
		} else {
			n.omitted++
		}
	}
	n.last[r.Tool], n.lastKey[r.Tool] = c, r.EffectKey
}

// Name completes both calls of every candidate, loads their executions
// and says what differs; candidates that are reads, or whose arguments
// the log does not record, are dropped: nothing about them is worth a
// look. It returns at most maxNearMisses, and how many more there were.
func (n *NearMissFinder) Name(ctx context.Context, s *activity.Store) ([]NearMiss, int, error) {
	names, err := loadSourceNames(ctx, s)
	if err != nil {
		return nil, 0, err
	}
	return n.name(ctx, s, names)
}

func (n *NearMissFinder) name(ctx context.Context, s *activity.Store, names sourceNames) ([]NearMiss, int, error) {
	var ids []activity.ExecutionID
	var calls []*CallRef
	for i := range n.found {
		m := &n.found[i]
		ids = append(ids, m.First.ExecutionID, m.Second.ExecutionID)
		calls = append(calls, &m.First, &m.Second)
	}
	if err := fillCalls(ctx, s, names, calls); err != nil {
		return nil, 0, fmt.Errorf("near misses: %w", err)
	}
	execs := map[activity.ExecutionID]activity.Execution{}
	for len(ids) > 0 { // SQLite binds at most 32,766 values a statement
		part := ids[:min(len(ids), 500)]
		ids = ids[len(part):]
		got, err := s.ExecutionsByID(ctx, part)
		if err != nil {
			return nil, 0, fmt.Errorf("near misses: %w", err)
		}
		for k, v := range got {
			execs[k] = v
		}
	}
	var out []NearMiss
	omitted := n.omitted
	for _, m := range n.found {
		a, b := execs[m.First.ExecutionID], execs[m.Second.ExecutionID]
		if a.Contract == activity.ContractReadOnly || b.Contract == activity.ContractReadOnly ||
			!a.Records(activity.FactArguments) || !b.Records(activity.FactArguments) {
			continue
		}
		m.Differs = differs(a, b)
		if len(out) == maxNearMisses {
			omitted++
			continue
		}
		out = append(out, m)
	}
	return out, omitted, nil
}

// differs says what tells two executions of one tool apart.
func differs(a, b activity.Execution) []string {
	var d []string
	if a.Target != b.Target {
		d = append(d, fmt.Sprintf("target: %s vs %s", a.Target, b.Target))
	}
	if a.Method != b.Method {
		d = append(d, fmt.Sprintf("method: %s vs %s", a.Method, b.Method))
	}
	var x, y map[string]json.RawMessage
	if json.Unmarshal(a.Arguments, &x) != nil || json.Unmarshal(b.Arguments, &y) != nil {
		if !bytes.Equal(a.Arguments, b.Arguments) {
			d = append(d, "arguments differ")
		}
		return d
	}
	keys := map[string]bool{}
	for k := range x {
		keys[k] = true
	}
	for k := range y {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		if !bytes.Equal(x[k], y[k]) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		d = append(d, fmt.Sprintf("arguments.%s: %s vs %s", k, orAbsent(x[k]), orAbsent(y[k])))
	}
	return d
}

func orAbsent(v json.RawMessage) string {
	if v == nil {
		return "absent"
	}
	return string(v)
}

// Result is one whole analysis: the suspects, and the near misses named
// beside them.
type Result struct {
	Suspects          []*Suspect `json:"suspects"`
	NearMisses        []NearMiss `json:"near_misses"`
	NearMissesOmitted int        `json:"near_misses_omitted,omitempty"`
}

// Analyse collects every suspect and near miss (for small stores, tests
// and reports; Scan streams).
func Analyse(ctx context.Context, s *activity.Store, opts Options) (*Result, error) {
	res := &Result{Suspects: []*Suspect{}, NearMisses: []NearMiss{}}
	opts.NearMisses = func(ms []NearMiss, omitted int) {
		res.NearMisses, res.NearMissesOmitted = append(res.NearMisses, ms...), omitted
	}
	err := Scan(ctx, s, opts, func(sus *Suspect) error {
		res.Suspects = append(res.Suspects, sus)
		return nil
	})
	return res, err
}
