// Package suspects is the console's list of suspected duplicates: verdict
// and severity as words and glyphs, sorting, and a filter that stays
// visible once applied.
package suspects

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/report"
	"github.com/mcpdup/mcpdup/tui/cells"
	"github.com/mcpdup/mcpdup/tui/nav"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// Sort orders.
var sorts = []string{"severity", "time", "tool", "verdict"}

// Model is the list.
type Model struct {
	all      []analyze.Row // one compact row per suspect; opening one reads it whole
	idx      *index        // sort keys, search text, counts, sort orders
	shown    []int32       // indexes into all, filtered and sorted; may share idx's order: never modify in place
	shownQ   string        // the filter and
	shownN   int           // the number of suspects and
	sortedBy int           // the sort shown was computed from
	cursor   int
	offset   int
	width    int
	height   int
	sortBy   int
	filter   nav.Filter
	opened   *analyze.Row       // set by enter; the app takes it after Update
	near     []analyze.NearMiss // calls of one tool that asked for other effects
	styles   theme.Styles
}

// TakeOpened returns the suspect the operator just opened, once: the app
// calls it right after Update and reads the suspect whole to show it.
func (m *Model) TakeOpened() *analyze.Row {
	s := m.opened
	m.opened = nil
	return s
}

// New returns an empty list.
func New(styles theme.Styles) Model {
	return Model{filter: nav.NewFilter("verdict, tool, suspect id…"), styles: styles, idx: &index{}}
}

// SetSize sets the list's box.
func (m *Model) SetSize(w, h int) {
	m.width, m.height = max(w, 0), max(h, 0)
	m.filter.SetWidth(m.width - 4)
	m.clamp()
}

// SetSuspects replaces the suspects, keeping the selection when it can.
func (m *Model) SetSuspects(all []*analyze.Suspect) {
	m.setRows(rowsOf(nil, all))
}

func rowsOf(to []analyze.Row, sus []*analyze.Suspect) []analyze.Row {
	for _, s := range sus {
		to = append(to, s.Row())
	}
	return to
}

func (m *Model) setRows(all []analyze.Row) {
	var keep string
	if s := m.Selected(); s != nil {
		keep = s.ID
	}
	m.all = all
	m.idx = &index{}
	m.idx.add(all)
	m.apply()
	m.selectID(keep)
}

// selectID moves the cursor to the suspect with this id, if shown.
func (m *Model) selectID(id string) {
	for i, idx := range m.shown {
		if m.all[idx].ID == id {
			m.cursor = i
		}
	}
	m.clamp()
}

// SetNearMisses keeps the near misses the analysis named, for the list's
// last line.
func (m *Model) SetNearMisses(near []analyze.NearMiss) { m.near = near }

// NearMisses returns the near misses the list names.
func (m *Model) NearMisses() []analyze.NearMiss { return m.near }

// nearText names the near misses in a line: how many, and the first.
func (m *Model) nearText() string {
	if len(m.near) == 0 {
		return ""
	}
	first := m.near[0]
	what := "another effect"
	if len(first.Differs) > 0 {
		what, _, _ = strings.Cut(first.Differs[0], ":")
	}
	noun := "near misses"
	if len(m.near) == 1 {
		noun = "near miss"
	}
	return fmt.Sprintf(" · %d %s (not suspects): %s differs in %s", len(m.near), noun, first.Tool, what)
}

// ReplaceEffects brings the suspects of these effect keys up to date:
// live mode's update (analyze.Rebuild), when new records touched only
// those effects. Their suspects named in kept stay, fresh ones replace or
// join them, and the rest of them go. The selection stays on its suspect
// when it can.
func (m *Model) ReplaceEffects(keys, kept []string, fresh []*analyze.Suspect) {
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	stays := make(map[string]bool, len(kept))
	for _, id := range kept {
		stays[id] = true
	}
	at := map[string]int{} // rows that do not stay as they are
	for i, s := range m.all {
		if set[s.EffectKey] && !stays[s.ID] {
			at[s.ID] = i
		}
	}
	// A suspect that only grew (the last group of an effect called all
	// day gained a call) keeps its place in every order: changed in
	// place, where a removal rebuilds the index of every suspect.
	var added []*analyze.Suspect
	for _, sus := range fresh {
		i, ok := at[sus.ID]
		if ok && sameOrder(m.all[i], sus.Row()) {
			m.all[i] = sus.Row()
			delete(at, sus.ID)
			continue
		}
		added = append(added, sus)
	}
	if len(at) == 0 {
		var keep string
		if s := m.Selected(); s != nil {
			keep = s.ID
		}
		m.Add(added) // nothing removed: no index to rebuild
		m.selectID(keep)
		return
	}
	all := make([]analyze.Row, 0, len(m.all)+len(added))
	for _, s := range m.all {
		if _, drop := at[s.ID]; !drop {
			all = append(all, s)
		}
	}
	m.setRows(rowsOf(all, added))
}

