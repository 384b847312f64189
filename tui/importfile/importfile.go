// Package importfile asks the operator for a log file to import into the
// database the console shows: a path, with tab completing it, then, when
// the file's format cannot be detected, the format from a list.
package importfile

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/tui/prompt"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// Model is the prompt.
type Model struct {
	prompt.Model
	path    string   // the file, once chosen
	formats []string // set while asking for the format
}

const pathHint = "tab completes the path; the format is detected; the file is imported whole or not at all"

// New returns a closed prompt.
func New(styles theme.Styles) Model {
	return Model{Model: prompt.New("import file: ", pathHint, checkPath, styles)}
}

func checkPath(v string) error {
	p := Expand(v)
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		return fmt.Errorf("%q is not a file", p)
	}
	return nil
}

// Open asks for a file, empty.
func (m *Model) Open() tea.Cmd {
	m.formats, m.path = nil, ""
	m.Relabel("import file: ")
	m.Model = prompt.Rebind(m.Model, checkPath)
	m.Suggest(nil)
	return m.Model.Open("", pathHint)
}

// AskFormat asks which of formats the file at path is (the app says why
// in the status bar).
func (m *Model) AskFormat(path string, formats []string) tea.Cmd {
	m.path, m.formats = path, formats
	m.Relabel("format of " + filepath.Base(path) + ": ")
	m.Model = prompt.Rebind(m.Model, func(v string) error {
		if !slices.Contains(formats, strings.TrimSpace(v)) {
			return fmt.Errorf("%q is not one of %s", strings.TrimSpace(v), strings.Join(formats, ", "))
		}
		return nil
	})
	m.Suggest(formats)
	return m.Model.Open("", "one of: "+strings.Join(formats, ", ")+" (tab completes; esc cancels)")
}

// Update edits the answer and keeps the completions up to date.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := m.Model.Update(msg)
	if m.IsOpen() && m.formats == nil {
		m.Suggest(completions(m.Value()))
	}
	return m, cmd
}

// Take returns the chosen file and format ("" to detect it), once.
func (m *Model) Take() (path, format string, ok bool) {
	v, ok := m.Model.Take()
	if !ok {
		return "", "", false
	}
	if m.formats != nil {
		return m.path, strings.TrimSpace(v), true
	}
	return Expand(v), "", true
}

// completions lists the paths that complete typed: the entries of its
// directory that start with its last element, directories with a
// trailing slash, at most 50.
func completions(typed string) []string {
	if typed == "" {
		return nil
	}
	dir, base := filepath.Split(typed)
	entries, err := os.ReadDir(Expand(dir + "."))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), base) || strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(base, ".") {
			continue
		}
		c := dir + e.Name()
		if e.IsDir() {
			c += string(filepath.Separator)
		}
		out = append(out, c)
		if len(out) == 50 {
			break
		}
	}
	return out
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
