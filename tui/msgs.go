package tui

import (
	"context"
	"strconv"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/internal/termsafe"
	"github.com/mcpdup/mcpdup/report"
)

// Every read and write of the store happens in a command; Update only
// routes messages. Replies carry the generation of the load they answer
// so a stale reply (from before a refresh) is dropped. What a command
// reads is scrubbed there (termsafe.Scrub) before any view styles it: the
// frame lets SGR through for the console's own colours, so a colour
// carried in a log must arrive already shown as text.

// suspectsMsg is one batch of suspects as the analysis streams them.
type suspectsMsg struct {
	gen      int
	suspects []*analyze.Suspect
	read     int64                   // calls read so far
	near     []analyze.NearMiss      // with done: the near misses named
	finder   *analyze.NearMissFinder // with done: what found them, for live mode to go on feeding
	done     bool
	through  int64 // with done: the log size the analysis covers at least
	err      error
	next     tea.Cmd
}

// refreshMsg is live mode's update: the suspects of the effects that the
// records since the last analysis touched, rebuilt alone.
type refreshMsg struct {
	gen     int
	keys    []string
	kept    []string // suspects of keys that stand as they were
	fresh   []*analyze.Suspect
	near    []analyze.NearMiss      // the near misses named again, when the new calls added some
	finder  *analyze.NearMissFinder // what named them
	execs   []activity.Execution    // the executions the new records touched
	runs    []activity.Run          // read again only when a run started or ended
	newRuns bool
	through int64
	err     error
}

type pendingMsg struct {
	execs     []activity.Execution
	approvals []activity.Approval
	// vaultLocked: every agent call is refused until an operator unlocks.
	vaultLocked bool
	err         error
}

type browseMsg struct {
	execs []activity.Execution
	runs  []activity.Run
	err   error
}

type auditMsg struct {
	report *audit.Report
	err    error
}

type resolvedMsg struct {
	what    string
	logSize int64 // the log's size after the write: our own write is not "new activity"
	err     error
}

type tickMsg time.Time

type sizeMsg struct {
	size int64
	err  error
}

// loadSuspects streams the analysis in batches, so the first suspects
// appear while a large log is still being read.
func loadSuspects(s *activity.Store, opts analyze.Options, gen int) tea.Cmd {
	ch := make(chan suspectsMsg, 4)
	var read int64
	opts.Progress = func(n int64) { read = n }
	var near []analyze.NearMiss
	opts.NearMisses = func(found []analyze.NearMiss, _ int) { near = found }
	opts.Finder = analyze.NewNearMissFinder()
	go func() {
		defer close(ch)
		// Read before the scan: records appended while it runs are
		// analysed again by the first refresh, which is harmless.
		through, _ := s.LogSize(context.Background())
		// The first suspects go out at once (the first frame should not
		// wait for the analysis); after that, batches every 100ms or 8,192
		// suspects: each batch costs the list a merge of its sort orders.
		var batch []*analyze.Suspect
		last, size := time.Now(), 64
		err := analyze.Scan(context.Background(), s, opts, func(sus *analyze.Suspect) error {
			termsafe.Scrub(sus) // data reaches the frame with its escapes shown (see scrub.go)
			batch = append(batch, sus)
			if len(batch) >= size || time.Since(last) > 100*time.Millisecond {
				ch <- suspectsMsg{gen: gen, suspects: batch, read: read}
				batch, last, size = nil, time.Now(), 8192
			}
			return nil
		})
		termsafe.Scrub(&near)
		ch <- suspectsMsg{gen: gen, suspects: batch, read: read, near: near, finder: opts.Finder, done: true, through: through, err: err}
	}()
	var next tea.Cmd
	next = func() tea.Msg {
		m, ok := <-ch
		if !ok {
			return nil
		}
		if !m.done {
			m.next = next
		}
		return m
	}
	return next
}