// sameOrder reports whether two rows of one suspect sort, filter and
// count alike: what the index holds of a row.
func sameOrder(a, b analyze.Row) bool {
	return a.ID == b.ID && a.Tool == b.Tool && a.Target == b.Target && a.Title == b.Title && a.Verdict == b.Verdict &&
		a.Severity == b.Severity && a.FirstAt.Equal(b.FirstAt)
}

// Add appends suspects as they stream in.
func (m *Model) Add(more []*analyze.Suspect) {
	m.all = rowsOf(m.all, more)
	m.idx.add(m.all)
	m.apply()
}

// All is every suspect's row, in load order.
func (m Model) All() []analyze.Row { return m.all }

// Captures reports whether the filter has the keyboard (q must not quit).
func (m *Model) Captures() bool { return m.filter.Typing() }

// Status is the list's part of the status bar: how many suspects, how many
// shown, and the duplicates and risks among them by name.
func (m *Model) Status() string {
	shown, total, counts := m.Counts()
	s := fmt.Sprintf("%d suspects", total)
	if shown != total {
		s = fmt.Sprintf("%d/%d suspects", shown, total)
	}
	if c := counts[analyze.VerdictDuplicate] + counts[analyze.VerdictDuplicateRisk]; c > 0 {
		s += fmt.Sprintf(" (✗ %d duplicate, ? %d risk)", counts[analyze.VerdictDuplicate], counts[analyze.VerdictDuplicateRisk])
	}
	return s
}

// Init starts nothing: the app loads the suspects.
func (m *Model) Init() tea.Cmd { return nil }

// Selected is the row under the cursor, or nil.
func (m Model) Selected() *analyze.Row {
	if m.cursor < 0 || m.cursor >= len(m.shown) {
		return nil
	}
	r := m.all[m.shown[m.cursor]]
	return &r
}

// Counts tallies the shown suspects and all of them.
func (m Model) Counts() (shown, total int, byVerdict analyze.Counts) {
	return len(m.shown), len(m.all), m.idx.counts
}

// Filter is the applied filter text.
func (m Model) Filter() string { return m.filter.Value() }

// SortName is the current sort order.
func (m Model) SortName() string { return sorts[m.sortBy] }

// Update handles keys. No I/O happens here.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return m, nil
	}
	if m.filter.Typing() {
		changed, cmd := m.filter.Edit(km)
		if changed {
			m.apply()
		}
		return m, cmd
	}
	if cursor, ok := nav.Move(km, m.cursor, len(m.shown), max(m.rows()-1, 1)); ok {
		m.cursor = cursor
		m.clamp()
		return m, nil
	}
	switch {
	case key.Matches(km, keys.Filter):
		return m, m.filter.Open()
	case key.Matches(km, keys.ClearFilter) && m.filter.Value() != "":
		m.filter.Clear()
		m.apply()
	case key.Matches(km, keys.Sort):
		m.sortBy = (m.sortBy + 1) % len(sorts)
		m.apply()
	case key.Matches(km, keys.Open):
		m.opened = m.Selected()
	}
	m.clamp()
	return m, nil
}

// apply filters and sorts. Typing more of a filter only narrows what is
// shown, so it searches the rows shown rather than all of them.
func (m *Model) apply() {
	q := m.filter.Query()
	ord := m.idx.order(m.all, m.sortBy)
	switch {
	case q == "":
		m.shown = ord
	case m.shownQ != "" && strings.Contains(q, m.shownQ) && m.shownN == len(m.all) && m.sortedBy == m.sortBy:
		m.shown = m.idx.filter(m.shown, q)
	default:
		m.shown = m.idx.filter(ord, q)
	}
	m.shownQ, m.shownN, m.sortedBy = q, len(m.all), m.sortBy
	m.clamp()
}

func (m *Model) rows() int { return max(m.height-3, 1) } // header, filter line, spare

func (m *Model) clamp() {
	m.cursor = min(max(m.cursor, 0), max(len(m.shown)-1, 0))
	rows := m.rows()
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+rows {
		m.offset = m.cursor - rows + 1
	}
	m.offset = max(min(m.offset, len(m.shown)-rows), 0)
}

