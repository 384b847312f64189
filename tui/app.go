// Package tui is the mcpdup console: a root model that routes to child
// views (suspects, a suspect's detail, the pending queue, the executions
// and sessions browsers, and the prompts that ask for a file or a time
// range). Every view is a Component (component.go): a tea.Model with its
// own keys (help.KeyMap), a size, and its own part of the status bar. The
// tabs are a slice; a view opened over a tab (a suspect, a replay) is
// pushed on a stack and esc pops it; an open prompt goes above both. One
// path routes every key: to the focused view, the first of an open prompt,
// the top of the stack, the active tab.
//
// How a child talks to the app. A child that hands back a decision the
// app must act on before the next key (open this suspect, go back, the
// prompt's answer) keeps it for a one-shot Take* method, which the app
// calls right after every key: so enter followed at once by another key
// reaches the view enter opened. A child that asks for I/O (resolve,
// decide an approval) returns a command whose message (ResolveMsg,
// DecideMsg) the app turns into a store command; its reply comes back as a
// message. No I/O happens in Update: every read and write of the store,
// and every import, is a command (see msgs.go). New is the one
// construction path for the program and tests.
package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/internal/termsafe"
	"github.com/mcpdup/mcpdup/report"
	"github.com/mcpdup/mcpdup/tui/browse"
	"github.com/mcpdup/mcpdup/tui/cells"
	"github.com/mcpdup/mcpdup/tui/detail"
	"github.com/mcpdup/mcpdup/tui/importfile"
	"github.com/mcpdup/mcpdup/tui/operator"
	"github.com/mcpdup/mcpdup/tui/pending"
	"github.com/mcpdup/mcpdup/tui/suspects"
	"github.com/mcpdup/mcpdup/tui/timerange"
)

// Import imports one log file into the store the console shows, as mcpdup
// import does: the command line hands it to New, so the console depends
// on the model only. It returns a line for the status bar and whether
// anything was added (the views reload only then). format is "" to
// detect it, else one of Options.ImportFormats.
type Import func(ctx context.Context, path, format string) (summary string, added bool, err error)

// ErrFormatNeeded is what an Import error wraps when the file's format
// cannot be detected: the console then asks for one from ImportFormats.
var ErrFormatNeeded = errors.New("choose the file's format")

// Options configure the console.
type Options struct {
	// Operator is recorded on resolutions and approvals.
	Operator string
	// Poll is how often live mode looks for new records (0: 500ms; <0: off).
	Poll time.Duration
	// Analysis tunes suspect detection.
	Analysis analyze.Options
	// Title names the source in the status bar (default: the db path).
	Title string
	// Import, if set, is what i runs on the file the operator names.
	Import Import
	// ImportFormats are the formats Import reads, offered when a file's
	// format cannot be detected.
	ImportFormats []string
}

// tab is one view of the tab line.
type tab struct {
	key, name string
	view      Component
	count     func() int // how many the view holds, shown after the name
}

// The views, in tab order.
const (
	tabSuspects = iota
	tabPending
	tabExecutions
	tabSessions
)

// Minimum size the layout supports; smaller gets a "too small" screen.
const minWidth, minHeight = 50, 12

