package suspects

import "github.com/charmbracelet/bubbles/key"

// keyMap is the suspects list's keys.
type keyMap struct {
	Up, Down, Top, Bottom, PageUp, PageDown key.Binding
	Open, Filter, ClearFilter, Sort, Apply  key.Binding
}

var keys = keyMap{
	Up:          key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
	Down:        key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
	Top:         key.NewBinding(key.WithKeys("g", "home"), key.WithHelp("g", "top")),
	Bottom:      key.NewBinding(key.WithKeys("G", "end"), key.WithHelp("G", "bottom")),
	PageUp:      key.NewBinding(key.WithKeys("pgup", "ctrl+u"), key.WithHelp("pgup", "page up")),
	PageDown:    key.NewBinding(key.WithKeys("pgdown", "ctrl+d"), key.WithHelp("pgdn", "page down")),
	Open:        key.NewBinding(key.WithKeys("enter", "right", "l"), key.WithHelp("enter", "the five questions")),
	Filter:      key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
	ClearFilter: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
	Sort:        key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort")),
	Apply:       key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "apply filter")),
}

// ShortHelp and FullHelp list only the keys that work right now.
func (m Model) ShortHelp() []key.Binding {
	if m.filtering {
		return []key.Binding{keys.Apply, keys.ClearFilter}
	}
	return []key.Binding{keys.Open, keys.Filter, keys.Sort}
}

func (m Model) FullHelp() [][]key.Binding {
	if m.filtering {
		return [][]key.Binding{{keys.Apply, keys.ClearFilter}}
	}
	nav := []key.Binding{keys.Up, keys.Down, keys.Top, keys.Bottom, keys.PageUp, keys.PageDown}
	acts := []key.Binding{keys.Open, keys.Filter, keys.Sort}
	if m.filter.Value() != "" {
		acts = append(acts, keys.ClearFilter)
	}
	return [][]key.Binding{nav, acts}
}
