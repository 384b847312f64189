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

// Model is a titled table of text rows.
type Model struct {
	title   string
	header  string
	rows    []string
	details []string // a line shown under the table for the selected row
	cursor  int
	extra   []key.Binding // keys the app adds (help only)
	width   int
	height  int
	empty   string // what the view shows with no rows: what would fill it
	styles  theme.Styles
}

// WithEmpty returns m saying text when it has no rows.
func (m Model) WithEmpty(text string) Model {
	m.empty = text
	return m
}

// New returns an empty table.
func New(title string, styles theme.Styles) Model { return Model{title: title, styles: styles} }

// SetRows replaces the contents.
func (m *Model) SetRows(header string, rows, details []string) {
	m.header, m.rows, m.details = header, rows, details
	m.cursor = min(m.cursor, max(len(rows)-1, 0))
}

// SetSize sets the view's box.
func (m *Model) SetSize(w, h int) { m.width, m.height = max(w, 0), max(h, 0) }

// Len is how many rows the table holds.
func (m Model) Len() int { return len(m.rows) }

// Cursor is the selected row.
func (m Model) Cursor() int { return m.cursor }

// WithKeys adds keys the app handles for this table to its help.
func (m Model) WithKeys(extra ...key.Binding) Model {
	m.extra = extra
	return m
}

// ShortHelp and FullHelp list the keys.
func (m Model) ShortHelp() []key.Binding {
	return append([]key.Binding{nav.Keys.Up, nav.Keys.Down}, m.extra...)
}
func (m Model) FullHelp() [][]key.Binding {
	cols := [][]key.Binding{nav.Keys.Bindings()}
	if len(m.extra) > 0 {
		cols = append(cols, m.extra)
	}
	return cols
}

// page is the rows that fit under the title and header and above the
// selected row's detail (detailLines).
func (m Model) page() int { return max(m.height-3-detailLines, 1) }

const detailLines = 2

// Init starts nothing: the app hands the table its rows.
func (m *Model) Init() tea.Cmd { return nil }

// Captures is false: a table has no text field.
func (m *Model) Captures() bool { return false }

// Status is empty: the title counts the rows.
func (m *Model) Status() string { return "" }

// Update moves the cursor.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return m, nil
	}
	m.cursor, _ = nav.Move(km, m.cursor, len(m.rows), m.page())
	m.cursor = min(max(m.cursor, 0), max(len(m.rows)-1, 0))
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
	if w := nav.Where(start, start+rows, len(m.rows)); w != "" {
		title += " · " + w
	}
	b.WriteString(m.styles.Title.Render(cells.Clip(title, m.width)) + "\n")
	b.WriteString(m.styles.Muted.Render(cells.Clip(cells.Cursor(false)+m.header, m.width)) + "\n")
	if len(m.rows) == 0 && m.empty != "" {
		b.WriteString(m.styles.Muted.Render(ansi.Wrap("  "+m.empty, max(m.width-1, 10), " ")) + "\n")
	}
	for i := start; i < min(start+rows, len(m.rows)); i++ {
		line := cells.Clip(cells.Cursor(i == m.cursor)+m.rows[i], m.width)
		if i == m.cursor {
			line = m.styles.Selected.Render(line)
		}
		b.WriteString(line + "\n")
	}
	if m.cursor < len(m.details) {
		lines := strings.Split(ansi.Wrap(m.details[m.cursor], m.width, " "), "\n")
		if len(lines) > detailLines {
			lines = lines[:detailLines]
			lines[detailLines-1] = cells.Clip(lines[detailLines-1]+"…", m.width)
		}
		b.WriteString(m.styles.Muted.Render(strings.Join(lines, "\n")))
	}
	return b.String()
}
