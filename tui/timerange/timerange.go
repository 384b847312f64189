// Package timerange asks the operator for a time range to replay: two
// times, as RFC 3339 or as clock times on a given day.
package timerange

import (
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/tui/prompt"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// Model is the prompt: it takes an answer only when Parse accepts it.
type Model struct {
	prompt.Model
	day      time.Time // the day clock times are on
	from, to time.Time
}

// New returns a closed prompt.
func New(styles theme.Styles) Model {
	m := Model{}
	m.Model = prompt.New("replay from, to: ", "", func(v string) error {
		_, _, err := Parse(v, m.day)
		return err
	}, styles)
	return m
}

// Open shows the prompt filled with a range.
func (m *Model) Open(from, to time.Time) tea.Cmd {
	m.day = from.UTC()
	m.Model = m.withDay()
	return m.Model.Open(from.UTC().Format("15:04:05")+" "+to.UTC().Format("15:04:05"),
		"two times: 15:04[:05] on "+m.day.Format("2006-01-02")+" UTC, or RFC 3339")
}

// withDay rebinds the check to the current day (the check closes over a
// copy of the model, so it is rebuilt when the day changes).
func (m *Model) withDay() prompt.Model {
	day := m.day
	p := m.Model
	return prompt.Rebind(p, func(v string) error {
		_, _, err := Parse(v, day)
		return err
	})
}

// Take returns the entered range, once.
func (m *Model) Take() (from, to time.Time, ok bool) {
	v, ok := m.Model.Take()
	if !ok {
		return time.Time{}, time.Time{}, false
	}
	from, to, err := Parse(v, m.day)
	return from, to, err == nil
}

// Parse reads "FROM TO": each RFC 3339, or a clock time (15:04 or
// 15:04:05, UTC) on day. TO must not be before FROM.
func Parse(s string, day time.Time) (from, to time.Time, err error) {
	f := strings.Fields(strings.ReplaceAll(s, ",", " "))
	if len(f) != 2 {
		return from, to, fmt.Errorf("give two times, from and to (got %d)", len(f))
	}
	if from, err = parseTime(f[0], day); err != nil {
		return from, to, fmt.Errorf("from: %w", err)
	}
	if to, err = parseTime(f[1], day); err != nil {
		return from, to, fmt.Errorf("to: %w", err)
	}
	if to.Before(from) {
		return from, to, fmt.Errorf("to (%s) is before from (%s)", f[1], f[0])
	}
	return from, to, nil
}

func parseTime(s string, day time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"15:04:05", "15:04"} {
		if c, err := time.Parse(layout, s); err == nil {
			y, mo, d := day.UTC().Date()
			return time.Date(y, mo, d, c.Hour(), c.Minute(), c.Second(), 0, time.UTC), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor 15:04[:05]", s)
}
