package analyze

import (
	"context"
	"fmt"
	"strconv"

	"github.com/mcpdup/mcpdup/activity"
)

// effect is what the records show an execution did at its target.
type effect struct {
	acted Tri // yes: the records show it acted; no: it cannot have; unknown: it may have
	// replayOf is the earlier execution (index) whose answer this one's
	// is shown or keyed to be, or -1.
	replayOf int
	// possibleReplay: a success after an earlier success, where nothing
	// shows two effects (no keys recorded, no created ids): the target may
	// have answered the second from the first.
	possibleReplay bool
	// noOutcome: the source records no outcome for it at all.
	noOutcome bool
	why       string
}

// effectIn is what the effect walk reads of one execution. Every
// execution of a group has one; the whole execution is kept only for
// those its suspect lists (maxListed): the group of a busy endpoint's hour
// in a proxy log holds hundreds of thousands.
type effectIn struct {
	id                                      activity.ExecutionID
	dispatched                              bool
	outcome                                 activity.Outcome
	recordsOutcome, recordsKey, recordsArgs bool
	key                                     activity.Opt[string]
	created, replayed                       string
}

func effectInOf(x *activity.Execution) effectIn {
	in := factsOf(x.ID, x.NotRecorded, x.IdempotencyKey, x.Created, x.Replayed)
	in.dispatched, in.outcome = x.State.Dispatched(), x.Outcome
	return in
}

// factsOf is what the walk reads of an execution beside its state: what
// its source records, the key it was sent with, what its answer created
// or replayed (the history checker reads them from its transitions' rows).
func factsOf(id activity.ExecutionID, notRecorded []activity.Fact, key activity.Opt[string], created, replayed string) effectIn {
	x := activity.Execution{NotRecorded: notRecorded} // the model's one rule for what a source records
	return effectIn{id: id, recordsOutcome: x.Records(activity.FactOutcome), recordsKey: x.Records(activity.FactIdempotencyKey),
		recordsArgs: x.Records(activity.FactArguments), key: key, created: created, replayed: replayed}
}

// effectWalk reads each execution of a suspect in order (add). Two
// successes are two effects only when the records show it: distinct
// created ids, or keys the source records and that differ (none sent
// counts). The same key as an earlier execution that may have acted, the
// same created id, or the target's replay mark make an answer a replay,
// not an effect.
type effectWalk struct {
	in  []effectIn
	out []effect
	// mayHaveActed holds, per recorded key, the latest execution sent with
	// it that may have acted: one lookup, where a scan of every earlier
	// execution made a group of many unanswered calls quadratic (20,000
	// MCP calls of one effect: 7.8 s).
	mayHaveActed map[string]int
	// answerable: the earlier executions a success may be a replay of,
	// indexed by what the comparison reads (answerable.go).
	answerable answerable
}

// add reads the next execution and returns what it did.
func (ew *effectWalk) add(x *activity.Execution) effect { return ew.addIn(effectInOf(x)) }

func (ew *effectWalk) addIn(in effectIn) effect {
	if ew.mayHaveActed == nil {
		ew.mayHaveActed = map[string]int{}
	}
	i := len(ew.in)
	ew.in = append(ew.in, in)
	ef := ew.effectOf(i)
	ew.out = append(ew.out, ef)
	if k := in.key; ef.acted != No && k.OK && k.V != "" {
		ew.mayHaveActed[k.V] = i
	}
	if ef.acted != No || ef.replayOf >= 0 { // an attempt that had no effect cannot be replayed
		ew.answerable.note(i, &ew.in[i])
	}
	return ef
}

func (ew *effectWalk) effectOf(i int) effect {
	x, prior := &ew.in[i], ew.out
	ef := effect{acted: Unknown, replayOf: -1}
	switch {
	case !x.dispatched:
		ef.acted, ef.why = No, "never dispatched"
		return ef
	case x.outcome == activity.OutcomeFailure:
		ef.acted, ef.why = No, "the target answered that it failed"
		return ef
	case x.outcome != activity.OutcomeSuccess:
		ef.noOutcome = !x.recordsOutcome
		ef.why = "no outcome shown"
		// Sent with the key of an earlier execution that may have acted:
		// whatever happened to it, the target could act only once.
		if j, ok := ew.mayHaveActed[x.key.V]; ok && sameKey(x.key, ew.in[j].key) {
			ef.acted, ef.replayOf, ef.why = No, j, "the same Idempotency-Key as "+string(ew.in[j].id)+": the target acts on it once at most"
		}
		return ef
	}
	ef.acted, ef.why = Yes, "the target answered success"
	if x.replayed != "" {
		ef.acted, ef.replayOf, ef.why = No, ew.answerable.replayBase(x), "the target says its answer is a replay ("+x.replayed+")"
		return ef
	}
	// The latest earlier execution it may be answered from, as it
	// compares: the same created id, the same key, or a success the
	// records do not tell apart from it.
	j, how := ew.answerable.latestFor(x)
	if j < 0 {
		return ef
	}
	base := j
	if prior[j].replayOf >= 0 {
		base = prior[j].replayOf
	}
	y := &ew.in[j]
	switch how {
	case sameCreated:
		ef.acted, ef.replayOf, ef.why = No, base, "the same created id as "+string(y.id)+": a replay"
	case sameKeyAs:
		ef.acted, ef.replayOf, ef.why = No, base, "the same Idempotency-Key as "+string(y.id)+": the target answers it from the first"
	case untold:
		ef.acted, ef.possibleReplay, ef.why = Unknown, true, "a second success the records do not show to be a second effect"
	}
	return ef
}

