// Package pending is the queue of what awaits an operator: executions
// whose outcome is unknown, and approvals a running gateway waits for.
// Marking one verified or rejected asks for a note and a confirmation
// (No by default); the app writes it through the same function as
// `mcpdup resolve`.
package pending

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/tui/cells"
	"github.com/mcpdup/mcpdup/tui/nav"
	"github.com/mcpdup/mcpdup/tui/theme"
)

// ResolveMsg asks the app to record an operator's resolution.
type ResolveMsg struct {
	Execution activity.ExecutionID
	Outcome   activity.ResolutionOutcome
	Note      string
}

// DecideMsg asks the app to answer an approval.
type DecideMsg struct {
	Approval string
	State    activity.ApprovalState
	Note     string
}

type step int

const (
	stepBrowse step = iota
	stepNote
	stepConfirm
	stepFilter // typing the / filter
)

type item struct {
	exec     *activity.Execution
	approval *activity.Approval
}

// Model is the queue.
type Model struct {
	all    []item // everything pending
	items  []item // what the filter lets through, in order
	filter nav.Filter
	cursor int
	width  int
	height int
	step   step
	action string // verified | rejected | approved | denied
	asked  string // the id of the item the note and confirmation are about
	note   textinput.Model
	styles theme.Styles
}

// New returns an empty queue.
func New(styles theme.Styles) Model {
	n := textinput.New()
	n.Prompt = "note: "
	n.Placeholder = "what did you check? (required)"
	n.CharLimit = 500
	return Model{note: n, filter: nav.NewFilter(""), styles: styles}
}

// SetItems replaces the queue's contents.
func (m *Model) SetItems(execs []activity.Execution, approvals []activity.Approval) {
	m.all = m.all[:0]
	for i := range approvals {
		m.all = append(m.all, item{approval: &approvals[i]})
	}
	for i := range execs {
		m.all = append(m.all, item{exec: &execs[i]})
	}
	m.apply()
}

// apply keeps the items whose line or description holds the filter.
func (m *Model) apply() {
	q := m.filter.Query()
	m.items = m.items[:0]
	for _, it := range m.all {
		if nav.Match(q, m.line(it), m.describe(it)) {
			m.items = append(m.items, it)
		}
	}
	m.cursor = min(m.cursor, max(len(m.items)-1, 0))
}

// Len is how many items wait, whatever the filter shows.
func (m Model) Len() int { return len(m.all) }

// Captures reports whether a note or a confirmation is open: every key
// goes to it (q types a q; anything but y answers No).
func (m *Model) Captures() bool { return m.step != stepBrowse }

// Status is the queue's part of the status bar.
func (m *Model) Status() string { return fmt.Sprintf("%d pending", len(m.items)) }

// Init starts nothing: the app loads the queue.
func (m *Model) Init() tea.Cmd { return nil }

// SetSize sets the view's box.
func (m *Model) SetSize(w, h int) {
	m.width, m.height = max(w, 0), max(h, 0)
	m.note.Width = max(m.width-10, 10)
}

func (m Model) selected() *item {
	if m.cursor < 0 || m.cursor >= len(m.items) {
		return nil
	}
	return &m.items[m.cursor]
}

// Update handles keys.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return m, nil
	}
	switch m.step {
	case stepFilter:
		changed, cmd := m.filter.Edit(km)
		if changed {
			m.apply()
		}
		if !m.filter.Typing() {
			m.step = stepBrowse
		}
		return m, cmd
	case stepNote:
		switch {
		case key.Matches(km, keys.Cancel):
			m.step = stepBrowse
			m.note.Blur()
			return m, nil
		case key.Matches(km, keys.Submit):
			if strings.TrimSpace(m.note.Value()) == "" && m.action != "approved" {
				return m, nil // a note is required
			}
			m.step = stepConfirm
			m.note.Blur()
			return m, nil
		}
		var cmd tea.Cmd
		m.note, cmd = m.note.Update(km)
		return m, cmd
	case stepConfirm:
		m.step = stepBrowse
		if !key.Matches(km, keys.Yes) {
			return m, nil // No is the default
		}
		// The item asked about, not whatever sits at the cursor now: live
		// mode may have reloaded the queue while the note was typed.
		it := m.target()
		if it == nil {
			return m, nil
		}
		note := strings.TrimSpace(m.note.Value())
		if it.exec != nil {
			out := activity.ResolutionRejected
			if m.action == "verified" {
				out = activity.ResolutionVerified
			}
			id := it.exec.ID
			return m, func() tea.Msg { return ResolveMsg{Execution: id, Outcome: out, Note: note} }
		}
		state := activity.ApprovalDenied
		if m.action == "approved" {
			state = activity.ApprovalApproved
		}
		id := it.approval.ID
		return m, func() tea.Msg { return DecideMsg{Approval: id, State: state, Note: note} }
	}
	it := m.selected()
	if c, ok := nav.Move(km, m.cursor, len(m.items), m.rows()); ok {
		m.cursor = min(max(c, 0), max(len(m.items)-1, 0))
		return m, nil
	}
	switch {
	case key.Matches(km, keys.Filter):
		m.step = stepFilter
		return m, m.filter.Open()
	case key.Matches(km, keys.Cancel) && m.filter.Value() != "":
		m.filter.Clear()
		m.apply()
	case it != nil && it.exec != nil && key.Matches(km, keys.Verify):
		return m.ask("verified")
	case it != nil && it.exec != nil && key.Matches(km, keys.Reject):
		return m.ask("rejected")
	case it != nil && it.approval != nil && key.Matches(km, keys.Approve):
		return m.ask("approved")
	case it != nil && it.approval != nil && key.Matches(km, keys.Deny):
		return m.ask("denied")
	}
	return m, nil
}

