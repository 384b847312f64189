package tui

import (
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
)

// globalKeys work everywhere except while typing (ctrl+c always works).
type globalKeys struct {
	Quit, ForceQuit, Help, NextTab, PrevTab, Tab1, Tab2, Tab3, Tab4, Refresh key.Binding
	ReplayRange                                                              key.Binding // executions browser
	Import                                                                   key.Binding // the lists, not a suspect's walk
}

var keys = globalKeys{
	Quit:        key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit")),
	ForceQuit:   key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
	Help:        key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
	NextTab:     key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next view")),
	PrevTab:     key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous view")),
	Tab1:        key.NewBinding(key.WithKeys("1"), key.WithHelp("1", "suspects")),
	Tab2:        key.NewBinding(key.WithKeys("2"), key.WithHelp("2", "pending")),
	Tab3:        key.NewBinding(key.WithKeys("3"), key.WithHelp("3", "executions")),
	Tab4:        key.NewBinding(key.WithKeys("4"), key.WithHelp("4", "sessions")),
	Refresh:     key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "refresh")),
	ReplayRange: key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "replay a time range")),
	Import:      key.NewBinding(key.WithKeys("i"), key.WithHelp("i", "import a log")),
}

// tabsHelp stands for 1–4 in the full help, to keep it narrow.
var tabsHelp = key.NewBinding(key.WithKeys("1", "2", "3", "4"), key.WithHelp("1-4", "a view"))

// helpKeys joins the active view's keys with the global ones, so `?`
// lists exactly the keys that work where the operator is.
type helpKeys struct {
	view   help.KeyMap // the focused view's keys
	typing bool
	detail bool // in a suspect's walk: no import
}

func (h helpKeys) ShortHelp() []key.Binding {
	ks := h.view.ShortHelp()
	if !h.typing {
		ks = append(ks, keys.Help, keys.Quit)
	}
	return ks
}

func (h helpKeys) FullHelp() [][]key.Binding {
	groups := h.view.FullHelp()
	if h.typing {
		return append(groups, []key.Binding{keys.ForceQuit})
	}
	other := []key.Binding{keys.Refresh, keys.Help, keys.Quit, keys.ForceQuit}
	if !h.detail {
		other = append([]key.Binding{keys.Import}, other...)
	}
	return append(groups, []key.Binding{keys.NextTab, keys.PrevTab, tabsHelp}, other)
}

var _ help.KeyMap = helpKeys{}
