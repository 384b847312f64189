// Package suspects is the console's list of suspected duplicates: verdict
// and severity as words and glyphs, sorting, and a filter that stays
// visible once applied.
package suspects

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// Sort orders.
var sorts = []string{"severity", "time", "tool", "verdict"}

// Model is the list.
type Model struct {
	all       []*analyze.Suspect
	shown     []int // indexes into all, filtered and sorted
	cursor    int
	offset    int
	width     int
	height    int
	sortBy    int
	filter    textinput.Model
	filtering bool
	opened    *analyze.Suspect // set by enter; the app takes it after Update
	styles    theme.Styles
}

// TakeOpened returns the suspect the operator just opened, once. The app
// calls it right after Update, so opening is synchronous: a key typed
// next already reaches the detail view.
func (m *Model) TakeOpened() *analyze.Suspect {
	s := m.opened
	m.opened = nil
	return s
}

// New returns an empty list.
func New(styles theme.Styles) Model {
	f := textinput.New()
	f.Prompt = "/"
	f.Placeholder = "verdict, tool, suspect id…"
	f.CharLimit = 120
	return Model{filter: f, styles: styles}
}

// SetSize sets the list's box.
func (m *Model) SetSize(w, h int) {
	m.width, m.height = max(w, 0), max(h, 0)
	m.filter.Width = max(m.width-4, 1)
	m.clamp()
}

// SetSuspects replaces the suspects, keeping the selection when it can.
func (m *Model) SetSuspects(all []*analyze.Suspect) {
	var keep string
	if s := m.Selected(); s != nil {
		keep = s.ID
	}
	m.all = all
	m.apply()
	for i, idx := range m.shown {
		if m.all[idx].ID == keep {
			m.cursor = i
		}
	}
	m.clamp()
}

// Add appends suspects as they stream in.
func (m *Model) Add(more []*analyze.Suspect) {
	m.all = append(m.all, more...)
	m.apply()
}

// Typing reports whether the filter has the keyboard (q must not quit).
func (m Model) Typing() bool { return m.filtering }

// Selected is the suspect under the cursor, or nil.
func (m Model) Selected() *analyze.Suspect {
	if m.cursor < 0 || m.cursor >= len(m.shown) {
		return nil
	}
	return m.all[m.shown[m.cursor]]
}

// Counts tallies the shown suspects and all of them.
func (m Model) Counts() (shown, total int, byVerdict analyze.Counts) {
	byVerdict = analyze.Counts{}
	for _, s := range m.all {
		byVerdict.Add(s)
	}
	return len(m.shown), len(m.all), byVerdict
}

// Filter is the applied filter text.
func (m Model) Filter() string { return m.filter.Value() }

// SortName is the current sort order.
func (m Model) SortName() string { return sorts[m.sortBy] }

// Update handles keys. No I/O happens here.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return m, nil
	}
	if m.filtering {
		switch {
		case key.Matches(km, keys.Apply):
			m.filtering = false
			m.filter.Blur()
			return m, nil
		case key.Matches(km, keys.ClearFilter):
			m.filtering = false
			m.filter.Blur()
			m.filter.SetValue("")
			m.apply()
			return m, nil
		}
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(km)
		m.apply()
		return m, cmd
	}
	switch {
	case key.Matches(km, keys.Up):
		m.cursor--
	case key.Matches(km, keys.Down):
		m.cursor++
	case key.Matches(km, keys.Top):
		m.cursor = 0
	case key.Matches(km, keys.Bottom):
		m.cursor = len(m.shown) - 1
	case key.Matches(km, keys.PageUp):
		m.cursor -= max(m.rows()-1, 1)
	case key.Matches(km, keys.PageDown):
		m.cursor += max(m.rows()-1, 1)
	case key.Matches(km, keys.Filter):
		m.filtering = true
		return m, m.filter.Focus()
	case key.Matches(km, keys.ClearFilter) && m.filter.Value() != "":
		m.filter.SetValue("")
		m.apply()
	case key.Matches(km, keys.Sort):
		m.sortBy = (m.sortBy + 1) % len(sorts)
		m.apply()
	case key.Matches(km, keys.Open):
		m.opened = m.Selected()
	}
	m.clamp()
	return m, nil
}

