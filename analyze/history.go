package analyze

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// Op is one operation of a Jepsen-style history: an invocation of an
// action at its target and how it completed. ok: the target acted; fail:
// it did not; info: nobody knows (Jepsen's indeterminate operation).
type Op struct {
	Index     int64                `json:"index"` // the transition's log record
	Type      string               `json:"type"`  // invoke | ok | fail | info
	Process   string               `json:"process"`
	F         string               `json:"f"`     // the tool
	Value     string               `json:"value"` // the effect key: same value, same requested effect
	Execution activity.ExecutionID `json:"execution"`
	Time      *time.Time           `json:"time,omitempty"`
	// Recovered marks a completion that settled an earlier info: a status
	// lookup, a resend with the same key, or an operator's resolution.
	Recovered bool `json:"recovered,omitempty"`
	// ReadOnly marks a read: it has no effect to duplicate.
	ReadOnly bool `json:"read_only,omitempty"`
	// execSeq, window and facts are what the checker's effect rule reads
	// of the execution: the analysis's, so that both say duplicated alike.
	execSeq int64
	window  time.Duration
	facts   effectIn
}

// History streams the store's lifecycle as operations, in log order.
func History(ctx context.Context, s *activity.Store, fn func(Op) error) error {
	infos := pendingInfos{}
	return s.ScanTransitions(ctx, 0, -1, func(t *activity.TransitionRow) error {
		op, ok := opOf(t, infos[t.ExecutionID])
		if !ok {
			return nil
		}
		infos.note(op)
		return fn(op)
	})
}

// pendingInfos are the executions whose last completion was info: the
// next ok or fail settles it (Op.Recovered).
type pendingInfos map[activity.ExecutionID]bool

func (p pendingInfos) note(op Op) {
	switch op.Type {
	case "info":
		p[op.Execution] = true
	case "ok", "fail":
		delete(p, op.Execution)
	}
}

// opOf is the operation a transition is, if any: a dispatch invokes; a
// success or an operator's verification is ok; a failure (after dispatch)
// or an operator's rejection fails; an unknown outcome is info. wasInfo
// says the execution's last completion was info, which this one settles.
func opOf(t *activity.TransitionRow, wasInfo bool) (Op, bool) {
	op := Op{Index: t.Seq, Process: string(t.RunID), F: t.Tool, Value: t.EffectKey, Execution: t.ExecutionID,
		ReadOnly: t.Contract == activity.ContractReadOnly, execSeq: t.ExecSeq, window: DefaultWindow,
		facts: factsOf(t.ExecutionID, t.NotRecorded, t.IdempotencyKey, t.ExecCreated, t.ExecReplayed)}
	op.facts.dispatched = true // operations are dispatches and what followed them
	if op.Process == "" {
		op.Process = t.Actor
	}
	if t.Window.OK && t.Window.V > 0 {
		op.window = t.Window.V
	}
	if t.At.OK {
		at := t.At.V
		op.Time = &at
	}
	switch t.To {
	case activity.StateDispatched:
		op.Type = "invoke"
	case activity.StateSucceeded, activity.StateVerified:
		op.Type = "ok"
	case activity.StateFailed, activity.StateRejectedByOperator:
		op.Type = "fail"
	case activity.StateFailedBefore:
		if t.From != activity.StateDispatched {
			return op, false // never invoked
		}
		op.Type = "fail"
	case activity.StateUnknown:
		op.Type = "info"
	default:
		return op, false
	}
	op.Recovered = (op.Type == "ok" || op.Type == "fail") && wasInfo
	return op, true
}

