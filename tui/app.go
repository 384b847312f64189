// Package tui is the mcpdup console: a root model that routes to child
// views (suspects, a suspect's detail, the pending queue, the executions
// and sessions browsers), each with its own keys, help and size. No I/O
// happens in Update: every read and write of the store is a command (see
// msgs.go). New is the one construction path for the program and tests.
package tui

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/tui/browse"
	"github.com/mcpdup/mcpdup/tui/cells"
	"github.com/mcpdup/mcpdup/tui/detail"
	"github.com/mcpdup/mcpdup/tui/importfile"
	"github.com/mcpdup/mcpdup/tui/pending"
	"github.com/mcpdup/mcpdup/tui/suspects"
	"github.com/mcpdup/mcpdup/tui/timerange"
)

// Options configure the console.
type Options struct {
	// Operator is recorded on resolutions and approvals.
	Operator string
	// Poll is how often live mode looks for new records (0: 2s; <0: off).
	Poll time.Duration
	// Analysis tunes suspect detection.
	Analysis analyze.Options
	// Title names the source in the status bar (default: the db path).
	Title string
}

// The views, in tab order.
const (
	tabSuspects = iota
	tabPending
	tabExecutions
	tabSessions
)

var tabNames = []string{"1 suspects", "2 pending", "3 executions", "4 sessions"}

// Minimum size the layout supports; smaller gets a "too small" screen.
const minWidth, minHeight = 50, 12

// Model is the console.
type Model struct {
	store    *activity.Store
	opts     Options
	width    int
	height   int
	tab      int
	inDetail bool
	suspects suspects.Model
	detail   detail.Model
	pending  pending.Model
	execs    browse.Model
	runs     browse.Model
	rangeAsk timerange.Model
	fileAsk  importfile.Model
	execList []activity.Execution // the executions browser's rows
	help     help.Model
	showHelp bool

	gen      int   // generation of the suspects load
	loading  bool  // suspects still streaming in
	read     int64 // calls read by the running load
	logSize  int64 // records seen; live mode reloads when it grows
	auditTxt string
	status   string
	bad      bool
}

// New builds the console on an open store.
func New(s *activity.Store, opts Options) *Model {
	if opts.Poll == 0 {
		opts.Poll = 2 * time.Second
	}
	if opts.Title == "" {
		opts.Title = s.Path()
	}
	return &Model{
		store: s, opts: opts,
		suspects: suspects.New(styles), detail: detail.New(styles), pending: pending.New(styles),
		execs: browse.New("executions (newest first)", styles).WithKeys(keys.ReplayRange), runs: browse.New("agent runs (the Sessions log)", styles),
		rangeAsk: timerange.New(styles), fileAsk: importfile.New(styles),
		help: help.New(), auditTxt: "audit: checking…", loading: true,
	}
}

// Init starts every load; live mode polls for new records.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{loadSuspects(m.store, m.opts.Analysis, m.gen), loadPending(m.store), loadBrowsers(m.store),
		verifyLog(m.store), logSize(m.store)}
	if m.opts.Poll > 0 {
		cmds = append(cmds, tick(m.opts.Poll))
	}
	return tea.Batch(cmds...)
}

// reload starts a fresh load of everything (after a write, or when live
// mode sees new records). Replies to an older load are dropped.
func (m *Model) reload() tea.Cmd {
	m.gen++
	m.loading, m.read = true, 0
	m.suspects.SetSuspects(nil)
	return tea.Batch(loadSuspects(m.store, m.opts.Analysis, m.gen), loadPending(m.store), loadBrowsers(m.store), verifyLog(m.store))
}

