package analyze

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
// records (Follow), so its near misses stay a scan's.
type NearMissFinder struct {
	last    map[string]CallRef // tool → its latest call
	lastKey map[string]string  // tool → that call's effect key
	found   []NearMiss         // in the order of their second calls, as a scan finds them
	omitted int
	behind  bool               // a call came before its tool's latest
	through int64              // the newest log record among the calls seen
	pending []activity.CallKey // followed calls not settled yet
	changed bool               // found changed since the last Name
}

// settleDelay is how long a followed call waits before the finder sees
// it: a gateway takes a call's time when it arrives and commits it after
// its checks, so two concurrent calls can reach the log in the other
// order. Seen in order once both are in, they make no false alarm (and no
// whole read of the log to recover from one).
const settleDelay = 5 * time.Second

// NewNearMissFinder returns a finder that has seen no call.
func NewNearMissFinder() *NearMissFinder {
	return &NearMissFinder{last: map[string]CallRef{}, lastKey: map[string]string{}}
}

// Follow feeds the finder the calls of records appended since it last
// saw one (Touched.Calls), as of now. Calls it has seen are passed over (a
// refresh may read again what the scan read); a call is seen once
// settleDelay has passed since it was received, in the order calls were
// received. A call that still comes before its tool's latest (an older
// log imported meanwhile) makes the finder Behind.
func (n *NearMissFinder) Follow(opts Options, calls []activity.CallKey, now time.Time) {
	newest := n.through
	for _, k := range calls {
		if k.Seq > n.through {
			n.pending = append(n.pending, k)
			newest = max(newest, k.Seq)
		}
	}
	n.through = newest
	slices.SortFunc(n.pending, func(a, b activity.CallKey) int {
		if c := a.ReceivedAt.Compare(b.ReceivedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	horizon := now.Add(-settleDelay)
	settled := 0
	for settled < len(n.pending) && !n.pending[settled].ReceivedAt.After(horizon) {
		k := &n.pending[settled]
		n.seeKey(opts, k)
		settled++
	}
	n.pending = slices.Delete(n.pending, 0, settled)
}

// Changed reports whether the finder holds near misses Name has not
// named yet.
func (n *NearMissFinder) Changed() bool { return n.changed }

// Behind reports whether a call came out of order: only a finder fed the
// whole log again (FindNearMisses) names the near misses now.
func (n *NearMissFinder) Behind() bool { return n.behind }

// FindNearMisses feeds a new finder every call of the log, by their keys
// (no suspect is analysed).
func FindNearMisses(ctx context.Context, s *activity.Store, opts Options) (*NearMissFinder, error) {
	n := NewNearMissFinder()
	err := s.ScanCallKeys(ctx, func(k *activity.CallKey) error {
		n.seeKey(opts, k)
		return nil
	})
	return n, err
}

// seeKey follows a call known by its key alone.
func (n *NearMissFinder) seeKey(opts Options, k *activity.CallKey) {
	n.see(k, keyRef(k), windowOf(opts, k))
}

func (n *NearMissFinder) see(r *activity.CallKey, c CallRef, window time.Duration) {
	n.through = max(n.through, r.Seq)
	if r.Tool == "" {
		return
	}
	prev, ok := n.last[r.Tool]
	if ok && callBefore(c, prev) {
		n.behind = true
		return
	}
	if ok && n.lastKey[r.Tool] != r.EffectKey && c.ReceivedAt.Sub(prev.ReceivedAt) <= window {
		n.add(NearMiss{Tool: r.Tool, First: prev, Second: c})
	}
	n.last[r.Tool], n.lastKey[r.Tool] = c, r.EffectKey
}

// callBefore orders calls as a scan reads them: by time received, then
// log record.
func callBefore(a, b CallRef) bool {
	return a.ReceivedAt.Before(b.ReceivedAt) || a.ReceivedAt.Equal(b.ReceivedAt) && a.Seq < b.Seq
}

// add keeps a near miss among the first 2×maxNearMisses in the order of
// their second calls, as a scan keeps them: a followed call of one tool
// can come before another tool's latest.
func (n *NearMissFinder) add(m NearMiss) {
	i := sort.Search(len(n.found), func(i int) bool { return callBefore(m.Second, n.found[i].Second) })
	if i == maxNearMisses*2 {
		n.omitted++
		return
	}
	if len(n.found) == maxNearMisses*2 {
		n.found = n.found[:len(n.found)-1]
		n.omitted++
	}
	n.found = slices.Insert(n.found, i, m)
	n.changed = true
}

// report names the near misses found to opts.NearMisses, if set.
func (n *NearMissFinder) report(ctx context.Context, s *activity.Store, names sourceNames, opts Options) error {
	if opts.NearMisses == nil {
		return nil
	}
	found, omitted, err := n.name(ctx, s, names)
	if err != nil {
		return err
	}
	opts.NearMisses(found, omitted)
	return nil
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
	n.changed = false
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
