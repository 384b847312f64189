package detail

import (
	"github.com/charmbracelet/bubbles/key"

	"github.com/mcpdup/mcpdup/tui/nav"
)

type keyMap struct {
	Next, Prev, Replay, StepNext, StepPrev, Back key.Binding
}

var keys = keyMap{
	Next:     key.NewBinding(key.WithKeys("enter", "right", "l"), key.WithHelp("enter/→", "next question")),
	Prev:     key.NewBinding(key.WithKeys("left", "h", "backspace"), key.WithHelp("←", "previous question")),
	Replay:   key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "replay step by step")),
	StepNext: key.NewBinding(key.WithKeys("down", "j", "n", "right", "l"), key.WithHelp("↓/n", "next event")),
	StepPrev: key.NewBinding(key.WithKeys("up", "k", "b", "left", "h"), key.WithHelp("↑/b", "previous event")),
	Back:     key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
}

// ShortHelp and FullHelp list the keys that work in the current mode.
func (m Model) ShortHelp() []key.Binding {
	if m.replaying || m.sus == nil {
		return []key.Binding{keys.StepNext, keys.StepPrev, keys.Back}
	}
	return []key.Binding{keys.Next, keys.Prev, keys.Replay, keys.Back}
}

func (m Model) FullHelp() [][]key.Binding {
	moves := []key.Binding{nav.Keys.Top, nav.Keys.Bottom, nav.Keys.PageUp, nav.Keys.PageDown}
	if !m.replaying && m.sus != nil {
		moves = append([]key.Binding{nav.Keys.Up, nav.Keys.Down}, moves...) // scroll the timeline
	}
	return [][]key.Binding{m.ShortHelp(), moves}
}
