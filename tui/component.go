package tui

import (
	"github.com/charmbracelet/bubbles/help"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/tui/browse"
	"github.com/mcpdup/mcpdup/tui/detail"
	"github.com/mcpdup/mcpdup/tui/importfile"
	"github.com/mcpdup/mcpdup/tui/operator"
	"github.com/mcpdup/mcpdup/tui/pending"
	"github.com/mcpdup/mcpdup/tui/suspects"
	"github.com/mcpdup/mcpdup/tui/timerange"
)

// Component is what every view of the console is (soft-serve's contract):
// a tea.Model that lists its own keys and takes the size it is given, plus
// what the app needs to route keys and fill the status bar. The app holds
// components in slices and routes through this interface only.
type Component interface {
	tea.Model
	help.KeyMap
	// SetSize gives the view its box.
	SetSize(width, height int)
	// Captures reports whether the view takes every key right now (a text
	// field or a confirmation is open): the global keys are off, and q
	// types a q.
	Captures() bool
	// Status is the view's own part of the status bar ("" for none).
	Status() string
}

var (
	_ Component = (*suspects.Model)(nil)
	_ Component = (*detail.Model)(nil)
	_ Component = (*pending.Model)(nil)
	_ Component = (*browse.Model)(nil)
	_ Component = (*timerange.Model)(nil)
	_ Component = (*importfile.Model)(nil)
	_ Component = (*operator.Model)(nil)
)
