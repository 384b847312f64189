// Package prompt is a one-line question at the bottom of the console: a
// text field, a hint under it, and the reason when the answer is refused.
// The range replay and the file import ask through it.
package prompt

import (
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/tui/cells"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// Model is open between Open and an answer check accepts, or esc.
type Model struct {
	input  textinput.Model
	hint   string
	check  func(string) error // nil error: the answer is taken
	open   bool
	err    string
	answer string
	done   bool
	width  int
	styles theme.Styles
}

var keys = struct{ Submit, Cancel key.Binding }{
	Submit: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "go")),
	Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
}

// New returns a closed prompt; check judges an answer before it is taken.
func New(label, hint string, check func(string) error, styles theme.Styles) Model {
	in := textinput.New()
	in.Prompt = label
	in.CharLimit = 4096
	return Model{input: in, hint: hint, check: check, styles: styles}
}

// Rebind returns m judging answers with check instead.
func Rebind(m Model, check func(string) error) Model {
	m.check = check
	return m
}

// Relabel changes the prompt's label (the text before the field).
func (m *Model) Relabel(label string) { m.input.Prompt = label }

// Value is what is typed so far.
func (m Model) Value() string { return m.input.Value() }

// Suggest offers completions of what is typed: tab accepts the shown one,
// ctrl+n and ctrl+p move between them (the text field's own keys).
func (m *Model) Suggest(s []string) {
	m.input.ShowSuggestions = len(s) > 0
	m.input.SetSuggestions(s)
}

// Open shows the prompt filled with value.
func (m *Model) Open(value, hint string) tea.Cmd {
	m.open, m.err, m.done = true, "", false
	if hint != "" {
		m.hint = hint
	}
	m.input.SetValue(value)
	m.input.CursorEnd()
	return m.input.Focus()
}

// IsOpen reports whether the prompt has the keyboard.
func (m Model) IsOpen() bool { return m.open }

// Take returns the accepted answer, once.
func (m *Model) Take() (string, bool) {
	if !m.done {
		return "", false
	}
	m.done = false
	return m.answer, true
}

// SetSize sets the prompt's width; it is two lines high whatever h.
func (m *Model) SetSize(w, _ int) { m.width, m.input.Width = w, max(w-len(m.input.Prompt)-2, 10) }

// Captures reports whether the prompt is open: it has the keyboard.
func (m *Model) Captures() bool { return m.open }

// Status is empty: the prompt is on screen.
func (m *Model) Status() string { return "" }

// Init starts nothing.
func (m *Model) Init() tea.Cmd { return nil }

// ShortHelp and FullHelp list the prompt's keys.
func (m Model) ShortHelp() []key.Binding  { return []key.Binding{keys.Submit, keys.Cancel} }
func (m Model) FullHelp() [][]key.Binding { return [][]key.Binding{m.ShortHelp()} }

// Update handles keys while open.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	km, ok := msg.(tea.KeyMsg)
	if !ok || !m.open {
		return m, nil
	}
	switch {
	case key.Matches(km, keys.Cancel):
		m.open = false
		m.input.Blur()
		return m, nil
	case key.Matches(km, keys.Submit):
		if err := m.check(m.input.Value()); err != nil {
			m.err = err.Error()
			return m, nil
		}
		m.answer, m.done, m.open = m.input.Value(), true, false
		m.input.Blur()
		return m, nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(km)
	m.err = ""
	return m, cmd
}

// View draws the prompt and, under it, the hint or what is wrong.
func (m Model) View() string {
	if !m.open {
		return ""
	}
	if m.err != "" {
		return m.input.View() + "\n" + m.styles.Bad.Render(cells.Clip(m.err, m.width))
	}
	return m.input.View() + "\n" + m.styles.Muted.Render(cells.Clip(m.hint, m.width))
}
