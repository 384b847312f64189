package gatewaylite_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
	"github.com/mcpdup/mcpdup/gatewaylite/gatewaytest"
)

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// helper builds the mcpdup binary the host runs as its marker helper.
func helper(t *testing.T) string {
	t.Helper()
	helperOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpdup-helper-")
		if err != nil {
			helperErr = err
			return
		}
		helperPath = filepath.Join(dir, "mcpdup")
		if out, err := exec.Command("go", "build", "-o", helperPath, "../cmd/mcpdup").CombinedOutput(); err != nil {
			helperErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	return helperPath
}

// sshHarness is the gateway harness with SSH tools on a real sshd, reached
// through a TCP proxy that can cut a connection.
type sshHarness struct {
	*harness
	sshd   *gatewaytest.SSHD
	proxy  *gatewaytest.TCPProxy
	effect string
}

func newSSHHarness(t *testing.T, hostKey string) *sshHarness {
	sshd := gatewaytest.StartSSHD(t)
	proxy := gatewaytest.NewTCPProxy(sshd.Addr)
	t.Cleanup(proxy.Close)
	if hostKey == "" {
		hostKey = sshd.HostKeyLine
	}
	extra, effect := sshTools(t, sshd, proxy.Port(), hostKey)
	return &sshHarness{harness: newHarness(t, extra), sshd: sshd, proxy: proxy, effect: effect}
}

// sshTools is the config of two SSH tools on sshd reached at port: one run
// under the marker helper, one without. Both append a line to the effect
// file, which counts how often the command ran.
func sshTools(t *testing.T, sshd *gatewaytest.SSHD, port int, hostKey string) (config, effect string) {
	dir := t.TempDir()
	effect = filepath.Join(dir, "effect")
	config = fmt.Sprintf(`
[credential.host-key]
key_file = %q

[[tool]]
name = "append_line"
channel = "ssh"
host = "127.0.0.1"
port = %d
user = %q
host_key = %q
credential_ref = "host-key"
command = ["sh", "-c", "sleep \"$2\"; while [ -e \"$3.hold\" ]; do sleep 0.05; done; printf '%%s\\n' \"$1\" >> \"$3\"; echo appended in \"$(pwd)\"", "sh", "{line}", "{pause}", %q]
workdir = %q
marker_dir = %q
helper = %q
timeout = "5s"

[[tool]]
name = "append_unmarked"
channel = "ssh"
host = "127.0.0.1"
port = %d
user = %q
host_key = %q
credential_ref = "host-key"
command = ["sh", "-c", "sleep \"$4\"; printf '%%s\\n' \"$1\" >> \"$2\"; pwd; exit \"$3\"", "sh", "{line}", %q, "{code}", "{pause}"]
defaults = { pause = "0" }
workdir = %q
timeout = "5s"
`, sshd.UserKeyFile, port, sshd.User, hostKey, effect, dir, filepath.Join(dir, "markers"), helper(t),
		port, sshd.User, hostKey, effect, unmarkedWorkdir(t, dir))
	return config, effect
}

// unmarkedWorkdir is the unmarked tool's working directory: a name with a
// space and a quote, which the remote shell must receive as one word.
func unmarkedWorkdir(t *testing.T, dir string) string {
	w := filepath.Join(dir, "w o'rk")
	if err := os.Mkdir(w, 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

func (h *sshHarness) lines() []string {
	b, _ := os.ReadFile(h.effect)
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestSSHRunsCommandOnce: a call runs its command on the real host under
// a marker; an argument full of shell syntax arrives as data; the exit
// code and output are recorded; the canonical target names the account
// and the pinned host key.
func TestSSHRunsCommandOnce(t *testing.T) {
	h := newSSHHarness(t, "")
	cs := h.connect("2025-06-18", false)
	nasty := "a; touch " + h.effect + ".pwned $(id) `id` \"q\" 'r'\nsecond"
	res := mustCall(t, cs, "append_line", map[string]any{"line": nasty, "pause": "0"}, nil)
	if res.IsError || !strings.Contains(resultText(res), "appended in "+filepath.Dir(h.effect)) {
		t.Fatalf("result: %+v %s", res, resultText(res))
	}
	if got := h.lines(); len(got) != 2 || got[0]+"\n"+got[1] != nasty {
		t.Fatalf("the host got %q, want %q", got, nasty)
	}
	if _, err := os.Stat(h.effect + ".pwned"); err == nil {
		t.Fatal("an argument ran as code")
	}
	m := execMeta(t, res)
	h.gw.Settle()
	e, err := h.store.Execution(ctx, activity.ExecutionID(m["id"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	if e.Channel != activity.ChannelSSH || e.ExitCode != activity.Some(0) || e.Contract != activity.ContractRecoverableByLookup ||
		!strings.HasPrefix(e.Target, h.sshd.User+"@127.0.0.1:") || !strings.Contains(e.Target, "SHA256:") || !strings.HasPrefix(e.Method, "exec sh -c ") {
		t.Fatalf("execution: %+v", e)
	}
}

// TestSSHExitCodeAndUnmarked: a command without a marker still records
// its exit code; a nonzero exit is the target saying it failed.
func TestSSHExitCodeAndUnmarked(t *testing.T) {
	h := newSSHHarness(t, "")
	cs := h.connect("2025-06-18", false)
	res := mustCall(t, cs, "append_unmarked", map[string]any{"line": "x", "code": "3"}, nil)
	h.gw.Settle()
	e, _ := h.store.Execution(ctx, activity.ExecutionID(execMeta(t, res)["id"].(string)))
	if !res.IsError || e.ExitCode != activity.Some(3) || e.Outcome != activity.OutcomeFailure {
		t.Fatalf("exit 3: %+v", e)
	}
	if want := filepath.Join(filepath.Dir(h.effect), "w o'rk"); !strings.Contains(resultText(res), want) || !strings.HasSuffix(e.Method, " in "+want) {
		t.Fatalf("ran in %q (method %q), want %q", resultText(res), e.Method, want)
	}
}

// TestSSHChangedHostKeyRefused: a host whose key is not the pinned one is
// refused before anything is sent.
func TestSSHChangedHostKeyRefused(t *testing.T) {
	other := gatewaytest.StartSSHD(t) // another host's key
	h := newSSHHarness(t, other.HostKeyLine)
	cs := h.connect("2025-06-18", false)
	res := mustCall(t, cs, "append_line", map[string]any{"line": "x", "pause": "0"}, nil)
	h.gw.Settle()
	e, _ := h.store.Execution(ctx, activity.ExecutionID(execMeta(t, res)["id"].(string)))
	if e.State != activity.StateFailedBefore && e.State != activity.StateDelivered || !strings.Contains(e.Error, "not the pinned") || h.lines() != nil {
		t.Fatalf("changed key: state %s error %q lines %q", e.State, e.Error, h.lines())
	}
}

// TestSSHDropAfterStart cuts the connection while the command runs. The
// command keeps running on the host and finishes; the gateway says
// unknown; the agent's retry attaches, the gateway reads the host's
// marker and answers with the real exit code; the command ran once.
func TestSSHDropAfterStart(t *testing.T) {
	h := newSSHHarness(t, "")
	cs := h.connect("2025-06-18", false)
	// The command holds while effect.hold exists, so it is still running
	// when the retries come however slow this machine is; the test lets it
	// finish once a retry has been told it runs.
	hold := h.effect + ".hold"
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"line": "deploy r-881", "pause": "0"}
	h.proxy.CutNext(800 * time.Millisecond)
	first := mustCall(t, cs, "append_line", args, nil)
	m := execMeta(t, first)
	id := activity.ExecutionID(m["id"].(string))
	h.gw.Settle()
	if e, _ := h.store.Execution(ctx, id); e.State != activity.StateUnknown {
		t.Fatalf("after the cut: %s (%s)", e.State, e.Error)
	}
	var res = first
	deadline := time.Now().Add(15 * time.Second)
	sawRunning := false
	for {
		res = mustCall(t, cs, "append_line", args, nil)
		if execMeta(t, res)["id"] != string(id) {
			t.Fatalf("the retry made a new execution: %+v", execMeta(t, res))
		}
		sawRunning = sawRunning || strings.Contains(resultText(res), "in progress: still running on the host (pid ")
		if sawRunning {
			os.Remove(hold)
		}
		h.gw.Settle()
		if e, _ := h.store.Execution(ctx, id); e.Outcome == activity.OutcomeSuccess {
			break
		}
		if time.Now().After(deadline) {
			h.gw.Settle()
			e, _ := h.store.Execution(ctx, id)
			t.Fatalf("never recovered (a retry told it runs: %v): %+v", sawRunning, e)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !sawRunning {
		t.Error("no retry while the command ran was told it is in progress on the host")
	}
	h.gw.Settle()
	e, _ := h.store.Execution(ctx, id)
	if e.ExitCode != activity.Some(0) || !strings.Contains(resultText(res), "appended") {
		t.Fatalf("recovered: %+v %s", e, resultText(res))
	}
	if got := h.lines(); len(got) != 1 || got[0] != "deploy r-881" {
		t.Fatalf("the command ran %d times: %q", len(got), got)
	}
	trs, _ := h.store.TransitionsOf(ctx, []activity.ExecutionID{id})
	var why []string
	for _, tr := range trs[id] {
		why = append(why, string(tr.To)+": "+tr.Reason)
	}
	if !strings.Contains(strings.Join(why, "\n"), "recovered by lookup: the host's marker records exit code 0") {
		t.Fatalf("transitions:\n%s", strings.Join(why, "\n"))
	}
	// The analysis sees one action, and question 3 cites the exit code.
	sus, err := analyze.All(ctx, h.store, analyze.Options{})
	if err != nil || len(sus) != 1 || sus[0].Verdict != analyze.VerdictAttached || !strings.Contains(sus[0].Questions[2].Explanation, "exit code 0") {
		t.Fatalf("analysis: %v %+v", err, sus)
	}
}

// TestSSHGatewayKilledMidCommand SIGKILLs the gateway while a marked
// command runs on the host. The command outlives the gateway (the helper
// ignores the hang-up) and finishes; the restarted gateway turns the
// execution unknown, reads the host's marker in the background and
// records the real exit code; the agent's retry gets that result; the
// command ran once.
func TestSSHGatewayKilledMidCommand(t *testing.T) {
	t.Setenv("TEST_AGENT_TOKEN", agentToken)
	t.Setenv("TEST_DEPLOY_TOKEN", credValue)
	sshd := gatewaytest.StartSSHD(t)
	target := loopback.NewTarget()
	defer target.Close()
	extra, effect := sshTools(t, sshd, sshd.Port, sshd.HostKeyLine)
	config := testConfig(target.URL, target.URL, extra)
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "gw.db"), filepath.Join(dir, "keys")
	addr := freeAddr(t)
	endpoint := "http://" + addr + "/mcp"

	gw := startGatewayProcess(t, config, db, keys, addr)
	cs, err := loopback.Connect(ctx, endpoint, agentToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"line": "migrate 42", "pause": "1.5"}
	errc := make(chan error, 1)
	go func() {
		_, err := call(t, cs, "append_line", args, nil)
		errc <- err
	}()
	markers := filepath.Join(filepath.Dir(effect), "markers")
	waitFor(t, func() bool { m, _ := os.ReadDir(markers); return len(m) > 0 }, "the command to start on the host")
	gw.kill()
	if err := <-errc; err == nil {
		t.Fatal("the call survived the gateway's death")
	}

	startGatewayProcess(t, config, db, keys, addr)
	store, err := activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var e activity.Execution
	waitFor(t, func() bool {
		es, _ := store.Executions(ctx, activity.ExecutionFilter{Tool: "append_line"})
		if len(es) == 1 {
			e = es[0]
		}
		return e.Outcome == activity.OutcomeSuccess
	}, "the restarted gateway to read the marker")
	if e.ExitCode != activity.Some(0) {
		t.Fatalf("recovered: %+v", e)
	}
	cs2, err := loopback.Connect(ctx, endpoint, agentToken, loopback.ProtocolLegacy)
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	res := mustCall(t, cs2, "append_line", args, nil)
	if m := execMeta(t, res); m["replayed"] != true || m["id"] != string(e.ID) || !strings.Contains(resultText(res), "appended") {
		t.Fatalf("retry after restart: %v %s", m, resultText(res))
	}
	b, _ := os.ReadFile(effect)
	if string(b) != "migrate 42\n" {
		t.Fatalf("the host's effect file: %q", b)
	}
	trs, _ := store.TransitionsOf(ctx, []activity.ExecutionID{e.ID})
	var why []string
	for _, tr := range trs[e.ID] {
		why = append(why, string(tr.To)+": "+tr.Reason)
	}
	if got := strings.Join(why, "\n"); !strings.Contains(got, "unknown") || !strings.Contains(got, "marker records exit code 0") {
		t.Fatalf("transitions:\n%s", got)
	}
}

// TestSSHDropBeforeCommandStarted cuts the connection after the session
// started but before the host's helper ran (a slow host: a wrapper sleeps
// in front of the helper). The gateway reads no marker, sends the command
// again under the same execution id, and the agent gets its result. If
// the first send then starts late, the helper refuses it (exit 125): the
// command runs once either way.
func TestSSHDropBeforeCommandStarted(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(map[bool]string{false: "first send dies", true: "first send starts late"}[late], func(t *testing.T) {
			sshd := gatewaytest.StartSSHD(t)
			proxy := gatewaytest.NewTCPProxy(sshd.Addr)
			t.Cleanup(proxy.Close)
			extra, effect := sshTools(t, sshd, proxy.Port(), sshd.HostKeyLine)
			// The first "marker run" sleeps 2 s; then it exits without
			// running the helper, or runs it and records its exit code.
			dir := filepath.Dir(effect)
			then := "exit 1"
			if late {
				then = `"$real" "$@"; echo $? > "$flag.late"; exit 0`
			}
			wrapper := filepath.Join(dir, "slow-helper")
			script := fmt.Sprintf("#!/bin/sh\nreal=%s\nflag=%s\nif [ \"$2\" = run ] && [ ! -e \"$flag\" ]; then : > \"$flag\"; sleep 2; %s; fi\nexec \"$real\" \"$@\"\n",
				shellQuoteTest(helper(t)), shellQuoteTest(filepath.Join(dir, "first")), then)
			if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			extra = strings.Replace(extra, fmt.Sprintf("helper = %q", helper(t)), fmt.Sprintf("helper = %q", wrapper), 1)
			h := &sshHarness{harness: newHarness(t, extra), sshd: sshd, proxy: proxy, effect: effect}
			cs := h.connect("2025-06-18", false)

			proxy.CutNext(700 * time.Millisecond)
			res := mustCall(t, cs, "append_line", map[string]any{"line": "restart web-7", "pause": "0"}, nil)
			id := activity.ExecutionID(execMeta(t, res)["id"].(string))
			h.gw.Settle()
			e, _ := h.store.Execution(ctx, id)
			if e.Outcome != activity.OutcomeSuccess || e.ExitCode != activity.Some(0) || !strings.Contains(resultText(res), "appended") {
				t.Fatalf("after the resend: %+v %s", e, resultText(res))
			}
			trs, _ := h.store.TransitionsOf(ctx, []activity.ExecutionID{id})
			var path []string
			for _, tr := range trs[id] {
				path = append(path, string(tr.To))
			}
			if got := strings.Join(path, ">"); !strings.Contains(got, "dispatched>unknown>dispatched>succeeded") {
				t.Fatalf("lifecycle: %s", got)
			}
			if late {
				waitFor(t, func() bool { _, err := os.Stat(filepath.Join(dir, "first.late")); return err == nil }, "the late first send")
				if b, _ := os.ReadFile(filepath.Join(dir, "first.late")); strings.TrimSpace(string(b)) != "125" {
					t.Fatalf("the late first send exited %q, want the helper's refusal 125", b)
				}
			} else {
				time.Sleep(2200 * time.Millisecond) // the first send's wrapper has given up
			}
			if got := h.lines(); len(got) != 1 || got[0] != "restart web-7" {
				t.Fatalf("the command ran %d times: %q", len(got), got)
			}
		})
	}
}

func shellQuoteTest(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestSSHPinnedByFingerprint: the host key pinned as a SHA256 fingerprint
// works like the key line; another fingerprint refuses the call.
func TestSSHPinnedByFingerprint(t *testing.T) {
	sshd := gatewaytest.StartSSHD(t)
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(sshd.HostKeyLine))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pin  string
		runs bool
	}{{ssh.FingerprintSHA256(key), true}, {"SHA256:" + strings.Repeat("A", 43), false}} {
		proxy := gatewaytest.NewTCPProxy(sshd.Addr)
		t.Cleanup(proxy.Close)
		extra, effect := sshTools(t, sshd, proxy.Port(), c.pin)
		h := &sshHarness{harness: newHarness(t, extra), sshd: sshd, proxy: proxy, effect: effect}
		res := mustCall(t, h.connect("2025-06-18", false), "append_line", map[string]any{"line": "x", "pause": "0"}, nil)
		h.gw.Settle()
		e, _ := h.store.Execution(ctx, activity.ExecutionID(execMeta(t, res)["id"].(string)))
		if ran := len(h.lines()) == 1; ran != c.runs || c.runs != (e.Outcome == activity.OutcomeSuccess) || !strings.Contains(e.Target, c.pin) {
			t.Fatalf("pin %s: ran %v, execution %+v", c.pin, ran, e)
		}
	}
}

// TestSSHTimeoutThenMarker: a marked command that outlives the tool's
// timeout is not killed and not sent again: the call answers in progress
// (outcome unknown), and once the command ends the retry gets its result.
func TestSSHTimeoutThenMarker(t *testing.T) {
	sshd := gatewaytest.StartSSHD(t)
	proxy := gatewaytest.NewTCPProxy(sshd.Addr)
	t.Cleanup(proxy.Close)
	extra, effect := sshTools(t, sshd, proxy.Port(), sshd.HostKeyLine)
	extra = strings.Replace(extra, `timeout = "5s"`, `timeout = "1s"`, 1)
	h := &sshHarness{harness: newHarness(t, extra), sshd: sshd, proxy: proxy, effect: effect}
	cs := h.connect("2025-06-18", false)
	args := map[string]any{"line": "long job", "pause": "2"}
	first := mustCall(t, cs, "append_line", args, nil)
	id := activity.ExecutionID(execMeta(t, first)["id"].(string))
	h.gw.Settle()
	if e, _ := h.store.Execution(ctx, id); e.State != activity.StateUnknown || !strings.Contains(resultText(first), "in progress") {
		t.Fatalf("after the timeout: %s %q", e.State, resultText(first))
	}
	var res = first
	waitFor(t, func() bool {
		res = mustCall(t, cs, "append_line", args, nil)
		return strings.Contains(resultText(res), "appended")
	}, "the retry to get the command's result")
	if m := execMeta(t, res); m["id"] != string(id) || m["replayed"] != true {
		t.Fatalf("retry: %v", m)
	}
	if got := h.lines(); len(got) != 1 {
		t.Fatalf("the command ran %d times", len(got))
	}
}

// TestSSHUnmarkedDropNeedsVerification: without a marker nothing on the
// host can say what happened after a drop, so the tool is
// blocked_after_unknown: the execution waits for an operator, retries are
// told so and nothing is sent again; the operator's verification answers
// the next retry.
func TestSSHUnmarkedDropNeedsVerification(t *testing.T) {
	h := newSSHHarness(t, "")
	cs := h.connect("2025-06-18", false)
	args := map[string]any{"line": "rotate keys", "code": "0", "pause": "2"}
	h.proxy.CutNext(800 * time.Millisecond)
	first := mustCall(t, cs, "append_unmarked", args, nil)
	id := activity.ExecutionID(execMeta(t, first)["id"].(string))
	h.gw.Settle()
	if e, _ := h.store.Execution(ctx, id); e.State != activity.StatePendingVerification || e.Contract != activity.ContractBlockedAfterUnknown {
		t.Fatalf("after the cut: %s %s", e.State, e.Contract)
	}
	retry := mustCall(t, cs, "append_unmarked", args, nil)
	if m := execMeta(t, retry); m["id"] != string(id) || m["state"] != "pending_verification" || !strings.Contains(resultText(retry), "will not be sent again") {
		t.Fatalf("retry: %v %s", m, resultText(retry))
	}
	waitFor(t, func() bool { return len(h.lines()) == 1 }, "the command to finish on the host")
	if _, _, err := h.store.Resolve(ctx, activity.Resolution{ExecutionID: id, Outcome: activity.ResolutionVerified, Operator: "alice", Note: "line present on the host"}); err != nil {
		t.Fatal(err)
	}
	after := mustCall(t, cs, "append_unmarked", args, nil)
	if m := execMeta(t, after); m["id"] != string(id) || !strings.Contains(resultText(after), "verified by an operator") {
		t.Fatalf("after verification: %v %s", m, resultText(after))
	}
	time.Sleep(300 * time.Millisecond)
	if got := h.lines(); len(got) != 1 {
		t.Fatalf("the command ran %d times", len(got))
	}
}

// TestSSHKeyNeverRecorded: the private key an SSH tool logs in with never
// reaches the database, its WAL, an export or the logs, through a normal
// call and a dropped one.
func TestSSHKeyNeverRecorded(t *testing.T) {
	h := newSSHHarness(t, "")
	cs := h.connect("2025-06-18", false)
	mustCall(t, cs, "append_line", map[string]any{"line": "a", "pause": "0"}, nil)
	h.proxy.CutNext(800 * time.Millisecond)
	mustCall(t, cs, "append_line", map[string]any{"line": "b", "pause": "2"}, nil)
	key, err := os.ReadFile(h.sshd.UserKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	// Every line of the key's base64 body is a canary.
	var canaries []string
	for _, line := range strings.Split(string(key), "\n") {
		if len(line) >= 40 && !strings.HasPrefix(line, "-----") {
			canaries = append(canaries, line[:40])
		}
	}
	if len(canaries) < 3 {
		t.Fatalf("key file has %d body lines", len(canaries))
	}
	h.gw.Close()
	if _, err := h.store.Seal(ctx, activity.SealManual); err != nil {
		t.Fatal(err)
	}
	var export bytes.Buffer
	if _, err := audit.Export(ctx, h.store, &export); err != nil {
		t.Fatal(err)
	}
	sources := map[string][]byte{"export": export.Bytes(), "logs": []byte(h.logs.String())}
	for _, f := range []string{"gw.db", "gw.db-wal"} {
		b, err := os.ReadFile(filepath.Join(h.dir, f))
		if err != nil {
			t.Fatal(err)
		}
		sources[f] = b
	}
	if !bytes.Contains(export.Bytes(), []byte(`"credential_ref":"host-key"`)) {
		t.Fatal("the export does not name the credential: is the scan reading the right data?")
	}
	for name, data := range sources {
		for _, c := range canaries {
			if bytes.Contains(data, []byte(c)) {
				t.Errorf("%s contains part of the private key (%q)", name, c)
			}
		}
	}
}

// TestSSHEncryptedKeyAndAgent: the login key may be an encrypted key file
// (passphrase from passphrase_env) or held by an SSH agent (ssh_agent):
// both run the command; a wrong passphrase stops the gateway at start with
// an error naming the credential; the passphrase is never recorded.
func TestSSHEncryptedKeyAndAgent(t *testing.T) {
	sshd := gatewaytest.StartSSHD(t)
	const pass = "canary-ssh-passphrase-5b1e"
	encrypted := sshd.NewUserKey(t, "encrypted_key", pass)
	agentKey := sshd.NewUserKey(t, "agent_key", "")
	withCredential := func(extra, credential string) string {
		out := strings.Replace(extra, fmt.Sprintf("[credential.host-key]\nkey_file = %q\n", sshd.UserKeyFile), "[credential.host-key]\n"+credential, 1)
		if out == extra {
			t.Fatal("the credential was not replaced")
		}
		return out
	}
	t.Run("encrypted key file", func(t *testing.T) {
		t.Setenv("TEST_SSH_PASSPHRASE", pass)
		extra, effect := sshTools(t, sshd, sshd.Port, sshd.HostKeyLine)
		extra = withCredential(extra, fmt.Sprintf("key_file = %q\npassphrase_env = \"TEST_SSH_PASSPHRASE\"\n", encrypted))
		h := &sshHarness{harness: newHarness(t, extra), sshd: sshd, effect: effect}
		res := mustCall(t, h.connect("2025-06-18", false), "append_line", map[string]any{"line": "x", "pause": "0"}, nil)
		if !strings.Contains(resultText(res), "appended") || len(h.lines()) != 1 {
			t.Fatalf("with the encrypted key: %s", resultText(res))
		}
		h.gw.Close()
		for _, f := range []string{"gw.db", "gw.db-wal"} {
			if b, _ := os.ReadFile(filepath.Join(h.dir, f)); bytes.Contains(b, []byte(pass)) {
				t.Errorf("%s contains the passphrase", f)
			}
		}
		if strings.Contains(h.logs.String(), pass) {
			t.Error("the logs contain the passphrase")
		}

		t.Setenv("TEST_SSH_PASSPHRASE", "wrong")
		cfg, err := gatewaylite.ParseConfig([]byte(testConfig("http://127.0.0.1:1", "http://127.0.0.1:1", extra)))
		if err != nil {
			t.Fatal(err)
		}
		store, err := activity.Open(ctx, filepath.Join(t.TempDir(), "x.db"), activity.Options{KeyDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		_, err = gatewaylite.New(ctx, cfg, store, gatewaylite.Options{KeyDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "credential host-key") || !strings.Contains(err.Error(), "TEST_SSH_PASSPHRASE") {
			t.Fatalf("a wrong passphrase: %v", err)
		}
	})
	t.Run("ssh agent", func(t *testing.T) {
		t.Setenv("SSH_AUTH_SOCK", gatewaytest.StartAgent(t, agentKey))
		extra, effect := sshTools(t, sshd, sshd.Port, sshd.HostKeyLine)
		extra = withCredential(extra, "ssh_agent = true\n")
		h := &sshHarness{harness: newHarness(t, extra), sshd: sshd, effect: effect}
		res := mustCall(t, h.connect("2025-06-18", false), "append_line", map[string]any{"line": "y", "pause": "0"}, nil)
		if !strings.Contains(resultText(res), "appended") || len(h.lines()) != 1 {
			t.Fatalf("through the agent: %s", resultText(res))
		}
	})
}

// TestSSHHelperDiesWhileCommandRuns: the marker helper killed while its
// command goes on exits 137 as a killed command would; that was recorded
// as the command's failure, delivered, and the retry ran the command a
// second time. Only the marker's own record of the end makes a failure.
func TestSSHHelperDiesWhileCommandRuns(t *testing.T) {
	sshd := gatewaytest.StartSSHD(t)
	dir := t.TempDir()
	effect := filepath.Join(dir, "effect")
	h := newHarness(t, fmt.Sprintf(`
[credential.host-key]
key_file = %q

[[tool]]
name = "outlive_helper"
channel = "ssh"
host = "127.0.0.1"
port = %d
user = %q
host_key = %q
credential_ref = "host-key"
command = ["sh", "-c", "kill -KILL $PPID; sleep 0.3; printf '%%s\\n' \"$1\" >> \"$2\"", "sh", "{line}", %q]
workdir = %q
marker_dir = %q
helper = %q
timeout = "5s"
`, sshd.UserKeyFile, sshd.Port, sshd.User, sshd.HostKeyLine, effect, dir, filepath.Join(dir, "markers"), helper(t)))
	cs := h.connect("2025-06-18", false)
	first := mustCall(t, cs, "outlive_helper", map[string]any{"line": "once"}, nil)
	if st := execMeta(t, first)["state"]; st == string(activity.StateFailed) || st == string(activity.StateDelivered) {
		t.Fatalf("the helper's death read as the command's failure: %v %s", st, resultText(first))
	}
	time.Sleep(time.Second) // the command ends meanwhile, unrecorded
	mustCall(t, cs, "outlive_helper", map[string]any{"line": "once"}, nil)
	time.Sleep(time.Second)
	if b, _ := os.ReadFile(effect); strings.Count(string(b), "once\n") != 1 {
		t.Fatalf("the command ran %d times: %q", strings.Count(string(b), "once\n"), b)
	}
}
