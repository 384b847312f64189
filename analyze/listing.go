package analyze

// A suspect of a huge group: every execution is read, a chunk at a time,
// and only those the suspect lists are kept whole.

import (
	"context"
	"fmt"
	"slices"

	"github.com/mcpdup/mcpdup/activity"
)

// maxListed is how many calls and executions a suspect lists: the first
// ones, and past them those its answers cite. The analysis reads them
// all. The group of a busy endpoint's hour in a proxy log that records no
// bodies (every POST one effect) holds hundreds of thousands: 200,000
// calls held whole took 2.4 GB, and their JSON 168 MB. A variable so that
// tests can list fewer.
var maxListed = 1000

// maxBatchCalls bounds the calls of the groups analysed together
// (analyseGroups), so a batch of many mid-size groups is bounded too.
const maxBatchCalls = 16 * 1024

// builder assembles a suspect from its group's executions, given in order
// a chunk at a time (add), then its calls (calls), then the walk (finish).
type builder struct {
	ctx   context.Context
	s     *activity.Store
	g     *group
	names sourceNames
	sus   *Suspect
	ids   []activity.ExecutionID // the group's executions, in the order their first calls came
	ew    effectWalk
	// pair: the first two executions that may have acted, which the walk
	// examines whenever two may have; listed whatever their place.
	pair []int
	// listed maps an execution's place in ids to its place in
	// sus.Executions, for those listed past the first maxListed.
	listed map[int]int
	// unsigned: executions that rest on a record nothing signs.
	unsigned map[activity.ExecutionID]bool
}

func newBuilder(ctx context.Context, s *activity.Store, g *group, names sourceNames) *builder {
	b := &builder{ctx: ctx, s: s, g: g, names: names, listed: map[int]int{}, unsigned: map[activity.ExecutionID]bool{},
		sus: &Suspect{EffectKey: g.key, Window: g.window.String(),
			FirstAt: g.calls[0].ReceivedAt, LastAt: g.calls[len(g.calls)-1].ReceivedAt, CallsTotal: len(g.calls)}}
	seen := map[activity.ExecutionID]bool{} // a map: a group may hold thousands
	for _, c := range g.calls {
		if !seen[c.ExecutionID] {
			seen[c.ExecutionID] = true
			b.ids = append(b.ids, c.ExecutionID)
		}
	}
	b.sus.ExecutionsTotal = len(b.ids)
	b.sus.listCap = maxListed
	return b
}

// add reads the next executions of the group (in order) from recs.
func (b *builder) add(ids []activity.ExecutionID, recs *groupRecords) error {
	for _, id := range ids {
		e, ok := recs.execs[id]
		if !ok {
			return fmt.Errorf("execution %s: %w", id, activity.ErrNotFound)
		}
		i := len(b.ew.out)
		ef := b.ew.add(&e)
		trs, approvals := recs.trs[id], recs.approvals[id]
		if slices.Contains(e.NotRecorded, activity.FactSignature) ||
			slices.ContainsFunc(trs, func(t activity.Transition) bool { return b.names[t.Source.Source].Unsigned(t.Source) }) {
			b.unsigned[id] = true
		}
		cited := false
		if ef.acted != No && len(b.pair) < 2 {
			b.pair = append(b.pair, i)
			cited = true
		}
		if i >= maxListed && !cited {
			continue
		}
		if i >= maxListed {
			b.listed[i] = len(b.sus.Executions)
		}
		if recs.partial {
			steps, err := loadExecutions(b.ctx, b.s, []activity.ExecutionID{id}, false)
			if err != nil {
				return err
			}
			trs, approvals = steps.trs[id], steps.approvals[id]
		}
		es := summarise(e, trs)
		es.Source, es.Approvals = b.names.text(e.Source), approvals
		b.sus.Executions = append(b.sus.Executions, es)
	}
	return nil
}

// execution is the listed summary of the group's i-th execution.
func (b *builder) execution(i int) *ExecutionSummary {
	if j, ok := b.listed[i]; ok {
		return &b.sus.Executions[j]
	}
	return &b.sus.Executions[i]
}

