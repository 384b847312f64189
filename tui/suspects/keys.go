package suspects

import (
	"github.com/charmbracelet/bubbles/key"

	"github.com/mcpdup/mcpdup/tui/nav"
)

// keyMap is the suspects list's keys.
type keyMap struct {
	Open, Filter, ClearFilter, Sort, Apply key.Binding
}

var keys = keyMap{
	Open:        key.NewBinding(key.WithKeys("enter", "right", "l"), key.WithHelp("enter", "the five questions")),
	Filter:      key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
	ClearFilter: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
	Sort:        key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort")),
	Apply:       key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "apply filter")),
}

// ShortHelp and FullHelp list only the keys that work right now.
func (m Model) ShortHelp() []key.Binding {
	if m.filter.Typing() {
		return []key.Binding{keys.Apply, keys.ClearFilter}
	}
	return []key.Binding{keys.Open, keys.Filter, keys.Sort}
}

func (m Model) FullHelp() [][]key.Binding {
	if m.filter.Typing() {
		return [][]key.Binding{{keys.Apply, keys.ClearFilter}}
	}
	moves := nav.Keys.Bindings()
	acts := []key.Binding{keys.Open, keys.Filter, keys.Sort}
	if m.filter.Value() != "" {
		acts = append(acts, keys.ClearFilter)
	}
	return [][]key.Binding{moves, acts}
}
