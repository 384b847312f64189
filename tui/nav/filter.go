package nav

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
)

// FilterKeys are the / filter's keys, the same in every list.
var FilterKeys = struct{ Filter, Apply, Clear key.Binding }{
	Filter: key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
	Apply:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "apply filter")),
	Clear:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
}

// Filter is the / filter a list shares with the others: a text field,
// open while the operator types in it; what it holds stays applied after
// enter until esc clears it.
type Filter struct {
	input  textinput.Model
	typing bool
}

// NewFilter returns an empty, closed filter; placeholder says what it
// matches ("" for none).
func NewFilter(placeholder string) Filter {
	in := textinput.New()
	in.Prompt = "/"
	in.Placeholder = placeholder
	in.CharLimit = 256
	return Filter{input: in}
}

// Set puts q in the filter (as if typed and applied).
func (f *Filter) Set(q string) { f.input.SetValue(q) }

// Open starts typing in the filter.
func (f *Filter) Open() tea.Cmd {
	f.typing = true
	return f.input.Focus()
}

// Typing reports whether the filter has the keyboard.
func (f Filter) Typing() bool { return f.typing }

// Value is the filter as typed.
func (f Filter) Value() string { return f.input.Value() }

// Clear empties the filter.
func (f *Filter) Clear() { f.input.SetValue("") }

// SetWidth sets the field's width.
func (f *Filter) SetWidth(w int) { f.input.Width = max(w, 1) }

// Edit handles a key while typing: enter keeps the filter, esc clears it,
// anything else edits it. It reports whether the value changed.
func (f *Filter) Edit(km tea.KeyMsg) (changed bool, cmd tea.Cmd) {
	switch {
	case key.Matches(km, FilterKeys.Apply):
		f.typing = false
		f.input.Blur()
		return false, nil
	case key.Matches(km, FilterKeys.Clear):
		f.typing = false
		f.input.Blur()
		f.input.SetValue("")
		return true, nil
	}
	before := f.input.Value()
	f.input, cmd = f.input.Update(km)
	return f.input.Value() != before, cmd
}

// View is the field while typing.
func (f Filter) View() string { return f.input.View() }

// Match reports whether any of texts holds q, case-insensitively (q
// already lower-cased and trimmed; "" matches everything).
func Match(q string, texts ...string) bool {
	if q == "" {
		return true
	}
	for _, t := range texts {
		if strings.Contains(strings.ToLower(t), q) {
			return true
		}
	}
	return false
}

// Query is a filter's value as Match wants it.
func (f Filter) Query() string { return strings.ToLower(strings.TrimSpace(f.input.Value())) }