// Model is the console.
type Model struct {
	store  *activity.Store
	opts   Options
	width  int
	height int

	tabs  []tab       // tab order
	tab   int         // the active tab
	stack []Component // views opened over the active tab; esc pops
	asks  []Component // the prompts, above everything while open

	// The views by name, for what the app hands them and takes from them.
	suspects *suspects.Model
	detail   *detail.Model
	pending  *pending.Model
	execs    *browse.Model
	runs     *browse.Model
	rangeAsk *timerange.Model
	fileAsk  *importfile.Model
	opAsk    *operator.Model
	// awaiting is the decision held while opAsk asks who makes it.
	awaiting tea.Msg
	execList []activity.Execution // the executions browser's rows
	execRows map[activity.ExecutionID]execRow
	runList  []activity.Run // the sessions browser's rows
	help     help.Model
	showHelp bool

	gen     int   // generation of the suspects load
	loading bool  // suspects still streaming in
	read    int64 // calls read by the running load
	logSize int64 // records seen; live mode refreshes when it grows
	// analysedTo is the log size the suspects shown cover: a refresh
	// analyses the records from there on.
	analysedTo int64
	finder     *analyze.NearMissFinder // the load's, fed the new calls of each refresh
	cuts       *analyze.EffectCuts     // where the refreshes of this load may read each effect from
	refreshing bool                    // a refresh is running
	refreshDue bool                    // and another is wanted when it ends
	// follower verifies the log as it grows; nil: the next audit is a
	// whole verification.
	follower *audit.Follower
	// opening is the suspect being read whole to open; keys typed
	// meanwhile wait in typedAhead for its view.
	opening     string
	typedAhead  []tea.KeyMsg
	auditing    bool
	auditDue    bool
	auditTxt    string
	vaultLocked bool // every agent call is refused: the status bar says so
	status      string
	bad         bool
}

// New builds the console on an open store.
func New(s *activity.Store, opts Options) *Model {
	if opts.Poll == 0 {
		opts.Poll = 500 * time.Millisecond
	}
	if opts.Title == "" {
		opts.Title = s.Path()
	}
	sus, det, pend := suspects.New(styles), detail.New(styles), pending.New(styles)
	execs := browse.New("executions (newest first)", styles).WithKeys(keys.ReplayRange).
		WithEmpty("no executions yet: a gateway records one for every tools/call it accepts; i imports a log that has them.")
	runs := browse.New("agent runs (the Sessions log)", styles).
		WithEmpty("no agent runs yet: each agent process a gateway sees (a session, a named run, a token) appears here.")
	rangeAsk, fileAsk, opAsk := timerange.New(styles), importfile.New(styles), operator.New(styles)
	m := &Model{
		store: s, opts: opts,
		suspects: &sus, detail: &det, pending: &pend, execs: &execs, runs: &runs, rangeAsk: &rangeAsk, fileAsk: &fileAsk, opAsk: &opAsk,
		help: help.New(), auditTxt: auditWaits, loading: true,
	}
	m.tabs = []tab{
		{key: "1", name: "Suspects", view: m.suspects, count: func() int { _, total, _ := m.suspects.Counts(); return total }},
		// Closures, not method values: Len has a value receiver, and a
		// method value would count the view as it was here, empty.
		{key: "2", name: "Pending", view: m.pending, count: func() int { return m.pending.Len() }},
		{key: "3", name: "Executions", view: m.execs, count: func() int { return m.execs.Len() }},
		{key: "4", name: "Sessions", view: m.runs, count: func() int { return m.runs.Len() }},
	}
	m.asks = []Component{m.fileAsk, m.rangeAsk, m.opAsk}
	return m
}

// Init starts every load; live mode polls for new records.
func (m *Model) Init() tea.Cmd {
	m.loading = true
	// The log is checked once the suspects are listed (see suspectsMsg):
	// on two cores the two slowed each other, and the list is what an
	// engineer waits for (at 6M records every suspect was listed after
	// 33 s beside the check, 22 s before it).
	cmds := []tea.Cmd{loadSuspects(m.store, m.opts.Analysis, m.gen), loadPending(m.store), loadBrowsers(m.store),
		logSize(m.store)}
	if m.opts.Poll > 0 {
		cmds = append(cmds, tick(m.opts.Poll))
	}
	return tea.Batch(cmds...)
}

// reload starts a fresh load of everything (r), and a whole verification.
// Replies to an older load are dropped.
func (m *Model) reload() tea.Cmd {
	m.gen++
	m.loading, m.read, m.refreshing, m.refreshDue = true, 0, false, false
	m.suspects.SetSuspects(nil)
	m.follower = nil
	m.auditTxt = auditWaits
	return tea.Batch(loadSuspects(m.store, m.opts.Analysis, m.gen), loadPending(m.store), loadBrowsers(m.store))
}

