package gatewaylite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
)

const strangerLimits = `
[limits]
max_connections = 48
max_body_bytes = 65536
read_header_timeout = "1s"
read_timeout = "1s"
idle_timeout = "5s"
unauthenticated_records_per_second = 20
rate_per_second = -1
`

// attack runs strangers against addr until stop closes: large
// unauthenticated bodies, unauthenticated and authenticated bodies that
// trickle, headers that never end, and connections that say nothing.
// It returns how many requests or connections were refused.
func attack(addr string, stop <-chan struct{}) *atomic.Int64 {
	var refused atomic.Int64
	big := bytes.Repeat([]byte("x"), 1<<20)
	body := func() io.Reader {
		return io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+strings.Repeat("n", 300)+`","arguments":{"pad":"`), bytes.NewReader(big))
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	loop := func(n int, f func()) {
		for range n {
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					f()
					refused.Add(1)
				}
			}()
		}
	}
	raw := func(first string, trickle bool) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, first)
		for trickle {
			time.Sleep(100 * time.Millisecond)
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
		io.Copy(io.Discard, c) // until the server closes it
	}
	head := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n"
	loop(6, func() { // large unauthenticated bodies
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", body())
		req.Header.Set("Content-Type", "application/json")
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	loop(8, func() { raw(head+"\r\n", true) })                                         // unauthenticated slow body
	loop(2, func() { raw(head+"Authorization: Bearer "+agentToken+"\r\n\r\n", true) }) // authenticated slow body
	loop(6, func() { raw("POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\n", false) })         // headers that never end
	loop(40, func() { raw("", false) })                                                // silent connections
	return &refused
}

// dbState is the database's logical size (pages in use, through the WAL)
// and how many refused unauthenticated calls it holds.
func dbState(t *testing.T, db string) (bytes, strangers int64) {
	t.Helper()
	c, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var pages, size int64
	if err := c.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	c.QueryRow(`PRAGMA page_size`).Scan(&size)
	c.QueryRow(`SELECT count(*) FROM calls WHERE actor = 'unauthenticated'`).Scan(&strangers)
	return pages * size, strangers
}

func openFDs(pid int) int {
	es, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(es)
}

// TestStrangersAreBounded is the load test of strangers, on loopback,
// against a gateway process served as `mcpdup gateway` serves it: while
// strangers send large and slow bodies at volume, an authenticated
// client's calls keep succeeding, the database grows by a bounded amount
// per refused request, and the gateway's descriptors stay bounded.
func TestStrangersAreBounded(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Fatal("this test counts the gateway's descriptors in /proc (Linux, as CI runs): ", err)
	}
	t.Setenv("TEST_AGENT_TOKEN", agentToken)
	t.Setenv("TEST_DEPLOY_TOKEN", credValue)
	target := loopback.NewTarget()
	defer target.Close()
	dir := t.TempDir()
	db, keys := filepath.Join(dir, "gw.db"), filepath.Join(dir, "keys")
	addr := freeAddr(t)
	gw := startGatewayProcess(t, testConfig(target.URL, target.URL, strangerLimits), db, keys, addr)
	pid := gw.cmd.Process.Pid
	cs, err := loopback.Connect(ctx, "http://"+addr+"/mcp", agentToken, loopback.ProtocolLegacy)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	mustCall(t, cs, "get_status", map[string]any{"service": "warm-up"}, nil)
	idleFDs := openFDs(pid)

	// Phase 1: strangers alone, to weigh what each refused request costs.
	before, recBefore := dbState(t, db)
	stop := make(chan struct{})
	refused := attack(addr, stop)
	time.Sleep(3 * time.Second)
	close(stop)
	time.Sleep(1500 * time.Millisecond) // their last requests end
	after, recAfter := dbState(t, db)
	n1, grown, recorded := refused.Load(), after-before, recAfter-recBefore

	// Phase 2: strangers while the agent keeps calling.
	stop = make(chan struct{})
	refused = attack(addr, stop)
	var ok, failed int
	var maxFDs int
	var mu sync.Mutex
	sample := make(chan struct{})
	go func() {
		defer close(sample)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				mu.Lock()
				maxFDs = max(maxFDs, openFDs(pid))
				mu.Unlock()
			}
		}
	}()
	// A fixed number of calls, not a time window: what must hold is that
	// each one succeeds, however slow a loaded machine makes them.
	began := time.Now()
	for i := range 20 {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"service": "api", "version": fmt.Sprint(i)}})
		cancel()
		if err != nil || res.IsError {
			failed++
			t.Logf("call %d: %v", i, err)
			continue
		}
		ok++
	}
	took := time.Since(began)
	close(stop)
	<-sample
	n2 := refused.Load()

	store, err := activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	st, _ := store.Stats(ctx)
	perRefused, perRecord := float64(grown)/float64(n1), float64(grown)/float64(max(recorded, 1))
	t.Logf("phase 1: %d refused stranger requests/connections in 3 s, %d recorded; database grew %d bytes (%.0f per refused request, %.0f per record)", n1, recorded, grown, perRefused, perRecord)
	t.Logf("phase 2: %d refused meanwhile; agent calls %d ok, %d failed in %.1f s; gateway descriptors %d idle, %d at most (max_connections 48)", n2, ok, failed, took.Seconds(), idleFDs, maxFDs)
	t.Logf("calls recorded in all: %d (refused strangers recorded at most 20/s, the rest counted)", st.Calls)
	if failed > 0 || ok != 20 {
		t.Fatalf("the agent's calls did not keep succeeding: %d ok, %d failed", ok, failed)
	}
	if recorded == 0 {
		t.Fatal("no refused stranger was recorded")
	}
	if perRecord > 2048 || recorded > 20*3+40+20 {
		t.Fatalf("refused strangers cost %.0f bytes per record, %d records in 3 s (want at most 2 KiB each, at most 20/s after a burst of 40)", perRecord, recorded)
	}
	if maxFDs > 48+32 {
		t.Fatalf("the gateway held %d descriptors (max_connections 48)", maxFDs)
	}
	if target.Duplicates() != 0 {
		t.Fatalf("duplicates: %v", target.DuplicatedIntents())
	}
}
