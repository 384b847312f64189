package analyze

// Which earlier execution a success may be a replay of, found through
// maps: comparing each success with every earlier execution was quadratic
// in a group of many keyed successes (a tool polled with the same
// arguments all day, each call its own key).

import "github.com/mcpdup/mcpdup/activity"

// answerable indexes the earlier executions a success may be answered
// from (every one but an attempt that had no effect), by what the
// comparison reads. Each holds the latest, as the comparison walks back
// from the newest; firstByKey and first the earliest, for replayBase.
type answerable struct {
	byCreated      map[string]int // by created id
	byKey          map[string]int // by recorded key
	byKeyUncreated map[string]int // by recorded key, of those that show no created id
	// the latest success; the latest that shows no created id; and of
	// each, the latest whose records do not tell it apart (key or
	// arguments not recorded, or no key).
	success, successUncreated, weak, weakUncreated int
	firstByKey                                     map[string]int
	first                                          int
	started                                        bool
}

// how a success relates to the earlier execution latestFor finds.
type relation int

const (
	sameCreated relation = iota + 1 // it shows the same created id: a replay
	sameKeyAs                       // it carried the same key: answered from it
	untold                          // a success the records do not tell apart
)

func (a *answerable) init() {
	if !a.started {
		*a = answerable{byCreated: map[string]int{}, byKey: map[string]int{}, byKeyUncreated: map[string]int{}, firstByKey: map[string]int{},
			success: -1, successUncreated: -1, weak: -1, weakUncreated: -1, first: -1, started: true}
	}
}

// untold reports whether an execution's records cannot tell it apart
// from another success: its key or arguments are not recorded, or no key.
func (x *effectIn) untold() bool { return !x.recordsKey || !x.key.OK || !x.recordsArgs }

func keyOf(x *effectIn) (string, bool) { return x.key.V, x.key.OK && x.key.V != "" }

// note adds execution i, which a later success may be answered from.
func (a *answerable) note(i int, x *effectIn) {
	a.init()
	if a.first < 0 {
		a.first = i
	}
	if x.created != "" {
		a.byCreated[x.created] = i
	}
	if k, ok := keyOf(x); ok {
		a.byKey[k] = i
		if x.created == "" {
			a.byKeyUncreated[k] = i
		}
		if _, seen := a.firstByKey[k]; !seen {
			a.firstByKey[k] = i
		}
	}
	if x.outcome != activity.OutcomeSuccess {
		return
	}
	a.success = i
	if x.created == "" {
		a.successUncreated = i
	}
	if x.untold() {
		a.weak = i
		if x.created == "" {
			a.weakUncreated = i
		}
	}
}

// latestFor finds the latest earlier execution success x may be answered
// from, and how, or -1. Walking back from the newest, the first that
// compares decides: the same created id; else, unless both show created
// ids and they differ (two effects, whatever the keys say), the same key;
// else a success the records of one or the other cannot tell apart.
func (a *answerable) latestFor(x *effectIn) (int, relation) {
	a.init()
	get := func(m map[string]int, k string) int {
		if j, ok := m[k]; ok {
			return j
		}
		return -1
	}
	created, byKey, success, weak := -1, -1, a.success, a.weak
	keys := a.byKey
	if x.created != "" {
		// Those with another created id are two effects: only the same
		// id, or none shown, compare.
		created = get(a.byCreated, x.created)
		keys, success, weak = a.byKeyUncreated, a.successUncreated, a.weakUncreated
	}
	if k, ok := keyOf(x); ok {
		byKey = get(keys, k)
	}
	if !x.untold() {
		success = weak // x is told apart: only a success whose own records cannot be
	}
	best, how := -1, relation(0)
	for _, c := range []struct {
		j   int
		how relation
	}{{created, sameCreated}, {byKey, sameKeyAs}, {success, untold}} {
		if c.j > best { // ties go to the first: the comparison's order
			best, how = c.j, c.how
		}
	}
	return best, how
}

// replayBase is the earlier execution a replayed answer most likely
// replays: the first with the same key, else the first that may have
// acted (0 when none).
func (a *answerable) replayBase(x *effectIn) int {
	a.init()
	if k, ok := keyOf(x); ok {
		if j, ok := a.firstByKey[k]; ok {
			return j
		}
	}
	return max(a.first, 0)
}
