// Package detail shows one suspect: the five questions walked one at a
// time with their answers, evidence and explanations, then the verdict and
// the recommended fix, and a swimlane timeline (agent / gateway / target)
// that can be replayed event by event.
package detail

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/report"
	"github.com/mcpdup/mcpdup/tui/cells"
	"github.com/mcpdup/mcpdup/tui/nav"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// Model is the detail view.
type Model struct {
	sus       *analyze.Suspect
	tl        *report.Timeline
	step      int // questions revealed: 1..5, then 6 shows the verdict
	replaying bool
	frame     int // replay position
	top       int // the first event shown outside replay (scrolled with ↑/↓, g/G, pgup/pgdn)
	width     int
	height    int
	back      bool // set by esc; the app takes it after Update
	styles    theme.Styles
}

// TakeBack reports, once, that the operator left the view.
func (m *Model) TakeBack() bool {
	b := m.back
	m.back = false
	return b
}

// New returns an empty detail view.
func New(styles theme.Styles) Model { return Model{styles: styles} }

// SetSuspect shows a suspect from its first question.
func (m *Model) SetSuspect(s *analyze.Suspect) {
	m.sus, m.tl, m.step, m.replaying, m.frame, m.top = s, report.SuspectTimeline(s), 1, false, 0, 0
}

// SetRange shows a time range's events, replayed from the first: no
// suspect, no questions; esc leaves.
func (m *Model) SetRange(tl *report.Timeline) {
	m.sus, m.tl, m.step, m.replaying, m.frame, m.top = nil, tl, 0, true, 0, 0
}

// Suspect is the suspect shown (nil for a time range).
func (m Model) Suspect() *analyze.Suspect { return m.sus }

// Step is how many questions are revealed (6: the verdict too).
func (m Model) Step() int { return m.step }

// Replaying reports whether the timeline is being stepped through.
func (m Model) Replaying() bool { return m.replaying }

// Frame is the replay position.
func (m Model) Frame() int { return m.frame }

// SetSize sets the view's box.
func (m *Model) SetSize(w, h int) { m.width, m.height = max(w, 0), max(h, 0) }

// Init starts nothing: the app hands the view what it shows.
func (m *Model) Init() tea.Cmd { return nil }

// Captures is false: the walk has no text field.
func (m *Model) Captures() bool { return false }

// Status is empty: the walk says where it is on screen.
func (m *Model) Status() string { return "" }

// Update handles keys.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	km, ok := msg.(tea.KeyMsg)
	if !ok || m.tl == nil {
		return m, nil
	}
	if m.replaying {
		switch {
		case key.Matches(km, keys.Back) && m.sus == nil:
			m.back = true // a time range is only a replay
		case key.Matches(km, keys.Back):
			m.replaying = false
		case key.Matches(km, keys.StepNext):
			m.frame = max(min(m.frame+1, len(m.tl.Frames)-1), 0)
		case key.Matches(km, keys.StepPrev):
			m.frame = max(m.frame-1, 0)
		default:
			if f, ok := nav.Move(km, m.frame, len(m.tl.Frames), m.page()); ok {
				m.frame = min(max(f, 0), max(len(m.tl.Frames)-1, 0))
			}
		}
		return m, nil
	}
	switch {
	case key.Matches(km, keys.Back):
		m.back = true
	case key.Matches(km, keys.Next):
		m.step = min(m.step+1, 6)
	case key.Matches(km, keys.Prev):
		m.step = max(m.step-1, 1)
	case key.Matches(km, keys.Replay):
		m.replaying, m.frame = true, 0
	default:
		// The timeline under the walk scrolls: a short terminal must not
		// hide its first events.
		if t, ok := nav.Move(km, m.top, len(m.tl.Frames), m.page()); ok {
			if key.Matches(km, nav.Keys.Bottom) {
				t = len(m.tl.Frames) // View clamps to the last page
			}
			m.top = min(max(t, 0), len(m.tl.Frames))
		}
	}
	return m, nil
}

// page is how far pgup/pgdn move in the timeline.
func (m Model) page() int { return max(m.height/2, 1) }

