package timerange

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/tui/theme"
)

func TestParse(t *testing.T) {
	day := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	at := func(h, m, s int) time.Time { return time.Date(2026, 11, 30, h, m, s, 0, time.UTC) }
	for _, c := range []struct {
		in       string
		from, to time.Time
		err      string
	}{
		{"09:00 09:05", at(9, 0, 0), at(9, 5, 0), ""},
		{"09:00:10, 09:00:20", at(9, 0, 10), at(9, 0, 20), ""},
		{"2026-11-29T23:59:00Z 09:00", time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC), at(9, 0, 0), ""},
		{"09:05 09:00", time.Time{}, time.Time{}, "before"},
		{"09:00", time.Time{}, time.Time{}, "two times"},
		{"9am 10am", time.Time{}, time.Time{}, `from: "9am"`},
	} {
		from, to, err := Parse(c.in, day)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) = %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !from.Equal(c.from) || !to.Equal(c.to) {
			t.Errorf("Parse(%q) = %s %s %v", c.in, from, to, err)
		}
	}
}

func TestPromptKeys(t *testing.T) {
	m := New(theme.Default())
	m.SetSize(80, 2)
	m.Open(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 9, 5, 0, 0, time.UTC))
	if !m.IsOpen() || !strings.Contains(m.View(), "09:00:00 09:05:00") {
		t.Fatalf("prefilled prompt:\n%s", m.View())
	}
	for range 8 {
		m.Update(tea.KeyMsg{Type: tea.KeyBackspace})
	}
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("08:00")})
	m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	if !m.IsOpen() || !strings.Contains(m.View(), "before") {
		t.Fatalf("a reversed range must be refused in place:\n%s", m.View())
	}
	for range 5 {
		m.Update(tea.KeyMsg{Type: tea.KeyBackspace})
	}
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("09:01")})
	m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	from, to, ok := m.Take()
	if !ok || m.IsOpen() || from.Format("15:04") != "09:00" || to.Format("15:04") != "09:01" {
		t.Fatalf("take: %v %s %s", ok, from, to)
	}
	if _, _, ok := m.Take(); ok {
		t.Fatal("a range is taken once")
	}
	m.Open(from, to)
	m.Update(tea.KeyMsg{Type: tea.KeyEsc})
	if _, _, ok := m.Take(); ok || m.IsOpen() {
		t.Fatal("esc cancels")
	}
}