// Update routes a message: typing first, then global keys, then the view.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.layout()
		return m, nil
	case tea.KeyMsg:
		return m.key(msg)
	case suspectsMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		m.suspects.Add(msg.suspects)
		m.read = msg.read
		if msg.err != nil {
			m.setStatus("analysis: "+msg.err.Error(), true)
		}
		if msg.done {
			m.loading = false
			return m, nil
		}
		return m, msg.next
	case pendingMsg:
		if msg.err != nil {
			m.setStatus("pending: "+msg.err.Error(), true)
		} else {
			m.pending.SetItems(msg.execs, msg.approvals)
		}
	case browseMsg:
		if msg.err != nil {
			m.setStatus("browse: "+msg.err.Error(), true)
		} else {
			m.setBrowsers(msg.execs, msg.runs)
		}
	case importedMsg:
		if msg.err != nil {
			m.setStatus("import: "+msg.err.Error(), true)
			return m, nil
		}
		r := msg.report
		if r.AlreadyImported {
			m.setStatus(fmt.Sprintf("%s was imported before (%s): nothing added", filepath.Base(r.File), r.Source), false)
			return m, nil
		}
		m.setStatus(fmt.Sprintf("imported %s (%s): %d calls, %d executions, %d skipped", filepath.Base(r.File), r.Format, r.Calls, r.Executions, r.Skipped), false)
		return m, m.reload()
	case rangeMsg:
		if msg.err != nil {
			m.setStatus("replay: "+msg.err.Error(), true)
			return m, nil
		}
		m.setStatus("", false)
		m.detail.SetRange(msg.tl)
		m.inDetail = true
	case auditMsg:
		m.auditTxt = auditText(msg.report, msg.err)
	case resolvedMsg:
		if msg.err != nil {
			m.setStatus(msg.err.Error(), true)
			return m, nil
		}
		m.setStatus(msg.what, false)
		m.logSize = max(m.logSize, msg.logSize)
		return m, m.reload()
	case pending.ResolveMsg:
		return m, resolve(m.store, activity.Resolution{ExecutionID: msg.Execution, Outcome: msg.Outcome, Operator: m.opts.Operator, Note: msg.Note})
	case pending.DecideMsg:
		return m, decide(m.store, msg.Approval, msg.State, m.opts.Operator, msg.Note)
	case tickMsg:
		return m, tea.Batch(logSize(m.store), tick(m.opts.Poll))
	case sizeMsg:
		// The log only grows: a size read before our own last write is
		// old news, not new activity.
		if msg.err == nil && msg.size > m.logSize {
			first := m.logSize == 0
			m.logSize = msg.size
			if !first && !m.loading {
				m.setStatus("new activity: reloaded", false)
				return m, m.reload()
			}
		}
	}
	return m, nil
}

func (m *Model) typing() bool {
	switch {
	case m.rangeAsk.IsOpen(), m.fileAsk.IsOpen():
		return true
	case m.inDetail:
		return false
	case m.tab == tabSuspects:
		return m.suspects.Typing()
	case m.tab == tabPending:
		return m.pending.Typing()
	}
	return false
}

func (m *Model) key(km tea.KeyMsg) (tea.Model, tea.Cmd) {
	if key.Matches(km, keys.ForceQuit) {
		return m, tea.Quit
	}
	// Keys typed faster than the terminal is read arrive as one message
	// of several runes; outside a text field each is its own command.
	if km.Type == tea.KeyRunes && len(km.Runes) > 1 && !km.Paste && !m.typing() {
		var cmds []tea.Cmd
		for _, r := range km.Runes {
			_, cmd := m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: km.Alt})
			cmds = append(cmds, cmd)
			if m.typing() {
				break // a rune opened a text field: the rest is typing
			}
		}
		return m, tea.Batch(cmds...)
	}
	m.status, m.bad = "", false
	if !m.typing() && !(m.tab == tabPending && m.pending.Busy() && !m.inDetail) {
		switch {
		case key.Matches(km, keys.Quit):
			return m, tea.Quit
		case key.Matches(km, keys.Help):
			m.showHelp = !m.showHelp
			m.layout()
			return m, nil
		case key.Matches(km, keys.NextTab):
			return m, m.switchTab((m.tab + 1) % len(tabNames))
		case key.Matches(km, keys.PrevTab):
			return m, m.switchTab((m.tab + len(tabNames) - 1) % len(tabNames))
		case key.Matches(km, keys.Tab1):
			return m, m.switchTab(tabSuspects)
		case key.Matches(km, keys.Tab2):
			return m, m.switchTab(tabPending)
		case key.Matches(km, keys.Tab3):
			return m, m.switchTab(tabExecutions)
		case key.Matches(km, keys.Tab4):
			return m, m.switchTab(tabSessions)
		case key.Matches(km, keys.Import) && !m.inDetail:
			return m, m.fileAsk.Open()
		case key.Matches(km, keys.Refresh) && !(m.inDetail && m.detail.Replaying()):
			m.setStatus("refreshing", false)
			return m, m.reload()
		}
	}
	var cmd tea.Cmd
	switch {
	case m.fileAsk.IsOpen():
		m.fileAsk, cmd = m.fileAsk.Update(km)
		if path, ok := m.fileAsk.Take(); ok {
			m.setStatus("importing "+path+"…", false)
			return m, importFile(m.store, path)
		}
	case m.rangeAsk.IsOpen():
		m.rangeAsk, cmd = m.rangeAsk.Update(km)
		if from, to, ok := m.rangeAsk.Take(); ok {
			m.setStatus("reading the range…", false)
			return m, loadRange(m.store, from, to)
		}
	case m.inDetail:
		m.detail, cmd = m.detail.Update(km)
		if m.detail.TakeBack() {
			m.inDetail = false
		}
	case m.tab == tabSuspects:
		m.suspects, cmd = m.suspects.Update(km)
		if s := m.suspects.TakeOpened(); s != nil {
			m.detail.SetSuspect(s)
			m.inDetail = true
		}
	case m.tab == tabPending:
		m.pending, cmd = m.pending.Update(km)
	case m.tab == tabExecutions && key.Matches(km, keys.ReplayRange):
		cmd = m.askRange()
	case m.tab == tabExecutions:
		m.execs, cmd = m.execs.Update(km)
	case m.tab == tabSessions:
		m.runs, cmd = m.runs.Update(km)
	}
	return m, cmd
}

