package tui

import (
	"github.com/charmbracelet/lipgloss"

	"github.com/mcpdup/mcpdup/tui/theme"
)

// styles is the app's one set of styles, built from the shared theme.
var styles = theme.Default()

var (
	tabStyle       = lipgloss.NewStyle().Padding(0, 1)
	activeTabStyle = lipgloss.NewStyle().Padding(0, 1).Reverse(true).Bold(true)
)
