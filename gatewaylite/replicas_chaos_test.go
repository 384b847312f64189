package gatewaylite_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
)

// TestChaosReplicas runs the chaos workload (chaos.calls calls, the same
// faults at the target and at the agent) through three gateway replicas on
// one PostgreSQL database behind a round-robin balancer, while replicas are
// SIGKILLed and restarted at random; then through a pass-through with the
// same faults. The replicas must let no duplicate effect through, lose no
// record, and recover each dead replica's executions exactly once, and
// never a live one's.
func TestChaosReplicas(t *testing.T) {
	t.Setenv("TEST_AGENT_TOKEN", agentToken)
	n := *chaosCalls
	var fleet *replicaFleet
	gw := runChaos(t, n, func(t *testing.T, targetProxyURL, targetURL string) chaosFront {
		fleet = startFleet(t, 3, replicaTTL+"\n"+fmt.Sprintf(chaosConfig, targetProxyURL, targetURL))
		return fleet.front(t)
	})
	pt := runChaos(t, n, passThroughFront)
	rec := fleet.recoveries(t)
	// One history for all the writers: verified offline, the tables
	// rebuilt from the log.
	pub, err := fleet.store.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	audited, err := audit.VerifyStore(ctx, fleet.store, audit.Options{Key: pub})
	if err != nil {
		t.Fatal(err)
	}
	report := fmt.Sprintf("replica chaos run, %d calls, 3 replicas behind a round-robin balancer, %d SIGKILLs, naive retry layer, %d%%+%d%% target faults, %d%% agent-side faults:\n"+
		"  replicas:     %5d effects, %3d duplicate effects, %4d retries, %3d pending verification, %3d gave up (%v)\n"+
		"  pass-through: %5d effects, %3d duplicate effects, %4d retries, %3d gave up (%v)\n"+
		"  replicas' history check: %d invocations, %d ok, %d fail, %d info, %d duplicated, %d lost, %d recovered, %d still unknown\n"+
		"  leases: %d dead replicas recovered, each once; %d executions they left in flight recovered, each once; %d live replicas recovered\n"+
		"  the shared log: %d records from %d processes, audit verify %s (%s)",
		n, fleet.kills.Load(), 10, 10, 10, gw.effects, gw.duplicates, gw.retries, gw.pending, gw.gaveUp, gw.elapsed.Round(time.Millisecond),
		pt.effects, pt.duplicates, pt.retries, pt.gaveUp, pt.elapsed.Round(time.Millisecond),
		gw.history.Invocations, gw.history.OK, gw.history.Fail, gw.history.Info, gw.history.Duplicated, gw.history.Lost,
		gw.history.Recovered, gw.history.StillUnknown, rec.deadRecovered, rec.executions, rec.liveRecovered,
		audited.Records, rec.processes, audited.Result, audited.Integrity().Text)
	t.Log(report)
	fmt.Println(report)
	if gw.duplicates != 0 {
		t.Errorf("the replicas let %d duplicate effects through", gw.duplicates)
	}
	if gw.history.Duplicated != 0 || gw.history.Lost != 0 {
		t.Errorf("the replicas' history shows %d duplicated and %d lost actions", gw.history.Duplicated, gw.history.Lost)
	}
	if gw.history.OK > gw.effects || gw.history.OK+gw.history.StillUnknown < gw.effects {
		t.Errorf("history (%d ok, %d unknown) does not account for the target's %d effects", gw.history.OK, gw.history.StillUnknown, gw.effects)
	}
	if pt.duplicates == 0 {
		t.Errorf("the pass-through run shows no duplicates: the faults are not biting")
	}
	if fleet.kills.Load() == 0 || rec.deadRecovered == 0 || rec.executions == 0 {
		t.Errorf("no replica was killed and recovered with work in flight: %d kills, %d recovered, %d executions (if the recovery's reason was reworded, this check reads it: recoveries())",
			fleet.kills.Load(), rec.deadRecovered, rec.executions)
	}
	for _, p := range rec.problems {
		t.Error(p)
	}
	if audited.Tampered || !audited.Integrity().Tables {
		t.Errorf("the shared log does not verify: %+v", audited.Problems)
	}
}

// replicaFleet is n gateway processes on one PostgreSQL database, a
// balancer in front, and a killer that SIGKILLs and restarts them.
type replicaFleet struct {
	config, db, keys string
	mu               sync.Mutex
	procs            []*gatewayProcess
	killed           map[int]bool // pids
	kills            atomic.Int64
	stop             chan struct{}
	done             chan struct{}
	store            *activity.Store
}

func startFleet(t *testing.T, n int, config string) *replicaFleet {
	db, keys := sharedDB(t)
	f := &replicaFleet{config: config, db: db, keys: keys, killed: map[int]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	for range n {
		f.procs = append(f.procs, startGatewayProcess(t, config, db, keys, freeAddr(t)))
	}
	var err error
	if f.store, err = activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keys}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.store.Close() })
	return f
}

