package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
)

// TestConsoleInTmux drives the real binary the way an operator does, in
// a real terminal (tmux): build the demo database, open the console,
// filter the suspects, walk one suspect's five questions, mark a pending
// execution verified with a note, quit. Then the log must verify and the
// resolution must be in the database. .ci/run installs tmux.
func TestConsoleInTmux(t *testing.T) {
	bin, dir, db, keys := demoDatabase(t)

	// NO_COLOR: the layout must say everything colour would.
	tm := startTmux(t, dir, 120, 40, "env", "NO_COLOR=1", bin, "console", "--db", db, "--key-dir", keys, "--operator", "alice")
	tm.waitFor("10 suspects (✗ 1 duplicate, ? 1 risk) · 3 pending · audit ✓ verified")
	if raw := tm.run("capture-pane", "-e", "-p", "-t", "e2e"); regexp.MustCompile(`\x1b\[[0-9;]*(3[0-9]|4[0-9]|9[0-7])(;[0-9]+)*m`).MatchString(raw) {
		t.Fatalf("colour on screen under NO_COLOR:\n%q", raw)
	}

	tm.keys("/")
	tm.typeText("pt_create")
	tm.keys("Enter")
	tm.waitFor("filter: pt_create")
	tm.waitFor(" 1/10 suspects")
	tm.waitFor("› ✗ duplicate") // the cursor shows without colour
	if screen := tm.capture(); !strings.Contains(screen, "duplicate") || strings.Contains(screen, "scale_service") {
		t.Fatalf("the filter shows the wrong rows:\n%s", screen)
	}

	tm.keys("Enter")
	for i, q := range []string{
		"1. Did one agent process send both calls?",
		"2. Was the first call authorized, and did it reach dispatch?",
		"3. Did the gateway get a response or exit code from the target?",
		"4. Did result delivery fail after the action finished at the target?",
		"5. Did the second call reuse the first execution",
	} {
		tm.waitFor(q)
		tm.waitFor("question " + string(rune('1'+i)) + " of 5")
		tm.keys("Enter")
	}
	tm.waitFor("Verdict: ✗")
	tm.waitFor("Fix:")
	tm.keys("Escape")
	tm.waitGone("› suspect")
	tm.keys("Escape")
	tm.waitFor("10 suspects (✗ 1 duplicate")

	tm.keys("2")
	tm.waitFor("awaiting an operator")
	tm.keys("v")
	tm.typeText("ledger checked: one charge")
	tm.keys("Enter")
	prompt := tm.waitFor(`with note "ledger checked: one charge"? (y/N)`)
	id := regexp.MustCompile(`Mark (act_[0-9A-Z]{26}) verified`).FindStringSubmatch(prompt)
	if id == nil {
		t.Fatalf("no execution id in the prompt:\n%s", prompt)
	}
	tm.keys("y")
	tm.waitFor("is now verified")
	tm.waitFor("[2] Pending 2")
	tm.keys("q")
	tm.waitExit()

	if out, err := exec.Command(bin, "audit", "verify", "--db", db, "--key-dir", keys).CombinedOutput(); err != nil {
		t.Fatalf("audit verify after the console: %v\n%s", err, out)
	}
	s, err := activity.Open(context.Background(), db, activity.Options{KeyDir: keys, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Resolutions(context.Background(), activity.ExecutionID(id[1]))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Operator != "alice" || res[0].Note != "ledger checked: one charge" || res[0].Outcome != activity.ResolutionVerified {
		t.Fatalf("resolution in the database: %+v", res)
	}
	if e, _ := s.Execution(context.Background(), activity.ExecutionID(id[1])); e.State != activity.StateVerified {
		t.Fatalf("execution state %s", e.State)
	}
}

// TestConsoleOnCallInTmux is the 3 a.m. path at 80×24 and 200×50: a shell
// with no $USER or $LOGNAME (kubectl exec) opens the console; the tab line
// says key, name and count; the most severe suspect is first and its id
// stays on screen in a form mcpdup report accepts.
func TestConsoleOnCallInTmux(t *testing.T) {
	bin, _, db, keys := demoDatabase(t)
	for _, size := range [][2]int{{80, 24}, {200, 50}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			tm := startTmux(t, t.TempDir(), size[0], size[1], "env", "-u", "USER", "-u", "LOGNAME", "NO_COLOR=1", bin, "console", "--db", db, "--key-dir", keys)
			// The views load side by side: wait for each count.
			tm.waitFor("[1] Suspects 10")
			tm.waitFor("[2] Pending 3")
			loaded := regexp.MustCompile(`\[3\] Executions [1-9][0-9]*\s+\[4\] Sessions [1-9]`)
			screen := tm.pollFor(loaded.MatchString)
			var first string
			for _, l := range strings.Split(screen, "\n") {
				if strings.Contains(l, "sus_") {
					first = l
					break
				}
			}
			if !strings.Contains(first, "duplicate ") || !strings.Contains(first, "critical") {
				t.Fatalf("the first suspect is not the critical duplicate:\n%s", screen)
			}
			id := regexp.MustCompile(`sus_(…[0-9A-Z]{6}|[0-9A-Z]{26})`).FindString(first)
			if id == "" {
				t.Fatalf("no suspect id on the first row:\n%s", screen)
			}
			out, err := exec.Command(bin, "report", id, "--db", db, "--key-dir", keys).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "# Post-incident report") {
				t.Fatalf("mcpdup report %s (the id as the screen shows it): %v\n%s", id, err, out)
			}
			// The suspect's timeline starts at its first event and scrolls.
			tm.keys("Enter")
			tm.waitFor("1. Did one agent process send both calls?")
			screen = tm.capture()
			if !strings.Contains(screen, "tools/call") {
				t.Fatalf("the first tools/call is not on screen:\n%s", screen)
			}
			if strings.Contains(screen, "more below") { // cut off: it must scroll
				tm.waitFor("more below")
				tm.keys("G")
				tm.waitFor("more above")
				tm.keys("g")
				tm.waitFor("events 1–")
			}
			tm.keys("Escape")
			tm.keys("q")
			tm.waitExit()
		})
	}
}