// refresh brings the views up to the log after new records (live mode,
// the console's own writes): only the suspects of the effects the new
// records touched are analysed again, and only the new records hashed.
func (m *Model) refresh() tea.Cmd {
	if m.loading {
		return nil // the running load will cover them, then refresh
	}
	if m.refreshing {
		m.refreshDue = true
		return nil
	}
	m.refreshing = true
	opts := m.opts.Analysis
	opts.Cuts = m.cuts
	return tea.Batch(refreshSuspects(m.store, opts, m.analysedTo, m.finder, m.gen), loadPending(m.store), m.audit())
}

// audit advances the follower, one advance at a time.
func (m *Model) audit() tea.Cmd {
	if m.auditing {
		m.auditDue = true
		return nil
	}
	if m.follower == nil {
		f, err := newFollower(m.store)
		if err != nil {
			m.auditTxt = auditText(nil, err)
			return nil
		}
		m.follower = f
		m.auditTxt = "audit: checking…"
	}
	m.auditing = true
	return advanceAudit(m.follower)
}

// auditWaits is the audit's word while the suspects load: the log is
// checked once they are listed.
const auditWaits = "audit: checked after the analysis…"

// Update routes a message: typing first, then global keys, then the view.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.layout()
		return m, nil
	case tea.KeyMsg:
		return m, m.key(msg)
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
			m.analysedTo = msg.through
			m.suspects.SetNearMisses(msg.near)
			m.finder = msg.finder
			m.cuts = analyze.NewEffectCuts()
			audit := m.audit()
			if m.logSize > m.analysedTo { // records arrived while it ran
				return m, tea.Batch(audit, m.refresh())
			}
			return m, audit
		}
		return m, msg.next
	case refreshMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		m.refreshing = false
		if msg.err != nil {
			m.setStatus("analysis: "+msg.err.Error(), true)
			return m, nil
		}
		m.suspects.ReplaceEffects(msg.keys, msg.kept, msg.fresh)
		if msg.near != nil {
			m.suspects.SetNearMisses(msg.near)
		}
		if msg.finder != nil {
			m.finder = msg.finder
		}
		m.setExecs(mergeNewest(m.execList, msg.execs, browseLimit))
		if msg.newRuns {
			m.setRuns(msg.runs)
		}
		m.analysedTo = max(m.analysedTo, msg.through)
		if m.refreshDue {
			m.refreshDue = false
			return m, m.refresh()
		}
	case pendingMsg:
		if msg.err != nil {
			m.setStatus("pending: "+msg.err.Error(), true)
		} else {
			m.pending.SetItems(msg.execs, msg.approvals)
			m.vaultLocked = msg.vaultLocked
		}
	case browseMsg:
		if msg.err != nil {
			m.setStatus("browse: "+msg.err.Error(), true)
		} else {
			m.execRows = nil
			m.setExecs(msg.execs)
			m.setRuns(msg.runs)
		}
	case importedMsg:
		if errors.Is(msg.err, ErrFormatNeeded) && msg.format == "" && len(m.opts.ImportFormats) > 0 {
			// Not a dead end: ask which format it is, from the list.
			m.setStatus(strings.TrimSuffix(msg.err.Error(), ": "+ErrFormatNeeded.Error())+": which format is it?", false)
			return m, m.fileAsk.AskFormat(msg.path, m.opts.ImportFormats)
		}
		if msg.err != nil {
			m.setStatus("import: "+msg.err.Error(), true)
			return m, nil
		}
		m.setStatus(msg.summary, false)
		// Our own import is not new activity: live mode must not replace
		// its summary with "new activity: reloaded".
		m.logSize = max(m.logSize, msg.logSize)
		if !msg.added {
			return m, nil
		}
		return m, m.refresh()
	case openedMsg:
		ahead := m.typedAhead
		m.opening, m.typedAhead = "", nil
		if msg.err != nil {
			m.setStatus("open "+msg.id+": "+msg.err.Error()+" (r reloads)", true)
			return m, nil
		}
		m.detail.SetSuspect(msg.sus)
		m.open(m.detail)
		var cmds []tea.Cmd
		for _, km := range ahead {
			cmds = append(cmds, m.key(km))
		}
		return m, tea.Batch(cmds...)
	case rangeMsg:
		if msg.err != nil {
			m.setStatus("replay: "+msg.err.Error(), true)
			return m, nil
		}
		m.setStatus("", false)
		m.detail.SetRange(msg.tl)
		m.open(m.detail)
	case auditMsg:
		m.auditing = false
		m.auditTxt = auditText(msg.report, msg.err)
		if msg.err != nil {
			m.follower = nil // the next audit starts over
		}
		if m.auditDue {
			m.auditDue = false
			return m, m.audit()
		}
	case resolvedMsg:
		if msg.err != nil {
			m.setStatus(msg.err.Error(), true)
			return m, nil
		}
		m.setStatus(msg.what, false)
		m.logSize = max(m.logSize, msg.logSize)
		return m, m.refresh()
	case pending.ResolveMsg, pending.DecideMsg:
		return m, m.decideAs(msg)
	case tickMsg:
		return m, tea.Batch(logSize(m.store), tick(m.opts.Poll))
	case sizeMsg:
		// The log only grows: a size read before our own last write is
		// old news, not new activity.
		if msg.err == nil && msg.size > m.logSize {
			first := m.logSize == 0
			m.logSize = msg.size
			if !first {
				m.setStatus("new activity: updated", false)
				return m, m.refresh()
			}
		}
	}
	return m, nil
}

