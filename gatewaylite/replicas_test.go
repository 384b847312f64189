package gatewaylite_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/activity/audit"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/gatewaylite"
	"github.com/mcpdup/mcpdup/internal/pgtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// replicaTTL is the lease of the replicas these tests run: short, so a
// killed one is recovered within the test.
const replicaTTL = `lease_ttl = "1s"`

// sharedDB is a PostgreSQL database with its schema and keys made, as
// replicas find it: none of them is its creator.
func sharedDB(t *testing.T) (db, keys string) {
	t.Helper()
	db = activitytest.Postgres.DB(t)
	return db, sharedKeys(t, db)
}

// sharedKeys makes db's schema and keys, as replicas find them.
func sharedKeys(t *testing.T, db string) (keys string) {
	t.Helper()
	keys = filepath.Join(t.TempDir(), "keys")
	s, err := activity.Open(ctx, db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gatewaylite.LoadFingerprinter(keys); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return keys
}

// replicaSetup is what the replica tests share: the agent's and the
// credential's tokens, a target, a shared database, and the harness
// configuration with a short lease and extra's top-level keys.
func replicaSetup(t *testing.T, extra string) (target *loopback.Target, db, keys, config string) {
	t.Helper()
	t.Setenv("TEST_AGENT_TOKEN", agentToken)
	t.Setenv("TEST_DEPLOY_TOKEN", credValue)
	target = loopback.NewTarget()
	t.Cleanup(target.Close)
	db, keys = sharedDB(t)
	return target, db, keys, testConfig(target.URL, target.URL, replicaTTL+"\n"+extra)
}

// inProcessReplica serves a gateway replica on db from this process.
func inProcessReplica(t *testing.T, config, db, keys string) (*gatewaylite.Gateway, string) {
	t.Helper()
	cfg, err := gatewaylite.ParseConfig([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	s, err := activity.Open(ctx, db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	gw, err := gatewaylite.New(ctx, cfg, s, gatewaylite.Options{KeyDir: keys, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", gw.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// Closed first: a call still waiting (an approval) ends, so the
	// server's Close does not wait on it.
	t.Cleanup(func() { gw.Close() })
	return gw, srv.URL + "/mcp"
}

// TestRetryOnAnotherReplicaAttaches: a call in flight on one replica and
// its retry on another are one execution; the target acts once, and the
// retry answers with the first call's outcome.
func TestRetryOnAnotherReplicaAttaches(t *testing.T) {
	target, db, keys, config := replicaSetup(t, "")
	_, a := inProcessReplica(t, config, db, keys)
	_, b := inProcessReplica(t, config, db, keys)
	hold := make(chan struct{})
	target.SetHold(hold)
	args := map[string]any{"service": "billing", "version": "12"}

	csA, err := loopback.Connect(ctx, a, agentToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	defer csA.Close()
	first := make(chan map[string]any, 1)
	go func() { first <- execMeta(t, mustCall(t, csA, "deploy_release", args, nil)) }()
	waitFor(t, func() bool { return target.Total() == 1 }, "the target to receive the first call")

	csB, err := loopback.Connect(ctx, b, agentToken, loopback.ProtocolLegacy)
	if err != nil {
		t.Fatal(err)
	}
	defer csB.Close()
	retry := make(chan map[string]any, 1)
	go func() { retry <- execMeta(t, mustCall(t, csB, "deploy_release", args, nil)) }()
	time.Sleep(200 * time.Millisecond) // the retry waits on the first call's execution
	target.SetHold(nil)
	close(hold)
	m1, m2 := <-first, <-retry
	// The first call's answer may already be delivered when the retry reads it.
	if m2["id"] != m1["id"] || m2["replayed"] != true || (m2["state"] != "succeeded" && m2["state"] != "delivered") {
		t.Fatalf("retry on the other replica: %v; first: %v", m2, m1)
	}
	if n := target.Total(); n != 1 {
		t.Fatalf("the target acted %d times", n)
	}
}

// TestReplicaKilledMidFlight: a replica dies (SIGKILL) while the target
// acts; another replica, which kept running, recovers its execution once
// the dead one's lease runs out, exactly as a restart would (unknown, then
// per contract); a retry through the survivor attaches, and the target
// acted once. The survivor's own lease is never taken.
func TestReplicaKilledMidFlight(t *testing.T) {
	target, db, keys, config := replicaSetup(t, "")
	survivor, b := inProcessReplica(t, config, db, keys)
	store, err := activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	cases := []struct {
		tool      string
		args      map[string]any
		recovered activity.State
		retried   string
	}{
		{"deploy_release", map[string]any{"service": "billing", "version": "13"}, activity.StateUnknown, "succeeded"},
		{"charge_card", map[string]any{"amount_cents": 700, "card_token": secretValue}, activity.StatePendingVerification, "pending_verification"},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			addr := freeAddr(t)
			doomed := startGatewayProcess(t, config, db, keys, addr)
			hold := make(chan struct{})
			target.SetHold(hold)
			before := target.Total()
			cs, err := loopback.Connect(ctx, "http://"+addr+"/mcp", agentToken, loopback.ProtocolStateless)
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				_, err := call(t, cs, c.tool, c.args, nil)
				errc <- err
			}()
			waitFor(t, func() bool { return target.Total() == before+1 }, "the target to receive the request")
			doomed.kill()
			if err := <-errc; err == nil {
				t.Fatal("the call survived its replica's death")
			}
			target.SetHold(nil)
			close(hold)

			var e activity.Execution
			waitFor(t, func() bool {
				es, err := store.Executions(ctx, activity.ExecutionFilter{Tool: c.tool})
				if err != nil || len(es) != 1 {
					return false
				}
				e = es[0]
				return e.State == c.recovered
			}, "the survivor to recover the dead replica's execution")
			cs2, err := loopback.Connect(ctx, b, agentToken, loopback.ProtocolLegacy)
			if err != nil {
				t.Fatal(err)
			}
			defer cs2.Close()
			res := mustCall(t, cs2, c.tool, c.args, nil)
			if m := execMeta(t, res); m["replayed"] != true || m["state"] != c.retried || m["id"] != string(e.ID) {
				t.Fatalf("retry on the survivor: %v %s", m, resultText(res))
			}
			if got := target.Total() - before; got != 1 {
				t.Fatalf("the target acted %d times", got)
			}
		})
	}
	leases, err := store.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recovered := 0
	for _, l := range leases {
		switch {
		case l.ID == survivor.Replica() && l.RecoveredBy != "":
			t.Fatalf("the live replica's lease was recovered by %s", l.RecoveredBy)
		case l.ID != survivor.Replica() && l.RecoveredBy != survivor.Replica():
			t.Fatalf("a dead replica's lease %+v was not recovered by the survivor", l)
		case l.ID != survivor.Replica():
			recovered++
		}
	}
	if recovered != len(cases) {
		t.Fatalf("%d dead replicas recovered, want %d", recovered, len(cases))
	}
}

// TestDecisionReachesTheWaitingReplica: a call waits on a per-use approval
// on one replica; the operator answers through another store (the console,
// mcpdup approve), and the waiting replica acts on it from the commit's
// notification alone: it rereads nothing on its own within the test.
func TestDecisionReachesTheWaitingReplica(t *testing.T) {
	defer gatewaylite.SetApprovalPoll(time.Hour)()
	target, db, keys, config := replicaSetup(t, strings.Replace(perUseConfig, `approval_timeout = "3s"`, `approval_timeout = "1h"`, 1))
	_, a := inProcessReplica(t, config, db, keys)
	operator, err := activity.Open(ctx, db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer operator.Close()

	cs, err := loopback.Connect(ctx, a, agentToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	done := make(chan map[string]any, 1)
	go func() {
		done <- execMeta(t, mustCall(t, cs, "refund", map[string]any{"order": "o-18", "amount_cents": 300}, nil))
	}()
	var pending []activity.Approval
	waitFor(t, func() bool {
		pending, _ = operator.Approvals(ctx, true)
		return len(pending) == 1
	}, "the call to wait on an approval")
	// The waiting replica LISTENs before the decision: its listener wakes
	// waiters when it connects, which would let the call through without
	// any notification.
	raw := activitytest.Postgres.Raw(t, db)
	waitFor(t, func() bool {
		var n int
		raw.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n)
		return n > 0
	}, "the waiting replica to LISTEN")
	time.Sleep(100 * time.Millisecond) // the waiter is past the read its listener's connection woke
	if _, err := operator.DecideApproval(ctx, pending[0].ID, activity.ApprovalApproved, "alice", "checked the order"); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-done:
		if m["state"] != "succeeded" || target.Total() != 1 {
			t.Fatalf("after the decision: %v (effects %d)", m, target.Total())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting replica never heard the decision")
	}
}

// sseEvent is one server-sent event as a client reads it.
type sseEvent struct{ id, data string }

// readSSE reads every event of an SSE response body.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.id != "" || cur.data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

// TestResumptionOnAnotherReplica: a 2025-era client's tools/call stream
// is served by one replica; its resumption (GET with Last-Event-ID) that
// the balancer sends to another replica gets the same answer, from the
// shared event store. Another actor may not resume it.
func TestResumptionOnAnotherReplica(t *testing.T) {
	t.Setenv("TEST_OTHER_TOKEN", otherToken)
	target, db, keys, config := replicaSetup(t, secondActor)
	_, a := inProcessReplica(t, config, db, keys)
	_, b := inProcessReplica(t, config, db, keys)
	send := func(method, url, token, session, lastEvent, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", loopback.ProtocolLegacy)
		}
		if lastEvent != "" {
			req.Header.Set("Last-Event-ID", lastEvent)
			req.Header.Set("Accept", "text/event-stream")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := send("POST", a, agentToken, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+loopback.ProtocolLegacy+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	if session == "" {
		t.Fatalf("initialize: %d, no session", resp.StatusCode)
	}
	send("POST", a, agentToken, session, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp = send("POST", a, agentToken, session, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy_release","arguments":{"service":"billing","version":"14"}}}`)
	served := readSSE(t, resp.Body)
	if len(served) < 2 || !strings.Contains(served[len(served)-1].data, `"result"`) {
		t.Fatalf("the call's stream on its replica: %+v", served)
	}
	answer := served[len(served)-1]

	// The client lost the answer after the priming event; its resumption
	// lands on the other replica.
	resumed := readSSE(t, send("GET", b, agentToken, session, served[0].id, "").Body)
	if len(resumed) != 1 || resumed[0] != answer {
		t.Fatalf("resumed on the other replica: %+v, want %+v", resumed, answer)
	}
	if resp := send("GET", b, otherToken, session, served[0].id, ""); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another actor resuming the stream: %d", resp.StatusCode)
	}
	if n := target.Total(); n != 1 {
		t.Fatalf("the target acted %d times", n)
	}
}

// TestVaultLockReachesEveryReplica: the vault, locked by an operator
// through another store (mcpdup lock, the console), refuses calls on every
// replica at once; unlocked, they act again.
func TestVaultLockReachesEveryReplica(t *testing.T) {
	target, db, keys, config := replicaSetup(t, "")
	_, a := inProcessReplica(t, config, db, keys)
	_, b := inProcessReplica(t, config, db, keys)
	operator, err := activity.Open(ctx, db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer operator.Close()
	vault := func(locked bool) {
		if _, err := operator.Write(ctx, func(w *activity.Tx) error { return w.SetVault(locked, "alice", "drill") }); err != nil {
			t.Fatal(err)
		}
	}
	callOn := func(endpoint, version string) map[string]any {
		cs, err := loopback.Connect(ctx, endpoint, agentToken, loopback.ProtocolStateless)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		return execMeta(t, mustCall(t, cs, "deploy_release", map[string]any{"service": "billing", "version": version}, nil))
	}
	vault(true)
	for i, endpoint := range []string{a, b} {
		if m := callOn(endpoint, fmt.Sprint("locked-", i)); m["state"] != "rejected" {
			t.Fatalf("replica %d with the vault locked: %v", i, m)
		}
	}
	vault(false)
	for i, endpoint := range []string{a, b} {
		if m := callOn(endpoint, fmt.Sprint("unlocked-", i)); m["state"] != "succeeded" {
			t.Fatalf("replica %d after unlock: %v", i, m)
		}
	}
	if n := target.Total(); n != 2 {
		t.Fatalf("the target acted %d times, want 2 (after the unlock only)", n)
	}
}

// TestLeasesOutliveALongWrite: while another process holds the write lock
// for several lease TTLs (a long import), live replicas keep renewing
// their leases, and once the lock is free nobody claims them.
func TestLeasesOutliveALongWrite(t *testing.T) {
	_, db, keys, config := replicaSetup(t, "")
	a, _ := inProcessReplica(t, config, db, keys)
	b, _ := inProcessReplica(t, config, db, keys)
	writer, err := activity.Open(ctx, db, activity.Options{KeyDir: keys}) // opening writes: before the lock
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	thirdStore, err := activity.Open(ctx, db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer thirdStore.Close()
	cfg, err := gatewaylite.ParseConfig([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	// A dead replica's lease, for the live ones to claim once they can.
	dead, err := writer.StartLease(ctx, "dead", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	raw := activitytest.Postgres.Raw(t, db)
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`SELECT pg_advisory_xact_lock(120273854821744)`); err != nil { // the store's write lock, 0x6d6370647570
		t.Fatal(err)
	}
	// It is the store's lock: a write waits on it.
	wrote := make(chan error, 1)
	go func() {
		_, err := writer.Write(ctx, func(w *activity.Tx) error { return w.SetVault(false, "alice", "probe") })
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("a write went through while the write lock was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// A third replica starts while the lock is held: its recovery waits,
	// its lease must not.
	c := make(chan *gatewaylite.Gateway, 1)
	go func() {
		g, err := gatewaylite.New(ctx, cfg, thirdStore, gatewaylite.Options{KeyDir: keys, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Error(err)
		}
		c <- g
	}()
	time.Sleep(3 * time.Second)
	tx.Rollback()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	third := <-c
	if third == nil {
		t.FailNow()
	}
	defer third.Close()
	time.Sleep(1500 * time.Millisecond) // a sweep or two after the lock is free
	store, err := activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	leases, err := store.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		switch {
		case l.ID == dead.ID && l.RecoveredBy == "":
			t.Errorf("the dead replica's lease was never claimed")
		case l.ID != dead.ID && l.RecoveredBy != "":
			t.Errorf("lease %s (live) was claimed by %s", l.ID, l.RecoveredBy)
		}
	}
	for _, g := range []*gatewaylite.Gateway{a, b, third} {
		select {
		case <-g.Lost():
			t.Errorf("replica %s lost its lease", g.Replica())
		default:
		}
	}
}

// TestSessionApprovalSurvivesARecovery: two replicas' calls of one named
// run wait on its session approval; the replica that asked dies, and its
// recovery leaves the approval to the live one's call, which the
// operator's answer then lets through.
func TestSessionApprovalSurvivesARecovery(t *testing.T) {
	_, db, keys, config := replicaSetup(t, `session_grant = "ask"`)
	_, live := inProcessReplica(t, config, db, keys)
	addr := freeAddr(t)
	doomed := startGatewayProcess(t, config, db, keys, addr)
	operator, err := activity.Open(ctx, db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer operator.Close()
	meta := mcp.Meta{gatewaylite.MetaRunID: "run-shared"}
	pending := func() []activity.Approval { as, _ := operator.Approvals(ctx, true); return as }

	csDoomed, err := loopback.Connect(ctx, "http://"+addr+"/mcp", agentToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	defer csDoomed.Close()
	go call(t, csDoomed, "deploy_release", map[string]any{"service": "a", "version": "1"}, meta)
	waitFor(t, func() bool { return len(pending()) == 1 }, "the first call to ask for the session grant")
	csLive, err := loopback.Connect(ctx, live, agentToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	defer csLive.Close()
	// Asserted here, not in the goroutine: a failed call must fail the
	// test, not leave it waiting.
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	second := make(chan answer, 1)
	go func() {
		res, err := call(t, csLive, "deploy_release", map[string]any{"service": "b", "version": "1"}, meta)
		second <- answer{res, err}
	}()
	time.Sleep(300 * time.Millisecond) // the live replica's call waits on the same approval
	doomed.kill()
	waitFor(t, func() bool {
		leases, _ := operator.Leases(ctx)
		for _, l := range leases {
			if l.RecoveredBy != "" {
				return true
			}
		}
		return false
	}, "the dead replica to be recovered")
	as := pending()
	if len(as) != 1 || as[0].Kind != activity.ApprovalSession {
		t.Fatalf("after the recovery the session approval is gone: %+v", as)
	}
	if _, err := operator.DecideApproval(ctx, as[0].ID, activity.ApprovalApproved, "bob", "known agent"); err != nil {
		t.Fatal(err)
	}
	a := <-second
	if a.err != nil {
		t.Fatal(a.err)
	}
	if m := execMeta(t, a.res); m["state"] != "succeeded" {
		t.Fatalf("the live replica's call after the grant: %v", m)
	}
}

// TestTokenRunIsOneRunOnEveryReplica: an agent known only by its token,
// whose calls the balancer spreads over two replicas, is one run, with one
// session grant asked for, not one per replica.
func TestTokenRunIsOneRunOnEveryReplica(t *testing.T) {
	_, db, keys, config := replicaSetup(t, "")
	_, a := inProcessReplica(t, config, db, keys)
	_, b := inProcessReplica(t, config, db, keys)
	store, err := activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	runs := map[activity.RunID]bool{}
	for i, endpoint := range []string{a, b, a, b} {
		cs, err := loopback.Connect(ctx, endpoint, agentToken, loopback.ProtocolStateless)
		if err != nil {
			t.Fatal(err)
		}
		id := execMeta(t, mustCall(t, cs, "deploy_release", map[string]any{"service": "billing", "version": fmt.Sprint("run-", i)}, nil))["id"].(string)
		cs.Close()
		e, err := store.Execution(ctx, activity.ExecutionID(id))
		if err != nil {
			t.Fatal(err)
		}
		runs[e.RunID] = true
	}
	if len(runs) != 1 {
		t.Fatalf("one token's calls on two replicas made %d runs: %v", len(runs), runs)
	}
}

// TestDatabaseAwayLongerThanALease: with the database away longer than
// the lease TTL every lease runs out; the first replica to renew after it
// claimed the others before they could renew, and a healthy replica
// stopped. A replica claims others' leases only once its own renewals
// have gone through for a whole TTL.
func TestDatabaseAwayLongerThanALease(t *testing.T) {
	_, db, keys, config := replicaSetup(t, "")
	var away atomic.Int32 // 0: reachable; 1: away for all; 2: away for the second replica only
	var second atomic.Value
	second.Store("")
	t.Cleanup(gatewaylite.SetRenewalFault(func(replica string) error {
		switch away.Load() {
		case 1:
			return errors.New("injected: the database is away")
		case 2:
			if replica == second.Load().(string) {
				return errors.New("injected: not reachable yet")
			}
		}
		return nil
	}))
	a, _ := inProcessReplica(t, config, db, keys)
	b, _ := inProcessReplica(t, config, db, keys)
	second.Store(b.Replica())
	away.Store(1)
	time.Sleep(2500 * time.Millisecond) // both leases (1 s) run out
	away.Store(2)                       // the first renews at once, the second half a TTL later
	time.Sleep(500 * time.Millisecond)
	away.Store(0)
	time.Sleep(2500 * time.Millisecond) // sweeps enough to claim whatever they would
	for _, g := range []*gatewaylite.Gateway{a, b} {
		select {
		case <-g.Lost():
			t.Errorf("replica %s lost its lease to a live replica", g.Replica())
		default:
		}
	}
}

// TestDeniedApprovalNeverTakenOver: a replica whose lease lapsed (its
// renewals failing, nobody claiming it) could not record an operator's
// denial (the write was fenced), so the refund stayed accepted; the
// agent's retry on that replica then took it over as "the process that
// accepted it is gone" and paid the refund the operator had denied.
func TestDeniedApprovalNeverTakenOver(t *testing.T) {
	defer gatewaylite.SetApprovalPoll(50 * time.Millisecond)()
	target, db, keys, config := replicaSetup(t, strings.Replace(perUseConfig, `approval_timeout = "3s"`, `approval_timeout = "1h"`, 1))
	var away atomic.Bool
	t.Cleanup(gatewaylite.SetRenewalFault(func(string) error {
		if away.Load() {
			return errors.New("injected: renewal connection stuck")
		}
		return nil
	}))
	_, url := inProcessReplica(t, config, db, keys)
	operator, err := activity.Open(ctx, db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer operator.Close()
	cs, err := loopback.Connect(ctx, url, agentToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"order": "o-66", "amount_cents": 5000}
	first := make(chan map[string]any, 1)
	go func() { first <- execMeta(t, mustCall(t, cs, "refund", args, nil)) }()
	var pending []activity.Approval
	waitFor(t, func() bool { pending, _ = operator.Approvals(ctx, true); return len(pending) == 1 }, "the call to wait on an approval")
	away.Store(true)
	time.Sleep(1500 * time.Millisecond) // the lease (1 s) lapses; no other replica claims it
	if _, err := operator.DecideApproval(ctx, pending[0].ID, activity.ApprovalDenied, "alice", "fraudulent refund"); err != nil {
		t.Fatal(err)
	}
	if m := <-first; m["state"] != "rejected" {
		t.Errorf("the denied call: %v, want rejected", m)
	}
	away.Store(false)
	time.Sleep(700 * time.Millisecond) // renewed: the lease was never claimed
	if m := execMeta(t, mustCall(t, cs, "refund", args, nil)); m["state"] != "rejected" {
		t.Errorf("its retry: %v, want rejected", m)
	}
	if n := target.Total(); n != 0 {
		t.Fatalf("the operator denied the refund, and the target acted %d times", n)
	}
}

// TestStartingReplicaClaimsNoLiveOne: a replica (re)starting as the
// database came back from an outage longer than a lease claimed at once
// every live replica whose renewal had not landed yet: its start-up
// recovery skipped the whole-TTL guard its sweeps keep.
func TestStartingReplicaClaimsNoLiveOne(t *testing.T) {
	_, db, keys, config := replicaSetup(t, "")
	var away atomic.Int32 // 0: reachable; 1: away for all; 2: away for the first replica only
	var first atomic.Value
	first.Store("")
	t.Cleanup(gatewaylite.SetRenewalFault(func(replica string) error {
		switch away.Load() {
		case 1:
			return errors.New("injected: the database is away")
		case 2:
			if replica == first.Load().(string) {
				return errors.New("injected: not reachable yet")
			}
		}
		return nil
	}))
	a, _ := inProcessReplica(t, config, db, keys)
	first.Store(a.Replica())
	away.Store(1)
	time.Sleep(2500 * time.Millisecond) // its lease (1 s) runs out
	away.Store(2)
	go func() { time.Sleep(500 * time.Millisecond); away.Store(0) }()
	c, _ := inProcessReplica(t, config, db, keys) // starting as the database returns
	time.Sleep(1500 * time.Millisecond)
	select {
	case <-a.Lost():
		t.Errorf("live replica %s lost its lease to %s, which had just started", a.Replica(), c.Replica())
	default:
	}
}

// TestCloseWhileDatabasePaused: a replica told to stop while PostgreSQL
// did not answer (paused, its connections open) waited for good on the
// outcome it could not write: SIGTERM never ended the process. Close
// now gives the writes a grace, then abandons them and says so; the
// execution stays dispatched on disk, recovered as unknown like a crash.
func TestCloseWhileDatabasePaused(t *testing.T) {
	defer gatewaylite.SetCloseGrace(time.Second)()
	grace := activity.CloseGrace
	activity.CloseGrace = time.Second
	t.Cleanup(func() { activity.CloseGrace = grace })
	t.Setenv("TEST_AGENT_TOKEN", agentToken)
	t.Setenv("TEST_DEPLOY_TOKEN", credValue)
	pg := pgtest.Own(t)
	db := pg.NewDB(t)
	keys := sharedKeys(t, db)
	target := loopback.NewTarget()
	t.Cleanup(target.Close)
	gw, url := inProcessReplica(t, testConfig(target.URL, target.URL, replicaTTL), db, keys)
	hold := make(chan struct{})
	target.SetHold(hold)
	cs, err := loopback.Connect(ctx, url, agentToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	go call(t, cs, "deploy_release", map[string]any{"service": "s", "version": "9"}, nil)
	waitFor(t, func() bool { return target.Total() == 1 }, "the target to receive the call")
	resume := pg.Pause(t)
	target.SetHold(nil)
	close(hold)
	time.Sleep(300 * time.Millisecond) // the answer is back; its outcome cannot be written
	closed := make(chan error, 1)
	go func() { closed <- gw.Close() }()
	select {
	case err := <-closed:
		if err == nil || !strings.Contains(err.Error(), "did not answer") {
			t.Errorf("Close abandoned a write and said: %v", err)
		}
	case <-time.After(15 * time.Second):
		resume()
		t.Fatal("Close did not return within 15 s while the database was paused")
	}
	resume()
	if n := target.Total(); n != 1 {
		t.Fatalf("the target acted %d times, want 1", n)
	}
}

// skewedReplica serves a replica on db whose host clock is skew off.
func skewedReplica(t *testing.T, config, db, keys string, skew time.Duration) string {
	t.Helper()
	cfg, err := gatewaylite.ParseConfig([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	s, err := activity.Open(ctx, db, activity.Options{KeyDir: keys, Now: func() time.Time { return time.Now().Add(skew) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	gw, err := gatewaylite.New(ctx, cfg, s, gatewaylite.Options{KeyDir: keys, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", gw.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { gw.Close() })
	return srv.URL + "/mcp"
}

// TestReplicasKeepTheDatabaseClock: replicas on hosts whose clocks
// disagree compared a retry with the time another replica wrote by its
// own clock. A retry on a host 90 minutes ahead was a "late repeat"
// (deploy_release's attach window is an hour) and deployed again; a few
// minutes' skew made audit verify call an honest log tampered (its
// unsealed tail spanned more than the sealing policy allows). The store
// keeps the database's time on PostgreSQL.
func TestReplicasKeepTheDatabaseClock(t *testing.T) {
	target, db, keys, config := replicaSetup(t, "")
	behind := skewedReplica(t, config, db, keys, -3*time.Minute)
	ahead := skewedReplica(t, config, db, keys, 90*time.Minute)
	args := map[string]any{"service": "billing", "version": "13"}
	run := map[string]any{"mcpdup.dev/run_id": "run-skew"}
	var ids []any
	for i, url := range []string{behind, ahead, behind, ahead} {
		cs, err := loopback.Connect(ctx, url, agentToken, loopback.ProtocolStateless)
		if err != nil {
			t.Fatal(err)
		}
		a := args
		if i >= 2 { // a second intent, in the other order
			a = map[string]any{"service": "billing", "version": "14"}
		}
		ids = append(ids, execMeta(t, mustCall(t, cs, "deploy_release", a, run))["id"])
		cs.Close()
	}
	if ids[0] != ids[1] || ids[2] != ids[3] {
		t.Errorf("retries within a second across replicas made new executions: %v", ids)
	}
	if n := target.Total(); n != 2 {
		t.Errorf("the target acted %d times for two intents, each retried once", n)
	}
	s, err := activity.Open(ctx, db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pub, err := s.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.VerifyStore(ctx, s, audit.Options{Key: pub})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Tampered {
		t.Errorf("audit verify of an honest log written by skewed hosts: %+v", rep.Problems)
	}
}

// TestPostgresPausedLongerThanALease: PostgreSQL itself stopped
// (SIGSTOP, its connections open) for three leases, then resumed. A
// sweep that passed its health check just before the pause went on after
// it and claimed whichever live replica's renewal landed second (2 runs
// in 19 on the old code). Each claim now checks this replica's health
// again inside its write, where its renewals during the pause had failed.
func TestPostgresPausedLongerThanALease(t *testing.T) {
	t.Setenv("TEST_AGENT_TOKEN", agentToken)
	t.Setenv("TEST_DEPLOY_TOKEN", credValue)
	pg := pgtest.Own(t)
	db := pg.NewDB(t)
	keys := sharedKeys(t, db)
	config := testConfig("http://127.0.0.1:1", "http://127.0.0.1:1", replicaTTL)
	a, _ := inProcessReplica(t, config, db, keys)
	b, _ := inProcessReplica(t, config, db, keys)
	time.Sleep(1500 * time.Millisecond) // both healthy for a whole TTL: claims allowed
	resume := pg.Pause(t)
	time.Sleep(3 * time.Second)
	resume()
	time.Sleep(3 * time.Second)
	for _, g := range []*gatewaylite.Gateway{a, b} {
		select {
		case <-g.Lost():
			t.Errorf("replica %s lost its lease to a live replica", g.Replica())
		default:
		}
	}
}

// TestDenialStandsAfterItsReplicaDied: a call waited on a per-use
// approval on a replica that was killed; the operator denied it before
// another replica recovered the call. Recovery made it
// failed_before_dispatch, so the agent's retry asked for approval again:
// the denial did not stand. Now the recovery rejects it with the denial,
// and the retry gets that answer.
func TestDenialStandsAfterItsReplicaDied(t *testing.T) {
	defer gatewaylite.SetApprovalPoll(50 * time.Millisecond)()
	target, db, keys, config := replicaSetup(t, strings.Replace(perUseConfig, `approval_timeout = "3s"`, `approval_timeout = "1h"`, 1))
	_, survivor := inProcessReplica(t, config, db, keys)
	operator, err := activity.Open(ctx, db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer operator.Close()
	addr := freeAddr(t)
	doomed := startGatewayProcess(t, config, db, keys, addr)
	cs, err := loopback.Connect(ctx, "http://"+addr+"/mcp", agentToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"order": "o-77", "amount_cents": 9000}
	go call(t, cs, "refund", args, nil)
	var pending []activity.Approval
	waitFor(t, func() bool { pending, _ = operator.Approvals(ctx, true); return len(pending) == 1 }, "the call to wait on an approval")
	doomed.kill()
	if _, err := operator.DecideApproval(ctx, pending[0].ID, activity.ApprovalDenied, "alice", "fraudulent refund"); err != nil {
		t.Fatal(err)
	}
	var e activity.Execution
	waitFor(t, func() bool {
		e, err = operator.Execution(ctx, pending[0].ExecutionID)
		return err == nil && e.State != activity.StateAccepted
	}, "the survivor to recover the dead replica's call")
	if e.State != activity.StateRejected || !strings.Contains(e.Error, "denied by alice") {
		t.Fatalf("recovered as %s (%s), want rejected with the denial", e.State, e.Error)
	}
	cs2, err := loopback.Connect(ctx, survivor, agentToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	if m := execMeta(t, mustCall(t, cs2, "refund", args, nil)); m["state"] != "rejected" || m["id"] != string(e.ID) {
		t.Errorf("the retry: %v, want the denied execution, rejected", m)
	}
	if all, _ := operator.Approvals(ctx, false); len(all) != 1 {
		t.Errorf("%d approvals asked, want the one the operator denied", len(all))
	}
	if n := target.Total(); n != 0 {
		t.Fatalf("the target acted %d times", n)
	}
}
