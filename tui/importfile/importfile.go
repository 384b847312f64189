// Package importfile asks the operator for a log file to import into the
// database the console shows.
package importfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/tui/prompt"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// Model is the prompt.
type Model struct{ prompt.Model }

// New returns a closed prompt.
func New(styles theme.Styles) Model {
	check := func(v string) error {
		p := Expand(v)
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return fmt.Errorf("%q is not a file", p)
		}
		return nil
	}
	return Model{prompt.New("import file: ", "the format is detected; the file is imported whole or not at all", check, styles)}
}

// Open shows the prompt, empty.
func (m *Model) Open() tea.Cmd { return m.Model.Open("", "") }

// Take returns the chosen file, once.
func (m *Model) Take() (string, bool) {
	v, ok := m.Model.Take()
	return Expand(v), ok
}

// Expand resolves a leading ~/ and surrounding space.
func Expand(p string) string {
	p = strings.TrimSpace(p)
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}