// onScreen is the view the body shows: the top of the stack, else the
// active tab.
func (m *Model) onScreen() Component {
	if n := len(m.stack); n > 0 {
		return m.stack[n-1]
	}
	return m.tabs[m.tab].view
}

// focused is the view keys go to: an open prompt, else the one on screen.
func (m *Model) focused() Component {
	for _, a := range m.asks {
		if a.Captures() {
			return a
		}
	}
	return m.onScreen()
}

// open shows v over the active tab until esc.
func (m *Model) open(v Component) {
	if m.onScreen() != v {
		m.stack = append(m.stack, v)
	}
}

// inDetail reports whether a view is open over the active tab.
func (m *Model) inDetail() bool { return len(m.stack) > 0 }

func (m *Model) typing() bool { return m.focused().Captures() }

func (m *Model) key(km tea.KeyMsg) tea.Cmd {
	if key.Matches(km, keys.ForceQuit) {
		return tea.Quit
	}
	if m.opening != "" {
		// A suspect is being read to open: what is typed meanwhile is
		// meant for its view, and goes there once it is open.
		m.typedAhead = append(m.typedAhead, km)
		return nil
	}
	// Keys typed faster than the terminal is read arrive as one message
	// of several runes; outside a text field each is its own command.
	if km.Type == tea.KeyRunes && len(km.Runes) > 1 && !km.Paste && !m.typing() {
		var cmds []tea.Cmd
		for _, r := range km.Runes {
			cmds = append(cmds, m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: km.Alt}))
			if m.typing() {
				break // a rune opened a text field: the rest is typing
			}
		}
		return tea.Batch(cmds...)
	}
	m.status, m.bad = "", false
	if !m.typing() {
		if cmd, ok := m.globalKey(km); ok {
			return cmd
		}
	}
	_, cmd := m.focused().Update(km)
	return tea.Batch(cmd, m.take())
}

