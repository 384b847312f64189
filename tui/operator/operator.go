// Package operator asks, once, who is acting, when the console was opened
// without a name ($USER, $LOGNAME and the OS account gave none) and an
// action must record one.
package operator

import (
	"errors"
	"strings"
	"unicode"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/tui/prompt"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// Model is the prompt.
type Model struct{ prompt.Model }

// New returns a closed prompt.
func New(styles theme.Styles) Model {
	return Model{prompt.New("your name: ", "recorded with this decision and the ones after it; esc cancels", check, styles)}
}

func check(v string) error {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return errors.New("a name is needed to record who decided")
	case len(v) > 64:
		return errors.New("at most 64 characters")
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return errors.New("no control characters")
	}
	return nil
}

// Open shows the prompt, empty.
func (m *Model) Open() tea.Cmd { return m.Model.Open("", "") }

// Take returns the name given, once.
func (m *Model) Take() (string, bool) {
	v, ok := m.Model.Take()
	return strings.TrimSpace(v), ok
}