// calls lists the group's calls: the first maxListed, and the first call
// of each execution the walk examines. Each chunk of calls is completed
// by fill (nil: they already are), and every call is checked for a
// record nothing signs.
func (b *builder) calls(fill func([]*CallRef) error, i1, i2 int) error {
	cited := map[activity.ExecutionID]bool{}
	for _, i := range []int{i1, i2} {
		if i >= 0 {
			cited[b.ids[i]] = true
		}
	}
	const chunk = 8 * 1024
	for lo := 0; lo < len(b.g.calls); lo += chunk {
		part := b.g.calls[lo:min(lo+chunk, len(b.g.calls))]
		if fill != nil {
			ptrs := make([]*CallRef, len(part))
			for i := range part {
				ptrs[i] = &part[i]
			}
			if err := fill(ptrs); err != nil {
				return err
			}
		}
		for i, c := range part {
			if b.names[c.prov.Source].Unsigned(c.prov) {
				b.unsigned[c.ExecutionID] = true // an unsigned call (an attached retry) changes the walk too
			}
			if lo+i < maxListed || cited[c.ExecutionID] {
				delete(cited, c.ExecutionID)
				b.sus.Calls = append(b.sus.Calls, c)
			} else if fill != nil {
				part[i] = CallRef{Seq: c.Seq, ReceivedAt: c.ReceivedAt, ExecutionID: c.ExecutionID} // as keyRef left it
			}
		}
	}
	return nil
}

// finish lists the calls, loads the runs of those listed and walks the
// questions.
func (b *builder) finish(ctx context.Context, s *activity.Store, fill func([]*CallRef) error) (*Suspect, error) {
	sus := b.sus
	if len(b.ew.out) == 0 {
		return nil, fmt.Errorf("group %s: no executions", b.g.key)
	}
	w := &walk{sus: sus, sources: b.names, eff: b.ew.out, ins: b.ew.in}
	w.pick(b.pair)
	if err := b.calls(fill, w.i1, w.i2); err != nil {
		return nil, err
	}
	w.unsignedN = len(b.unsigned)
	sus.ID = suspectID(sus.Calls[0].ID) // completed by now
	w.e1 = b.execution(w.i1)
	if w.i2 >= 0 {
		w.e2 = b.execution(w.i2)
	}
	runs := map[activity.RunID]activity.Run{}
	for _, c := range sus.Calls {
		if c.RunID == "" {
			continue
		}
		if _, ok := runs[c.RunID]; !ok {
			r, err := s.Run(ctx, c.RunID)
			if err != nil {
				return nil, err
			}
			runs[c.RunID] = r
			sus.runs = append(sus.runs, r)
		}
	}
	w.runs = runs
	first := sus.Executions[0].exec
	sus.Tool, sus.Target, sus.Method = first.Tool, first.Target, first.Method
	sus.Recorder = b.names.recorder(first.Source)
	w.run()
	if note := sus.ListingNote(); note != "" {
		sus.Summary += " " + note + "."
	}
	if sus.Verdict == VerdictDuplicate {
		shown, err := w.effectsShown(ctx, s)
		if err != nil {
			return nil, err
		}
		sus.Shown = shown
	}
	return sus, nil
}

// analyseLarge analyses a group of more than maxListed calls, reading its
// executions a chunk at a time.
func analyseLarge(ctx context.Context, s *activity.Store, g *group, names sourceNames) (*Suspect, error) {
	b := newBuilder(ctx, s, g, names)
	unsigned := names.anyUnsigned()
	step := min(maxBatchIDs, maxListed) // so the tests' short listings read partial chunks too
	for lo := 0; lo < len(b.ids); lo += step {
		chunk := b.ids[lo:min(lo+step, len(b.ids))]
		// Past those listed, an execution's steps matter only for what
		// signs them.
		recs, err := loadExecutions(ctx, s, chunk, lo >= maxListed && !unsigned)
		if err != nil {
			return nil, err
		}
		if err := b.add(chunk, recs); err != nil {
			return nil, err
		}
	}
	return b.finish(ctx, s, func(calls []*CallRef) error { return fillCalls(ctx, s, names, calls) })
}

// NCalls is how many calls the suspect's group holds, listed or not.
func (s *Suspect) NCalls() int { return max(s.CallsTotal, len(s.Calls)) }

// NExecutions is how many executions its group holds, listed or not.
func (s *Suspect) NExecutions() int { return max(s.ExecutionsTotal, len(s.Executions)) }

// ListingNote says what a suspect that lists only some of its calls or
// executions lists, or "" when it lists them all.
func (s *Suspect) ListingNote() string {
	if len(s.Calls) >= s.NCalls() && len(s.Executions) >= s.NExecutions() {
		return ""
	}
	return fmt.Sprintf("Listed: %d of its %d calls and %d of its %d executions (the first %d, and those the answers cite); the answers read them all",
		len(s.Calls), s.NCalls(), len(s.Executions), s.NExecutions(), s.listCap)
}