func (m *Model) ask(action string) (tea.Model, tea.Cmd) {
	m.action, m.step = action, stepNote
	m.asked = ""
	if it := m.selected(); it != nil {
		m.asked = itemID(*it)
	}
	m.note.SetValue("")
	return m, m.note.Focus()
}

// target is the item the open question is about, wherever a reload has
// put it, or nil if it has left the queue.
func (m Model) target() *item {
	for i := range m.all {
		if itemID(m.all[i]) == m.asked {
			return &m.all[i]
		}
	}
	return nil
}

func itemID(it item) string {
	if it.exec != nil {
		return string(it.exec.ID)
	}
	return it.approval.ID
}

// View draws the queue and, when open, the prompt.
func (m Model) View() string {
	if m.width <= 0 || m.height <= 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(m.styles.Title.Render(cells.Clip(fmt.Sprintf("%d awaiting an operator: unknown outcomes and approvals", len(m.items)), m.width)) + "\n")
	if len(m.items) == 0 && len(m.all) > 0 {
		b.WriteString(m.styles.Muted.Render(cells.Clip(fmt.Sprintf("  nothing pending matches %q (esc clears the filter)", m.filter.Value()), m.width)) + "\n")
	}
	if len(m.all) == 0 {
		b.WriteString(m.styles.Muted.Width(max(m.width-1, 10)).Render("  nothing awaits an operator. Executions whose outcome is unknown (v verifies, x rejects) and approvals a gateway asks for (a approves, d denies) appear here.") + "\n")
	}
	rows := m.rows()
	start := max(m.cursor-rows+1, 0)
	if w := nav.Where(start, start+rows, len(m.items)); w != "" {
		b.WriteString(m.styles.Muted.Render(cells.Clip("  "+w+" (↑/↓, g/G, pgup/pgdn)", m.width)) + "\n")
	}
	for i := start; i < min(start+rows, len(m.items)); i++ {
		line := cells.Cursor(i == m.cursor) + m.line(m.items[i])
		if i == m.cursor {
			b.WriteString(m.styles.Selected.Render(cells.Clip(line, m.width)) + "\n")
		} else {
			b.WriteString(cells.Clip(line, m.width) + "\n")
		}
	}
	if it := m.selected(); it != nil {
		b.WriteString("\n" + m.styles.Muted.Width(max(m.width-1, 10)).Render(m.describe(*it)) + "\n")
	}
	switch {
	case m.step == stepFilter:
		b.WriteString("\n" + m.filter.View())
	case m.filter.Value() != "" && m.step == stepBrowse:
		b.WriteString("\n" + m.styles.Accent.Render(cells.Clip(fmt.Sprintf("filter: %s  (%d of %d; / edits, esc clears)", m.filter.Value(), len(m.items), len(m.all)), m.width)))
	}
	switch m.step {
	case stepNote:
		b.WriteString("\n" + m.styles.Accent.Render(fmt.Sprintf("Mark %s %s — ", m.subject(), m.action)) + "\n" + m.note.View())
	case stepConfirm:
		b.WriteString("\n" + m.styles.Warn.Render(cells.Clip(fmt.Sprintf("Mark %s %s with note %q? (y/N)", m.subject(), m.action, m.note.Value()), m.width)))
	}
	return b.String()
}

func (m Model) subject() string {
	if m.step != stepBrowse {
		return m.asked
	}
	if it := m.selected(); it != nil {
		return itemID(*it)
	}
	return ""
}

func (m Model) line(it item) string {
	if it.approval != nil {
		a := it.approval
		return fmt.Sprintf("? approval  %-30s %-10s %-20s %s", a.ID, a.Kind, a.Actor, a.Tool)
	}
	e := it.exec
	return fmt.Sprintf("? %-20s %-30s %-18s %s", e.State, e.ID, cells.Clip(e.Tool, 18), when(e.Times.Dispatched))
}

func (m Model) describe(it item) string {
	if it.approval != nil {
		return it.approval.Summary
	}
	e := it.exec
	return fmt.Sprintf("%s: %s %s on %s, contract %s. %s", e.Actor, e.Method, e.Tool, e.Target, e.Contract, e.Error)
}

func when(o activity.Opt[time.Time]) string {
	if !o.OK {
		return "sent: not recorded"
	}
	return "sent " + o.V.UTC().Format("01-02 15:04:05") + "Z"
}

// rows is how many items fit above the description and the prompt.
func (m Model) rows() int { return max(m.height-7, 1) }
