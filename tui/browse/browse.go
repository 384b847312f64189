// Package browse is a scrollable table: the console's executions and
// sessions browsers.
package browse

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mcpdup/mcpdup/tui/cells"
	"github.com/mcpdup/mcpdup/tui/nav"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// Model is a titled table of text rows, filtered with / like every list
// of the console.
type Model struct {
	title   string
	header  string
	rows    []string
	details []string      // a line shown under the table for the selected row
	shown   []int         // indexes into rows that match the filter
	cursor  int           // index into shown
	extra   []key.Binding // keys the app adds (help only)
	width   int
	height  int
	empty   string // what the view shows with no rows: what would fill it
	filter  nav.Filter
	styles  theme.Styles
}

var keys = nav.FilterKeys

// WithEmpty returns m saying text when it has no rows.
func (m Model) WithEmpty(text string) Model {
	m.empty = text
	return m
}

// New returns an empty table.
func New(title string, styles theme.Styles) Model {
	return Model{title: title, styles: styles, filter: nav.NewFilter("")}
}

// SetRows replaces the contents; the filter stays.
func (m *Model) SetRows(header string, rows, details []string) {
	m.header, m.rows, m.details = header, rows, details
	m.apply()
}

// apply recomputes the rows the filter lets through: a row matches when
// its text or its detail line contains the filter, case-insensitively.
func (m *Model) apply() {
	q := m.filter.Query()
	m.shown = m.shown[:0]
	for i, r := range m.rows {
		detail := ""
		if i < len(m.details) {
			detail = m.details[i]
		}
		if nav.Match(q, r, detail) {
			m.shown = append(m.shown, i)
		}
	}
	m.cursor = min(m.cursor, max(len(m.shown)-1, 0))
}

// SetSize sets the view's box.
func (m *Model) SetSize(w, h int) {
	m.width, m.height = max(w, 0), max(h, 0)
	m.filter.SetWidth(w - 4)
}

// Len is how many rows the table holds, filtered or not.
func (m Model) Len() int { return len(m.rows) }

// Selected is the selected row's index in the rows SetRows gave, or -1.
func (m Model) Selected() int {
	if m.cursor < len(m.shown) {
		return m.shown[m.cursor]
	}
	return -1
}

// WithKeys adds keys the app handles for this table to its help.
func (m Model) WithKeys(extra ...key.Binding) Model {
	m.extra = extra
	return m
}

// ShortHelp and FullHelp list the keys that work right now.
func (m Model) ShortHelp() []key.Binding {
	if m.filter.Typing() {
		return []key.Binding{keys.Apply, keys.Clear}
	}
	return append([]key.Binding{nav.Keys.Up, nav.Keys.Down, keys.Filter}, m.extra...)
}
func (m Model) FullHelp() [][]key.Binding {
	if m.filter.Typing() {
		return [][]key.Binding{m.ShortHelp()}
	}
	cols := [][]key.Binding{nav.Keys.Bindings(), {keys.Filter, keys.Clear}}
	if len(m.extra) > 0 {
		cols = append(cols, m.extra)
	}
	return cols
}

// page is the rows that fit under the title and header and above the
// selected row's detail (detailLines) and the filter line.
func (m Model) page() int { return max(m.height-4-detailLines, 1) }

const detailLines = 2

// Init starts nothing: the app hands the table its rows.
func (m *Model) Init() tea.Cmd { return nil }

// Captures reports whether the filter has the keyboard.
func (m *Model) Captures() bool { return m.filter.Typing() }

// Status is empty: the title counts the rows.
func (m *Model) Status() string { return "" }

// Update moves the cursor and edits the filter.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return m, nil
	}
	if m.filter.Typing() {
		changed, cmd := m.filter.Edit(km)
		if changed {
			m.apply()
		}
		return m, cmd
	}
	switch {
	case key.Matches(km, keys.Filter):
		return m, m.filter.Open()
	case key.Matches(km, keys.Clear) && m.filter.Value() != "":
		m.filter.Clear()
		m.apply()
		return m, nil
	}
	m.cursor, _ = nav.Move(km, m.cursor, len(m.shown), m.page())
	m.cursor = min(max(m.cursor, 0), max(len(m.shown)-1, 0))
	return m, nil
}

// View draws the table.
func (m Model) View() string {
	if m.width <= 0 || m.height <= 0 {
		return ""
	}
	var b strings.Builder
	rows := m.page()
	start := max(m.cursor-rows+1, 0)
	title := fmt.Sprintf("%s (%d)", m.title, len(m.rows))
	if w := nav.Where(start, start+rows, len(m.shown)); w != "" {
		title += " · " + w
	}
	b.WriteString(m.styles.Title.Render(cells.Clip(title, m.width)) + "\n")
	b.WriteString(m.styles.Muted.Render(cells.Clip(cells.Cursor(false)+m.header, m.width)) + "\n")
	switch {
	case len(m.rows) == 0 && m.empty != "":
		b.WriteString(m.styles.Muted.Render(ansi.Wrap("  "+m.empty, max(m.width-1, 10), " ")) + "\n")
	case len(m.shown) == 0:
		b.WriteString(m.styles.Muted.Render(cells.Clip(fmt.Sprintf("  nothing matches %q (esc clears the filter)", m.filter.Value()), m.width)) + "\n")
	}
	for i := start; i < min(start+rows, len(m.shown)); i++ {
		line := cells.Clip(cells.Cursor(i == m.cursor)+m.rows[m.shown[i]], m.width)
		if i == m.cursor {
			line = m.styles.Selected.Render(line)
		}
		b.WriteString(line + "\n")
	}
	if sel := m.Selected(); sel >= 0 && sel < len(m.details) {
		lines := strings.Split(ansi.Wrap(m.details[sel], m.width, " "), "\n")
		if len(lines) > detailLines {
			lines = lines[:detailLines]
			lines[detailLines-1] = cells.Clip(lines[detailLines-1]+"…", m.width)
		}
		b.WriteString(m.styles.Muted.Render(strings.Join(lines, "\n")) + "\n")
	}
	switch {
	case m.filter.Typing():
		b.WriteString(m.filter.View())
	case m.filter.Value() != "":
		b.WriteString(m.styles.Accent.Render(cells.Clip(fmt.Sprintf("filter: %s  (%d of %d; / edits, esc clears)", m.filter.Value(), len(m.shown), len(m.rows)), m.width)))
	}
	return b.String()
}