// askRange opens the time-range prompt, filled with a range around the
// selected execution (a minute before it to five after).
func (m *Model) askRange() tea.Cmd {
	at := time.Now().UTC().Add(-10 * time.Minute)
	if i := m.execs.Cursor(); i < len(m.execList) && m.execList[i].Times.Accepted.OK {
		at = m.execList[i].Times.Accepted.V.Add(-time.Minute)
	}
	return m.rangeAsk.Open(at, at.Add(6*time.Minute))
}

func (m *Model) switchTab(t int) tea.Cmd {
	m.tab, m.inDetail = t, false
	return nil
}

func (m *Model) setStatus(s string, bad bool) { m.status, m.bad = s, bad }

// layout gives each view the space left by the tab line, the status bar
// and, when shown, the full help.
func (m *Model) layout() {
	m.help.Width = m.width - 1
	bodyH := m.height - 2
	if m.showHelp {
		bodyH -= m.helpHeight()
	}
	bodyH = max(bodyH, 1)
	w := m.width - 1 // see safeLines
	m.suspects.SetSize(w, bodyH)
	m.detail.SetSize(w, bodyH)
	m.pending.SetSize(w, bodyH)
	m.execs.SetSize(w, bodyH)
	m.runs.SetSize(w, bodyH)
	m.rangeAsk.SetWidth(w)
	m.fileAsk.SetWidth(w)
}

func (m *Model) helpHeight() int {
	h := m.help
	h.ShowAll = true
	return strings.Count(h.View(m.helpKeys()), "\n") + 2
}

func (m *Model) helpKeys() helpKeys {
	var v viewKeys
	switch {
	case m.fileAsk.IsOpen():
		v = m.fileAsk
	case m.rangeAsk.IsOpen():
		v = m.rangeAsk
	case m.inDetail:
		v = m.detail
	case m.tab == tabSuspects:
		v = m.suspects
	case m.tab == tabPending:
		v = m.pending
	case m.tab == tabExecutions:
		v = m.execs
	default:
		v = m.runs
	}
	return helpKeys{view: v, typing: m.typing(), detail: m.inDetail}
}

// View draws the tab line, the active view, the help and the status bar.
func (m *Model) View() string {
	if m.width < minWidth || m.height < minHeight {
		return fmt.Sprintf("terminal too small: need %d×%d, have %d×%d\n(q quits)", minWidth, minHeight, m.width, m.height)
	}
	var b strings.Builder
	b.WriteString(m.tabLine() + "\n")
	var body string
	switch {
	case m.inDetail:
		body = m.detail.View()
	case m.tab == tabSuspects:
		body = m.suspects.View()
	case m.tab == tabPending:
		body = m.pending.View()
	case m.tab == tabExecutions:
		body = m.execs.View()
	default:
		body = m.runs.View()
	}
	bodyH := m.height - 2
	if m.showHelp {
		bodyH -= m.helpHeight()
	}
	if ask := m.rangeAsk.View() + m.fileAsk.View(); ask != "" {
		n := strings.Count(ask, "\n") + 1
		body = fit(body, max(bodyH-n, 1)) + "\n" + ask
	}
	b.WriteString(fit(body, max(bodyH, 1)))
	if m.showHelp {
		h := m.help
		h.ShowAll = true
		b.WriteString("\n" + h.View(m.helpKeys()) + "\n")
	}
	b.WriteString("\n" + m.statusBar())
	return safeLines(b.String(), m.width)
}

// safeLines keeps every line one cell short of the terminal's width: a
// glyph the terminal draws wider than its width table says must not wrap
// the line and shift everything below it.
func safeLines(s string, width int) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if ansi.StringWidth(l) >= width {
			lines[i] = ansi.Truncate(l, width-1, "…")
		}
	}
	return strings.Join(lines, "\n")
}

func (m *Model) tabLine() string {
	var parts []string
	for i, name := range tabNames {
		if i == tabPending && m.pending.Len() > 0 {
			name = fmt.Sprintf("%s (%d)", name, m.pending.Len())
		}
		if i == m.tab {
			parts = append(parts, activeTabStyle.Render("["+name+"]"))
		} else {
			parts = append(parts, tabStyle.Render(name))
		}
	}
	line := strings.Join(parts, " ")
	if m.inDetail {
		line += styles.Muted.Render("  › suspect")
	}
	return line
}