// View draws the walk above the timeline.
func (m Model) View() string {
	if m.tl == nil || m.width <= 0 || m.height <= 0 {
		return ""
	}
	if m.sus == nil {
		head := fmt.Sprintf("time range %s · %d events · %d executions", m.tl.Title, len(m.tl.Frames), len(m.tl.Executions))
		return m.styles.Title.Render(cells.Clip(head, m.width)) + "\n\n" + m.swimlanes(max(m.height-2, 3))
	}
	s := m.sus
	wrap := lipgloss.NewStyle().Width(max(m.width-2, 10))
	indented := wrap.PaddingLeft(3) // wrapped lines keep the indent
	var b strings.Builder
	head := fmt.Sprintf("%s %s — severity %s", s.Verdict.Glyph(), s.ID, s.Severity)
	b.WriteString(m.styles.Title.Render(cells.Clip(head, m.width)) + "\n")
	b.WriteString(m.styles.Muted.Render(cells.Clip(fmt.Sprintf("%s on %s %s · contract %s · %d calls · %d executions",
		s.Tool, s.Method, s.Target, s.Contract, s.NCalls(), s.NExecutions()), m.width)) + "\n\n")
	if !m.replaying {
		for i, q := range s.Questions {
			if i >= m.step {
				break
			}
			ans := m.styles.Answer(string(q.Answer)).Render(strings.ToUpper(string(q.Answer)))
			line := fmt.Sprintf("%d. %s %s", q.N, q.Question, ans)
			if i == m.step-1 && m.step <= 5 {
				b.WriteString(m.styles.Title.Render(line) + "\n")
				b.WriteString(indented.Render(q.Explanation) + "\n")
				if len(q.Evidence) > 0 {
					b.WriteString(m.styles.Muted.Render(indented.Render("evidence: "+report.EvidenceText(q))) + "\n")
				}
			} else {
				b.WriteString(cells.Clip(line, m.width) + "\n")
			}
		}
		if m.step <= 5 {
			b.WriteString("\n" + m.styles.Muted.Render(fmt.Sprintf("(question %d of 5: enter for the next)", m.step)) + "\n")
		} else {
			b.WriteString("\n" + m.styles.Severity(s.Severity).Render(wrap.Render(fmt.Sprintf("Verdict: %s %s", s.Verdict.Glyph(), s.Title))) + "\n")
			// The summary ends with the verdict sentence, already the line above.
			b.WriteString(wrap.Render(strings.TrimSuffix(s.Summary, " Verdict: "+s.Title+".")) + "\n")
			if len(s.Shown) > 0 {
				b.WriteString(m.styles.Muted.Render(wrap.Render("two effects shown: "+report.CitedText(s.Shown))) + "\n")
			}
			b.WriteString(m.styles.Accent.Render(wrap.Render("Fix: "+s.Fix)) + "\n")
		}
		b.WriteString("\n")
	}
	used := strings.Count(b.String(), "\n")
	b.WriteString(m.swimlanes(max(m.height-used, 3)))
	return b.String()
}

// swimlanes draws the timeline: three lifelines and one arrow per event.
// In replay mode it shows the events up to the current one and every
// execution's state after it.
func (m Model) swimlanes(height int) string {
	frames := m.tl.Frames
	last := len(frames) - 1
	if m.replaying {
		last = m.frame
	}
	// prefix: "#seq  hh:mm:ss.mmm "; then three lifelines; then the label.
	const prefixW = 19
	laneW := min(max((m.width-prefixW-32)/2, len("gateway")+2), 24) // a lane's name fits with a space after
	pos := map[report.Lane]int{report.LaneAgent: 0, report.LaneGateway: laneW, report.LaneTarget: 2 * laneW}
	var b strings.Builder
	rows := max(height-2, 1)
	if m.replaying {
		rows = max(rows-2, 1)
	}
	// Outside replay the window is where the operator scrolled it; in
	// replay it follows the current event.
	start := min(m.top, max(len(frames)-rows, 0))
	if m.replaying {
		start = max(last+1-rows, 0)
	}
	end := min(start+rows, last+1, len(frames))
	title := "timeline"
	if m.replaying {
		title = fmt.Sprintf("replay: event %d of %d (↓ next, ↑ back, g/G first/last, esc stops)", m.frame+1, len(frames))
	} else if w := nav.Where(start, end, len(frames)); w != "" {
		title = fmt.Sprintf("timeline · events %s", w)
		if start > 0 {
			title += fmt.Sprintf(" · ↑ %d more above", start)
		}
		if end < len(frames) {
			title += fmt.Sprintf(" · ↓ %d more below", len(frames)-end)
		}
		title += " (↑/↓ scroll, g/G, pgup/pgdn)"
	}
	b.WriteString(m.styles.Title.Render(cells.Clip(title, m.width)) + "\n")
	b.WriteString(cells.Clip(fmt.Sprintf("%-*s%-*s%-*s%s", prefixW, "", laneW, "agent", laneW, cells.Clip(m.tl.LaneName(report.LaneGateway), laneW-1), "target"), m.width) + "\n")
	for i := start; i < end; i++ {
		f := frames[i]
		line := []rune(strings.Repeat(" ", 2*laneW+1))
		for _, l := range []report.Lane{report.LaneAgent, report.LaneGateway, report.LaneTarget} {
			line[pos[l]] = '│'
		}
		a, z := pos[f.From], pos[f.To]
		if a == z {
			line[a] = '■'
		} else {
			lo, hi := min(a, z), max(a, z)
			for x := lo + 1; x < hi; x++ {
				line[x] = '─'
			}
			if z > a {
				line[z-1] = '▶'
			} else {
				line[z+1] = '◀'
			}
			if f.Kind == report.FrameLost {
				line[(lo+hi)/2] = '✕'
			}
		}
		at := "--:--:--.---"
		if f.Time != nil {
			at = f.Time.UTC().Format("15:04:05.000")
		}
		row := fmt.Sprintf("#%-5d %-12s %s  %s", f.Seq, at, string(line), f.Label)
		style := m.styles.Tone(f.Tone())
		if m.replaying && i == m.frame {
			style = m.styles.Selected
		}
		b.WriteString(style.Render(cells.Clip(row, m.width)) + "\n")
	}
	if m.replaying && m.frame < len(frames) {
		st := strings.Join(m.tl.States(frames[m.frame], report.Short), "  ")
		if st == "" {
			st = "no execution yet" // the call before its execution is accepted
		}
		b.WriteString(m.styles.Accent.Render(cells.Clip("states: "+st, m.width)) + "\n")
	}
	return b.String()
}