// apply filters and sorts.
func (m *Model) apply() {
	q := strings.ToLower(strings.TrimSpace(m.filter.Value()))
	m.shown = m.shown[:0]
	for i, s := range m.all {
		if q == "" || matches(s, q) {
			m.shown = append(m.shown, i)
		}
	}
	less := map[string]func(a, b *analyze.Suspect) int{
		"severity": func(a, b *analyze.Suspect) int {
			if d := b.Severity.Rank() - a.Severity.Rank(); d != 0 {
				return d
			}
			return a.FirstAt.Compare(b.FirstAt)
		},
		"time":    func(a, b *analyze.Suspect) int { return a.FirstAt.Compare(b.FirstAt) },
		"tool":    func(a, b *analyze.Suspect) int { return strings.Compare(a.Tool, b.Tool) },
		"verdict": func(a, b *analyze.Suspect) int { return verdictRank(a.Verdict) - verdictRank(b.Verdict) },
	}[sorts[m.sortBy]]
	slices.SortStableFunc(m.shown, func(i, j int) int { return less(m.all[i], m.all[j]) })
	m.clamp()
}

func verdictRank(v analyze.Verdict) int { return slices.Index(analyze.Verdicts, v) }

func matches(s *analyze.Suspect, q string) bool {
	for _, f := range []string{string(s.Verdict), s.Tool, s.ID, string(s.Severity), s.Title, s.Target} {
		if strings.Contains(strings.ToLower(f), q) {
			return true
		}
	}
	return false
}

func (m *Model) rows() int { return max(m.height-3, 1) } // header, filter line, spare

func (m *Model) clamp() {
	m.cursor = min(max(m.cursor, 0), max(len(m.shown)-1, 0))
	rows := m.rows()
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+rows {
		m.offset = m.cursor - rows + 1
	}
	m.offset = max(min(m.offset, len(m.shown)-rows), 0)
}

// View draws the list: a header, the visible rows, the filter line.
func (m Model) View() string {
	if m.width <= 0 || m.height <= 0 {
		return ""
	}
	var b strings.Builder
	toolW := min(max(m.width-76, 8), 28)
	header := fmt.Sprintf("  %-28s %-9s %-*s %5s %5s  %-16s %s", "VERDICT", "SEVERITY", toolW, "TOOL", "CALLS", "EXECS", "FIRST CALL", "SUSPECT")
	b.WriteString(m.styles.Title.Render(truncate(header, m.width)) + "\n")
	rows := m.rows()
	if len(m.shown) == 0 {
		msg := "  no suspects"
		if m.filter.Value() != "" {
			msg = fmt.Sprintf("  no suspects match %q (esc clears the filter)", m.filter.Value())
		}
		b.WriteString(m.styles.Muted.Render(truncate(msg, m.width)) + "\n")
		rows--
	}
	for i := m.offset; i < min(m.offset+rows, len(m.shown)); i++ {
		s := m.all[m.shown[i]]
		line := fmt.Sprintf("%s %-28s %-9s %-*s %5d %5d  %-16s %s", s.Verdict.Glyph(), s.Verdict, s.Severity, toolW,
			truncate(s.Tool, toolW), len(s.Calls), len(s.Executions), s.FirstAt.UTC().Format("01-02 15:04:05"), s.ID)
		line = truncate(line, m.width)
		if i == m.cursor {
			b.WriteString(m.styles.Selected.Render(pad(line, m.width)) + "\n")
		} else {
			b.WriteString(m.styles.Verdict(string(s.Verdict)).Render(line) + "\n")
		}
	}
	for i := len(m.shown) - m.offset; i < rows; i++ {
		b.WriteString("\n")
	}
	switch {
	case m.filtering:
		b.WriteString(m.filter.View())
	case m.filter.Value() != "":
		b.WriteString(m.styles.Accent.Render(truncate(fmt.Sprintf("filter: %s  (%d of %d; / edits, esc clears)", m.filter.Value(), len(m.shown), len(m.all)), m.width)))
	default:
		b.WriteString(m.styles.Muted.Render(truncate(fmt.Sprintf("sorted by %s (s changes); / filters", sorts[m.sortBy]), m.width)))
	}
	return b.String()
}

func truncate(s string, w int) string {
	r := []rune(s)
	if w <= 0 {
		return ""
	}
	if len(r) <= w {
		return s
	}
	if w == 1 {
		return "…"
	}
	return string(r[:w-1]) + "…"
}

func pad(s string, w int) string {
	n := len([]rune(s))
	if n >= w {
		return s
	}
	return s + strings.Repeat(" ", w-n)
}