// globalKey handles the keys that work everywhere but in a text field.
func (m *Model) globalKey(km tea.KeyMsg) (tea.Cmd, bool) {
	switch {
	case key.Matches(km, keys.Quit):
		return tea.Quit, true
	case key.Matches(km, keys.Help):
		m.showHelp = !m.showHelp
		m.layout()
		return nil, true
	case key.Matches(km, keys.NextTab):
		return m.switchTab((m.tab + 1) % len(m.tabs)), true
	case key.Matches(km, keys.PrevTab):
		return m.switchTab((m.tab + len(m.tabs) - 1) % len(m.tabs)), true
	case key.Matches(km, keys.Tab1):
		return m.switchTab(tabSuspects), true
	case key.Matches(km, keys.Tab2):
		return m.switchTab(tabPending), true
	case key.Matches(km, keys.Tab3):
		return m.switchTab(tabExecutions), true
	case key.Matches(km, keys.Tab4):
		return m.switchTab(tabSessions), true
	case key.Matches(km, keys.Import) && !m.inDetail():
		return m.fileAsk.Open(), true
	case key.Matches(km, keys.Refresh) && !(m.inDetail() && m.detail.Replaying()):
		m.setStatus("refreshing", false)
		return m.reload(), true
	case key.Matches(km, keys.ReplayRange) && m.onScreen() == m.execs:
		return m.askRange(), true
	}
	return nil, false
}

// take collects what the views handed back during the last key (see the
// package doc): an answered prompt, an opened suspect, a view left.
func (m *Model) take() tea.Cmd {
	if name, ok := m.opAsk.Take(); ok {
		m.opts.Operator = name
		msg := m.awaiting
		m.awaiting = nil
		return m.decideAs(msg)
	}
	if path, format, ok := m.fileAsk.Take(); ok {
		if m.opts.Import == nil {
			m.setStatus("import is not available in this console", true)
			return nil
		}
		m.setStatus("importing "+path+"…", false)
		return importFile(m.store, m.opts.Import, path, format)
	}
	if from, to, ok := m.rangeAsk.Take(); ok {
		m.setStatus("reading the range…", false)
		return loadRange(m.store, from, to)
	}
	if r := m.suspects.TakeOpened(); r != nil {
		m.opening = r.ID
		return openSuspect(m.store, m.opts.Analysis, r.ID)
	}
	if m.detail.TakeBack() && m.inDetail() {
		m.stack = m.stack[:len(m.stack)-1]
	}
	return nil
}

// decideAs records an operator's decision under their name, asking for
// the name first if the console has none.
func (m *Model) decideAs(msg tea.Msg) tea.Cmd {
	if m.opts.Operator == "" {
		m.awaiting = msg
		return m.opAsk.Open()
	}
	switch msg := msg.(type) {
	case pending.ResolveMsg:
		return resolve(m.store, activity.Resolution{ExecutionID: msg.Execution, Outcome: msg.Outcome, Operator: m.opts.Operator, Note: msg.Note})
	case pending.DecideMsg:
		return decide(m.store, msg.Approval, msg.State, m.opts.Operator, msg.Note)
	}
	return nil
}

// askRange opens the time-range prompt, filled with a range around the
// selected execution (a minute before it to five after).
func (m *Model) askRange() tea.Cmd {
	at := time.Now().UTC().Add(-10 * time.Minute)
	if i := m.execs.Selected(); i >= 0 && i < len(m.execList) && m.execList[i].Times.Accepted.OK {
		at = m.execList[i].Times.Accepted.V.Add(-time.Minute)
	}
	return m.rangeAsk.Open(at, at.Add(6*time.Minute))
}

func (m *Model) switchTab(t int) tea.Cmd {
	m.tab, m.stack = t, m.stack[:0]
	return nil
}

func (m *Model) setStatus(s string, bad bool) { m.status, m.bad = s, bad }

// views is every view, for what applies to all of them.
func (m *Model) views() []Component {
	vs := append([]Component{m.detail}, m.asks...)
	for _, t := range m.tabs {
		vs = append(vs, t.view)
	}
	return vs
}

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
	for _, v := range m.views() {
		v.SetSize(w, bodyH)
	}
}

