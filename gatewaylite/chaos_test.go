package gatewaylite_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/analyze"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
)

var chaosCalls = flag.Int("chaos.calls", 1000, "tool calls in the chaos run (try 10000)")

// chaosTools are the side-effecting tools the chaos run calls, one per
// non-read-only contract.
var chaosTools = []string{"deploy_release", "charge_card", "open_ticket"}

// The chaos run and the benchmarks drive one actor as hard as they can: its
// rate limit is off, so what they measure is duplicates and latency, not
// 429s.
const chaosConfig = `
attach_wait = "5s"
[limits]
rate_per_second = -1
[[actor]]
name = "agent:chaos"
token_env = "TEST_AGENT_TOKEN"
[[tool]]
name = "deploy_release"
url = "%[1]s/v1/releases"
contract = "repeatable_with_key"
timeout = "5s"
[[tool]]
name = "charge_card"
url = "%[1]s/v1/charges"
contract = "blocked_after_unknown"
timeout = "5s"
[[tool]]
name = "open_ticket"
url = "%[1]s/v1/tickets"
contract = "recoverable_by_lookup"
status_url = "%[2]s/v1/status/{execution_id}"
timeout = "5s"
`

type chaosResult struct {
	calls, gaveUp, pending, retries int64
	effects, duplicates             int
	targetFaults, agentFaults       int64
	elapsed                         time.Duration
	history                         analyze.CheckResult // the gateway's own record, checked
}

// TestChaos runs the same faulty workload, with a naive retry layer,
// through the gateway and through a plain pass-through MCP proxy, and
// compares the target's own effect counts.
func TestChaos(t *testing.T) {
	t.Setenv("TEST_AGENT_TOKEN", agentToken)
	n := *chaosCalls
	gw := runChaos(t, n, gatewayFront)
	pt := runChaos(t, n, passThroughFront)
	report := fmt.Sprintf("chaos run, %d calls, naive retry layer, %d%%+%d%% target faults, %d%% agent-side faults:\n"+
		"  gateway:      %5d effects, %3d duplicate effects, %4d retries, %3d pending verification, %3d gave up (%v)\n"+
		"  pass-through: %5d effects, %3d duplicate effects, %4d retries, %3d gave up (%v)\n"+
		"  gateway history check: %d invocations, %d ok, %d fail, %d info, %d duplicated, %d lost, %d recovered, %d still unknown",
		n, 10, 10, 10, gw.effects, gw.duplicates, gw.retries, gw.pending, gw.gaveUp, gw.elapsed.Round(time.Millisecond),
		pt.effects, pt.duplicates, pt.retries, pt.gaveUp, pt.elapsed.Round(time.Millisecond),
		gw.history.Invocations, gw.history.OK, gw.history.Fail, gw.history.Info, gw.history.Duplicated, gw.history.Lost,
		gw.history.Recovered, gw.history.StillUnknown)
	t.Log(report)
	fmt.Println(report)
	if gw.duplicates != 0 {
		t.Errorf("the gateway let %d duplicate effects through", gw.duplicates)
	}
	if gw.history.Duplicated != 0 || gw.history.Lost != 0 {
		t.Errorf("the gateway's own history shows %d duplicated and %d lost actions", gw.history.Duplicated, gw.history.Lost)
	}
	// The record never claims fewer effects than the target performed:
	// every effect is an ok, or hides behind an info still unknown.
	if gw.history.OK > gw.effects || gw.history.OK+gw.history.StillUnknown < gw.effects {
		t.Errorf("history (%d ok, %d unknown) does not account for the target's %d effects", gw.history.OK, gw.history.StillUnknown, gw.effects)
	}
	if pt.duplicates == 0 {
		t.Errorf("the pass-through run shows no duplicates: the faults are not biting, the comparison proves nothing")
	}
	if gw.targetFaults == 0 || gw.agentFaults == 0 {
		t.Errorf("no faults injected: %+v", gw)
	}
}

// chaosFront is what the chaos workload's agents call: its URL, the store
// it records into (nil: a pass-through records nothing), and finish, run
// once the workload is done and before the store is checked.
type chaosFront struct {
	url    string
	store  *activity.Store
	finish func()
}

