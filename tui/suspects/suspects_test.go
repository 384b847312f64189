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

// TestReplaceEffectsMatchesALoad applies live updates (analyze.Rebuild's
// kept and fresh suspects) to a loaded list and checks every sort against
// a list loaded with the result: suspects that only grew change in place,
// changed ones move, vanished ones go, new ones join.
func TestReplaceEffectsMatchesALoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	mk := func(i int, key string) *analyze.Suspect {
		return &analyze.Suspect{ID: fmt.Sprintf("sus_%026d", i), EffectKey: key, Tool: "deploy_release",
			Verdict: analyze.Verdicts[rng.IntN(len(analyze.Verdicts))], Severity: analyze.Severities[rng.IntN(len(analyze.Severities))],
			FirstAt: time.Date(2026, 11, 30, 9, rng.IntN(60), 0, 0, time.UTC), Calls: make([]analyze.CallRef, 2)}
	}
	m := New(theme.Default())
	m.SetSize(120, 40)
	var want []*analyze.Suspect
	for i := range 400 {
		want = append(want, mk(i, fmt.Sprintf("eff:%d", i%40)))
	}
	m.Add(want)
	next := len(want)
	for round := range 30 {
		keys := []string{fmt.Sprintf("eff:%d", rng.IntN(40)), fmt.Sprintf("eff:%d", rng.IntN(40))}
		var kept []string
		var fresh, stay []*analyze.Suspect
		grown := map[string]*analyze.Suspect{}
		for _, s := range want {
			if !slices.Contains(keys, s.EffectKey) {
				stay = append(stay, s)
				continue
			}
			switch rng.IntN(4) {
			case 0: // kept as it was
				kept = append(kept, s.ID)
				stay = append(stay, s)
			case 1: // grew: one more call, the same place in every order
				g := *s
				g.Calls = append(slices.Clone(s.Calls), analyze.CallRef{})
				fresh = append(fresh, &g)
				grown[s.ID] = &g
				stay = append(stay, &g)
			case 2: // changed: another verdict, so it moves
				c := *s
				c.Verdict, c.Severity = analyze.VerdictDuplicate, analyze.Severities[0]
				fresh = append(fresh, &c)
				if c.Verdict == s.Verdict && c.Severity == s.Severity { // it did not change after all
					grown[s.ID] = &c
					stay = append(stay, &c)
				}
			} // 3: gone
		}
		for range rng.IntN(3) {
			n := mk(next, keys[0])
			next++
			fresh = append(fresh, n)
		}
		rng.Shuffle(len(fresh), func(i, j int) { fresh[i], fresh[j] = fresh[j], fresh[i] })
		m.ReplaceEffects(keys, kept, fresh)
		// A list loaded with the result holds the rows that stayed, in
		// place, then the rest in the order they came.
		want = stay
		for _, s := range fresh {
			if grown[s.ID] == nil {
				want = append(want, s)
			}
		}
		for by := range sorts {
			m.sortBy = by
			m.apply()
			if got, w := m.shownIDs(), naive(want, by, ""); !slices.Equal(got, w) {
				t.Fatalf("round %d, sort %s: %d shown, want %d\n got %v\nwant %v", round, sorts[by], len(got), len(w), head(got), head(w))
			}
		}
		for _, r := range m.All() {
			if g := grown[r.ID]; g != nil && r.Calls != len(g.Calls) {
				t.Fatalf("round %d: %s shows %d calls, it has %d", round, r.ID, r.Calls, len(g.Calls))
			}
		}
		if _, total, counts := m.Counts(); total != len(want) || counts.Total() != len(want) {
			t.Fatalf("round %d: %d suspects counted, want %d", round, total, len(want))
		}
	}
}

// A count column holds five cells: a count too long for them is written
// in thousands or millions, never clipped ("2000…" for 200000 read as two
// thousand).
func TestCountsFitTheirColumn(t *testing.T) {
	for n, want := range map[int]string{7: "7", 99_999: "99999", 100_000: "100k", 200_000: "200k", 999_999: "999k",
		1_000_000: "1.0M", 1_250_000: "1.2M", 9_999_999: "9.9M", 10_000_000: "10M", 999_999_999: "999M", 1_500_000_000: "1G"} {
		if got := count(n); got != want || len(got) > colCalls.w {
			t.Errorf("count(%d) = %q, want %q in %d cells", n, got, want, colCalls.w)
		}
	}
	r := row([]column{colCalls, colExecs}, 0, analyze.Row{Calls: 200_000, Executions: 3})
	if !strings.Contains(r, "200k") || strings.Contains(r, "…") {
		t.Errorf("row of 200,000 calls: %q", r)
	}
}
