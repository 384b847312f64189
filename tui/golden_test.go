package tui

import (
	"bytes"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
)

// The golden tests run the console as a real tea.Program (teatest) at a
// fixed size with the Ascii colour profile (set in init), drive it with
// keys, and compare the final screen with testdata/*.golden. Ids are
// normalised; the clock is fixed by activitytest. Regenerate with
//
//	go test ./tui/ -run TestGolden -update
func TestGolden(t *testing.T) {
	screens := []struct {
		name string
		keys []tea.KeyMsg
		want string // text on screen once the keys have landed
		w, h int    // 100×30 when zero
	}{
		{"suspects", nil, "suspects", 0, 0},
		{"filter", append([]tea.KeyMsg{runes("/")}, append(typed("read"), keyOf(tea.KeyEnter))...), "filter: read", 0, 0},
		{"question1", []tea.KeyMsg{runes("s"), runes("s"), runes("s"), keyOf(tea.KeyEnter)}, "1. Did one agent process", 0, 0},
		{"verdict", []tea.KeyMsg{runes("s"), runes("s"), runes("s"), keyOf(tea.KeyEnter), keyOf(tea.KeyEnter), keyOf(tea.KeyEnter), keyOf(tea.KeyEnter), keyOf(tea.KeyEnter), keyOf(tea.KeyEnter)}, "Verdict:", 0, 0},
		{"replay", []tea.KeyMsg{runes("s"), runes("s"), runes("s"), keyOf(tea.KeyEnter), runes("p"), runes("n"), runes("n")}, "replay: event 3", 0, 0},
		{"pending", []tea.KeyMsg{runes("2")}, "unknown outcome", 0, 0},
		{"confirm", append([]tea.KeyMsg{runes("2"), runes("v")}, append(typed("ticket T-9 exists"), keyOf(tea.KeyEnter))...), "(y/N)", 0, 0},
		{"executions", []tea.KeyMsg{runes("3")}, "executions (newest first) (8)", 0, 0},
		{"sessions", []tea.KeyMsg{runes("4")}, "agent runs (the Sessions log) (2)", 0, 0},
		{"help", []tea.KeyMsg{runes("?")}, "filter", 0, 0},
		{"narrow_suspects", nil, "suspects", 60, 20},
		{"narrow_question1", []tea.KeyMsg{runes("s"), runes("s"), runes("s"), keyOf(tea.KeyEnter)}, "1. Did one agent", 60, 20},
		{"narrow_pending", []tea.KeyMsg{runes("2")}, "unknown outcome", 60, 20},
		{"wide_suspects", nil, "suspects", 200, 60},
		{"wide_verdict", []tea.KeyMsg{runes("s"), runes("s"), runes("s"), keyOf(tea.KeyEnter), keyOf(tea.KeyEnter), keyOf(tea.KeyEnter), keyOf(tea.KeyEnter), keyOf(tea.KeyEnter), keyOf(tea.KeyEnter)}, "Verdict:", 200, 60},
	}
	for _, sc := range screens {
		t.Run(sc.name, func(t *testing.T) {
			s, _ := testStore(t)
			w, h := sc.w, sc.h
			if w == 0 {
				w, h = 100, 30
			}
			tm := teatest.NewTestModel(t, New(s, Options{Operator: "alice", Poll: -1}), teatest.WithInitialTermSize(w, h))
			sc2 := &screen{tm: tm}
			sc2.waitFor(t, ready)          // every start-up load has landed
			sc2.waitFor(t, "Executions 8") // the browsers' too
			for _, k := range sc.keys {
				tm.Send(k)
			}
			sc2.waitFor(t, sc.want)
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
			golden.RequireEqual(t, []byte(normalise(final.View())))
		})
	}
}

// TestGoldenTooSmall checks the screen a terminal below the minimum gets,
// and that growing the terminal brings the console back.
func TestGoldenTooSmall(t *testing.T) {
	s, _ := testStore(t)
	tm := teatest.NewTestModel(t, New(s, Options{Operator: "alice", Poll: -1}), teatest.WithInitialTermSize(30, 8))
	sc := &screen{tm: tm}
	sc.waitFor(t, "too small")
	tm.Send(tea.WindowSizeMsg{Width: 100, Height: 30})
	sc.waitFor(t, ready)
	sc.seen.Reset()
	tm.Send(tea.WindowSizeMsg{Width: 30, Height: 8})
	sc.waitFor(t, "too small")
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
	golden.RequireEqual(t, []byte(normalise(final.View())))
}

// ready is the status bar once suspects, pending and the audit check
// have all loaded: the renderer repaints a changed line whole, so it
// appears in the output in one piece.
// (60 columns clip it after "key n").
const ready = "3 suspects · 1 pending · audit ✓ verified · key n"

// screen remembers all output a program has drawn: WaitFor consumes the
// reader, and a later wait must still see what an earlier one read.
type screen struct {
	tm   *teatest.TestModel
	seen bytes.Buffer
}

// waitFor reads the program's output until want has been drawn. The
// renderer only repaints changed lines, so the text is searched in all
// output so far, not in one frame.
func (s *screen) waitFor(t *testing.T, want string) {
	t.Helper()
	if strings.Contains(s.seen.String(), want) {
		return
	}
	teatest.WaitFor(t, s.tm.Output(), func(b []byte) bool {
		s.seen.Write(b)
		return strings.Contains(s.seen.String(), want)
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}

func runes(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }

func keyOf(k tea.KeyType) tea.KeyMsg { return tea.KeyMsg{Type: k} }

func typed(s string) []tea.KeyMsg {
	var ks []tea.KeyMsg
	for _, r := range s {
		ks = append(ks, runes(string(r)))
	}
	return ks
}
