package gatewaylite

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"
)

// LimitsConfig bounds what any client, authenticated or not, can make the
// gateway hold: connections, bytes, time, and calls per actor.
type LimitsConfig struct {
	// MaxBodyBytes bounds a request body; larger ones get 413.
	MaxBodyBytes int64 `toml:"max_body_bytes"`
	// MaxConnections bounds open connections; more wait to be accepted.
	MaxConnections int `toml:"max_connections"`
	// ReadHeaderTimeout bounds reading the request line and headers.
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	// ReadTimeout bounds reading the whole request body. It is applied per
	// request, not on the server: a server-wide read deadline would also
	// cut a 2025-era client's long-lived SSE stream.
	ReadTimeout Duration `toml:"read_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout Duration `toml:"idle_timeout"`
	// RatePerSecond and RateBurst limit each actor's requests (token
	// bucket); 0 takes the default, -1 turns the limit off.
	RatePerSecond float64 `toml:"rate_per_second"`
	RateBurst     int     `toml:"rate_burst"`
	// UnauthenticatedRecords bounds how many refused unauthenticated
	// requests are recorded per second (each as a bounded summary); the
	// ones beyond are counted into the next record.
	UnauthenticatedRecords float64 `toml:"unauthenticated_records_per_second"`
	// AllowedOrigins are the browser origins allowed besides the gateway's
	// own host (and loopback when it is on loopback), e.g.
	// "https://console.example.com".
	AllowedOrigins []string `toml:"allowed_origins"`
	// MaxSessions bounds the 2025-era sessions an actor opens within the
	// session timeout (run_idle_timeout): the SDK holds each (~7 KB) until
	// it times out, so a client opening sessions it never closes would
	// grow the gateway without end. 0 takes the default, -1 turns it off.
	MaxSessions int `toml:"max_sessions_per_actor"`
}

// Defaults of [limits].
const (
	DefaultMaxBodyBytes           = 4 << 20
	DefaultMaxConnections         = 256
	DefaultReadHeaderTimeout      = 10 * time.Second
	DefaultReadTimeout            = 30 * time.Second
	DefaultIdleTimeout            = 2 * time.Minute
	DefaultRatePerSecond          = 200
	DefaultRateBurst              = 400
	DefaultUnauthenticatedRecords = 20
	DefaultMaxSessions            = 10000
)

func (l *LimitsConfig) normalise() error {
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxConnections == 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	setDefault(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDefault(&l.ReadTimeout, DefaultReadTimeout)
	setDefault(&l.IdleTimeout, DefaultIdleTimeout)
	if l.RatePerSecond == 0 {
		l.RatePerSecond = DefaultRatePerSecond
		if l.RateBurst == 0 {
			l.RateBurst = DefaultRateBurst
		}
	}
	if l.RateBurst == 0 {
		l.RateBurst = max(1, int(2*l.RatePerSecond))
	}
	if l.UnauthenticatedRecords == 0 {
		l.UnauthenticatedRecords = DefaultUnauthenticatedRecords
	}
	if l.MaxSessions == 0 {
		l.MaxSessions = DefaultMaxSessions
	}
	switch {
	case l.MaxBodyBytes < 1024:
		return fmt.Errorf("limits.max_body_bytes: %d is below 1024", l.MaxBodyBytes)
	case l.MaxConnections < 1:
		return fmt.Errorf("limits.max_connections: %d is below 1", l.MaxConnections)
	case (l.RatePerSecond < 0 && l.RatePerSecond != -1) || l.RateBurst < 1:
		return fmt.Errorf("limits: rate_per_second %g and rate_burst %d must be positive (rate_per_second = -1 turns the limit off)", l.RatePerSecond, l.RateBurst)
	case l.MaxSessions < -1:
		return fmt.Errorf("limits.max_sessions_per_actor: %d is below -1 (-1 turns the limit off)", l.MaxSessions)
	case l.UnauthenticatedRecords < 0:
		return fmt.Errorf("limits.unauthenticated_records_per_second: %g is negative", l.UnauthenticatedRecords)
	}
	for _, o := range l.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" {
			return fmt.Errorf("limits.allowed_origins: %q is not an origin (scheme://host[:port])", o)
		}
	}
	return nil
}

// Listen opens the gateway's listener at cfg.Listen, bounded to
// MaxConnections open connections.
func (g *Gateway) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", g.cfg.Listen)
	if err != nil {
		return nil, err
	}
	return g.LimitListener(ln), nil
}

// LimitListener bounds ln to MaxConnections open connections: beyond
// that, new connections wait in the kernel's backlog instead of costing a
// descriptor each.
func (g *Gateway) LimitListener(ln net.Listener) net.Listener {
	return netutil.LimitListener(ln, g.cfg.Limits.MaxConnections)
}

// Server is the HTTP server for Handler, with the configured timeouts.
func (g *Gateway) Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: g.cfg.Limits.ReadHeaderTimeout.Duration,
		IdleTimeout:       g.cfg.Limits.IdleTimeout.Duration,
		MaxHeaderBytes:    64 << 10,
	}
}

// rateLimits holds one token bucket per actor.
type rateLimits struct {
	mu      sync.Mutex
	limit   rate.Limit
	burst   int
	buckets map[string]*rate.Limiter
}

func newRateLimits(l LimitsConfig) *rateLimits {
	r := &rateLimits{limit: rate.Limit(l.RatePerSecond), burst: l.RateBurst, buckets: map[string]*rate.Limiter{}}
	if l.RatePerSecond < 0 {
		r.limit = rate.Inf
	}
	return r
}

// allow takes one token of actor's bucket; actors are the configured
// ones, so the map is bounded.
func (r *rateLimits) allow(actor string) bool {
	r.mu.Lock()
	b := r.buckets[actor]
	if b == nil {
		b = rate.NewLimiter(r.limit, r.burst)
		r.buckets[actor] = b
	}
	r.mu.Unlock()
	return b.Allow()
}

// sessionLimits counts each actor's live 2025-era sessions the way the
// SDK holds them: from the answer that gave the session its id until a
// DELETE closed it or it sat idle for the session timeout (the SDK's
// SessionTimeout: no request in flight for that long). A client that
// closes its sessions is never refused however many it opens; one that
// keeps a session busy keeps it counted. Ids are added only from the
// SDK's answers, never from a client's header, and actors are the
// configured ones: at most max sessions per actor are remembered.
type sessionLimits struct {
	mu      sync.Mutex
	max     int
	window  time.Duration
	live    map[string]map[string]*liveSession // actor → session id
	opening map[string]int                     // initializes not answered yet
}

// liveSession is what the SDK's idle timer follows: requests in flight
// and when the last one ended.
type liveSession struct {
	last     time.Time
	inflight int
}

func newSessionLimits(max int, window time.Duration) *sessionLimits {
	return &sessionLimits{max: max, window: window, live: map[string]map[string]*liveSession{}, opening: map[string]int{}}
}

// open reports whether actor may open one more session now and, if so,
// holds a place for it until opened is called.
func (l *sessionLimits) open(actor string, now time.Time) bool {
	if l.max < 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.live[actor]
	for id, ls := range s {
		if ls.inflight == 0 && now.Sub(ls.last) > l.window {
			delete(s, id) // the SDK has timed it out
		}
	}
	if len(s)+l.opening[actor] >= l.max {
		return false
	}
	l.opening[actor]++
	return true
}

// opened gives back the place open held, counting the session the answer
// named (id; "" when the initialize failed).
func (l *sessionLimits) opened(actor, id string, now time.Time) {
	if l.max < 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opening[actor]--
	if id == "" {
		return
	}
	if l.live[actor] == nil {
		l.live[actor] = map[string]*liveSession{}
	}
	l.live[actor][id] = &liveSession{last: now}
}

// begin notes a request in actor's session id: the SDK's idle timer
// stops while one is in flight. An id the actor was not given is ignored.
func (l *sessionLimits) begin(actor, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.live[actor][id]; ls != nil {
		ls.inflight++
	}
}

// end notes the request begin noted has ended.
func (l *sessionLimits) end(actor, id string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.live[actor][id]; ls != nil {
		ls.inflight--
		ls.last = now
	}
}

// close forgets actor's session id: the SDK closed it.
func (l *sessionLimits) close(actor, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.live[actor], id)
}

// sessionAnswer updates the session count from an answer's status,
// before any byte of it leaves: a client may close a session the moment
// it hears of it, and open the next the moment it hears one closed. It
// counts the session an initialize's answer names, and forgets one that
// a DELETE the SDK accepted closed or a 404 says the SDK no longer holds
// (timed out).
func (g *Gateway) sessionAnswer(w http.ResponseWriter, r *http.Request, actor string, opening bool) func(code int) {
	sid := r.Header.Get("Mcp-Session-Id")
	return func(code int) {
		switch {
		case opening:
			g.sessions.opened(actor, w.Header().Get("Mcp-Session-Id"), g.now())
		case sid != "" && (r.Method == http.MethodDelete && code < http.StatusMultipleChoices || code == http.StatusNotFound):
			g.sessions.close(actor, sid)
		}
	}
}

// originAllowed checks the Origin header the way the SDK checks Host: a
// browser on some other site must not drive a local gateway (MCP
// transports, "Security Warning": servers must validate Origin). No
// Origin (a non-browser client) is fine.
func originAllowed(r *http.Request, allowed []string) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	if slices.Contains(allowed, o) {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false // includes "null": an opaque origin
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return isLoopbackHost(u.Hostname()) && isLoopbackHost(hostOnly(r.Host))
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}
