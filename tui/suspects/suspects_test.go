package suspects

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// TestIndexMatchesNaive streams random suspects in random batches and,
// after each, checks every sort and a run of filters (typed a letter at a
// time, then erased) against the obvious way: lower-case each field, keep
// the matches, stable-sort them.
func TestIndexMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tools := []string{"deploy_release", "Charge_Card", "get_status", "refund", "DEPLOY_preview"}
	m := New(theme.Default())
	m.SetSize(120, 40)
	var all []*analyze.Suspect
	for batch := 0; batch < 12; batch++ {
		var more []*analyze.Suspect
		for range rng.IntN(300) + 1 {
			more = append(more, &analyze.Suspect{
				ID:       fmt.Sprintf("sus_%026d", len(all)+len(more)),
				Tool:     tools[rng.IntN(len(tools))],
				Verdict:  analyze.Verdicts[rng.IntN(len(analyze.Verdicts))],
				Severity: analyze.Severities[rng.IntN(len(analyze.Severities))],
				FirstAt:  time.Date(2026, 11, 30, 9, 0, rng.IntN(60), 0, time.UTC), // many ties
				Title:    "Title " + tools[rng.IntN(len(tools))],
				Target:   "http://127.0.0.1/v1/x",
			})
		}
		all = append(all, more...)
		m.Add(more)
		for by := range sorts {
			m.sortBy = by
			for _, q := range []string{"", "d", "de", "dep", "depl", "dep", "de", "", "CARD", "sus_0000", "nothing-matches"} {
				m.filter.Set(q)
				m.apply()
				want := naive(all, by, q)
				if got := m.shownIDs(); !slices.Equal(got, want) {
					t.Fatalf("batch %d, sort %s, filter %q: %d shown, want %d\n got %v\nwant %v", batch, sorts[by], q, len(got), len(want), head(got), head(want))
				}
			}
		}
		shown, total, counts := m.Counts()
		if total != len(all) || counts.Total() != len(all) || shown != len(naive(all, 0, "nothing-matches")) {
			t.Fatalf("counts: %d %d %d", shown, total, counts.Total())
		}
	}
}

func naive(all []*analyze.Suspect, by int, q string) []string {
	q = strings.ToLower(q)
	var keep []*analyze.Suspect
	for _, s := range all {
		for _, f := range []string{string(s.Verdict), s.Tool, s.ID, string(s.Severity), s.Title, s.Target} {
			if strings.Contains(strings.ToLower(f), q) {
				keep = append(keep, s)
				break
			}
		}
	}
	slices.SortStableFunc(keep, func(a, b *analyze.Suspect) int {
		switch sorts[by] {
		case "severity":
			if d := b.Severity.Rank() - a.Severity.Rank(); d != 0 {
				return d
			}
			return a.FirstAt.Compare(b.FirstAt)
		case "time":
			return a.FirstAt.Compare(b.FirstAt)
		case "tool":
			return strings.Compare(a.Tool, b.Tool)
		default:
			return slices.Index(analyze.Verdicts, a.Verdict) - slices.Index(analyze.Verdicts, b.Verdict)
		}
	})
	ids := make([]string, len(keep))
	for i, s := range keep {
		ids[i] = s.ID
	}
	return ids
}

func (m Model) shownIDs() []string {
	ids := make([]string, len(m.shown))
	for i, x := range m.shown {
		ids[i] = m.all[x].ID
	}
	return ids
}

func head(ids []string) []string { return ids[:min(len(ids), 5)] }

// TestFilterTypingKeepsSelectionSane types into the filter with keys and
// checks the list never points past its end.
func TestFilterTypingKeepsSelectionSane(t *testing.T) {
	m := New(theme.Default())
	m.SetSize(80, 10)
	var more []*analyze.Suspect
	for i := range 50 {
		more = append(more, &analyze.Suspect{ID: fmt.Sprintf("sus_%d", i), Tool: fmt.Sprintf("tool_%d", i%7), Verdict: analyze.VerdictDuplicate, Severity: analyze.SeverityCritical})
	}
	m.Add(more)
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("G")})
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("/")})
	for _, r := range "tool_3" {
		m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	if shown, _, _ := m.Counts(); shown != 7 || m.Selected() == nil || m.Selected().Tool != "tool_3" {
		t.Fatalf("shown %d, selected %+v", shown, m.Selected())
	}
}
