package tui

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
	_ "modernc.org/sqlite"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/importers"
)

var ctx = context.Background()

func init() {
	// Goldens and assertions must not depend on the terminal running the
	// tests.
	lipgloss.SetColorProfile(termenv.Ascii)
	lipgloss.SetHasDarkBackground(true)
}

// testStore writes the scripted activitytest incident with a fixed clock.
func testStore(t testing.TB) (*activity.Store, map[string]activity.ExecutionID) {
	t.Helper()
	dir := t.TempDir()
	clock := activitytest.NewClock()
	s, err := activity.Open(ctx, filepath.Join(dir, "t.db"), activity.Options{KeyDir: filepath.Join(dir, "keys"), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ids, err := activitytest.Incident(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	return s, ids
}

// newTestModel builds the console the way the program does and runs its
// start-up loads to completion, synchronously.
func newTestModel(t testing.TB, w, h int) (*Model, *activity.Store, map[string]activity.ExecutionID) {
	t.Helper()
	s, ids := testStore(t)
	m := New(s, Options{Operator: "alice", Poll: -1, Import: importInto(s), ImportFormats: importers.Formats()})
	run(m, m.Init())
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m, s, ids
}

// importInto is the Import the command line hands the console: the same
// code as mcpdup import.
func importInto(s *activity.Store) Import {
	return func(ctx context.Context, path, format string) (string, bool, error) {
		rep, err := importers.Import(ctx, s, path, importers.Options{Format: format})
		var unknown *importers.UnknownFormatError
		if errors.As(err, &unknown) {
			return "", false, fmt.Errorf("%s: %w", unknown.Why, ErrFormatNeeded)
		}
		return rep.Summary(), !rep.AlreadyImported, err
	}
}

// run executes a command and everything it leads to, as the program
// would, except timers.
func run(m *Model, cmd tea.Cmd) {
	queue := []tea.Cmd{cmd}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		msg := c()
		switch msg := msg.(type) {
		case nil:
		case tea.BatchMsg:
			queue = append(queue, msg...)
		case tickMsg:
		default:
			if reflect.TypeOf(msg).String() == "tea.QuitMsg" {
				continue
			}
			_, next := m.Update(msg)
			queue = append(queue, next)
		}
	}
}

func press(m *Model, keys ...string) tea.Cmd {
	var cmds []tea.Cmd
	for _, k := range keys {
		var km tea.KeyMsg
		switch k {
		case "enter":
			km = tea.KeyMsg{Type: tea.KeyEnter}
		case "esc":
			km = tea.KeyMsg{Type: tea.KeyEsc}
		case "tab":
			km = tea.KeyMsg{Type: tea.KeyTab}
		case "ctrl+c":
			km = tea.KeyMsg{Type: tea.KeyCtrlC}
		case "left":
			km = tea.KeyMsg{Type: tea.KeyLeft}
		case "right":
			km = tea.KeyMsg{Type: tea.KeyRight}
		case "down":
			km = tea.KeyMsg{Type: tea.KeyDown}
		default:
			km = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		}
		_, cmd := m.Update(km)
		if k == "enter" {
			// What enter starts (opening a suspect reads it whole) lands
			// before the next key, as it does for a person.
			run(m, cmd)
			continue
		}
		cmds = append(cmds, cmd)
	}
	return tea.Batch(cmds...)
}

func isQuit(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	msg := cmd()
	if b, ok := msg.(tea.BatchMsg); ok {
		for _, c := range b {
			if isQuit(c) {
				return true
			}
		}
		return false
	}
	_, ok := msg.(tea.QuitMsg)
	return ok
}

func TestSuspectsListKeys(t *testing.T) {
	m, _, _ := newTestModel(t, 120, 30)
	shown, total, counts := m.suspects.Counts()
	if total != 3 || shown != 3 || counts[analyze.VerdictTwoProcesses] != 1 {
		t.Fatalf("suspects: %d/%d %v", shown, total, counts)
	}
	first := m.suspects.Selected().ID
	press(m, "j")
	if m.suspects.Selected().ID == first {
		t.Fatal("j did not move")
	}
	press(m, "k")
	if m.suspects.Selected().ID != first {
		t.Fatal("k did not move back")
	}
	press(m, "G")
	last := m.suspects.Selected().ID
	press(m, "g")
	if m.suspects.Selected().ID != first || last == first {
		t.Fatal("g/G")
	}
	press(m, "s")
	if m.suspects.SortName() != "time" {
		t.Fatalf("sort after s: %s", m.suspects.SortName())
	}
	// The filter: typing q there must not quit; enter applies and keeps it visible.
	if cmd := press(m, "/", "r", "e", "a", "d", "q"); isQuit(cmd) {
		t.Fatal("q quit while typing in the filter")
	}
	m.Update(tea.KeyMsg{Type: tea.KeyBackspace})
	press(m, "enter")
	if shown, _, _ := m.suspects.Counts(); shown != 1 || m.suspects.Filter() != "read" {
		t.Fatalf("filter %q shows %d", m.suspects.Filter(), shown)
	}
	if v := m.View(); !strings.Contains(v, "filter: read") || !strings.Contains(v, "1/3 suspects") {
		t.Fatalf("the applied filter must stay visible:\n%s", v)
	}
	press(m, "esc")
	if shown, _, _ := m.suspects.Counts(); shown != 3 {
		t.Fatal("esc did not clear the filter")
	}
	if !isQuit(press(m, "q")) {
		t.Fatal("q does not quit outside a text field")
	}
	if !isQuit(press(m, "/", "ctrl+c")) {
		t.Fatal("ctrl+c must quit even while typing")
	}
}

func TestDetailWalkAndReplay(t *testing.T) {
	m, _, _ := newTestModel(t, 120, 40)
	press(m, "s", "s", "s") // sort by verdict: two_processes first
	if m.suspects.Selected().Verdict != analyze.VerdictTwoProcesses {
		t.Fatalf("selected %s", m.suspects.Selected().Verdict)
	}
	press(m, "enter")
	if !m.inDetail() || m.detail.Step() != 1 {
		t.Fatal("enter did not open the walk at question 1")
	}
	v := m.View()
	if !strings.Contains(v, "1. Did one agent process send both calls? NO") || strings.Contains(v, "2. Was the first call") {
		t.Fatalf("question 1 alone:\n%s", v)
	}
	press(m, "enter", "l", "right", "enter")
	if m.detail.Step() != 5 {
		t.Fatalf("step %d", m.detail.Step())
	}
	press(m, "enter")
	if v := m.View(); !strings.Contains(v, "Verdict: ! two agent processes each sent the action") || !strings.Contains(v, "Fix:") {
		t.Fatalf("verdict page:\n%s", v)
	}
	press(m, "left")
	if m.detail.Step() != 5 {
		t.Fatal("← did not go back")
	}
	press(m, "p")
	if !m.detail.Replaying() {
		t.Fatal("p did not start the replay")
	}
	press(m, "n", "n", "down", "b")
	if m.detail.Frame() != 2 {
		t.Fatalf("frame %d after 3 forward, 1 back", m.detail.Frame())
	}
	if v := m.View(); !strings.Contains(v, "replay: event 3 of") || !strings.Contains(v, "states: ") {
		t.Fatalf("replay view:\n%s", v)
	}
	press(m, "esc")
	if m.detail.Replaying() || !m.inDetail() {
		t.Fatal("esc must stop the replay first")
	}
	press(m, "esc")
	if m.inDetail() {
		t.Fatal("esc must leave the detail")
	}
}

func TestPendingResolveFlow(t *testing.T) {
	m, s, ids := newTestModel(t, 120, 30)
	press(m, "2")
	if m.tab != tabPending || m.pending.Len() != 1 {
		t.Fatalf("pending tab: %d items", m.pending.Len())
	}
	press(m, "v")
	if !m.pending.Captures() {
		t.Fatal("v must ask for a note")
	}
	press(m, "enter")
	if !m.pending.Captures() {
		t.Fatal("an empty note must not be accepted")
	}
	for _, r := range "ticket T-9 exists" {
		press(m, string(r))
	}
	press(m, "enter")
	if v := m.View(); !strings.Contains(v, `verified with note "ticket T-9 exists"? (y/N)`) {
		t.Fatalf("confirmation:\n%s", v)
	}
	run(m, press(m, "n")) // anything but y is No
	if e, _ := s.Execution(ctx, ids["ticket"]); e.State != activity.StateUnknown {
		t.Fatal("No must not write")
	}
	press(m, "x")
	for _, r := range "no ticket in the tracker" {
		press(m, string(r))
	}
	press(m, "enter")
	run(m, press(m, "y"))
	e, _ := s.Execution(ctx, ids["ticket"])
	res, _ := s.Resolutions(ctx, ids["ticket"])
	if e.State != activity.StateRejectedByOperator || len(res) != 1 || res[0].Operator != "alice" || res[0].Note != "no ticket in the tracker" {
		t.Fatalf("after y: %s %+v", e.State, res)
	}
	if m.pending.Len() != 0 || !strings.Contains(m.View(), "is now rejected_by_operator, sealed at") {
		t.Fatalf("the view must update:\n%s", m.View())
	}
	// The console's own write is not "new activity" for live mode, even
	// when a size read before the write arrives late.
	n, _ := s.LogSize(ctx)
	m.Update(sizeMsg{size: n})
	m.Update(sizeMsg{size: n - 3})
	if !strings.Contains(m.View(), "is now rejected_by_operator") {
		t.Fatalf("live mode took our own write for new activity:\n%s", m.View())
	}
	if cp, _ := s.LatestCheckpoint(ctx); cp == nil || cp.Reason != activity.SealResolution {
		t.Fatalf("a resolution must be checkpointed: %+v", cp)
	}
}

func TestTabsHelpAndBrowsers(t *testing.T) {
	m, _, _ := newTestModel(t, 120, 40)
	press(m, "tab")
	if m.tab != tabPending {
		t.Fatal("tab")
	}
	press(m, "?")
	v := m.View()
	if !strings.Contains(v, "mark verified") || strings.Contains(v, "sort") {
		t.Fatalf("pending help must list only pending keys:\n%s", v)
	}
	press(m, "?", "1", "?")
	if v := m.View(); !strings.Contains(v, "sort") || strings.Contains(v, "mark verified") {
		t.Fatalf("suspects help:\n%s", v)
	}
	press(m, "?", "3")
	if v := m.View(); !strings.Contains(v, "executions (newest first) (8)") || !strings.Contains(v, "delivered") {
		t.Fatalf("executions browser:\n%s", v)
	}
	press(m, "4")
	if v := m.View(); !strings.Contains(v, "agent runs (the Sessions log) (2)") || !strings.Contains(v, "meta_run_id") {
		t.Fatalf("sessions browser:\n%s", v)
	}
	if !strings.Contains(m.View(), "audit ✓ verified") {
		t.Fatalf("audit indicator:\n%s", m.View())
	}
}

func TestSizes(t *testing.T) {
	m, _, _ := newTestModel(t, 40, 10)
	if v := m.View(); !strings.Contains(v, "terminal too small: need 50×12, have 40×10") {
		t.Fatalf("small:\n%s", v)
	}
	for _, size := range [][2]int{{60, 20}, {200, 60}, {80, 24}} {
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		for _, keys := range [][]string{nil, {"enter"}, {"p", "n"}, {"esc", "esc", "2", "v"}, {"esc", "3"}, {"4"}} {
			press(m, keys...)
			v := m.View()
			lines := strings.Split(v, "\n")
			if len(lines) != size[1] {
				t.Errorf("%dx%d after %v: %d lines", size[0], size[1], keys, len(lines))
			}
			for i, l := range lines {
				if w := ansi.StringWidth(l); w >= size[0] {
					t.Errorf("%dx%d after %v: line %d is %d wide: %q", size[0], size[1], keys, i, w, l)
				}
			}
		}
		press(m, "esc", "1")
	}
}

// TestLiveMode: a writer in another process appends; the console picks
// it up on its next poll without a restart.
func TestLiveMode(t *testing.T) {
	m, s, _ := newTestModel(t, 120, 30)
	run(m, logSize(s))
	other, err := activity.Open(ctx, s.Path(), activity.Options{KeyDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := activitytest.Fill(ctx, other, 12, 12); err != nil {
		t.Fatal(err)
	}
	other.Close()
	_, cmd := m.Update(tickMsg(time.Now()))
	run(m, cmd)
	if v := m.View(); !strings.Contains(v, "new activity: updated") || !strings.Contains(v, "[3] Executions 10") {
		t.Fatalf("live reload:\n%s", v)
	}
	if m.execs.View() == "" || !strings.Contains(m.execs.View(), "(10)") {
		t.Fatalf("executions after reload:\n%s", m.execs.View())
	}

	// New suspects, and an old suspect's effect called again: the list is
	// updated in place (the selection stays) and holds exactly what a
	// whole analysis finds.
	press(m, "1")
	sel := m.suspects.Selected()
	other, err = activity.Open(ctx, s.Path(), activity.Options{KeyDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := activitytest.FillMixed(ctx, other, 300, 50, 3); err != nil {
		t.Fatal(err)
	}
	other.Close()
	_, cmd = m.Update(tickMsg(time.Now()))
	run(m, cmd)
	all, err := analyze.All(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, total, _ := m.suspects.Counts(); total != len(all) || total <= 3 {
		t.Fatalf("live update: %d suspects listed, a whole analysis finds %d", total, len(all))
	}
	if got := m.suspects.Selected(); sel == nil || got == nil || got.ID != sel.ID {
		t.Fatalf("the selection moved: %v → %v", idOf(sel), idOf(got))
	}
	// The new calls' near misses are named too, as a whole analysis
	// names them (FillMixed's calls of one tool ask for other effects).
	res, err := analyze.Analyse(ctx, s, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.suspects.NearMisses(), res.NearMisses; len(got) != len(want) || len(want) == 0 || got[len(got)-1].Second.ID != want[len(want)-1].Second.ID {
		t.Fatalf("live update: %d near misses named, a whole analysis names %d", len(got), len(want))
	}
	if m.loading || m.gen != 0 {
		t.Fatalf("live mode reloaded instead of updating (gen %d)", m.gen)
	}
}

// normalise hides what differs from run to run (ids, clocks of wall
// time) so golden files compare the layout.
func normalise(s string) string {
	// An id, whole, shortened (act_…V89X53) or cut at the screen's edge:
	// its characters become X, so widths stay what they were.
	return idPattern.ReplaceAllStringFunc(s, func(id string) string {
		i := strings.IndexByte(id, '_')
		return id[:i+1] + regexp.MustCompile(`[0-9A-Z]`).ReplaceAllString(id[i+1:], "X")
	})
}

var idPattern = regexp.MustCompile(`\b(act|call|run|sus|apv|src)_…?[0-9A-Z]+`)

var _ = fmt.Sprint

// TestPendingApprovals: a per-use approval a gateway waits for shows in
// the pending queue; a answers it after a note and y, d denies; the
// decision is in the store and the queue updates.
func TestPendingApprovals(t *testing.T) {
	m, s, _ := newTestModel(t, 120, 30)
	var ids []string
	for _, tool := range []string{"charge_card", "rotate_credential"} {
		_, err := s.Write(ctx, func(w *activity.Tx) error {
			a, err := w.RequestApproval(activity.Approval{Kind: activity.ApprovalPerUse, Actor: "agent:deployer", Tool: tool, CredentialRef: "stripe", Summary: "use the " + tool + " credential"})
			ids = append(ids, a.ID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	run(m, press(m, "r"))
	press(m, "2")
	if m.pending.Len() != 3 {
		t.Fatalf("pending after r: %d", m.pending.Len())
	}
	v := m.View()
	if !strings.Contains(v, "charge_card") || !strings.Contains(v, "approval") {
		t.Fatalf("approvals not listed:\n%s", v)
	}
	// Approvals first (a gateway is waiting on them), then executions.
	press(m, "v") // verify is for executions: nothing to type on an approval
	if m.pending.Captures() {
		t.Fatal("v must not apply to an approval")
	}
	press(m, "a")
	for _, r := range "ok for the refund run" {
		press(m, string(r))
	}
	press(m, "enter")
	run(m, press(m, "y"))
	if a, _ := s.Approval(ctx, ids[0]); a.State != activity.ApprovalApproved || a.Operator != "alice" || a.Note != "ok for the refund run" {
		t.Fatalf("approval after a/y: %+v", a)
	}
	if m.pending.Len() != 2 {
		t.Fatalf("the queue must update: %d", m.pending.Len())
	}
	press(m, "g", "d")
	for _, r := range "not during the freeze" {
		press(m, string(r))
	}
	press(m, "enter")
	run(m, press(m, "y"))
	if a, _ := s.Approval(ctx, ids[1]); a.State != activity.ApprovalDenied || a.Note != "not during the freeze" {
		t.Fatalf("approval after d/y: %+v", a)
	}
	// Deciding twice is refused by the store, and the console says so.
	m.Update(decide(s, ids[1], activity.ApprovalApproved, "alice", "again")())
	if !m.bad {
		t.Fatalf("a second decision must show as an error:\n%s", m.View())
	}
}

// TestBrowserKeys moves through the executions browser; the line under
// the list follows the cursor with the whole id.
func TestBrowserKeys(t *testing.T) {
	m, _, _ := newTestModel(t, 120, 14)
	press(m, "3")
	if m.execs.Selected() != 0 {
		t.Fatal("cursor starts at the top")
	}
	press(m, "j", "down")
	if m.execs.Selected() != 2 {
		t.Fatalf("j, ↓: %d", m.execs.Selected())
	}
	press(m, "G")
	if m.execs.Selected() != 7 {
		t.Fatalf("G: %d", m.execs.Selected())
	}
	if v := m.View(); !strings.Contains(v, "› ✓ delivered") || !regexp.MustCompile(`act_[0-9A-Z]{26} · POST`).MatchString(v) {
		t.Fatalf("the last row must be selected and its id shown whole:\n%s", v)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyPgUp})
	if m.execs.Selected() >= 7 {
		t.Fatal("pgup")
	}
	press(m, "g", "k")
	if m.execs.Selected() != 0 {
		t.Fatal("g, k stay at the top")
	}
	press(m, "?")
	if v := m.View(); !strings.Contains(v, "page down") || !strings.Contains(v, "/   filter") {
		t.Fatalf("browser help:\n%s", v)
	}
	press(m, "?")
	// / filters this list too, on the row and its detail line.
	press(m, "/")
	if !m.execs.Captures() {
		t.Fatal("/ must open the filter")
	}
	for _, r := range "charge_card" {
		press(m, string(r))
	}
	press(m, "enter")
	v := m.View()
	if !strings.Contains(v, "filter: charge_card") || strings.Contains(v, "deploy_release  ") || !strings.Contains(v, "charge_card") {
		t.Fatalf("filtered executions:\n%s", v)
	}
	if i := m.execs.Selected(); i < 0 || m.execList[i].Tool != "charge_card" {
		t.Fatalf("the selection must map to the filtered row: %d", i)
	}
	press(m, "esc")
	if strings.Contains(m.View(), "filter:") {
		t.Fatal("esc must clear the filter")
	}
	m.Update(tea.KeyMsg{Type: tea.KeyShiftTab})
	if m.tab != tabPending {
		t.Fatal("shift+tab")
	}
}

// TestAuditIndicatorBroken: a record edited behind the store's back shows
// as a broken log in the status bar once the console checks again.
func TestAuditIndicatorBroken(t *testing.T) {
	m, s, _ := newTestModel(t, 120, 30)
	if !strings.Contains(m.View(), "audit ✓ verified") {
		t.Fatal("starts verified")
	}
	db, err := sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// What an attacker with the file does first: drop the append-only triggers.
	if _, err := db.Exec(`DROP TRIGGER audit_log_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE audit_log SET canonical = CAST(replace(CAST(canonical AS TEXT), 'agent:deployer', 'agent:deployeR') AS BLOB) WHERE seq = 5`); err != nil {
		t.Fatal(err)
	}
	run(m, press(m, "r"))
	if v := m.View(); !strings.Contains(v, "audit ✗ TAMPERED") {
		t.Fatalf("tampering not shown:\n%s", v)
	}
}

// TestAuditIndicatorTables: an edit of a table the console reads, with
// the log untouched, shows as tampering too.
func TestAuditIndicatorTables(t *testing.T) {
	m, s, _ := newTestModel(t, 120, 30)
	db, err := sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(`UPDATE executions SET outcome = 'failure' WHERE rowid = (SELECT MIN(rowid) FROM executions)`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("edited %d rows", n)
	}
	run(m, press(m, "r"))
	if v := m.View(); !strings.Contains(v, "audit ✗ TAMPERED") {
		t.Fatalf("a forged execution row not shown:\n%s", v)
	}
}

// TestRangeReplay: from the executions browser, p asks for a time range
// (filled around the selected execution), enter replays every event in
// it step by step, esc leaves.
func TestRangeReplay(t *testing.T) {
	m, _, _ := newTestModel(t, 120, 40)
	press(m, "3", "G", "p")
	if !m.rangeAsk.IsOpen() || !strings.Contains(m.View(), "replay from, to: 08:59:01 09:05:01") {
		t.Fatalf("the prompt, filled around the oldest execution:\n%s", m.View())
	}
	if cmd := press(m, "q"); isQuit(cmd) {
		t.Fatal("q must type into the prompt, not quit")
	}
	for range 40 {
		m.Update(tea.KeyMsg{Type: tea.KeyBackspace})
	}
	for _, r := range "09:00 09:00:05" {
		press(m, string(r))
	}
	run(m, press(m, "enter"))
	if !m.inDetail() || m.detail.Suspect() != nil || !m.detail.Replaying() {
		t.Fatal("enter must open the range replay")
	}
	v := m.View()
	if !strings.Contains(v, "time range 2026-11-30T09:00:00Z – 2026-11-30T09:00:05Z") || !strings.Contains(v, "replay: event 1 of") {
		t.Fatalf("range replay:\n%s", v)
	}
	press(m, "n", "n")
	if m.detail.Frame() != 2 || !strings.Contains(m.View(), "states: ") {
		t.Fatalf("stepping: frame %d\n%s", m.detail.Frame(), m.View())
	}
	press(m, "esc")
	if m.inDetail() || m.tab != tabExecutions {
		t.Fatal("esc leaves the range replay back to the executions")
	}
	// A reversed range is refused in the prompt, which stays open.
	press(m, "p")
	for range 40 {
		m.Update(tea.KeyMsg{Type: tea.KeyBackspace})
	}
	for _, r := range "09:05 09:00" {
		press(m, string(r))
	}
	press(m, "enter")
	if !m.rangeAsk.IsOpen() || !strings.Contains(m.View(), "is before") {
		t.Fatalf("reversed range:\n%s", m.View())
	}
	press(m, "esc")
	if m.rangeAsk.IsOpen() {
		t.Fatal("esc closes the prompt")
	}
}

// TestImportKey: i asks for a file, enter imports it with the same code as
// mcpdup import, and the views reload with what it added; a second
// import of the same file adds nothing and says so.
func TestImportKey(t *testing.T) {
	m, _, _ := newTestModel(t, 120, 40)
	_, total, _ := m.suspects.Counts()
	press(m, "i")
	if !m.fileAsk.IsOpen() || !strings.Contains(m.View(), "import file:") {
		t.Fatalf("i must open the prompt:\n%s", m.View())
	}
	for _, r := range "/nonexistent/x.log" {
		press(m, string(r))
	}
	press(m, "enter")
	if !m.fileAsk.IsOpen() || !strings.Contains(m.View(), "is not a file") {
		t.Fatalf("a missing file must be refused in place:\n%s", m.View())
	}
	press(m, "esc", "i")
	file := "../importers/testdata/sallyport/activity.jsonl"
	for _, r := range file {
		press(m, string(r))
	}
	run(m, press(m, "enter"))
	if v := m.View(); !strings.Contains(v, "imported activity.jsonl (sallyport): 10 calls, 10 executions, 0 skipped") {
		t.Fatalf("status after the import:\n%s", v)
	}
	if _, after, _ := m.suspects.Counts(); after != total+5 {
		t.Fatalf("suspects %d → %d, want 5 more", total, after)
	}
	// Live mode's next look at the log must not take our own import for
	// new activity and replace its summary.
	run(m, logSize(m.store))
	if v := m.View(); !strings.Contains(v, "imported activity.jsonl") || strings.Contains(v, "new activity: updated") {
		t.Fatalf("the import's summary was replaced:\n%s", v)
	}
	press(m, "i")
	for _, r := range file {
		press(m, string(r))
	}
	run(m, press(m, "enter"))
	if !strings.Contains(m.View(), "was imported before") {
		t.Fatalf("re-import:\n%s", m.View())
	}
}

// TestHostileTextEscapedInTheConsole: a tool name carrying a colour, an
// OSC title write and a BiDi override is drawn escaped; only the
// console's own styling reaches the terminal.
func TestHostileTextEscapedInTheConsole(t *testing.T) {
	m, s, _ := newTestModel(t, 160, 40)
	tool := "d\x1b[41mep\x1b]0;pwned\x07\u202egnp"
	_, err := s.Write(context.Background(), func(w *activity.Tx) error {
		for range 2 {
			e, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:x", Tool: tool, Channel: activity.ChannelHTTP,
				Target: "https://api.example/v1", Method: "POST", Arguments: json.RawMessage(`{"k":"\u202ev"}`)}})
			if err != nil {
				return err
			}
			if _, err := w.RecordCall(activity.Call{Actor: "agent:x", Method: "tools/call", Tool: tool, Arguments: e.Arguments,
				Disposition: activity.DispositionNewExecution, ExecutionID: e.ID}); err != nil {
				return err
			}
			// Both dispatched, both answered: a suspect whose detail
			// shows the tool, the arguments and the reason.
			for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded} {
				if _, err := w.Transition(activity.Transition{ExecutionID: e.ID, To: to, Reason: "x\x1b[2J"}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	run(m, press(m, "r"))
	run(m, press(m, "1"))
	for range 10 { // select the hostile tool's suspect
		if sel := m.suspects.Selected(); sel == nil || strings.HasPrefix(sel.Tool, `d\x1b`) {
			break
		}
		press(m, "j")
	}
	for _, key := range []string{"3", "1", "enter"} { // the executions view, suspects, a suspect's detail
		run(m, press(m, key))
		v := m.View()
		if strings.Contains(v, "\x1b]") || strings.ContainsRune(v, '\u202e') || strings.Contains(v, "\x1b[2J") || strings.ContainsRune(v, '\a') ||
			strings.Contains(v, "\x1b[41mep") {
			t.Fatalf("view %s drew a raw control sequence:\n%q", key, v)
		}
		if !strings.Contains(v, `d\x1b[41mep`) {
			t.Fatalf("view %s does not show the tool's escape as text:\n%q", key, v)
		}
	}
}

// A console opened without a name looks freely and asks once, inline,
// when a decision must record who made it.
func TestConsoleAsksForTheOperatorOnce(t *testing.T) {
	s, ids := testStore(t)
	m := New(s, Options{Poll: -1})
	run(m, m.Init())
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	press(m, "2")
	press(m, "x")
	for _, r := range "no ticket in the tracker" {
		press(m, string(r))
	}
	press(m, "enter")
	run(m, press(m, "y"))
	if !m.opAsk.IsOpen() || !strings.Contains(m.View(), "your name: ") {
		t.Fatalf("a decision without a name must ask for one:\n%s", m.View())
	}
	if e, _ := s.Execution(ctx, ids["ticket"]); e.State != activity.StateUnknown {
		t.Fatal("nothing may be written before the name is given")
	}
	run(m, press(m, "enter")) // an empty name is refused
	if !m.opAsk.IsOpen() {
		t.Fatal("an empty name was accepted")
	}
	for _, r := range "bob" {
		press(m, string(r))
	}
	run(m, press(m, "enter"))
	res, _ := s.Resolutions(ctx, ids["ticket"])
	if len(res) != 1 || res[0].Operator != "bob" || res[0].Note != "no ticket in the tracker" {
		t.Fatalf("resolution after the name: %+v", res)
	}
	if m.opts.Operator != "bob" {
		t.Fatalf("the name must be kept for the next decision: %q", m.opts.Operator)
	}
}

// At 80 columns the suspects list keeps an id a command accepts (its
// short form), and gives the calls count before it gives the id up.
func TestSuspectIDsAt80Columns(t *testing.T) {
	m, _, _ := newTestModel(t, 80, 24)
	v := m.View()
	if !strings.Contains(v, "SUSPECT") || !regexp.MustCompile(`sus_…[0-9A-Z]{6}`).MatchString(v) {
		t.Fatalf("no usable suspect id at 80 columns:\n%s", v)
	}
}

// On a short terminal a suspect's timeline starts at its first event,
// says what is cut off, and scrolls (↓, G, g, pgup), as every list does.
func TestTimelineScrollsOnAShortTerminal(t *testing.T) {
	m, _, _ := newTestModel(t, 80, 24)
	press(m, "enter")
	v := m.View()
	if !strings.Contains(v, "tools/call") || !strings.Contains(v, "more below") || strings.Contains(v, "more above") {
		t.Fatalf("the timeline must start at the first call and say what is below:\n%s", v)
	}
	press(m, "G")
	v = m.View()
	if !strings.Contains(v, "more above") || strings.Contains(v, "more below") {
		t.Fatalf("G must show the last events:\n%s", v)
	}
	press(m, "g")
	if v = m.View(); !strings.Contains(v, "events 1–") {
		t.Fatalf("g must return to the first event:\n%s", v)
	}
	press(m, "down")
	if v = m.View(); !strings.Contains(v, "events 2–") {
		t.Fatalf("↓ must scroll by one:\n%s", v)
	}
	// In replay, G jumps to the last event.
	press(m, "p")
	press(m, "G")
	v = m.View()
	if got := regexp.MustCompile(`replay: event (\d+) of (\d+)`).FindStringSubmatch(v); got == nil || got[1] != got[2] {
		t.Fatalf("G in replay must reach the last event:\n%s", v)
	}
}

// / filters the pending queue too; the tab still counts everything.
func TestPendingFilter(t *testing.T) {
	m, _, _ := newTestModel(t, 120, 30)
	press(m, "2", "/")
	for _, r := range "no-such-tool" {
		press(m, string(r))
	}
	press(m, "enter")
	if v := m.View(); !strings.Contains(v, `nothing pending matches "no-such-tool"`) || !strings.Contains(v, "[2] Pending 1") {
		t.Fatalf("filtered queue:\n%s", v)
	}
	press(m, "esc")
	if v := m.View(); !strings.Contains(v, "open_ticket") || strings.Contains(v, "filter:") {
		t.Fatalf("esc must clear the filter:\n%s", v)
	}
	press(m, "/")
	for _, r := range "OPEN_t" {
		press(m, string(r))
	}
	press(m, "enter")
	if v := m.View(); !strings.Contains(v, "open_ticket") || !strings.Contains(v, "(1 of 1;") {
		t.Fatalf("a case-insensitive match:\n%s", v)
	}
}

// i completes the path with tab, and a file whose format cannot be
// detected is not a dead end: the console asks which format it is, from
// the list, and imports it as that.
func TestImportAsksForTheFormat(t *testing.T) {
	m, _, _ := newTestModel(t, 120, 40)
	press(m, "i")
	for _, r := range "../importers/testdata/sallyp" {
		press(m, string(r))
	}
	m.Update(tea.KeyMsg{Type: tea.KeyTab})
	if v := m.fileAsk.Value(); v != "../importers/testdata/sallyport/" {
		t.Fatalf("tab completed to %q", v)
	}
	press(m, "esc")
	odd := filepath.Join(t.TempDir(), "odd.log")
	os.WriteFile(odd, []byte("%%% something no format here knows %%%\n"), 0o600)
	press(m, "i")
	for _, r := range odd {
		press(m, string(r))
	}
	run(m, press(m, "enter"))
	v := m.View()
	if !m.fileAsk.IsOpen() || !strings.Contains(v, "format of odd.log:") || !strings.Contains(v, "cannot tell the format") || !strings.Contains(v, "sallyport") {
		t.Fatalf("an undetected format must ask for one:\n%s", v)
	}
	for _, r := range "jpeg" {
		press(m, string(r))
	}
	run(m, press(m, "enter"))
	if !m.fileAsk.IsOpen() || !strings.Contains(m.View(), `"jpeg" is not one of`) {
		t.Fatalf("a format not in the list must be refused in place:\n%s", m.View())
	}
	for range "jpeg" {
		m.Update(tea.KeyMsg{Type: tea.KeyBackspace})
	}
	for _, r := range "nginx" {
		press(m, string(r))
	}
	run(m, press(m, "enter"))
	if v := m.View(); m.fileAsk.IsOpen() || !strings.Contains(v, "odd.log") || strings.Contains(v, "cannot tell the format") {
		t.Fatalf("the import must run as the chosen format:\n%s", v)
	}
}

// A reload while a decision is being typed does not move it to another
// item: it lands on the one asked about.
func TestPendingDecisionSurvivesAReload(t *testing.T) {
	m, s, ids := newTestModel(t, 120, 30)
	press(m, "2", "x")
	for _, r := range "no ticket" {
		press(m, string(r))
	}
	press(m, "enter")
	// Live mode reloads the queue meanwhile, with an approval now first.
	if _, err := s.Write(ctx, func(w *activity.Tx) error {
		_, err := w.RequestApproval(activity.Approval{Kind: activity.ApprovalSession, Actor: "agent:other", Summary: "a new run"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	run(m, loadPending(s))
	run(m, press(m, "y"))
	res, _ := s.Resolutions(ctx, ids["ticket"])
	if len(res) != 1 || res[0].Note != "no ticket" {
		t.Fatalf("the decision did not land on the execution asked about: %+v", res)
	}
	if as, _ := s.Approvals(ctx, true); len(as) != 1 {
		t.Fatalf("the new approval was decided by mistake: %+v", as)
	}
}

func idOf(s *analyze.Row) string {
	if s == nil {
		return "none"
	}
	return s.ID
}

// TestMergeNewest: live mode updates the executions browser in place: a
// listed execution the new records moved is replaced where it stands,
// new ones go on top newest first, and the list keeps its limit.
func TestMergeNewest(t *testing.T) {
	ex := func(id string, seq int64, st activity.State) activity.Execution {
		return activity.Execution{ID: activity.ExecutionID(id), Seq: seq, State: st}
	}
	list := []activity.Execution{ex("c", 3, activity.StateDelivered), ex("b", 2, activity.StateDispatched), ex("a", 1, activity.StateDelivered)}
	touched := []activity.Execution{ex("e", 4, activity.StateAccepted), ex("b", 2, activity.StateUnknown), ex("d", 5, activity.StateAccepted)}
	var got []string
	for _, e := range mergeNewest(list, touched, 4) {
		got = append(got, string(e.ID)+":"+string(e.State))
	}
	if want := []string{"d:accepted", "e:accepted", "c:delivered", "b:unknown"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// An old execution beyond the limit, touched now, does not jump on top.
	got = got[:0]
	for _, e := range mergeNewest(list, []activity.Execution{ex("z", 0, activity.StateVerified)}, 3) {
		got = append(got, string(e.ID))
	}
	if want := []string{"c", "b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("an old execution: got %v, want %v", got, want)
	}
}

// TestMergeNewestMatchesASort: the one-pass merge lists what sorting the
// list and the touched executions together would (the merge as it was),
// for random lists, touches and limits.
func TestMergeNewestMatchesASort(t *testing.T) {
	bySort := func(list, touched []activity.Execution, limit int) []activity.Execution {
		last := map[activity.ExecutionID]activity.Execution{}
		for _, e := range touched {
			last[e.ID] = e
		}
		listed := map[activity.ExecutionID]bool{}
		var out []activity.Execution
		for _, e := range list {
			listed[e.ID] = true
			if n, ok := last[e.ID]; ok {
				e = n
			}
			out = append(out, e)
		}
		newest := int64(-1)
		if len(list) > 0 {
			newest = list[0].Seq
		}
		for _, e := range last {
			if !listed[e.ID] && (e.Seq > newest || len(list) < limit) {
				out = append(out, e)
			}
		}
		slices.SortFunc(out, func(a, b activity.Execution) int { return cmp.Compare(b.Seq, a.Seq) })
		return out[:min(len(out), limit)]
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		limit := 1 + rng.IntN(8)
		seqs := rng.Perm(20)[:rng.IntN(limit+1)]
		slices.SortFunc(seqs, func(a, b int) int { return b - a })
		var list []activity.Execution
		for _, s := range seqs {
			list = append(list, activity.Execution{ID: activity.ExecutionID(fmt.Sprint("x", s)), Seq: int64(s), State: activity.StateDispatched})
		}
		var touched []activity.Execution
		for range rng.IntN(6) {
			s := rng.IntN(25)
			touched = append(touched, activity.Execution{ID: activity.ExecutionID(fmt.Sprint("x", s)), Seq: int64(s), State: activity.States[rng.IntN(len(activity.States))]})
		}
		got, want := mergeNewest(list, touched, limit), bySort(list, touched, limit)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: list %v touched %v limit %d:\ngot  %v\nwant %v", round, list, touched, limit, got, want)
		}
	}
}

// TestStateGlyph: an execution with no outcome is never marked ✓ (a
// dispatched call the target may or may not have acted on read ✓ in the
// executions view while its suspect said insufficient_evidence).
func TestStateGlyph(t *testing.T) {
	want := map[activity.State]string{
		activity.StateAccepted: "…", activity.StateAuthorized: "…",
		activity.StateDispatched: "?", activity.StateUnknown: "?", activity.StatePendingVerification: "?",
		activity.StateSucceeded: "✓", activity.StateDelivered: "✓", activity.StateVerified: "✓", activity.StateNotDelivered: "✓",
		activity.StateFailed: "✗", activity.StateRejected: "✗", activity.StateFailedBefore: "✗", activity.StateRejectedByOperator: "✗", activity.StateDeliveryFailed: "✗",
	}
	for st, g := range want {
		if got := stateGlyph(st); got != g {
			t.Errorf("%s: %q, want %q", st, got, g)
		}
	}
}

// TestStatusBarSaysTheVaultIsLocked: while the vault is locked every agent
// call is refused; the status bar says so first (nothing in the console
// did).
func TestStatusBarSaysTheVaultIsLocked(t *testing.T) {
	m, s, _ := newTestModel(t, 120, 30)
	if strings.Contains(m.View(), "VAULT LOCKED") {
		t.Fatalf("an unlocked vault shown locked:\n%s", m.View())
	}
	if _, err := s.Write(ctx, func(w *activity.Tx) error { return w.SetVault(true, "dana", "incident 4711") }); err != nil {
		t.Fatal(err)
	}
	run(m, loadPending(s))
	if v := m.View(); !strings.Contains(v, "VAULT LOCKED") {
		t.Fatalf("a locked vault is not in the status bar:\n%s", v)
	}
}
