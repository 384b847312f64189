// Package report renders what the analysis found for people: a suspect's
// post-incident report in Markdown or self-contained HTML, the suspects
// as a table or Markdown, and the timeline every one of them shows (the
// console's swimlanes too): its frames, each with a kind, and the state of
// every execution after each event. It reads the model and the analysis;
// it decides nothing.
package report

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/analyze"
)

// Lane is a swimlane of the timeline.
type Lane string

const (
	LaneAgent   Lane = "agent"
	LaneGateway Lane = "gateway"
	LaneTarget  Lane = "target"
)

// FrameKind is what an event of a timeline stands for.
type FrameKind string

const (
	FrameCall      FrameKind = "call"      // a tools/call reached the gateway
	FrameStep      FrameKind = "step"      // a lifecycle step inside the gateway
	FrameDispatch  FrameKind = "dispatch"  // the execution was handed to its target
	FrameAnswer    FrameKind = "answer"    // the target answered
	FrameDelivered FrameKind = "delivered" // the result reached the agent
	// FrameLost: an answer was lost, the target's (outcome unknown) or the
	// agent's (result not delivered). Drawn as a cross.
	FrameLost FrameKind = "lost"
	// FrameApproval: an operator approval was requested or decided.
	FrameApproval FrameKind = "approval"
)

// Frame is one event of a replay and the state of every execution after it.
type Frame struct {
	Seq         int64                                   `json:"seq"`
	Time        *time.Time                              `json:"time,omitempty"`
	Kind        FrameKind                               `json:"kind"`
	From        Lane                                    `json:"from"` // an arrow from one lane to another, or From == To
	To          Lane                                    `json:"to"`
	Label       string                                  `json:"label"`
	ExecutionID activity.ExecutionID                    `json:"execution_id,omitempty"`
	CallID      activity.CallID                         `json:"call_id,omitempty"`
	States      map[activity.ExecutionID]activity.State `json:"states"`
}

// Timeline is the ordered events of a suspect or a time range.
type Timeline struct {
	Title string `json:"title"`
	// Recorder names the middle lane: "gateway" for mcpdup's, else what
	// recorded the events (an imported log's format).
	Recorder   string                 `json:"recorder,omitempty"`
	Executions []activity.ExecutionID `json:"executions"` // in order of appearance
	Frames     []Frame                `json:"frames"`
}

// MarshalJSON writes empty lists as [], not null (a range with no
// events).
func (t Timeline) MarshalJSON() ([]byte, error) {
	type plain Timeline
	if t.Executions == nil {
		t.Executions = []activity.ExecutionID{}
	}
	if t.Frames == nil {
		t.Frames = []Frame{}
	}
	return json.Marshal(plain(t))
}

// SuspectTimeline replays a suspect: its calls and every transition of its
// executions, in log order.
func SuspectTimeline(sus *analyze.Suspect) *Timeline {
	tl := &Timeline{Title: fmt.Sprintf("%s: %s", sus.ID, sus.Title), Recorder: sus.Recorder}
	type ev struct {
		seq      int64
		call     *analyze.CallRef
		tr       *activity.Transition
		approval *activity.Approval
		decided  bool // the approval's decision, not its request
	}
	var evs []ev
	for i := range sus.Calls {
		evs = append(evs, ev{seq: sus.Calls[i].Seq, call: &sus.Calls[i]})
	}
	for i := range sus.Executions {
		tl.Executions = append(tl.Executions, sus.Executions[i].ID)
		for j := range sus.Executions[i].Transitions {
			t := &sus.Executions[i].Transitions[j]
			evs = append(evs, ev{seq: t.Seq, tr: t})
		}
		for j := range sus.Executions[i].Approvals {
			a := &sus.Executions[i].Approvals[j]
			evs = append(evs, ev{seq: a.Seq, approval: a})
			if a.DecidedSeq > 0 {
				evs = append(evs, ev{seq: a.DecidedSeq, approval: a, decided: true})
			}
		}
	}
	slices.SortFunc(evs, func(a, b ev) int { return int(a.seq - b.seq) })
	var states stateTrack
	for _, e := range evs {
		var f Frame
		switch {
		case e.call != nil:
			f = callFrame(e.call.Seq, e.call.ID, e.call.ExecutionID, e.call.Disposition, e.call.ReceivedAt)
		case e.approval != nil:
			f = approvalFrame(e.seq, e.approval, e.decided)
		default:
			f = transitionFrame(e.tr)
			states.set(e.tr.ExecutionID, e.tr.To)
		}
		f.States = states.snapshot()
		tl.Frames = append(tl.Frames, f)
	}
	return tl
}