// gatewayFront is one gateway in this process on a SQLite database.
func gatewayFront(t *testing.T, targetProxyURL, targetURL string) chaosFront {
	dir := t.TempDir()
	cfg, err := gatewaylite.ParseConfig([]byte(fmt.Sprintf(chaosConfig, targetProxyURL, targetURL)))
	if err != nil {
		t.Fatal(err)
	}
	store, err := activity.Open(ctx, filepath.Join(dir, "chaos.db"), activity.Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	gw, err := gatewaylite.New(ctx, cfg, store, gatewaylite.Options{KeyDir: filepath.Join(dir, "keys"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() { srv.Close(); gw.Close() })
	// The history is checked once the gateway is done: an agent that gave
	// up leaves its call running there (the target's answer dropped, the
	// gateway still waiting on it), and a dispatch whose outcome is not
	// recorded yet counted as lost (seen once in CI under load).
	finish := func() {
		srv.Close() // returns once every request it served has ended
		gw.Settle()
	}
	return chaosFront{url: srv.URL, store: store, finish: finish}
}

// passThroughFront is an MCP proxy that records nothing and retries
// nothing: what the target sees without the gateway.
func passThroughFront(t *testing.T, targetProxyURL, _ string) chaosFront {
	pt := loopback.NewPassThrough(map[string]string{
		"deploy_release": targetProxyURL + "/v1/releases",
		"charge_card":    targetProxyURL + "/v1/charges",
		"open_ticket":    targetProxyURL + "/v1/tickets",
	})
	t.Cleanup(pt.Close)
	return chaosFront{url: pt.URL, finish: func() {}}
}

func runChaos(t *testing.T, n int, mkFront func(t *testing.T, targetProxyURL, targetURL string) chaosFront) chaosResult {
	target := loopback.NewTarget()
	defer target.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	var rngMu sync.Mutex
	roll := func() float64 { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() }
	targetProxy := loopback.NewFaultProxy(target.URL)
	defer targetProxy.Close()
	targetProxy.Plan = func(_ *http.Request, _ []byte) loopback.Fault {
		switch r := roll(); {
		case r < 0.10:
			return loopback.DropRequest
		case r < 0.20:
			return loopback.DropResponse
		}
		return loopback.Pass
	}

	front := mkFront(t, targetProxy.URL, target.URL)
	agentProxy := loopback.NewFaultProxy(front.url)
	defer agentProxy.Close()
	agentProxy.Plan = func(_ *http.Request, body []byte) loopback.Fault {
		if loopback.IsToolsCall(body) && roll() < 0.10 {
			return loopback.DropResponse
		}
		return loopback.Pass
	}

	var res chaosResult
	start := time.Now()
	const workers = 8
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			protocol := loopback.ProtocolStateless
			if w%2 == 1 {
				protocol = loopback.ProtocolLegacy
			}
			agent := &loopback.NaiveAgent{Endpoint: agentProxy.URL + "/mcp", Token: agentToken, Protocol: protocol, Attempts: 6}
			defer agent.Close()
			for {
				i := next.Add(1)
				if i > int64(n) {
					break
				}
				tool := chaosTools[i%int64(len(chaosTools))]
				c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				out, err := agent.Call(c, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"n": i, "service": fmt.Sprintf("svc-%d", i)}})
				cancel()
				atomic.AddInt64(&res.calls, 1)
				switch {
				case err != nil:
					atomic.AddInt64(&res.gaveUp, 1)
				case out.Meta[gatewaylite.MetaExecution] != nil && out.Meta[gatewaylite.MetaExecution].(map[string]any)["state"] == "pending_verification":
					atomic.AddInt64(&res.pending, 1)
				}
			}
			atomic.AddInt64(&res.retries, int64(agent.Retries))
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	front.finish()
	res.effects, res.duplicates = int(target.Total()), target.Duplicates()
	res.targetFaults = targetProxy.Count(loopback.DropRequest) + targetProxy.Count(loopback.DropResponse)
	res.agentFaults = agentProxy.Count(loopback.DropResponse)
	if front.store != nil && res.duplicates > 0 {
		t.Logf("duplicated intents: %v", target.DuplicatedIntents())
	}
	if front.store != nil {
		var err error
		if res.history, err = analyze.Check(ctx, front.store); err != nil {
			t.Fatal(err)
		}
	}
	return res
}
