package pending

import (
	"github.com/charmbracelet/bubbles/key"

	"github.com/mcpdup/mcpdup/tui/nav"
)

type keyMap struct {
	Verify, Reject, Approve, Deny, Submit, Cancel, Yes, Filter key.Binding
}

var keys = keyMap{
	Verify:  key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "mark verified (it took effect)")),
	Reject:  key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "mark rejected (it did not)")),
	Approve: key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "approve")),
	Deny:    key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "deny")),
	Submit:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "continue")),
	Cancel:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
	Yes:     key.NewBinding(key.WithKeys("y", "Y"), key.WithHelp("y", "yes (anything else: no)")),
	Filter:  nav.FilterKeys.Filter,
}

// ShortHelp and FullHelp list the keys that work in the current step.
func (m Model) ShortHelp() []key.Binding {
	switch m.step {
	case stepNote:
		return []key.Binding{keys.Submit, keys.Cancel}
	case stepConfirm:
		return []key.Binding{keys.Yes}
	case stepFilter:
		return []key.Binding{keys.Submit, keys.Cancel}
	}
	var ks []key.Binding
	if it := m.selected(); it != nil {
		if it.approval != nil {
			ks = append(ks, keys.Approve, keys.Deny)
		} else {
			ks = append(ks, keys.Verify, keys.Reject)
		}
	}
	return ks
}

func (m Model) FullHelp() [][]key.Binding {
	if m.step != stepBrowse {
		return [][]key.Binding{m.ShortHelp()}
	}
	return [][]key.Binding{nav.Keys.Bindings(), append(m.ShortHelp(), keys.Filter)}
}
