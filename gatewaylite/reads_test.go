package gatewaylite_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
)

// Identical reads in flight at the same moment each run: a read has no
// effect to duplicate, and the store must never refuse one.
func TestConcurrentIdenticalReadsEachRun(t *testing.T) {
	for _, era := range []string{loopback.ProtocolLegacy, loopback.ProtocolStateless} {
		t.Run(era, func(t *testing.T) {
			h := newHarness(t, "")
			h.target.SetDelay(100e6) // 100ms: the reads overlap
			const n = 8
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cs, err := loopback.Connect(ctx, h.endpoint(false), agentToken, era)
					if err != nil {
						t.Error(err)
						return
					}
					defer cs.Close()
					res, err := call(t, cs, "get_status", map[string]any{"service": "billing"}, nil)
					if err != nil {
						t.Errorf("read %d: %v", i, err)
						return
					}
					if res.IsError || execMeta(t, res)["state"] != "succeeded" {
						t.Errorf("read %d: %v %s", i, execMeta(t, res), resultText(res))
					}
				}()
			}
			wg.Wait()
			if got := h.target.Reads(); got != n {
				t.Fatalf("the target saw %d reads, want %d", got, n)
			}
			es := h.executions("get_status")
			if len(es) != n {
				t.Fatalf("%d read executions, want %d", len(es), n)
			}
			for _, e := range es {
				if len(h.calls(e.ID)) != 1 {
					t.Fatalf("execution %s has %d calls", e.ID, len(h.calls(e.ID)))
				}
			}
		})
	}
}

// A gateway killed while a read is at the target leaves it unknown, not
// awaiting an operator, and the next identical read runs.
func TestCrashDuringReadLetsNextReadRun(t *testing.T) {
	t.Setenv("TEST_AGENT_TOKEN", agentToken)
	t.Setenv("TEST_DEPLOY_TOKEN", credValue)
	target := loopback.NewTarget()
	defer target.Close()
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "gw.db"), filepath.Join(dir, "keys")
	config := testConfig(target.URL, target.URL, "")
	addr := freeAddr(t)
	endpoint := "http://" + addr + "/mcp"
	args := map[string]any{"service": "billing"}

	gw := startGatewayProcess(t, config, db, keys, addr)
	hold := make(chan struct{})
	target.SetHold(hold)
	cs, err := loopback.Connect(ctx, endpoint, agentToken, loopback.ProtocolLegacy)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := call(t, cs, "get_status", args, nil)
		errc <- err
	}()
	waitFor(t, func() bool { return target.Reads() == 1 }, "the read to reach the target")
	gw.kill()
	if err := <-errc; err == nil {
		t.Fatal("the read survived the gateway's death")
	}
	target.SetHold(nil)
	close(hold)

	startGatewayProcess(t, config, db, keys, addr)
	for _, era := range []string{loopback.ProtocolLegacy, loopback.ProtocolStateless} {
		cs2, err := loopback.Connect(ctx, endpoint, agentToken, era)
		if err != nil {
			t.Fatal(err)
		}
		res := mustCall(t, cs2, "get_status", args, nil)
		cs2.Close()
		if m := execMeta(t, res); res.IsError || m["replayed"] != false || m["state"] != "succeeded" {
			t.Fatalf("%s: read after the crash: %v %s", era, m, resultText(res))
		}
	}
	store, err := activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	es, err := store.Executions(ctx, activity.ExecutionFilter{Tool: "get_status"})
	if err != nil || len(es) != 3 {
		t.Fatalf("executions: %d %v", len(es), err)
	}
	states := map[activity.State]int{}
	for _, e := range es {
		states[e.State]++
	}
	if states[activity.StateUnknown] != 1 || states[activity.StatePendingVerification] != 0 {
		t.Fatalf("states after a crash during a read: %v (want the crashed read unknown, none pending)", states)
	}
	if target.Reads() != 3 {
		t.Fatalf("target saw %d reads, want 3", target.Reads())
	}
}
