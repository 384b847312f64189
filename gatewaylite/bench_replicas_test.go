package gatewaylite_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
	"github.com/mcpdup/mcpdup/internal/gctune"
)

// BenchmarkReplicas sets, side by side in one run, one gateway on SQLite
// beside gateways on one PostgreSQL database (a cluster the benchmark
// starts, fsync on, as SQLite's synchronous=FULL): one replica, and three
// with the clients spread over them, at 1 and 16 clients. Each call is a
// new intent (accept, dispatch, outcome, delivery); p50/p99 and calls/s.
// All replicas share this process and its two cores, as replicas on one
// host would.
//
//	go test ./gatewaylite -run '^$' -bench Replicas -benchtime 2000x
func BenchmarkReplicas(b *testing.B) {
	b.Setenv("TEST_AGENT_TOKEN", agentToken)
	defer gctune.Raise(gatewaylite.GCPercent)()
	target := loopback.NewTarget()
	defer target.Close()
	config := fmt.Sprintf(chaosConfig, target.URL, target.URL)
	var n atomic.Int64
	setups := []struct {
		name     string
		engine   activitytest.Engine
		replicas int
	}{
		{"sqlite/1-gateway", activitytest.SQLite, 1},
		{"postgres/1-replica", activitytest.Postgres, 1},
		{"postgres/3-replicas", activitytest.Postgres, 3},
	}
	for _, clients := range []int{1, 16} {
		for _, st := range setups {
			b.Run(fmt.Sprintf("%s/clients=%d", st.name, clients), func(b *testing.B) {
				endpoints := benchReplicas(b, st.engine, st.replicas, config)
				var fns []func(context.Context) error
				for i := range clients {
					cs, err := loopback.Connect(context.Background(), endpoints[i%len(endpoints)], agentToken, loopback.ProtocolStateless)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { cs.Close() })
					fns = append(fns, func(ctx context.Context) error {
						res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"n": fmt.Sprint(clients, st.name, n.Add(1), i)}})
						if err == nil && res.IsError {
							err = fmt.Errorf("tool error: %v", res.Content)
						}
						return err
					})
				}
				measureCalls(b, fns)
			})
		}
	}
}

// benchReplicas serves replicas gateways on a new database of engine.
func benchReplicas(b *testing.B, engine activitytest.Engine, replicas int, config string) []string {
	db, keys := engine.DB(b), filepath.Join(b.TempDir(), "keys")
	cfg, err := gatewaylite.ParseConfig([]byte(config))
	if err != nil {
		b.Fatal(err)
	}
	var endpoints []string
	for range replicas {
		s, err := activity.Open(context.Background(), db, activity.Options{KeyDir: keys})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		gw, err := gatewaylite.New(context.Background(), cfg, s, gatewaylite.Options{KeyDir: keys, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(gw.Handler())
		b.Cleanup(srv.Close)
		b.Cleanup(func() { gw.Close() })
		endpoints = append(endpoints, srv.URL)
	}
	return endpoints
}