func (m *Model) helpHeight() int {
	h := m.help
	h.ShowAll = true
	return strings.Count(h.View(m.helpKeys()), "\n") + 2
}

func (m *Model) helpKeys() helpKeys {
	return helpKeys{view: m.focused(), typing: m.typing(), detail: m.inDetail()}
}

// View draws the tab line, the active view, the help and the status bar.
func (m *Model) View() string {
	if m.width < minWidth || m.height < minHeight {
		return fmt.Sprintf("terminal too small: need %d×%d, have %d×%d\n(q quits)", minWidth, minHeight, m.width, m.height)
	}
	var b strings.Builder
	b.WriteString(m.tabLine() + "\n")
	body := m.onScreen().View()
	bodyH := m.height - 2
	if m.showHelp {
		bodyH -= m.helpHeight()
	}
	var ask string
	for _, a := range m.asks {
		ask += a.View()
	}
	if ask != "" {
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
	// The frame is styled by us; anything else that would act on the
	// terminal (a tool name with an OSC sequence, a BiDi override in an
	// argument) is shown escaped.
	return safeLines(termsafe.Styled(b.String()), m.width)
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

// tabLine is "▸[1] Suspects 10  [2] Pending 3 …": the key in brackets
// (lazygit's habit), the name, then how many the view holds (k9s's), so a
// key is never read as a count; ▸ marks the active tab without colour.
func (m *Model) tabLine() string {
	var parts []string
	for i, t := range m.tabs {
		label := fmt.Sprintf("[%s] %s %d", t.key, t.name, t.count())
		if i == m.tab {
			parts = append(parts, activeTabStyle.Render("▸"+label))
		} else {
			parts = append(parts, tabStyle.Render(" "+label))
		}
	}
	line := strings.Join(parts, "  ")
	if m.inDetail() {
		line += styles.Muted.Render("  › suspect")
	}
	return line
}

// statusBar joins the tabs' own status texts, the audit indicator and the
// load state on the left, the message of the moment and "? help" on the
// right.
func (m *Model) statusBar() string {
	var parts []string
	for _, t := range m.tabs {
		if s := t.view.Status(); s != "" {
			parts = append(parts, s)
		}
	}
	if m.vaultLocked {
		// While it is locked every agent call is refused: first, where
		// the eye lands ("why is everything failing?").
		parts = append([]string{"VAULT LOCKED"}, parts...)
	}
	left := " " + strings.Join(append(parts, m.auditTxt), " · ")
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

// execRow is an execution's line in the browser and the line under it,
// kept while its state and error stay what they were: live mode sets the
// list twice a second, and formatting up to browseLimit rows each time was
// a quarter of the console's CPU beside a busy gateway.
type execRow struct {
	state       activity.State
	err         string
	row, detail string
}

func (m *Model) setExecs(execs []activity.Execution) {
	m.execList = execs
	if m.execRows == nil || len(m.execRows) > 2*browseLimit {
		m.execRows = make(map[activity.ExecutionID]execRow, len(execs))
	}
	rows, details := make([]string, len(execs)), make([]string, len(execs))
	for i, e := range execs {
		r, ok := m.execRows[e.ID]
		if !ok || r.state != e.State || r.err != e.Error {
			r = formatExec(e)
			m.execRows[e.ID] = r
		}
		rows[i], details[i] = r.row, r.detail
	}
	m.execs.SetRows(fmt.Sprintf("  %-22s %-11s %-20s %-16s %s", "STATE", "EXECUTION", "TOOL", "ACTOR", "ACCEPTED UTC"), rows, details)
}

func formatExec(e activity.Execution) execRow {
	// The list shows short ids; the line under it shows the whole id of
	// the selected row, to copy into mcpdup resolve.
	r := execRow{state: e.State, err: e.Error,
		row:    fmt.Sprintf("%s %-22s %-11s %-20s %-16s %s", stateGlyph(e.State), e.State, report.ShortID(string(e.ID)), cells.Clip(e.Tool, 20), cells.Clip(e.Actor, 16), timeText(e.Times.Accepted)),
		detail: fmt.Sprintf("%s · %s %s · contract %s", e.ID, e.Method, e.Target, e.Contract)}
	if e.Error != "" {
		r.detail += " · " + e.Error
	}
	return r
}

func (m *Model) setRuns(runs []activity.Run) {
	m.runList = runs
	var rows, details []string
	for _, r := range runs {
		// Most logs never say when a run ended (an import, a gateway run
		// that went idle): that is not "running".
		ended, why := "-", " · its end is not recorded"
		if r.EndedAt.OK {
			ended, why = r.EndedAt.V.UTC().Format("15:04:05"), ""
		}
		rows = append(rows, fmt.Sprintf("%-11s %-16s %-14s %-24s %-19s  %s", report.ShortID(string(r.ID)), cells.Clip(r.Actor, 16), r.IdentifiedBy, cells.Clip(r.Evidence, 24), r.StartedAt.UTC().Format("2006-01-02 15:04:05"), ended))
		details = append(details, fmt.Sprintf("%s · identified by %s: %s%s", r.ID, r.IdentifiedBy, r.Evidence, why))
	}
	m.runs.SetRows(fmt.Sprintf("%-11s %-16s %-14s %-24s %-19s  %s", "RUN", "ACTOR", "IDENTIFIED BY", "EVIDENCE", "STARTED UTC", "ENDED"), rows, details)
}

// mergeNewest updates a newest-first list of executions with the ones new
// records touched: a listed one is replaced where it stands (an
// execution keeps the place of its acceptance); one accepted after every
// listed one goes on top; an older one not listed stays out when the list
// is full (it is beyond the limit, as a reload would leave it) and takes
// its place otherwise. At most limit are kept.
//
// It runs on every live refresh over up to browseLimit rows: the list is
// ordered by acceptance (Seq, which an execution keeps), so a touched
// execution is found by binary search and the new ones merged in one
// pass, with no map of the list and no sort of it.
func mergeNewest(list, touched []activity.Execution, limit int) []activity.Execution {
	newestFirst := func(a, b activity.Execution) int { return cmp.Compare(b.Seq, a.Seq) }
	newest := int64(-1)
	if len(list) > 0 {
		newest = list[0].Seq
	}
	replaced := map[int]activity.Execution{} // by index in list; the last copy touched wins
	addedAt := map[activity.ExecutionID]int{}
	var added []activity.Execution
	for _, e := range touched {
		i, found := slices.BinarySearchFunc(list, e, newestFirst)
		switch {
		case found && list[i].ID == e.ID:
			replaced[i] = e
		case e.Seq > newest || len(list) < limit:
			if k, ok := addedAt[e.ID]; ok {
				added[k] = e
				continue
			}
			addedAt[e.ID] = len(added)
			added = append(added, e)
		}
	}
	slices.SortStableFunc(added, newestFirst)
	out := make([]activity.Execution, 0, min(len(list)+len(added), limit))
	for i, j := 0, 0; len(out) < limit && (i < len(added) || j < len(list)); {
		if j == len(list) || i < len(added) && added[i].Seq > list[j].Seq {
			out = append(out, added[i])
			i++
			continue
		}
		e := list[j]
		if r, ok := replaced[j]; ok {
			e = r
		}
		out = append(out, e)
		j++
	}
	return out
}

// stateGlyph marks an execution's state without colour: ✓ it acted (or
// an operator verified it), ✗ it failed or was refused, ? sent with no
// outcome yet (dispatched, unknown, awaiting verification), … not sent yet.
func stateGlyph(s activity.State) string {
	switch s {
	case activity.StateAccepted, activity.StateAuthorized:
		return "…"
	case activity.StateDispatched, activity.StateUnknown, activity.StatePendingVerification:
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
	}
	return r.Integrity().Short()
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
