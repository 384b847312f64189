// Package gatewaylite is mcpdup's embedded MCP gateway. Every tools/call
// gets an execution identity (execution id and intent fingerprint), a
// lifecycle recorded durably in the activity store before each next step,
// and a truthful answer. A retry of the same intent attaches to the
// existing execution instead of acting again.
package gatewaylite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
)

// Options configure a Gateway beyond its config file.
type Options struct {
	// KeyDir holds the fingerprint key (beside the log signing keys).
	KeyDir string
	// Logger receives operational messages; never secrets.
	Logger *slog.Logger
	// Now is the clock; nil means the store's (the database's, on PostgreSQL).
	Now func() time.Time
	// Version is reported to MCP clients.
	Version string
	// Lock is the database's gateway lock when the caller took it before
	// opening the store (as mcpdup gateway does); nil: New takes it. The
	// gateway releases it on Close either way.
	Lock *DatabaseLock
}

// Gateway is the MCP front, the dispatchers and the lifecycle recorder.
type Gateway struct {
	// outcomes counts outcome records queued behind answers and not yet
	// durable (recordOutcomeAsync).
	outcomes pending
	cfg      *Config
	store    *activity.Store
	fp       *Fingerprinter
	tools    map[string]*toolSpec
	server   *mcp.Server
	runs     *runTracker
	inflight inflight
	results  resultCache
	// lookups keeps the last inconclusive lookup of an unknown execution
	// (e.g. "still running on the host"), so a retry is told what is known.
	lookups  sync.Map
	delivery *deliveries
	auth     *authenticator
	limits   *rateLimits
	sessions *sessionLimits
	// overLimit bounds how many rate-limited calls are recorded one by one.
	overLimit *boundedLog
	// unread bounds how many requests whose body could not be read (too
	// large, too slow) are recorded one by one.
	unread *boundedLog
	// strangers records refused unauthenticated requests, bounded.
	strangers *strangers
	events    mcp.EventStore
	replica
	log     *slog.Logger
	now     func() time.Time
	closers []func() error
	bg      sync.WaitGroup
	stop    chan struct{}
}

// toolSpec is one tool as the gateway dispatches it, from the config or
// an upstream MCP server.
type toolSpec struct {
	name          string
	channel       activity.Channel
	contract      activity.Contract
	target        string
	method        string
	credentialRef string
	args          ArgSpec
	window        time.Duration
	timeout       time.Duration
	http          *httpTarget
	ssh           *sshTarget
	upstream      *upstreamTool
	statusURL     string
	schema        *inputSchema
	// perUseApproval: the tool's credential needs an operator's approval
	// for every execution.
	perUseApproval bool
}

// New builds a gateway on an open store: it loads the fingerprint key,
// connects upstream MCP servers, registers tools, and recovers executions
// a previous run left in flight.
func New(ctx context.Context, cfg *Config, store *activity.Store, opts Options) (*Gateway, error) {
	if opts.Now == nil {
		opts.Now = store.Now // on PostgreSQL the database's clock, which every replica shares
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.KeyDir == "" {
		opts.KeyDir = activity.DefaultKeyDir()
	}
	fp, err := LoadFingerprinter(opts.KeyDir)
	if err != nil {
		return nil, err
	}
	if err := sameFingerprintKey(ctx, store, fp, opts.KeyDir); err != nil {
		return nil, err
	}
	// One gateway process per database, held before anything is read:
	// recovery below may only settle executions no live process owns.
	lock := opts.Lock
	if lock == nil {
		if lock, err = LockDatabase(store.Path()); err != nil { // a PostgreSQL store's Path is still its URL
			return nil, err
		}
	}
	unlock := lock.Release
	g := &Gateway{
		cfg: cfg, store: store, fp: fp, tools: map[string]*toolSpec{},
		log: opts.Logger, now: opts.Now, stop: make(chan struct{}),
		closers: []func() error{unlock},
	}
	if g.auth, err = newAuthenticator(cfg.Actors); err != nil {
		g.Close()
		return nil, err
	}
	g.limits, g.strangers = newRateLimits(cfg.Limits), newStrangers(g)
	g.sessions = newSessionLimits(cfg.Limits.MaxSessions, cfg.RunIdleTimeout.Duration)
	g.overLimit = newBoundedLog(cfg.Limits.UnauthenticatedRecords)
	g.unread = newBoundedLog(cfg.Limits.UnauthenticatedRecords)
	g.runs = newRunTracker(g)
	g.delivery = newDeliveries(g)
	g.events = g.eventStore()
	g.server = mcp.NewServer(&mcp.Implementation{Name: "mcpdup-gateway", Version: opts.Version},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	g.server.AddReceivingMiddleware(g.everyCall)
	g.addAgentTools()
	client := newHTTPClient()
	for i := range cfg.Tools {
		t := &cfg.Tools[i]
		spec := &toolSpec{
			name: t.Name, channel: activity.Channel(t.Channel), contract: activity.Contract(t.Contract),
			method: t.Method, credentialRef: t.CredentialRef,
			args:   ArgSpec{Fingerprint: t.Fingerprint, Defaults: t.Defaults, OmitDefaults: t.DefaultsPolicy == "omit", SecretArgs: t.SecretArgs},
			window: t.AttachWindow.Duration, timeout: t.Timeout.Duration, statusURL: t.StatusURL,
			perUseApproval: t.CredentialRef != "" && cfg.Credentials[t.CredentialRef].PerUseApproval,
		}
		if spec.channel == activity.ChannelSSH {
			if spec.ssh, err = newSSHTarget(t, cfg.Credentials); err != nil {
				g.Close()
				return nil, err
			}
			spec.target, spec.method = spec.ssh.target(), spec.ssh.method()
		} else {
			if spec.http, err = newHTTPTarget(t, cfg.Credentials, client); err != nil {
				g.Close()
				return nil, err
			}
			spec.target = spec.http.target()
		}
		if spec.schema, err = compileSchema([]byte(t.InputSchema)); err != nil {
			g.Close()
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		g.addTool(spec, &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(t.InputSchema)})
	}
	for _, u := range cfg.Upstreams {
		if err := g.connectUpstream(ctx, u); err != nil {
			g.Close()
			return nil, err
		}
	}
	if err := g.startLease(ctx); err != nil {
		g.Close()
		return nil, err
	}
	g.closers = append(g.closers, g.endLease)
	if off := store.ClockOffset(); off > maxClockOffset || off < -maxClockOffset {
		g.log.Warn("this host's clock is off the database's; the gateway keeps the database's time (fix NTP on this host)", "offset", off)
	}
	g.bg.Add(1)
	go g.keepLease() // before recovery, which may wait on the write lock
	if err := g.recoverInFlight(ctx); err != nil {
		g.Close()
		return nil, fmt.Errorf("recover executions left in flight: %w", err)
	}
	if g.store.IsPostgres() {
		g.bg.Add(1)
		go g.sweep()
	}
	g.delivery.start()
	return g, nil
}

func (g *Gateway) addTool(spec *toolSpec, t *mcp.Tool) {
	g.tools[spec.name] = spec
	if t.Description == "" {
		t.Description = describe(spec)
	}
	g.server.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return g.handleCall(ctx, spec, req)
	})
}

