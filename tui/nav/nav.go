// Package nav is the cursor movement the console's lists share: the same
// keys and the same arithmetic in the suspects list and the browsers.
package nav

import (
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// KeyMap is the list navigation keys.
type KeyMap struct{ Up, Down, Top, Bottom, PageUp, PageDown key.Binding }

// Keys are the navigation keys of every list.
var Keys = KeyMap{
	Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
	Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
	Top:      key.NewBinding(key.WithKeys("g", "home"), key.WithHelp("g", "top")),
	Bottom:   key.NewBinding(key.WithKeys("G", "end"), key.WithHelp("G", "bottom")),
	PageUp:   key.NewBinding(key.WithKeys("pgup", "ctrl+u"), key.WithHelp("pgup", "page up")),
	PageDown: key.NewBinding(key.WithKeys("pgdown", "ctrl+d"), key.WithHelp("pgdn", "page down")),
}

// Bindings lists the keys for help.
func (k KeyMap) Bindings() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.Top, k.Bottom, k.PageUp, k.PageDown}
}

// Move returns where km takes a cursor in a list of n rows showing page
// rows at a time (unclamped: the caller clamps), and whether km is a
// navigation key at all.
func Move(km tea.KeyMsg, cursor, n, page int) (int, bool) {
	switch {
	case key.Matches(km, Keys.Up):
		return cursor - 1, true
	case key.Matches(km, Keys.Down):
		return cursor + 1, true
	case key.Matches(km, Keys.Top):
		return 0, true
	case key.Matches(km, Keys.Bottom):
		return n - 1, true
	case key.Matches(km, Keys.PageUp):
		return cursor - page, true
	case key.Matches(km, Keys.PageDown):
		return cursor + page, true
	}
	return cursor, false
}

// Where says which rows are on screen, "3–20 of 96" (rows start..end-1,
// counted from 1), so a cut list never looks whole; "" when all fit.
func Where(start, end, n int) string {
	if n == 0 || start <= 0 && end >= n {
		return ""
	}
	return fmt.Sprintf("%d–%d of %d", start+1, min(end, n), n)
}

// Window is the first row to show so that cursor is on screen, given the
// previous first row: it moves only when the cursor leaves the window.
func Window(first, cursor, n, rows int) int {
	rows = max(rows, 1)
	if cursor < first {
		first = cursor
	}
	if cursor >= first+rows {
		first = cursor - rows + 1
	}
	return min(max(first, 0), max(n-rows, 0))
}
