package gatewaylite_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
	"github.com/mcpdup/mcpdup/internal/gctune"
)

// BenchmarkToolsCall measures a tools/call side by side, in one run:
//
//	target:       the agent POSTs to the target API itself (no MCP)
//	pass-through: MCP through a plain proxy that records nothing
//	gateway:      MCP through the gateway (fingerprint, durable lifecycle)
//
// at 1 and 16 concurrent clients, each call a new intent (the full path:
// accept, dispatch, outcome, delivery). It reports p50/p99 latency,
// calls/s and the process's CPU time per call (clients, proxy or gateway
// and target alike, as all share this process and its two cores); compare
// the gateway's p50 with the others' for its overhead, and its CPU per
// call for the throughput two cores can give it.
//
//	go test ./gatewaylite -run '^$' -bench ToolsCall -benchtime 2000x
func BenchmarkToolsCall(b *testing.B) {
	b.Setenv("TEST_AGENT_TOKEN", agentToken)
	// The collector target mcpdup gateway runs with; the target and the
	// pass-through proxy share this process, and the setting.
	defer gctune.Raise(gatewaylite.GCPercent)()
	target := loopback.NewTarget()
	defer target.Close()
	dir := b.TempDir()
	cfg, err := gatewaylite.ParseConfig([]byte(fmt.Sprintf(chaosConfig, target.URL, target.URL)))
	if err != nil {
		b.Fatal(err)
	}
	store, err := activity.Open(context.Background(), filepath.Join(dir, "bench.db"), activity.Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	gw, err := gatewaylite.New(context.Background(), cfg, store, gatewaylite.Options{KeyDir: filepath.Join(dir, "keys"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	gwSrv := httptest.NewServer(gw.Handler())
	defer gwSrv.Close()
	pt := loopback.NewPassThrough(map[string]string{"deploy_release": target.URL + "/v1/releases"})
	defer pt.Close()

	var seq atomic.Int64
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	direct := func(ctx context.Context) error {
		body := fmt.Sprintf(`{"n":%d}`, seq.Add(1))
		resp, err := httpClient.Post(target.URL+"/v1/releases", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	viaMCP := func(endpoint string) func(b *testing.B, clients int) []func(context.Context) error {
		return func(b *testing.B, clients int) []func(context.Context) error {
			var fns []func(context.Context) error
			for range clients {
				cs, err := loopback.Connect(context.Background(), endpoint, agentToken, loopback.ProtocolStateless)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { cs.Close() })
				fns = append(fns, func(ctx context.Context) error {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"n": seq.Add(1)}})
					if err == nil && res.IsError {
						err = fmt.Errorf("tool error: %v", res.Content)
					}
					return err
				})
			}
			return fns
		}
	}
	paths := []struct {
		name  string
		setup func(b *testing.B, clients int) []func(context.Context) error
	}{
		{"target", func(b *testing.B, clients int) []func(context.Context) error {
			return slices.Repeat([]func(context.Context) error{direct}, clients)
		}},
		{"pass-through", viaMCP(pt.URL)},
		{"gateway", viaMCP(gwSrv.URL)},
	}
	for _, clients := range []int{1, 16} {
		for _, p := range paths {
			b.Run(fmt.Sprintf("%s/clients=%d", p.name, clients), func(b *testing.B) {
				measureCalls(b, p.setup(b, clients))
			})
		}
	}
}

// measureCalls runs b.N calls spread over fns (one per client) and
// reports p50/p99 latency and calls/s.
func measureCalls(b *testing.B, fns []func(context.Context) error) {
	lat := make([]time.Duration, 0, b.N)
	var mu sync.Mutex
	var next atomic.Int64
	cpu0 := activitytest.CPUTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := fn(context.Background()); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric(float64((activitytest.CPUTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/call")
}