// RangeTimeline replays everything that happened between two times: every
// call and transition received or recorded in [from, to].
func RangeTimeline(ctx context.Context, s *activity.Store, from, to time.Time) (*Timeline, error) {
	tl := &Timeline{Title: fmt.Sprintf("%s – %s", from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))}
	recorderOf, err := analyze.Recorders(ctx, s)
	if err != nil {
		return nil, err
	}
	var calls []Frame
	var recorders []string // what recorded the range's calls: its middle lane
	err = s.ScanCallsBetween(ctx, from, to, func(r *activity.CallRow) error {
		calls = append(calls, callFrame(r.Seq, r.ID, r.ExecutionID, r.Disposition, r.ReceivedAt))
		if rec := recorderOf(r.Source); !slices.Contains(recorders, rec) {
			recorders = append(recorders, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// One recorder names the lane; several (the gateway and an imported
	// log) are named together, never as the gateway alone.
	slices.Sort(recorders)
	tl.Recorder = strings.Join(recorders, " + ")
	var trs []activity.Transition
	err = s.ScanTransitions(ctx, 0, -1, func(t *activity.TransitionRow) error {
		if !t.At.OK || t.At.V.Before(from) || t.At.V.After(to) {
			return nil
		}
		trs = append(trs, t.Transition)
		return nil
	})
	if err != nil {
		return nil, err
	}
	frames := calls
	moved := make(map[int64]activity.State, len(trs)) // each transition's record: the state it moved to
	for i := range trs {
		frames = append(frames, transitionFrame(&trs[i]))
		moved[trs[i].Seq] = trs[i].To
	}
	slices.SortFunc(frames, func(a, b Frame) int { return int(a.Seq - b.Seq) })
	var states stateTrack
	seen := map[activity.ExecutionID]bool{}
	for i := range frames {
		f := &frames[i]
		if f.ExecutionID != "" && !seen[f.ExecutionID] {
			seen[f.ExecutionID] = true
			tl.Executions = append(tl.Executions, f.ExecutionID)
		}
		if f.CallID == "" {
			states.set(f.ExecutionID, moved[f.Seq])
		}
		f.States = states.snapshot()
	}
	tl.Frames = frames
	return tl, nil
}

// maxFrameStates bounds the states a frame carries: those of the
// executions changed last. A suspect's few are all there; of hundreds,
// those in play (every state in every frame was quadratic: a suspect
// listing 1,000 executions made 75 MB of Markdown).
const maxFrameStates = 6

// stateTrack follows the state of each execution of a timeline, and
// which changed last.
type stateTrack struct {
	states map[activity.ExecutionID]activity.State
	recent []activity.ExecutionID // changed last at the end; at most maxFrameStates
}

func (t *stateTrack) set(id activity.ExecutionID, s activity.State) {
	if t.states == nil {
		t.states = map[activity.ExecutionID]activity.State{}
	}
	t.states[id] = s
	if i := slices.Index(t.recent, id); i >= 0 {
		t.recent = slices.Delete(t.recent, i, i+1)
	} else if len(t.recent) == maxFrameStates {
		t.recent = slices.Delete(t.recent, 0, 1)
	}
	t.recent = append(t.recent, id)
}

// snapshot is the states of the executions changed last.
func (t *stateTrack) snapshot() map[activity.ExecutionID]activity.State {
	out := make(map[activity.ExecutionID]activity.State, len(t.recent))
	for _, id := range t.recent {
		out[id] = t.states[id]
	}
	return out
}

// approvalFrame is an operator approval the execution waited on: asked
// (the gateway's step), then decided, by whom and when, with the note.
func approvalFrame(seq int64, a *activity.Approval, decided bool) Frame {
	f := Frame{Seq: seq, Kind: FrameApproval, From: LaneGateway, To: LaneGateway, ExecutionID: a.ExecutionID}
	if !decided {
		at := a.RequestedAt
		f.Time = &at
		f.Label = fmt.Sprintf("%s approval %s requested", a.Kind, ShortID(a.ID))
		return f
	}
	if a.DecidedAt.OK {
		at := a.DecidedAt.V
		f.Time = &at
	}
	f.Label = fmt.Sprintf("approval %s %s by %s", ShortID(a.ID), a.State, a.Operator)
	if a.Note != "" {
		f.Label += ": " + a.Note
	}
	return f
}

func callFrame(seq int64, id activity.CallID, exec activity.ExecutionID, d activity.Disposition, at time.Time) Frame {
	label := "tools/call"
	switch d {
	case activity.DispositionAttached:
		label = "tools/call (retry, attached to " + Short(exec) + ")"
	case activity.DispositionNewExecution:
		label = "tools/call → new " + Short(exec)
	}
	t := at
	return Frame{Seq: seq, Time: &t, Kind: FrameCall, From: LaneAgent, To: LaneGateway, Label: label, CallID: id, ExecutionID: exec}
}

// transitionFrame draws a lifecycle step as the arrow it stands for.
func transitionFrame(t *activity.Transition) Frame {
	f := Frame{Seq: t.Seq, ExecutionID: t.ExecutionID, Kind: FrameStep, From: LaneGateway, To: LaneGateway, Label: string(t.To)}
	if t.At.OK {
		at := t.At.V
		f.Time = &at
	}
	switch t.To {
	case activity.StateDispatched:
		f.Kind, f.To, f.Label = FrameDispatch, LaneTarget, "dispatch "+Short(t.ExecutionID)
	case activity.StateSucceeded, activity.StateFailed:
		f.Kind, f.From, f.Label = FrameAnswer, LaneTarget, string(t.To)
		switch {
		case t.TargetStatus.OK:
			f.Label = fmt.Sprintf("%d (%s)", t.TargetStatus.V, t.To)
		case t.ExitCode.OK:
			f.Label = fmt.Sprintf("exit %d (%s)", t.ExitCode.V, t.To)
		}
	case activity.StateUnknown:
		f.Kind, f.From, f.Label = FrameLost, LaneTarget, "✕ no answer: outcome unknown"
	case activity.StateDelivered:
		f.Kind, f.To, f.Label = FrameDelivered, LaneAgent, "result delivered"
	case activity.StateDeliveryFailed, activity.StateNotDelivered:
		f.Kind, f.To, f.Label = FrameLost, LaneAgent, "✕ result not delivered"
	}
	return f
}

// States lists the state after frame f of the executions it carries
// (every one of a timeline of at most maxFrameStates, else those changed
// last), in the order the executions appear, as "id=state" with each id
// written by id.
func (tl *Timeline) States(f Frame, id func(activity.ExecutionID) string) []string {
	var out []string
	if len(f.States) == 0 {
		return nil
	}
	for _, x := range tl.Executions {
		if s, ok := f.States[x]; ok {
			out = append(out, id(x)+"="+string(s))
			if len(out) == len(f.States) {
				break
			}
		}
	}
	return out
}

// LaneName is how a lane is labelled on this timeline: the middle one is
// the recorder's, so a plain proxy's log is not drawn as a gateway.
func (tl *Timeline) LaneName(l Lane) string {
	if l == LaneGateway && tl.Recorder != "" {
		return tl.Recorder
	}
	return string(l)
}

// ShortID shortens an id to its prefix and last six characters
// ("act_…V89X53"): the tail is what tells two ids apart on a screen.
func ShortID(id string) string {
	i := strings.IndexByte(id, '_')
	if i < 0 || len(id) <= i+1+6+1 {
		return id
	}
	return id[:i+1] + "…" + id[len(id)-6:]
}

// Short is ShortID for an execution id.
func Short(id activity.ExecutionID) string { return ShortID(string(id)) }

// Full writes an execution id whole.
func Full(id activity.ExecutionID) string { return string(id) }