// TestEmptyConsoleSaysWhatFillsIt opens the console on an empty database
// at 80×24 and 200×50: every view says what would fill it.
func TestEmptyConsoleSaysWhatFillsIt(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "empty.db"), filepath.Join(dir, "keys")
	if out, err := exec.Command(bin, "init", "--db", db, "--key-dir", keys).CombinedOutput(); err != nil {
		t.Fatalf("mcpdup init: %v\n%s", err, out)
	}
	for _, size := range [][2]int{{80, 24}, {200, 50}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			tm := startTmux(t, t.TempDir(), size[0], size[1], "env", "NO_COLOR=1", bin, "console", "--db", db, "--key-dir", keys, "--operator", "alice")
			tm.waitFor("[1] Suspects 0")
			tm.waitFor("Import a log with i")
			for key, want := range map[string]string{"2": "nothing awaits an operator", "3": "no executions yet", "4": "no agent runs yet"} {
				tm.keys(key)
				tm.waitFor(want)
			}
			tm.keys("q")
			tm.waitExit()
		})
	}
}

// tmuxSession is one program running in a private tmux server.
type tmuxSession struct {
	t      testing.TB
	socket string
	wait   time.Duration // how long pollFor waits; 0: a minute
}

// demoDatabase builds the binary and the demo's database for a console
// test.
func demoDatabase(t *testing.T) (bin, dir, db, keys string) {
	t.Helper()
	bin, dir = buildBinary(t), t.TempDir()
	db, keys = filepath.Join(dir, "demo.db"), filepath.Join(dir, "keys")
	if out, err := exec.Command(bin, "demo", "--db", db, "--key-dir", keys, "--no-console").CombinedOutput(); err != nil {
		t.Fatalf("mcpdup demo: %v\n%s", err, out)
	}
	return bin, dir, db, keys
}