// CheckResult counts what a history shows, in the categories of Jepsen's
// set and queue checkers.
type CheckResult struct {
	Invocations int `json:"invocations"`
	OK          int `json:"ok"`
	Fail        int `json:"fail"`
	Info        int `json:"info"`
	// Duplicated: requested effects (values) the records show the target
	// performed more than once, by distinct executions, by the analysis's
	// rule: two successes that the records do not show to be one (the
	// same key, the same created id, a replay mark, or arguments or keys
	// not recorded, as a proxy log without bodies) are not two effects.
	Duplicated int `json:"duplicated"`
	// PossiblyDuplicated: effects that two or more executions may have
	// performed (an unknown outcome, then another send; two successes the
	// records cannot tell apart) where fewer than two are shown to have.
	PossiblyDuplicated int `json:"possibly_duplicated"`
	// Lost: invocations that never completed, not even as info, in a
	// source that records outcomes.
	Lost int `json:"lost"`
	// OutcomeNotRecorded: invocations whose source records no outcome
	// (an MCP call a proxy passed on): not lost, not known.
	OutcomeNotRecorded int `json:"outcome_not_recorded"`
	// Recovered: indeterminate operations later settled as ok or fail.
	Recovered int `json:"recovered"`
	// StillUnknown: executions whose last completion is info.
	StillUnknown      int      `json:"still_unknown"`
	DuplicatedEffects []string `json:"duplicated_effects,omitempty"` // their effect keys, as before
	// Duplicates names each duplicated effect: its tool and target, and
	// the executions that each performed it.
	Duplicates []DuplicatedEffect `json:"duplicates,omitempty"`
}

// DuplicatedEffect is one effect the target performed more than once.
type DuplicatedEffect struct {
	EffectKey  string                 `json:"effect_key"`
	Tool       string                 `json:"tool"`
	Target     string                 `json:"target,omitempty"`
	Method     string                 `json:"method,omitempty"`
	Executions []activity.ExecutionID `json:"executions"`
}

// Checker folds a history into a CheckResult; feed it ops in order.
type Checker struct {
	execsBy map[string]map[activity.ExecutionID]*histExec // effect key → its invoked executions, as they stand
	toolOf  map[string]string                             // effect key → tool
	pending map[activity.ExecutionID]bool                 // invoked, not completed: whether its source records outcomes
	unknown map[activity.ExecutionID]bool
	res     CheckResult
}

// histExec is an invoked execution as its latest operation left it.
type histExec struct {
	seq    int64
	at     time.Time     // its first operation's time, when recorded
	window time.Duration // its attach window
	facts  effectIn
	last   string // invoke | ok | fail | info
}

// NewChecker returns an empty checker.
func NewChecker() *Checker {
	return &Checker{execsBy: map[string]map[activity.ExecutionID]*histExec{}, toolOf: map[string]string{}, pending: map[activity.ExecutionID]bool{},
		unknown: map[activity.ExecutionID]bool{}}
}

// Add folds one operation.
func (c *Checker) Add(op Op) {
	switch op.Type {
	case "invoke":
		c.res.Invocations++
		c.pending[op.Execution] = op.facts.recordsOutcome
		delete(c.unknown, op.Execution) // a resend: its completion settles the earlier info
	case "ok", "fail", "info":
		delete(c.pending, op.Execution)
		if op.Recovered {
			c.res.Recovered++
		}
		delete(c.unknown, op.Execution)
	}
	if !op.ReadOnly {
		c.note(op)
	}
	switch op.Type {
	case "ok":
		c.res.OK++
	case "fail":
		c.res.Fail++
	case "info":
		c.res.Info++
		c.unknown[op.Execution] = true
	}
}

// Result returns the counts so far.
func (c *Checker) Result() CheckResult {
	r := c.res
	c.settle(&r)
	sort.Strings(r.DuplicatedEffects)
	slices.SortFunc(r.Duplicates, func(a, b DuplicatedEffect) int { return strings.Compare(a.EffectKey, b.EffectKey) })
	return r
}

// note keeps what op says of its execution: its latest operation.
func (c *Checker) note(op Op) {
	execs := c.execsBy[op.Value]
	if execs == nil {
		execs = map[activity.ExecutionID]*histExec{}
		c.execsBy[op.Value], c.toolOf[op.Value] = execs, op.F
	}
	x := execs[op.Execution]
	if x == nil {
		x = &histExec{seq: op.execSeq, window: op.window, facts: op.facts}
		if op.Time != nil {
			x.at = *op.Time
		}
		execs[op.Execution] = x
	}
	x.last = op.Type
}