// sameKey reports whether two executions were sent with one recorded,
// non-empty idempotency key.
func sameKey(x, y activity.Opt[string]) bool {
	return x.OK && y.OK && x.V != "" && x.V == y.V
}

// sourceNames names import sources by their file, for evidence.
type sourceNames map[activity.SourceID]activity.Source

// text is a provenance as a reviewer finds it: "file:line record"; empty
// for the live gateway.
func (n sourceNames) text(p activity.Provenance) string {
	if p.IsZero() {
		return ""
	}
	s := firstNonEmpty(n[p.Source].File, string(p.Source))
	if p.Line > 0 {
		s += ":" + strconv.FormatInt(p.Line, 10)
	}
	if p.Record != "" {
		s += " " + p.Record
	}
	return s
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// effectsShown cites what shows a duplicate's two effects: the answers of
// the pair that name what each created, and a later DELETE or PATCH of
// what the second created (someone undid it: it was a second thing).
func (w *walk) effectsShown(ctx context.Context, s *activity.Store) ([]Evidence, error) {
	var ev []Evidence
	for _, e := range []*ExecutionSummary{w.e1, w.e2} {
		if t := transitionTo(e, activity.StateSucceeded); t != nil && t.Created != "" {
			ev = append(ev, w.evidence(e, t, "the answer names "+t.Created)...)
		}
	}
	listed, err := w.listingOfBoth(ctx, s)
	if err != nil {
		return nil, err
	}
	ev = append(ev, listed...)
	created := w.e2.exec.Created
	if created == "" {
		return ev, nil
	}
	later, err := s.Executions(ctx, activity.ExecutionFilter{TargetEnds: created, Methods: []string{"DELETE", "PATCH"}, AfterSeq: w.e2.Seq, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("cleanup of %s: %w", created, err)
	}
	for _, x := range later {
		ev = append(ev, Evidence{Seq: x.Seq, What: fmt.Sprintf("a later %s of %s undid the second", x.Method, created), Source: w.sources.text(x.Source)})
	}
	return ev, nil
}

// listingOfBoth cites the first later read whose answer lists both
// created ids: the target itself shows it holds two things.
func (w *walk) listingOfBoth(ctx context.Context, s *activity.Store) ([]Evidence, error) {
	c1, c2 := w.e1.exec.Created, w.e2.exec.Created
	if c1 == "" || c2 == "" || c1 == c2 {
		return nil, nil
	}
	found, err := s.ListingsAfter(ctx, w.e2.Seq, c1, c2)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	t := found[0]
	x, err := s.Execution(ctx, t.ExecutionID)
	if err != nil {
		return nil, fmt.Errorf("listing of %s and %s: %w", c1, c2, err)
	}
	what := fmt.Sprintf("a later %s %s lists both %s and %s", x.Method, x.Target, c1, c2)
	return []Evidence{{Seq: t.Seq, What: what, Source: w.sources.text(firstProvenance(t.Source, x.Source))}}, nil
}

func firstProvenance(ps ...activity.Provenance) activity.Provenance {
	for _, p := range ps {
		if !p.IsZero() {
			return p
		}
	}
	return activity.Provenance{}
}

// recorder names who recorded an execution: mcpdup's gateway for a live
// one, else the format of the log it was imported from ("envoy",
// "sallyport", "passthrough-capture"): the middle lane of its timeline is
// that, not a gateway it never went through.
func (n sourceNames) recorder(p activity.Provenance) string {
	if p.IsZero() {
		return RecorderGateway
	}
	return firstNonEmpty(n[p.Source].Format, "imported log")
}

// Recorders returns what recorded a call of each provenance, as
// Suspect.Recorder says it: "gateway", or the format of the log it came
// from.
func Recorders(ctx context.Context, s *activity.Store) (func(activity.Provenance) string, error) {
	names, err := loadSourceNames(ctx, s)
	if err != nil {
		return nil, err
	}
	return names.recorder, nil
}

// RecorderGateway is Suspect.Recorder for executions mcpdup's own gateway
// recorded.
const RecorderGateway = "gateway"

// anyUnsigned reports whether any source holds records nothing signs.
func (n sourceNames) anyUnsigned() bool {
	for _, src := range n {
		if src.UnsignedFrom > 0 {
			return true
		}
	}
	return false
}
