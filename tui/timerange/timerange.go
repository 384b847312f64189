// Package timerange asks the operator for a time range to replay: two
// times, as RFC 3339 or as clock times on a given day.
package timerange

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/tui/cells"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// Model is the prompt. It is open between Open and the operator's enter
// (a valid range) or esc.
type Model struct {
	input    textinput.Model
	open     bool
	day      time.Time // the day clock times are on
	err      string
	from, to time.Time
	done     bool // a range was entered; the app takes it
	width    int
	styles   theme.Styles
}

var keys = struct{ Submit, Cancel key.Binding }{
	Submit: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "replay the range")),
	Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
}

// New returns a closed prompt.
func New(styles theme.Styles) Model {
	in := textinput.New()
	in.Prompt = "replay from, to: "
	in.CharLimit = 80
	return Model{input: in, styles: styles}
}

// Open shows the prompt filled with a range around at.
func (m *Model) Open(from, to time.Time) tea.Cmd {
	m.open, m.err, m.done, m.day = true, "", false, from.UTC()
	m.input.SetValue(from.UTC().Format("15:04:05") + " " + to.UTC().Format("15:04:05"))
	m.input.CursorEnd()
	return m.input.Focus()
}

// IsOpen reports whether the prompt has the keyboard.
func (m Model) IsOpen() bool { return m.open }

// Take returns the entered range, once.
func (m *Model) Take() (from, to time.Time, ok bool) {
	if !m.done {
		return time.Time{}, time.Time{}, false
	}
	m.done = false
	return m.from, m.to, true
}

// SetWidth sets the prompt's width.
func (m *Model) SetWidth(w int) { m.width, m.input.Width = w, max(w-len(m.input.Prompt)-2, 10) }

// ShortHelp and FullHelp list the prompt's keys.
func (m Model) ShortHelp() []key.Binding  { return []key.Binding{keys.Submit, keys.Cancel} }
func (m Model) FullHelp() [][]key.Binding { return [][]key.Binding{m.ShortHelp()} }

// Update handles keys while open.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
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
		from, to, err := Parse(m.input.Value(), m.day)
		if err != nil {
			m.err = err.Error()
			return m, nil
		}
		m.from, m.to, m.done, m.open = from, to, true, false
		m.input.Blur()
		return m, nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(km)
	m.err = ""
	return m, cmd
}

// View draws the prompt and, under it, what is wrong with the entry.
func (m Model) View() string {
	if !m.open {
		return ""
	}
	hint := "two times: 15:04[:05] on " + m.day.Format("2006-01-02") + " UTC, or RFC 3339"
	if m.err != "" {
		return m.input.View() + "\n" + m.styles.Bad.Render(cells.Clip(m.err, m.width))
	}
	return m.input.View() + "\n" + m.styles.Muted.Render(cells.Clip(hint, m.width))
}

// Parse reads "FROM TO": each RFC 3339, or a clock time (15:04 or
// 15:04:05, UTC) on day. TO must not be before FROM.
func Parse(s string, day time.Time) (from, to time.Time, err error) {
	f := strings.Fields(strings.ReplaceAll(s, ",", " "))
	if len(f) != 2 {
		return from, to, fmt.Errorf("give two times, from and to (got %d)", len(f))
	}
	if from, err = parseTime(f[0], day); err != nil {
		return from, to, fmt.Errorf("from: %w", err)
	}
	if to, err = parseTime(f[1], day); err != nil {
		return from, to, fmt.Errorf("to: %w", err)
	}
	if to.Before(from) {
		return from, to, fmt.Errorf("to (%s) is before from (%s)", f[1], f[0])
	}
	return from, to, nil
}

func parseTime(s string, day time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"15:04:05", "15:04"} {
		if c, err := time.Parse(layout, s); err == nil {
			y, mo, d := day.UTC().Date()
			return time.Date(y, mo, d, c.Hour(), c.Minute(), c.Second(), 0, time.UTC), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor 15:04[:05]", s)
}