// refreshSuspects reads the records since the last analysis and rebuilds
// the suspects of the effects they touched, and reads the executions they
// touched for the browser: a few short reads, where a reload read the
// whole log again (and listing the newest 5,000 executions every second
// cost a 1M-record console 11% of a core by itself).
func refreshSuspects(s *activity.Store, opts analyze.Options, since int64, finder *analyze.NearMissFinder, gen int) tea.Cmd {
	return func() tea.Msg {
		ctx := context.Background()
		touched, err := analyze.TouchedSince(ctx, s, since)
		if err != nil {
			return refreshMsg{gen: gen, err: err}
		}
		rebuilt, err := analyze.Rebuild(ctx, s, opts, touched)
		if err != nil {
			return refreshMsg{gen: gen, err: err}
		}
		var runs []activity.Run
		if touched.Runs {
			if runs, err = s.Runs(ctx, browseLimit); err != nil {
				return refreshMsg{gen: gen, err: err}
			}
		}
		// Last: what it names is lost if the refresh fails after it.
		near, next, err := followNearMisses(ctx, s, opts, finder, touched.Calls)
		if err != nil {
			return refreshMsg{gen: gen, err: err}
		}
		for _, sus := range rebuilt.Fresh {
			termsafe.Scrub(sus)
		}
		termsafe.Scrub(&touched.Executions)
		termsafe.Scrub(&runs)
		return refreshMsg{gen: gen, keys: touched.Keys, kept: rebuilt.Kept, fresh: rebuilt.Fresh, near: near, finder: next, execs: touched.Executions, runs: runs, newRuns: touched.Runs,
			through: touched.Through, err: err}
	}
}

// followNearMisses feeds the new calls to the load's near-miss finder
// and names the near misses again if it holds more (a naming that failed
// is tried again next time); calls out of order (an older log imported
// meanwhile) need the whole log read again, by their keys. near is nil
// when nothing changed.
func followNearMisses(ctx context.Context, s *activity.Store, opts analyze.Options, finder *analyze.NearMissFinder,
	calls []activity.CallKey) (near []analyze.NearMiss, _ *analyze.NearMissFinder, err error) {
	if finder == nil {
		return nil, nil, nil
	}
	finder.Follow(opts, calls, time.Now())
	if finder.Behind() {
		if finder, err = analyze.FindNearMisses(ctx, s, opts); err != nil {
			return nil, nil, err
		}
	} else if !finder.Changed() {
		return nil, finder, nil
	}
	if near, _, err = finder.Name(ctx, s); err != nil {
		return nil, nil, err
	}
	termsafe.Scrub(&near)
	if near == nil {
		near = []analyze.NearMiss{}
	}
	return near, finder, nil
}

func loadPending(s *activity.Store) tea.Cmd {
	return func() tea.Msg {
		ctx := context.Background()
		execs, err := s.Executions(ctx, activity.ExecutionFilter{States: []activity.State{activity.StateUnknown, activity.StatePendingVerification}})
		if err != nil {
			return pendingMsg{err: err}
		}
		approvals, err := s.Approvals(ctx, true)
		if err != nil {
			return pendingMsg{err: err}
		}
		locked, _, err := s.Vault(ctx)
		termsafe.Scrub(&execs)
		termsafe.Scrub(&approvals)
		return pendingMsg{execs: execs, approvals: approvals, vaultLocked: locked, err: err}
	}
}

// browseLimit bounds the browsers: the newest rows are the ones an
// on-call engineer scrolls.
const browseLimit = 5000

func loadBrowsers(s *activity.Store) tea.Cmd {
	return func() tea.Msg {
		ctx := context.Background()
		execs, err := s.Executions(ctx, activity.ExecutionFilter{Newest: true, Limit: browseLimit})
		if err != nil {
			return browseMsg{err: err}
		}
		runs, err := s.Runs(ctx, browseLimit)
		termsafe.Scrub(&execs)
		termsafe.Scrub(&runs)
		return browseMsg{execs: execs, runs: runs, err: err}
	}
}

