package gatewaylite_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
	"github.com/mcpdup/mcpdup/internal/pgtest"
)

// gatewayProcess is a gateway running in its own process (this test
// binary re-executed), so a test can SIGKILL it mid-flight.
type gatewayProcess struct {
	cmd  *exec.Cmd
	addr string
}

func startGatewayProcess(t *testing.T, config, db, keys, addr string) *gatewayProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0]) // TestMain serves the gateway instead of testing
	cmd.Env = append(os.Environ(), "MCPDUP_TEST_GW_CONFIG="+config, "MCPDUP_TEST_GW_DB="+db,
		"MCPDUP_TEST_GW_KEYS="+keys, "MCPDUP_TEST_GW_ADDR="+addr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &gatewayProcess{cmd: cmd, addr: addr}
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway process did not start listening")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *gatewayProcess) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// TestMain turns this test binary into the gateway process the crash
// tests kill when startGatewayProcess runs it with the configuration in
// its environment; otherwise it runs the tests.
func TestMain(m *testing.M) {
	if cfg := os.Getenv("MCPDUP_TEST_GW_CONFIG"); cfg != "" {
		serveGatewayProcess(cfg)
		return
	}
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}

func serveGatewayProcess(cfgText string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "helper gateway:", err)
		os.Exit(3)
	}
	cfg, err := gatewaylite.ParseConfig([]byte(cfgText))
	if err != nil {
		fail(err)
	}
	cfg.Listen = os.Getenv("MCPDUP_TEST_GW_ADDR")
	store, err := activity.Open(context.Background(), os.Getenv("MCPDUP_TEST_GW_DB"), activity.Options{KeyDir: os.Getenv("MCPDUP_TEST_GW_KEYS")})
	if err != nil {
		fail(err)
	}
	gw, err := gatewaylite.New(context.Background(), cfg, store, gatewaylite.Options{KeyDir: os.Getenv("MCPDUP_TEST_GW_KEYS")})
	if err != nil {
		fail(err)
	}
	// Served as `mcpdup gateway` serves it: the bounded listener and the
	// configured timeouts.
	ln, err := gw.Listen()
	if err != nil {
		fail(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", gw.Handler())
	fail(gw.Server(mux).Serve(ln))
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestGatewayKilledMidFlight kills the gateway with SIGKILL while the
// target is acting, restarts it on the same database, and retries: the
// execution comes back unknown, the contract decides, and the target has
// acted once.
func TestGatewayKilledMidFlight(t *testing.T) {
	t.Setenv("TEST_AGENT_TOKEN", agentToken)
	t.Setenv("TEST_DEPLOY_TOKEN", credValue)
	target := loopback.NewTarget()
	defer target.Close()
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "gw.db"), filepath.Join(dir, "keys")
	config := testConfig(target.URL, target.URL, "")

	cases := []struct {
		tool      string
		args      map[string]any
		restarted activity.State // state after recovery
		retried   string         // state the retry reports
	}{
		{"deploy_release", map[string]any{"service": "billing", "version": "11"}, activity.StateUnknown, "succeeded"},
		{"charge_card", map[string]any{"amount_cents": 500, "card_token": secretValue}, activity.StatePendingVerification, "pending_verification"},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			addr := freeAddr(t)
			endpoint := "http://" + addr + "/mcp"
			gw := startGatewayProcess(t, config, db, keys, addr)
			hold := make(chan struct{})
			target.SetHold(hold)
			before := target.Total()

			cs, err := loopback.Connect(ctx, endpoint, agentToken, loopback.ProtocolStateless)
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				_, err := call(t, cs, c.tool, c.args, nil)
				errc <- err
			}()
			waitFor(t, func() bool { return target.Total() == before+1 }, "the target to receive the request")
			gw.kill()
			if err := <-errc; err == nil {
				t.Fatal("the call survived the gateway's death")
			}
			target.SetHold(nil)
			close(hold) // the target finishes acting; nobody hears the answer

			startGatewayProcess(t, config, db, keys, addr)
			store, err := activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keys})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			es, err := store.Executions(ctx, activity.ExecutionFilter{Tool: c.tool})
			if err != nil || len(es) != 1 || es[0].State != c.restarted {
				t.Fatalf("after restart: %+v %v", es, err)
			}
			cs2, err := loopback.Connect(ctx, endpoint, agentToken, loopback.ProtocolLegacy)
			if err != nil {
				t.Fatal(err)
			}
			defer cs2.Close()
			res := mustCall(t, cs2, c.tool, c.args, nil)
			if m := execMeta(t, res); m["replayed"] != true || m["state"] != c.retried || m["id"] != string(es[0].ID) {
				t.Fatalf("retry after restart: %v %s", m, resultText(res))
			}
			if got := target.Total() - before; got != 1 {
				t.Fatalf("the target acted %d times", got)
			}
			// A resend names the retry that caused it (it named no call).
			trs, err := store.TransitionsOf(ctx, []activity.ExecutionID{es[0].ID})
			if err != nil {
				t.Fatal(err)
			}
			calls, err := store.CallRowsOf(ctx, []activity.ExecutionID{es[0].ID})
			if err != nil {
				t.Fatal(err)
			}
			ids := map[activity.CallID]bool{}
			for _, c := range calls {
				ids[c.ID] = true
			}
			for _, tr := range trs[es[0].ID] {
				if strings.HasPrefix(tr.Reason, "resend") && (tr.CallID == "" || !ids[tr.CallID]) {
					t.Fatalf("resend %d names call %q, not one of the execution's calls %v", tr.Seq, tr.CallID, ids)
				}
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGatewayKilledAfterAnswering: the outcome is recorded behind the
// answer, so a gateway killed the moment an agent has its answer may not
// have made the outcome durable. Whichever it was, after a restart the
// execution is either as the agent was told or unknown (recovered per
// contract), a retry never makes the target act again, and the target
// acted once per call. It kills right after each answer, many times, and
// reports how often the outcome was not yet on disk.
func TestGatewayKilledAfterAnswering(t *testing.T) {
	t.Setenv("TEST_AGENT_TOKEN", agentToken)
	t.Setenv("TEST_DEPLOY_TOKEN", credValue)
	target := loopback.NewTarget()
	defer target.Close()
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "gw.db"), filepath.Join(dir, "keys")
	config := testConfig(target.URL, target.URL, "")
	addr := freeAddr(t)
	endpoint := "http://" + addr + "/mcp"
	gw := startGatewayProcess(t, config, db, keys, addr)
	notYet := 0
	const rounds = 12
	for i := range rounds {
		tool, args := "deploy_release", map[string]any{"service": "billing", "version": fmt.Sprint(100 + i)}
		if i%2 == 1 {
			tool, args = "charge_card", map[string]any{"amount_cents": 100 + i, "card_token": secretValue}
		}
		before := target.Total()
		cs, err := loopback.Connect(ctx, endpoint, agentToken, loopback.ProtocolStateless)
		if err != nil {
			t.Fatal(err)
		}
		res := mustCall(t, cs, tool, args, nil)
		gw.kill() // at once: the outcome may still be in the committer's queue
		told := execMeta(t, res)["state"]
		cs.Close()

		gw = startGatewayProcess(t, config, db, keys, addr)
		store, err := activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keys})
		if err != nil {
			t.Fatal(err)
		}
		e, err := store.Execution(ctx, activity.ExecutionID(execMeta(t, res)["id"].(string)))
		store.Close()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case string(e.State) == told || e.State == activity.StateDelivered || e.State == activity.StateDeliveryFailed || e.State == activity.StateNotDelivered:
			// the outcome was durable (its delivery, recovered, may not be)
		case e.State == activity.StateUnknown || e.State == activity.StatePendingVerification:
			notYet++
		default:
			t.Fatalf("round %d (%s): the agent was told %v, the restarted store says %s", i, tool, told, e.State)
		}
		cs2, err := loopback.Connect(ctx, endpoint, agentToken, loopback.ProtocolStateless)
		if err != nil {
			t.Fatal(err)
		}
		again := mustCall(t, cs2, tool, args, nil)
		cs2.Close()
		if m := execMeta(t, again); m["id"] != execMeta(t, res)["id"] {
			t.Fatalf("round %d (%s): the retry made execution %v, not %v", i, tool, m["id"], execMeta(t, res)["id"])
		}
		if got := target.Total() - before; got != 1 {
			t.Fatalf("round %d (%s): the target acted %d times", i, tool, got)
		}
	}
	t.Logf("killed right after %d answers: the outcome was not yet durable %d times (recovered as unknown), every retry attached, the target acted once each",
		rounds, notYet)
}