// settle adds to r what the checker's maps hold: the lost and still
// unknown executions, and the effects performed more than once, read
// execution by execution in the order they were accepted through the
// analysis's effect walk.
func (c *Checker) settle(r *CheckResult) {
	for _, recorded := range c.pending {
		if recorded {
			r.Lost++
		} else {
			r.OutcomeNotRecorded++
		}
	}
	r.StillUnknown += len(c.unknown)
	for v, execs := range c.execsBy {
		if len(execs) < 2 {
			continue
		}
		order := make([]*histExec, 0, len(execs))
		for _, x := range execs {
			order = append(order, x)
		}
		// In time order, as the analysis reads calls (an import of an
		// older log after a newer one gives older executions later seqs).
		slices.SortFunc(order, func(a, b *histExec) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return cmp.Compare(a.seq, b.seq)
		})
		// As the analysis groups calls: executions within the window of
		// the first of their group are one group, walked apart from the
		// next (two deploys a day apart are two intents, not one twice).
		dup, maybe := false, false
		for len(order) > 0 {
			n := 1
			for n < len(order) && (order[n].at.IsZero() || order[0].at.IsZero() || order[n].at.Sub(order[0].at) <= order[0].window) {
				n++
			}
			shown, may := c.walk(order[:n])
			if len(shown) > 1 {
				if !dup {
					r.Duplicated++
					r.DuplicatedEffects = append(r.DuplicatedEffects, v)
				}
				dup = true
				r.Duplicates = append(r.Duplicates, DuplicatedEffect{EffectKey: v, Tool: c.toolOf[v], Executions: shown})
			} else if len(shown)+may > 1 {
				maybe = true
			}
			order = order[n:]
		}
		if maybe && !dup {
			r.PossiblyDuplicated++
		}
	}
}

// walk reads one group's executions through the analysis's effect walk:
// those the records show acted, and how many more may have.
func (c *Checker) walk(group []*histExec) (shown []activity.ExecutionID, maybe int) {
	var ew effectWalk
	for _, x := range group {
		in := x.facts
		switch x.last {
		case "ok":
			in.outcome = activity.OutcomeSuccess
		case "fail":
			in.outcome = activity.OutcomeFailure
		}
		switch ew.addIn(in).acted {
		case Yes:
			shown = append(shown, in.id)
		case Unknown:
			maybe++
		}
	}
	slices.Sort(shown)
	return shown, maybe
}

// endGroup settles everything seen so far and forgets it, for operations
// that come grouped by effect: nothing after the group's end concerns its
// executions, so the checker holds one group at a time.
func (c *Checker) endGroup() {
	c.settle(&c.res)
	clear(c.execsBy)
	clear(c.toolOf)
	clear(c.pending)
	clear(c.unknown)
}

// Check runs the checker over the store's whole history, read grouped by
// effect, then by execution, each in log order (the store sorts), ending
// a group at each new effect: memory holds one effect's executions, not
// all of them. The counts are exactly those over the history in log
// order: each execution's operations keep their order, and no count
// depends on the order between executions.
func Check(ctx context.Context, s *activity.Store) (CheckResult, error) {
	c := NewChecker()
	infos := pendingInfos{} // the group's
	var key string
	err := s.ScanTransitionsByEffect(ctx, func(t *activity.TransitionRow) error {
		if t.EffectKey != key {
			c.endGroup()
			clear(infos)
			key = t.EffectKey
		}
		op, ok := opOf(t, infos[t.ExecutionID])
		if !ok {
			return nil
		}
		infos.note(op)
		c.Add(op)
		return nil
	})
	if err != nil {
		return CheckResult{}, err
	}
	r := c.Result()
	// The target and method are the executions' own: read for the few
	// duplicated effects only.
	for i, d := range r.Duplicates {
		if e, err := s.Execution(ctx, d.Executions[0]); err == nil {
			r.Duplicates[i].Target, r.Duplicates[i].Method = e.Target, e.Method
		}
	}
	return r, nil
}

// checkInLogOrder is the Checker over History: the reference Check must
// agree with (its memory grows with the executions).
func checkInLogOrder(ctx context.Context, s *activity.Store) (CheckResult, error) {
	c := NewChecker()
	err := History(ctx, s, func(op Op) error {
		c.Add(op)
		return nil
	})
	return c.Result(), err
}