// newFollower verifies the log with the key this host has for it (the
// indicator says when that key is not pinned), following it as it grows.
func newFollower(s *activity.Store) (*audit.Follower, error) {
	opts := audit.Options{}
	if pub, err := s.PublicKey(); err == nil {
		opts.Key = pub
	}
	if err := audit.UseWitness(s.WitnessPath(), &opts); err != nil {
		return nil, err
	}
	return audit.NewFollower(s, opts)
}

// advanceAudit verifies what was appended since the follower's last
// advance (everything, the first time).
func advanceAudit(f *audit.Follower) tea.Cmd {
	return func() tea.Msg {
		rep, err := f.Advance(context.Background())
		return auditMsg{report: rep, err: err}
	}
}

// resolve writes an operator's resolution through the same function as
// `mcpdup resolve`: chained, then sealed by a checkpoint.
func resolve(s *activity.Store, r activity.Resolution) tea.Cmd {
	return func() tea.Msg {
		e, cp, err := s.Resolve(context.Background(), r)
		if err != nil {
			return resolvedMsg{err: err}
		}
		what := report.ShortID(string(e.ID)) + " is now " + string(e.State)
		if cp != nil {
			what += ", sealed at " + strconv.FormatInt(cp.Size, 10)
		} else {
			what += " (unsealed: no signing key on this host)"
		}
		n, _ := s.LogSize(context.Background())
		return resolvedMsg{what: what, logSize: n}
	}
}

func decide(s *activity.Store, id string, state activity.ApprovalState, operator, note string) tea.Cmd {
	return func() tea.Msg {
		a, err := s.DecideApproval(context.Background(), id, state, operator, note)
		if err != nil {
			return resolvedMsg{err: err}
		}
		n, _ := s.LogSize(context.Background())
		return resolvedMsg{what: a.ID + " " + string(a.State), logSize: n}
	}
}

func tick(every time.Duration) tea.Cmd {
	return tea.Tick(every, func(t time.Time) tea.Msg { return tickMsg(t) })
}

func logSize(s *activity.Store) tea.Cmd {
	return func() tea.Msg {
		n, err := s.LogSize(context.Background())
		return sizeMsg{size: n, err: err}
	}
}

// openedMsg is a suspect read whole to be shown (the list keeps rows).
type openedMsg struct {
	id  string
	sus *analyze.Suspect
	err error
}

// openSuspect reads one suspect whole: analyze.Find rebuilds it from its
// first call's effect through an index, a few milliseconds at any size.
func openSuspect(s *activity.Store, opts analyze.Options, id string) tea.Cmd {
	return func() tea.Msg {
		sus, err := analyze.Find(context.Background(), s, opts, id)
		if err == nil {
			termsafe.Scrub(sus)
		}
		return openedMsg{id: id, sus: sus, err: err}
	}
}

type rangeMsg struct {
	tl  *report.Timeline
	err error
}

// loadRange reads every event between from and to for the range replay.
func loadRange(s *activity.Store, from, to time.Time) tea.Cmd {
	return func() tea.Msg {
		tl, err := report.RangeTimeline(context.Background(), s, from, to)
		termsafe.Scrub(tl)
		return rangeMsg{tl: tl, err: err}
	}
}

type importedMsg struct {
	path    string
	format  string // as asked for; "" detected
	summary string
	added   bool
	logSize int64 // the log's size after the import: not "new activity"
	err     error
}

// importFile runs the console's Import (the command line's, the same code
// as mcpdup import) on a file.
func importFile(s *activity.Store, imp Import, path, format string) tea.Cmd {
	return func() tea.Msg {
		summary, added, err := imp(context.Background(), path, format)
		n, _ := s.LogSize(context.Background())
		return importedMsg{path: path, format: format, summary: summary, added: added, logSize: n, err: err}
	}
}