func (m *Model) statusBar() string {
	shown, total, counts := m.suspects.Counts()
	left := fmt.Sprintf(" %d suspects", total)
	if shown != total {
		left = fmt.Sprintf(" %d/%d suspects", shown, total)
	}
	if c := counts[analyze.VerdictDuplicate] + counts[analyze.VerdictDuplicateRisk]; c > 0 {
		left += fmt.Sprintf(" (✗ %d duplicate, ? %d risk)", counts[analyze.VerdictDuplicate], counts[analyze.VerdictDuplicateRisk])
	}
	left += fmt.Sprintf(" · %d pending · %s", m.pending.Len(), m.auditTxt)
	if m.loading {
		left += fmt.Sprintf(" · analysing (%d calls read)", m.read)
	} else if m.opts.Poll > 0 {
		left += " · live"
	}
	right := "? help "
	if m.status != "" {
		right = m.status + "  " + right
	}
	w := m.width - 1 // see safeLines
	// The message of the moment wins over the counts when both do not fit.
	if rw := ansi.StringWidth(right); ansi.StringWidth(left)+rw+1 > w {
		left = cells.Clip(left, max(w-rw-1, 0))
	}
	space := w - len([]rune(left)) - len([]rune(right))
	line := left + strings.Repeat(" ", max(space, 1)) + right
	if r := []rune(line); len(r) > w {
		line = string(r[:max(w-1, 0)]) + "…"
	}
	if m.bad {
		return styles.Error.Render(line)
	}
	return styles.StatusBar.Render(line)
}

func (m *Model) setBrowsers(execs []activity.Execution, runs []activity.Run) {
	m.execList = execs
	var rows, details []string
	for _, e := range execs {
		// The list shows short ids; the line under it shows the whole id
		// of the selected row, to copy into mcpdup resolve.
		rows = append(rows, fmt.Sprintf("%s %-22s %-11s %-20s %-16s %s", stateGlyph(e.State), e.State, analyze.ShortID(string(e.ID)), cells.Clip(e.Tool, 20), cells.Clip(e.Actor, 16), timeText(e.Times.Accepted)))
		detail := fmt.Sprintf("%s · %s %s · contract %s", e.ID, e.Method, e.Target, e.Contract)
		if e.Error != "" {
			detail += " · " + e.Error
		}
		details = append(details, detail)
	}
	m.execs.SetRows(fmt.Sprintf("  %-22s %-11s %-20s %-16s %s", "STATE", "EXECUTION", "TOOL", "ACTOR", "ACCEPTED"), rows, details)
	rows, details = nil, nil
	for _, r := range runs {
		ended := "running"
		if r.EndedAt.OK {
			ended = "ended " + r.EndedAt.V.UTC().Format("15:04:05")
		}
		rows = append(rows, fmt.Sprintf("%-11s %-16s %-14s %-24s %s  %s", analyze.ShortID(string(r.ID)), cells.Clip(r.Actor, 16), r.IdentifiedBy, cells.Clip(r.Evidence, 24), r.StartedAt.UTC().Format("2006-01-02 15:04:05"), ended))
		details = append(details, fmt.Sprintf("%s · identified by %s: %s", r.ID, r.IdentifiedBy, r.Evidence))
	}
	m.runs.SetRows(fmt.Sprintf("%-11s %-16s %-14s %-24s %s", "RUN", "ACTOR", "IDENTIFIED BY", "EVIDENCE", "STARTED"), rows, details)
}

func stateGlyph(s activity.State) string {
	switch s {
	case activity.StateUnknown, activity.StatePendingVerification:
		return "?"
	case activity.StateRejected, activity.StateFailedBefore, activity.StateFailed, activity.StateRejectedByOperator, activity.StateDeliveryFailed:
		return "✗"
	}
	return "✓"
}

func auditText(r *audit.Report, err error) string {
	switch {
	case err != nil:
		return "audit: error"
	case r.Tampered:
		return fmt.Sprintf("audit ✗ BROKEN (%d problems)", len(r.Problems)+r.ProblemsOmitted)
	case r.Unsealed > 0:
		return fmt.Sprintf("audit ✓ chain ok, %d unsealed", r.Unsealed)
	}
	return "audit ✓ verified"
}

func timeText(o activity.Opt[time.Time]) string {
	if !o.OK {
		return "not recorded"
	}
	return o.V.UTC().Format("2006-01-02 15:04:05")
}

// fit pads or cuts a view to exactly h lines.
func fit(s string, h int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}
