// Package theme holds the console's styles. Every state is also carried
// by a word or a glyph, so nothing depends on colour alone: with NO_COLOR
// (lipgloss's Ascii profile) bold and reverse still mark what matters.
package theme

import (
	"github.com/charmbracelet/lipgloss"

	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/report"
)

// Styles are the semantic styles the views share.
type Styles struct {
	Title, Muted, Selected, Bad, Warn, Good, Accent, Border, StatusBar, Error lipgloss.Style
}

// Default returns the styles for the current colour profile.
func Default() Styles {
	c := func(light, dark string) lipgloss.AdaptiveColor {
		return lipgloss.AdaptiveColor{Light: light, Dark: dark}
	}
	return Styles{
		Title:     lipgloss.NewStyle().Bold(true),
		Muted:     lipgloss.NewStyle().Foreground(c("#6b6b6b", "#8a8a8a")),
		Selected:  lipgloss.NewStyle().Reverse(true),
		Bad:       lipgloss.NewStyle().Bold(true).Foreground(c("#a3141c", "#ff6b6b")),
		Warn:      lipgloss.NewStyle().Foreground(c("#8a6100", "#e0b050")),
		Good:      lipgloss.NewStyle().Foreground(c("#0a6b2d", "#5fd787")),
		Accent:    lipgloss.NewStyle().Foreground(c("#1f4fa0", "#7fb0ff")),
		Border:    lipgloss.NewStyle().Border(lipgloss.NormalBorder()).BorderForeground(c("#9aa7b8", "#5a6472")),
		StatusBar: lipgloss.NewStyle().Reverse(true),
		Error:     lipgloss.NewStyle().Bold(true).Foreground(c("#a3141c", "#ff6b6b")),
	}
}

// Tone is the style of a tone: red for an alarm, amber for a warning,
// plain for a calm frame.
func (s Styles) Tone(t report.Tone) lipgloss.Style {
	switch t {
	case report.ToneAlarm:
		return s.Bad
	case report.ToneWarn:
		return s.Warn
	}
	return lipgloss.NewStyle()
}

// Severity is the style of a suspect's severity: its tone, with a calm
// one green (one action, nothing to do).
func (s Styles) Severity(v analyze.Severity) lipgloss.Style {
	if t := report.SeverityTone(v); t != report.ToneCalm {
		return s.Tone(t)
	}
	return s.Good
}

// Answer is the style of a yes/no/unknown answer.
func (s Styles) Answer(a string) lipgloss.Style {
	switch a {
	case "yes":
		return s.Good
	case "no":
		return s.Bad
	}
	return s.Warn
}
