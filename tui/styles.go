package tui

import (
	"github.com/charmbracelet/lipgloss"

	"github.com/mcpdup/mcpdup/tui/theme"
)

// styles is the app's one set of styles, built from the shared theme.
var styles = theme.Default()

var (
	// The active tab is bracketed as well as reversed: with NO_COLOR the
	// brackets are what shows it.
	tabStyle       = lipgloss.NewStyle()
	activeTabStyle = lipgloss.NewStyle().Reverse(true).Bold(true)
)