func startTmux(t testing.TB, dir string, w, h int, argv ...string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("this test needs tmux (.ci/run installs it): ", err)
	}
	ts := &tmuxSession{t: t, socket: filepath.Join(dir, "tmux.sock")}
	args := append([]string{"new-session", "-d", "-s", "e2e", "-x", itoa(w), "-y", itoa(h)}, argv...)
	ts.run(args...)
	t.Cleanup(func() { exec.Command("tmux", "-S", ts.socket, "kill-server").Run() })
	return ts
}

func (ts *tmuxSession) run(args ...string) string {
	ts.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", ts.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	out, err := cmd.CombinedOutput()
	if err != nil {
		ts.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// keys sends tmux key names (Enter, Escape, or one character), one at a
// time with a pause, as a person types.
func (ts *tmuxSession) keys(names ...string) {
	ts.t.Helper()
	for _, k := range names {
		ts.run("send-keys", "-t", "e2e", k)
		time.Sleep(60 * time.Millisecond)
	}
}

func (ts *tmuxSession) typeText(s string) {
	ts.t.Helper()
	for _, r := range s {
		ts.run("send-keys", "-t", "e2e", "-l", string(r))
		time.Sleep(20 * time.Millisecond)
	}
}

func (ts *tmuxSession) capture() string {
	ts.t.Helper()
	return ts.run("capture-pane", "-p", "-t", "e2e")
}

// waitFor polls the screen until want is on it and returns the screen.
func (ts *tmuxSession) waitFor(want string) string {
	ts.t.Helper()
	return ts.pollFor(func(s string) bool { return strings.Contains(s, want) })
}

// pollFor polls the screen every 10ms until ok accepts it (a minute at
// most, unless wait says otherwise).
func (ts *tmuxSession) pollFor(ok func(screen string) bool) string {
	ts.t.Helper()
	deadline := time.Now().Add(cmp.Or(ts.wait, time.Minute))
	for {
		screen := ts.capture()
		if ok(screen) {
			return screen
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("the screen did not come as expected:\n%s", screen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (ts *tmuxSession) waitGone(text string) {
	ts.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		screen := ts.capture()
		if !strings.Contains(screen, text) {
			return
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("%q stays on the screen:\n%s", text, screen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitExit waits for the program to end, which ends the session.
func (ts *tmuxSession) waitExit() {
	ts.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for exec.Command("tmux", "-S", ts.socket, "has-session", "-t", "e2e").Run() == nil {
		if time.Now().After(deadline) {
			ts.t.Fatalf("the console did not quit; the screen:\n%s", ts.capture())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestDemoWithoutTerminal: piped or in CI, the demo still runs the whole
// incident and prints what the console would open on, every verdict of
// the analysis among it; the console itself refuses with a usage error.
func TestDemoWithoutTerminal(t *testing.T) {
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "demo.db"), filepath.Join(dir, "keys")
	var out, errb strings.Builder
	if code := run([]string{"demo", "--db", db, "--key-dir", keys}, &out, &errb); code != 0 {
		t.Fatalf("demo exit %d: %s", code, errb.String())
	}
	for _, v := range []string{"duplicate ", "duplicate_risk", "two_processes", "insufficient_evidence", "intentional_repeat", "one_action_refused", "one_action_first_no_effect", "one_action_attached", "harmless_read_only"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("demo output lacks %s:\n%s", v, out.String())
		}
	}
	if !strings.Contains(errb.String(), "no terminal here") || !strings.Contains(errb.String(), "mcpdup console --db "+db) {
		t.Errorf("demo did not say how to open the console:\n%s", errb.String())
	}
	errb.Reset()
	if code := run([]string{"console", "--db", db, "--key-dir", keys, "--operator", "alice"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "needs a terminal") {
		t.Errorf("console without a terminal: exit %d, %s", code, errb.String())
	}
	if code := run([]string{"demo", "--db", db, "--key-dir", keys}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "exists") {
		t.Errorf("demo over an existing database: exit %d, %s", code, errb.String())
	}
}

// TestDemoOnPostgres: the demo writes into an empty PostgreSQL database,
// never shows the URL's password, and refuses a database that already
// holds a log (a signed log cannot be taken back).
func TestDemoOnPostgres(t *testing.T) {
	db := activitytest.Postgres.DB(t) + "&password=s3cret-pw" // the test server trusts its socket
	keys := filepath.Join(t.TempDir(), "keys")
	var out, errb strings.Builder
	if code := run([]string{"demo", "--db", db, "--key-dir", keys}, &out, &errb); code != 0 || !strings.Contains(out.String(), "duplicate ") {
		t.Fatalf("demo on an empty database: exit %d: %s", code, errb.String())
	}
	if strings.Contains(errb.String()+out.String(), "s3cret-pw") {
		t.Errorf("the demo showed the password:\n%s", errb.String())
	}
	errb.Reset()
	if code := run([]string{"demo", "--db", db, "--key-dir", keys}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "holds an mcpdup log") || strings.Contains(errb.String(), "s3cret-pw") {
		t.Errorf("demo over a database with a log: exit %d, %s", code, errb.String())
	}
}

// TestConsoleLiveWithGateway: the console is open on the database a
// running gateway (another process) writes; calls made through the
// gateway appear in the console without a restart.
func TestConsoleLiveWithGateway(t *testing.T) {
	bin := buildBinary(t)
	target := loopback.NewTarget()
	defer target.Close()
	dir := t.TempDir()
	endpoint, _, _ := startGateway(t, bin, dir, target.URL)
	db, keys := filepath.Join(dir, "gw.db"), filepath.Join(dir, "keys")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := loopback.Connect(ctx, endpoint, gatewayToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(v int) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"version": v}})
		if err != nil || res.IsError {
			t.Fatalf("call through the gateway: %v %+v", err, res)
		}
	}
	call(1)

	tm := startTmux(t, dir, 120, 30, bin, "console", "--db", db, "--key-dir", keys, "--operator", "alice")
	tm.waitFor("· live")
	tm.keys("3")
	tm.waitFor("executions (newest first) (1)")

	call(2)
	call(3)
	tm.waitFor("executions (newest first) (3)")
	tm.waitFor("new activity: updated")
	if screen := tm.capture(); strings.Count(screen, "deploy_release") < 3 || !strings.Contains(screen, "delivered") {
		t.Fatalf("the new executions are not listed:\n%s", screen)
	}
	if got := target.Total(); got != 3 {
		t.Fatalf("target acted %d times, want 3", got)
	}
	tm.keys("q")
	tm.waitExit()
}

// TestConsoleImportsFiles: files given to the console are imported first
// (here into a new database) and shown.
func TestConsoleImportsFiles(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	abs, _ := filepath.Abs("../../importers/testdata/sallyport/activity.jsonl")
	tm := startTmux(t, dir, 120, 30, bin, "console", "--db", filepath.Join(dir, "new.db"), "--key-dir", filepath.Join(dir, "keys"), "--operator", "alice", abs)
	tm.waitFor("5 suspects (✗ 0 duplicate, ? 1 risk) · 2 pending · audit ✓ verified") // Sallyport records no keys and no results: two successes are not two effects
	tm.waitFor("two_processes")
	tm.keys("q")
	tm.waitExit()
}

// TestConsoleBesideALoadedGateway is the live incident: the console open
// in a terminal while a real gateway process serves 100 calls a second.
// It measures, and prints, the console's CPU over the steady load, how
// long a new suspect takes to appear on its screen, and the wall time of
// an `mcpdup resolve` run meanwhile (a writer whose close waits on the
// console's reads). It fails only if the suspect never appears or the
// resolve fails: the figures are for the closing note, not assertions
// (this machine is shared).
func TestConsoleBesideALoadedGateway(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Fatal("this test reads the console's CPU from /proc")
	}
	bin := buildBinary(t)
	target := loopback.NewTarget()
	defer target.Close()
	slow := loopback.NewTarget() // answers after the gateway gave up: an unknown outcome to resolve
	defer slow.Close()
	slow.SetDelay(2 * time.Second)
	dir := t.TempDir()
	if base := os.Getenv("MCPDUP_LIVE_BASE"); base != "" {
		// A big store to start from (a directory with log.db and keys/,
		// e.g. activitytest.MillionMixed's): the console's load then
		// matters, as in a real incident.
		activitytest.CopyFile(t, filepath.Join(base, "log.db"), filepath.Join(dir, "gw.db"))
		activitytest.CopyDir(t, filepath.Join(base, "keys"), filepath.Join(dir, "keys"))
	}
	endpoint, env, _ := startGateway(t, bin, dir, target.URL, fmt.Sprintf(`
[[tool]]
name = "charge_card"
url = "%s/v1/charges"
contract = "blocked_after_unknown"
timeout = "300ms"
`, slow.URL))
	db, keys := filepath.Join(dir, "gw.db"), filepath.Join(dir, "keys")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := loopback.Connect(ctx, endpoint, gatewayToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	deploy := func(v int) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"version": v}})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %+v", res.Content)
		}
		return err
	}
	for v := range 300 {
		if err := deploy(1000 + v); err != nil {
			t.Fatal(err)
		}
	}
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge_card", Arguments: map[string]any{"amount": 5}}) // times out: unknown
	unknown := unknownExecution(t, db, keys)

	tm := startTmux(t, dir, 140, 30, bin, "console", "--db", db, "--key-dir", keys, "--operator", "alice")
	tm.waitFor("· live")
	tm.waitFor("audit ✓")
	pid := strings.TrimSpace(tm.run("display-message", "-p", "-t", "e2e", "#{pane_pid}"))

	// The steady load: 100 calls a second, each a new effect.
	stop := make(chan struct{})
	loadDone := make(chan struct{})
	var served atomic.Int64
	go func() {
		defer close(loadDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for v := 0; ; v++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if deploy(2000+v) == nil {
				served.Add(1)
			}
		}
	}()
	time.Sleep(2 * time.Second) // past the first polls: steady state
	cpu0, wall0, served0 := procCPU(t, pid), time.Now(), served.Load()

	// A retry of an earlier call: it attaches, and makes a suspect.
	time.Sleep(2 * time.Second)
	before := suspectCount(t, tm.capture())
	if err := deploy(1000); err != nil {
		t.Fatal(err)
	}
	retried := time.Now()
	tm.pollFor(func(screen string) bool { return suspectCount(t, screen) == before+1 })
	appeared := time.Since(retried)

	started := time.Now()
	out, err := exec.Command(bin, "resolve", unknown, "--verified", "--note", "charge found in the processor", "--db", db, "--key-dir", keys,
		"--operator", "alice").CombinedOutput()
	resolveWall := time.Since(started)
	if err != nil {
		t.Fatalf("resolve beside the console: %v\n%s", err, out)
	}

	time.Sleep(6 * time.Second)
	cpu1, wall1, served1 := procCPU(t, pid), time.Now(), served.Load()
	close(stop)
	<-loadDone
	calls := served1 - served0 // over the window the CPU is measured in
	// The follower verified every record as it came, with checkpoints
	// signed meanwhile (one a second or so at this rate): no false alarm.
	if screen := tm.capture(); strings.Contains(screen, "TAMPERED") || !strings.Contains(screen, "audit ✓") {
		t.Fatalf("the console's audit indicator beside a live gateway:\n%s", screen)
	}
	window := wall1.Sub(wall0)
	t.Logf("console beside a gateway serving %d calls in %.1f s (%.0f calls/s): console CPU %.1f%% of one core over %.1f s; "+
		"a new suspect on screen %d ms after its call returned; mcpdup resolve took %d ms",
		calls, window.Seconds(), float64(calls)/window.Seconds(), 100*(cpu1-cpu0)/window.Seconds(), window.Seconds(),
		appeared.Milliseconds(), resolveWall.Milliseconds())
	tm.keys("q")
	tm.waitExit()
	_ = env
}

// suspectCount reads the suspects tab's count off the screen.
func suspectCount(t *testing.T, screen string) int {
	t.Helper()
	m := regexp.MustCompile(`\[1\] Suspects (\d+)`).FindStringSubmatch(screen)
	if m == nil {
		t.Fatalf("no suspects count on the screen:\n%s", screen)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// procCPU is a process's user and system CPU so far, in seconds.
func procCPU(t *testing.T, pid string) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command (which may hold spaces) in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// unknownExecution is the id of the one execution whose outcome is
// unknown (pending_verification, for its contract).
func unknownExecution(t *testing.T, db, keys string) string {
	t.Helper()
	s, err := activity.Open(context.Background(), db, activity.Options{ReadOnly: true, KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 50 {
		execs, err := s.Executions(context.Background(), activity.ExecutionFilter{States: []activity.State{activity.StateUnknown, activity.StatePendingVerification}})
		if err != nil {
			t.Fatal(err)
		}
		if len(execs) == 1 {
			return string(execs[0].ID)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the slow charge left no unknown execution")
	return ""
}

// TestReplicasAndTheConsoleOnPostgres is the README's three commands: two
// `mcpdup gateway` processes on one PostgreSQL database and the console on
// it. A call through each replica, and the retry of the first through the
// second, show in the live console as two executions; the target acted
// twice; after both stop, `mcpdup audit verify` proves the one log both
// wrote.
func TestReplicasAndTheConsoleOnPostgres(t *testing.T) {
	bin := buildBinary(t)
	target := loopback.NewTarget()
	defer target.Close()
	dir := t.TempDir()
	db := activitytest.Postgres.DB(t)
	first, env, cmd1 := startGatewayOn(t, bin, dir, db, target.URL, `lease_ttl = "2s"`)
	second, _, cmd2 := startGatewayOn(t, bin, dir, db, target.URL, `lease_ttl = "2s"`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(endpoint string, v int) map[string]any {
		t.Helper()
		cs, err := loopback.Connect(ctx, endpoint, gatewayToken, loopback.ProtocolStateless)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"version": v}})
		if err != nil || res.IsError {
			t.Fatalf("call through %s: %v %+v", endpoint, err, res)
		}
		m, _ := res.Meta[gatewaylite.MetaExecution].(map[string]any)
		return m
	}
	a := call(first, 1)
	if retry := call(second, 1); retry["id"] != a["id"] || retry["replayed"] != true {
		t.Fatalf("the retry on the other replica: %v, first %v", retry, a)
	}

	tm := startTmux(t, dir, 120, 30, bin, "console", "--db", db, "--key-dir", filepath.Join(dir, "keys"), "--operator", "alice")
	tm.waitFor("· live")
	tm.keys("3")
	tm.waitFor("executions (newest first) (1)")
	call(second, 2)
	tm.waitFor("executions (newest first) (2)")
	tm.keys("q")
	tm.waitExit()
	if got := target.Total(); got != 2 {
		t.Fatalf("target acted %d times, want 2", got)
	}
	for _, c := range []*exec.Cmd{cmd1, cmd2} {
		c.Process.Signal(syscall.SIGTERM)
		c.Wait()
	}
	verify := exec.Command(bin, "audit", "verify")
	verify.Env = env
	out, err := verify.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "result: OK") || !strings.Contains(string(out), "tables") {
		t.Fatalf("audit verify of the shared database: %v\n%s", err, out)
	}
}
