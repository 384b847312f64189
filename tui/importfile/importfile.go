// Package importfile asks the operator for a log file to import into the
// database the console shows.
package importfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/tui/cells"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// Model is the prompt, open between Open and enter (an existing file) or
// esc.
type Model struct {
	input  textinput.Model
	open   bool
	err    string
	path   string
	done   bool
	width  int
	styles theme.Styles
}

var keys = struct{ Submit, Cancel key.Binding }{
	Submit: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "import the file")),
	Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
}

// New returns a closed prompt.
func New(styles theme.Styles) Model {
	in := textinput.New()
	in.Prompt = "import file: "
	in.Placeholder = "path to an export, a Sallyport export, traces, a HAR, an MCP log, an access log"
	in.CharLimit = 4096
	return Model{input: in, styles: styles}
}

// Open shows the prompt, empty.
func (m *Model) Open() tea.Cmd {
	m.open, m.err, m.done = true, "", false
	m.input.SetValue("")
	return m.input.Focus()
}

// IsOpen reports whether the prompt has the keyboard.
func (m Model) IsOpen() bool { return m.open }

// Take returns the chosen file, once.
func (m *Model) Take() (string, bool) {
	if !m.done {
		return "", false
	}
	m.done = false
	return m.path, true
}

// SetWidth sets the prompt's width.
func (m *Model) SetWidth(w int) { m.width, m.input.Width = w, max(w-len(m.input.Prompt)-2, 10) }

// ShortHelp and FullHelp list the prompt's keys.
func (m Model) ShortHelp() []key.Binding  { return []key.Binding{keys.Submit, keys.Cancel} }
func (m Model) FullHelp() [][]key.Binding { return [][]key.Binding{m.ShortHelp()} }

// Update handles keys while open. Checking that the file exists is a
// stat, cheap enough for Update; reading it is the app's command.
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
		p := expand(strings.TrimSpace(m.input.Value()))
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			m.err = fmt.Sprintf("%q is not a file", p)
			return m, nil
		}
		m.path, m.done, m.open = p, true, false
		m.input.Blur()
		return m, nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(km)
	m.err = ""
	return m, cmd
}

func expand(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// View draws the prompt and what is wrong with the entry.
func (m Model) View() string {
	if !m.open {
		return ""
	}
	if m.err != "" {
		return m.input.View() + "\n" + m.styles.Bad.Render(cells.Clip(m.err, m.width))
	}
	return m.input.View() + "\n" + m.styles.Muted.Render(cells.Clip("the format is detected; the file is imported whole or not at all", m.width))
}
