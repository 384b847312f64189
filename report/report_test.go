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