// Settle waits until every outcome recorded behind an answer is durable,
// so a reader of the store sees what the agents were told. The gateway
// itself never needs it (a retry waits on the execution in flight).
func (g *Gateway) Settle() { g.outcomes.wait() }

// pending counts work in flight. Unlike a sync.WaitGroup it may grow while
// someone waits: calls still finishing while Close settles the rest.
type pending struct {
	mu   sync.Mutex
	n    int
	zero sync.Cond
}

func (p *pending) add() {
	p.mu.Lock()
	p.n++
	p.mu.Unlock()
}

func (p *pending) done() {
	p.mu.Lock()
	if p.n--; p.n == 0 && p.zero.L != nil {
		p.zero.Broadcast()
	}
	p.mu.Unlock()
}

func (p *pending) wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.zero.L == nil {
		p.zero.L = &p.mu
	}
	for p.n > 0 {
		p.zero.Wait()
	}
}

// maxClockOffset is how far this host's clock may be off the database's
// before the gateway says so at start.
const maxClockOffset = time.Second

// closeGrace is how long Close waits for calls' outcomes to be written.
var closeGrace = 10 * time.Second

// Close stops background work and upstream connections, after the
// outcomes in flight are written (at most closeGrace: then the store's
// writes are abandoned, Abort). The store stays open: its owner closes it.
func (g *Gateway) Close() error {
	select {
	case <-g.stop:
		return nil
	default:
		close(g.stop)
	}
	settled := make(chan struct{})
	go func() {
		g.Settle()
		if g.delivery != nil {
			g.delivery.stop()
		}
		g.bg.Wait()
		close(settled)
	}()
	var errs []error
	select {
	case <-settled:
	case <-time.After(closeGrace):
		// The database stopped answering (paused, unreachable): what is
		// not written stays dispatched, recovered as unknown at the next
		// start, as after a crash.
		g.log.Error("the database has not answered for "+closeGrace.String()+": abandoning the writes in flight", "replica", g.lease.ID)
		errs = append(errs, fmt.Errorf("gateway stopped with writes in flight: the database did not answer for %v", closeGrace))
		g.store.Abort()
		<-settled
	}
	for i := len(g.closers) - 1; i >= 0; i-- { // last opened, first closed: the lock goes last
		errs = append(errs, g.closers[i]())
	}
	return errors.Join(errs...)
}

// Handler returns the HTTP handler serving MCP over Streamable HTTP for
// both protocol eras, behind bearer-token authentication.
func (g *Gateway) Handler() http.Handler {
	getServer := func(*http.Request) *mcp.Server { return g.server }
	// The front bounds bodies at max_body_bytes; the SDK must not cut
	// lower at its own default.
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		EventStore:          g.events,
		SessionTimeout:      g.cfg.RunIdleTimeout.Duration,
		Logger:              g.log,
		MaxRequestBodyBytes: g.cfg.Limits.MaxBodyBytes,
	})
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		Logger:              g.log,
		MaxRequestBodyBytes: g.cfg.Limits.MaxBodyBytes,
	})
	return g.front(stateful, stateless)
}

// inflight lets a retry wait for the goroutine that is dispatching the
// execution it attached to.
type inflight struct {
	mu   sync.Mutex
	done map[activity.ExecutionID]chan struct{}
}

func (f *inflight) begin(id activity.ExecutionID) func() {
	// Already begun by this goroutine's caller (a resend inside execute):
	// the outer end closes it.
	end, _ := f.claim(id)
	return end
}

// claim begins id unless a goroutine already has: first says this one
// did (the others get an end that does nothing).
func (f *inflight) claim(id activity.ExecutionID) (end func(), first bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done == nil {
		f.done = map[activity.ExecutionID]chan struct{}{}
	}
	if _, ok := f.done[id]; ok {
		return func() {}, false
	}
	ch := make(chan struct{})
	f.done[id] = ch
	return func() {
		f.mu.Lock()
		delete(f.done, id)
		f.mu.Unlock()
		close(ch)
	}, true
}

// wait returns a channel closed when id's dispatch ends, or nil when no
// goroutine of this process is dispatching it.
func (f *inflight) wait(id activity.ExecutionID) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done[id]
}