// View draws the list: a header, the visible rows, the filter line.
func (m Model) View() string {
	if m.width <= 0 || m.height <= 0 {
		return ""
	}
	var b strings.Builder
	cols, toolW := layout(m.width)
	b.WriteString(m.styles.Title.Render(cells.Clip("    "+header(cols, toolW), m.width)) + "\n")
	rows := m.rows()
	if len(m.shown) == 0 {
		msg := "  no suspects: no two calls asked for the same effect. Import a log with i, point a gateway at this database (mcpdup gateway --config FILE --db …), or try mcpdup demo."
		if m.filter.Value() != "" {
			msg = fmt.Sprintf("  no suspects match %q (esc clears the filter)", m.filter.Value())
		}
		wrapped := ansi.Wrap(msg, max(m.width-1, 10), " ")
		b.WriteString(m.styles.Muted.Render(wrapped) + "\n")
		rows -= strings.Count(wrapped, "\n") + 1
	}
	for i := m.offset; i < min(m.offset+rows, len(m.shown)); i++ {
		s := m.all[m.shown[i]]
		line := cells.Cursor(i == m.cursor) + s.Verdict.Glyph() + " " + row(cols, toolW, s)
		line = cells.Clip(line, m.width)
		if i == m.cursor {
			b.WriteString(m.styles.Selected.Render(cells.Pad(line, m.width)) + "\n")
		} else {
			b.WriteString(m.styles.Severity(s.Severity).Render(line) + "\n")
		}
	}
	for i := len(m.shown) - m.offset; i < rows; i++ {
		b.WriteString("\n")
	}
	switch {
	case m.filter.Typing():
		b.WriteString(m.filter.View())
	case m.filter.Value() != "":
		b.WriteString(m.styles.Accent.Render(cells.Clip(fmt.Sprintf("filter: %s  (%d of %d; / edits, esc clears)", m.filter.Value(), len(m.shown), len(m.all)), m.width)))
	default:
		where := ""
		if w := nav.Where(m.offset, m.offset+rows, len(m.shown)); w != "" {
			where = w + " · "
		}
		b.WriteString(m.styles.Muted.Render(cells.Clip(where+fmt.Sprintf("sorted by %s (s changes); / filters", sorts[m.sortBy])+m.nearText(), m.width)))
	}
	return b.String()
}

// A column of the list. The tool column (w 0) takes the width the
// others leave, up to 28 cells.
type column struct {
	title string
	w     int
	right bool
	cell  func(analyze.Row) string
}

var (
	colVerdict  = column{"VERDICT", 26, false, func(s analyze.Row) string { return string(s.Verdict) }}
	colSeverity = column{"SEVERITY", 9, false, func(s analyze.Row) string { return string(s.Severity) }}
	colTool     = column{"TOOL", 0, false, func(s analyze.Row) string { return s.Tool }}
	colCalls    = column{"CALLS", 5, true, func(s analyze.Row) string { return count(s.Calls) }}
	colExecs    = column{"EXECS", 5, true, func(s analyze.Row) string { return count(s.Executions) }}
	colFirst    = column{"FIRST CALL UTC", 14, false, func(s analyze.Row) string { return s.FirstAt.UTC().Format("01-02 15:04:05") }}
	colID       = column{"SUSPECT", 30, false, func(s analyze.Row) string { return string(s.ID) }}
	colShortID  = column{"SUSPECT", 11, false, func(s analyze.Row) string { return report.ShortID(string(s.ID)) }}
)

// count writes n in the five cells of a count column: exactly up to
// 99999, then in thousands or millions ("200k", "1.2M"), as top does,
// where clipping made 200000 "2000…". The detail's header has it exactly.
func count(n int) string {
	switch {
	case n < 100_000:
		return strconv.Itoa(n)
	case n < 10_000_000:
		if n < 1_000_000 {
			return strconv.Itoa(n/1000) + "k"
		}
		return strconv.FormatFloat(float64(n/100_000)/10, 'f', 1, 64) + "M"
	case n < 1_000_000_000:
		return strconv.Itoa(n/1_000_000) + "M"
	}
	return strconv.Itoa(n/1_000_000_000) + "G"
}

// layouts are tried widest first: a narrower terminal shortens the
// suspect id to its tail (which every command accepts), then loses the
// first call's time, the executions and the calls counts, before the tool
// column drops below 14 cells; the id stays, so what is on screen can be
// typed into mcpdup report and replay.
var layouts = [][]column{
	{colVerdict, colSeverity, colTool, colCalls, colExecs, colFirst, colID},
	{colVerdict, colSeverity, colTool, colCalls, colExecs, colFirst, colShortID},
	{colVerdict, colSeverity, colTool, colCalls, colExecs, colShortID},
	{colVerdict, colSeverity, colTool, colCalls, colShortID},
	{colVerdict, colSeverity, colTool, colShortID},
	{colVerdict, colTool, colShortID}, // the glyph and colour still say how bad
}

func layout(width int) ([]column, int) {
	for i, cols := range layouts {
		fixed := 4 // cursor mark, glyph, spaces
		for _, c := range cols {
			fixed += c.w + 1
		}
		if toolW := width - fixed; toolW >= 14 || i == len(layouts)-1 {
			return cols, min(max(toolW, 8), 28)
		}
	}
	panic("unreachable")
}

func header(cols []column, toolW int) string {
	var b strings.Builder
	for _, c := range cols {
		b.WriteString(cellText(c, toolW, c.title) + " ")
	}
	return strings.TrimRight(b.String(), " ")
}

func row(cols []column, toolW int, s analyze.Row) string {
	var b strings.Builder
	for _, c := range cols {
		b.WriteString(cellText(c, toolW, c.cell(s)) + " ")
	}
	return strings.TrimRight(b.String(), " ")
}

func cellText(c column, toolW int, v string) string {
	w := c.w
	if w == 0 {
		w = toolW
	}
	v = cells.Clip(v, w)
	if c.right {
		return strings.Repeat(" ", w-len([]rune(v))) + v
	}
	return cells.Pad(v, w)
}