// front starts the balancer and the killer; finish stops the killer,
// restarts whoever is down, waits until every dead replica's lease has
// been claimed and until the live replicas are done with what they
// dispatched (an agent that gave up left calls running; read before
// their outcome, one is a "lost" action in the history).
func (f *replicaFleet) front(t *testing.T) chaosFront {
	b := &balancer{fleet: f, sticky: map[string]int{}, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	go f.killLoop(t)
	return chaosFront{url: srv.URL, store: f.store, finish: func() {
		close(f.stop)
		<-f.done
		f.waitRecovered(t)
		f.waitSettled(t)
	}}
}

// killLoop SIGKILLs a random replica every 0.5–1.5 s and restarts it on
// its address 0.2–0.6 s later (a new process: a new lease).
func (f *replicaFleet) killLoop(t *testing.T) {
	defer close(f.done)
	rng := rand.New(rand.NewPCG(3, 5))
	for {
		select {
		case <-f.stop:
			return
		case <-time.After(time.Duration(500+rng.IntN(1000)) * time.Millisecond):
		}
		i := rng.IntN(len(f.procs))
		f.mu.Lock()
		p := f.procs[i]
		f.killed[p.cmd.Process.Pid] = true
		f.mu.Unlock()
		p.kill()
		f.kills.Add(1)
		time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
		next := startGatewayProcess(t, f.config, f.db, f.keys, p.addr)
		f.mu.Lock()
		f.procs[i] = next
		f.mu.Unlock()
	}
}

// waitRecovered waits until every killed replica's lease is claimed.
func (f *replicaFleet) waitRecovered(t *testing.T) {
	waitFor(t, func() bool {
		leases, err := f.store.Leases(ctx)
		if err != nil {
			return false
		}
		for _, l := range leases {
			if f.killed[l.PID] && l.RecoveredBy == "" {
				return false
			}
		}
		return true
	}, "every killed replica's lease to be recovered")
}

// waitSettled waits until no execution is on its way to an outcome
// (accepted, authorized or dispatched): the tools' timeouts end each.
func (f *replicaFleet) waitSettled(t *testing.T) {
	waitFor(t, func() bool {
		st, err := f.store.Stats(ctx)
		if err != nil {
			return false
		}
		return st.ByState[activity.StateAccepted]+st.ByState[activity.StateAuthorized]+st.ByState[activity.StateDispatched] == 0
	}, "the live replicas' executions to reach an outcome")
}

type recoveryCheck struct {
	deadRecovered, liveRecovered, executions, processes int
	problems                                            []string
}

// recoveries checks, from the store, that every killed replica was
// recovered by one live one and no live one was, that each execution a
// dead replica left was recovered once, and that none is left in flight
// with a dead owner.
func (f *replicaFleet) recoveries(t *testing.T) recoveryCheck {
	var rc recoveryCheck
	leases, err := f.store.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dead := map[string]bool{}
	rc.processes = len(leases)
	for _, l := range leases {
		switch {
		case l.RecoveredBy != "" && !f.killed[l.PID]:
			rc.liveRecovered++
			rc.problems = append(rc.problems, fmt.Sprintf("live replica %s (pid %d) was recovered by %s", l.ID, l.PID, l.RecoveredBy))
		case l.RecoveredBy != "":
			rc.deadRecovered++
			dead[l.ID] = true
		case f.killed[l.PID]:
			rc.problems = append(rc.problems, fmt.Sprintf("killed replica %s (pid %d) was never recovered", l.ID, l.PID))
		}
	}
	seen := map[string]int{}
	err = f.store.ScanTransitions(ctx, 0, -1, func(tr *activity.TransitionRow) error {
		_, after, ok := strings.Cut(tr.Reason, "gateway replica ")
		if !ok || !strings.Contains(tr.Reason, "; recovered by ") {
			return nil
		}
		owner, _, _ := strings.Cut(after, " ")
		seen[string(tr.ExecutionID)+" "+owner]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, c := range seen {
		rc.executions++
		if c != 1 {
			rc.problems = append(rc.problems, fmt.Sprintf("execution and dead replica %s: recovered %d times", k, c))
		}
	}
	left, err := f.store.Executions(ctx, activity.ExecutionFilter{Live: true, States: []activity.State{activity.StateAccepted,
		activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded, activity.StateFailed}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if dead[e.Replica] {
			rc.problems = append(rc.problems, fmt.Sprintf("execution %s is still %s, owned by dead replica %s", e.ID, e.State, e.Replica))
		}
	}
	return rc
}

// balancer spreads requests over the fleet round-robin, as a load
// balancer without session affinity for new sessions does; a request of
// an MCP session goes to the replica that opened it while it lives (and
// elsewhere, which does not know the session, once it is gone). A replica
// that refuses the connection (killed) is skipped.
type balancer struct {
	fleet  *replicaFleet
	next   atomic.Uint64
	mu     sync.Mutex
	sticky map[string]int
	client *http.Client
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, "read request", http.StatusBadRequest)
		return
	}
	b.fleet.mu.Lock()
	addrs := make([]string, len(b.fleet.procs))
	for i, p := range b.fleet.procs {
		addrs[i] = p.addr
	}
	b.fleet.mu.Unlock()
	first := int(b.next.Add(1) % uint64(len(addrs)))
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		b.mu.Lock()
		if i, ok := b.sticky[sid]; ok {
			first = i
		}
		b.mu.Unlock()
	}
	for k := range addrs {
		i := (first + k) % len(addrs)
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addrs[i]+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := b.client.Do(req)
		if errors.Is(err, syscall.ECONNREFUSED) {
			continue // that replica is down: the next one
		}
		if err != nil {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			b.mu.Lock()
			b.sticky[sid] = i
			b.mu.Unlock()
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		flush := http.NewResponseController(w)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				w.Write(buf[:n])
				flush.Flush()
			}
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		return
	}
	http.Error(w, "no replica is up", http.StatusBadGateway)
}
