package report_test

import (
	"context"
	"fmt"
	"html"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/report"
)

var ctx = context.Background()

// deploySuspect is the scripted incident's deploy: a result not
// delivered, a retry that attached to it, and a second run's deploy.
func deploySuspect(t *testing.T) *analyze.Suspect {
	t.Helper()
	s, _ := activitytest.Open(t, activity.Options{Now: activitytest.NewClock().Now})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	all, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sus := range all {
		if sus.Tool == "deploy_release" {
			return sus
		}
	}
	t.Fatal("no deploy_release suspect")
	return nil
}

func TestSuspectTimeline(t *testing.T) {
	sus := deploySuspect(t)
	tl := report.SuspectTimeline(sus)
	var labels []string
	kinds := map[report.FrameKind]int{}
	for _, f := range tl.Frames {
		labels = append(labels, fmt.Sprintf("%s>%s:%s", f.From, f.To, f.Label))
		kinds[f.Kind]++
		if lost := strings.HasPrefix(f.Label, "✕"); lost != (f.Kind == report.FrameLost) || lost != (f.Tone() == report.ToneAlarm) {
			t.Errorf("frame #%d %q: kind %s, tone %d", f.Seq, f.Label, f.Kind, f.Tone())
		}
	}
	got := strings.Join(labels, " | ")
	for _, want := range []string{"agent>gateway:tools/call → new", "gateway>target:dispatch", "target>gateway:201 (succeeded)",
		"gateway>agent:✕ result not delivered", "agent>gateway:tools/call (retry, attached", "gateway>agent:result delivered"} {
		if !strings.Contains(got, want) {
			t.Fatalf("timeline lacks %q:\n%s", want, got)
		}
	}
	for _, k := range []report.FrameKind{report.FrameCall, report.FrameStep, report.FrameDispatch, report.FrameAnswer, report.FrameLost, report.FrameDelivered} {
		if kinds[k] == 0 {
			t.Errorf("no %s frame in %s", k, got)
		}
	}
	first, last := tl.Frames[0], tl.Frames[len(tl.Frames)-1]
	if last.States[sus.Executions[0].ID] != activity.StateDelivered {
		t.Fatalf("state after the last frame: %v", last.States)
	}
	// States evolve frame by frame.
	if len(first.States) != 0 {
		t.Fatalf("before any transition no execution has a state: %v", first.States)
	}
	states := tl.States(last, report.Short)
	if len(states) != len(sus.Executions) || states[0] != report.Short(sus.Executions[0].ID)+"=delivered" {
		t.Fatalf("states after the last frame: %v", states)
	}
}

func TestReportsCiteTheRecords(t *testing.T) {
	sus := deploySuspect(t)
	tl := report.SuspectTimeline(sus)
	var md, page strings.Builder
	if err := report.Markdown(&md, sus, tl, nil, audit.NotChecked("a test")); err != nil {
		t.Fatal(err)
	}
	if err := report.HTML(&page, sus, tl, nil, audit.NotChecked("a test")); err != nil {
		t.Fatal(err)
	}
	ev := sus.Questions[1].Evidence[0]
	cite := fmt.Sprintf("#%d %s", ev.Seq, ev.What)
	for name, out := range map[string]string{"markdown": md.String(), "html": page.String()} {
		if !strings.Contains(out, sus.ID) || !strings.Contains(out, cite) || !strings.Contains(out, html.EscapeString(sus.Title)) {
			t.Errorf("%s report lacks the suspect, its verdict or the evidence %q", name, cite)
		}
	}
	if p := page.String(); !strings.Contains(p, "<svg") || strings.Contains(p, "<script") || strings.Count(p, ">✕<") != 1 {
		t.Errorf("html: want an inline SVG with one cross (the lost answer), no script:\n%.400s", p)
	}
}

// A plain proxy's log is drawn with its recorder in the middle lane, not
// a gateway it never went through.
func TestMiddleLaneIsTheRecorder(t *testing.T) {
	tl := &report.Timeline{Recorder: "envoy", Frames: []report.Frame{{Seq: 1, From: report.LaneAgent, To: report.LaneGateway, Label: "tools/call"}}}
	svg := report.SequenceSVG(tl)
	if !strings.Contains(svg, ">envoy</text>") || strings.Contains(svg, ">gateway</text>") {
		t.Fatalf("middle lane: %s", svg)
	}
	if tl.LaneName(report.LaneGateway) != "envoy" || (&report.Timeline{}).LaneName(report.LaneGateway) != "gateway" {
		t.Fatal("LaneName")
	}
}

// A frame carries the states of the executions changed last: all of a
// suspect's few, and of many only the six in play, so a replay of
// hundreds does not copy every state into every frame.
func TestFrameStatesOfManyExecutions(t *testing.T) {
	for _, n := range []int{3, 40} {
		sus := &analyze.Suspect{ID: "sus_x"}
		for i := range n {
			id := activity.ExecutionID(fmt.Sprintf("act_%02d", i))
			sus.Calls = append(sus.Calls, analyze.CallRef{Seq: int64(i * 10), ID: activity.CallID(fmt.Sprintf("call_%02d", i)), ExecutionID: id,
				Disposition: activity.DispositionNewExecution})
			var trs []activity.Transition
			for j, to := range []activity.State{activity.StateAccepted, activity.StateDispatched, activity.StateSucceeded} {
				// The answers come late: every execution is dispatched before any answer.
				seq := int64(i*10 + j + 1)
				if to == activity.StateSucceeded {
					seq = int64(n*10 + i)
				}
				trs = append(trs, activity.Transition{Seq: seq, ExecutionID: id, To: to})
			}
			sus.Executions = append(sus.Executions, analyze.ExecutionSummary{ID: id, Transitions: trs})
		}
		tl := report.SuspectTimeline(sus)
		for _, f := range tl.Frames {
			if len(f.States) > 6 {
				t.Fatalf("%d executions: frame #%d carries %d states", n, f.Seq, len(f.States))
			}
			if f.CallID == "" && f.States[f.ExecutionID] == "" {
				t.Fatalf("%d executions: frame #%d (%s) lacks its own execution's state: %v", n, f.Seq, f.Label, f.States)
			}
		}
		last := tl.Frames[len(tl.Frames)-1]
		want := min(n, 6)
		got := tl.States(last, report.Full)
		if len(got) != want {
			t.Fatalf("%d executions: the last frame shows %v, want the %d changed last", n, got, want)
		}
		for k, s := range got {
			if id := fmt.Sprintf("act_%02d=succeeded", n-want+k); s != id {
				t.Fatalf("%d executions: the last frame shows %v, want %s at %d", n, got, id, k)
			}
		}
	}
}
