package gatewaylite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/mcpdup/mcpdup/activity"
)

// What of a stranger's request is looked at and recorded: a prefix of its
// body, under a short deadline, and a name of bounded length.
const (
	strangerPrefix  = 4 << 10
	strangerWait    = 2 * time.Second
	maxSummaryName  = 64
	maxRPCID        = 128 // a JSON-RPC id kept for correlation
	unauthenticated = "unauthenticated"
)

// strangers records requests that presented no valid token, as bounded
// summaries (method, tool name truncated, size, peer), never their
// payload, at most UnauthenticatedRecords per second: a flood of strangers
// costs the append-only log a bounded amount per second, and the ones
// beyond the rate are counted into the next record.
type strangers struct {
	g   *Gateway
	log *boundedLog
}

func newStrangers(g *Gateway) *strangers {
	return &strangers{g: g, log: newBoundedLog(g.cfg.Limits.UnauthenticatedRecords)}
}

// boundedLog lets through at most per records a second (twice that in a
// burst) of refusals a flood could repeat without end; the ones held back
// are counted into the next record that is written.
type boundedLog struct {
	limiter *rate.Limiter
	dropped atomic.Int64
}

func newBoundedLog(per float64) *boundedLog {
	return &boundedLog{limiter: rate.NewLimiter(rate.Limit(per), max(1, int(2*per)))}
}

// take reports whether one more refusal may be recorded, and the text
// that says how many of what were held back since the last one.
func (l *boundedLog) take(what string) (more string, ok bool) {
	if !l.limiter.Allow() {
		l.dropped.Add(1)
		return "", false
	}
	if n := l.dropped.Swap(0); n > 0 {
		more = fmt.Sprintf("; %d more %s refused since the last record, not recorded one by one", n, what)
	}
	return more, true
}

var (
	methodField = regexp.MustCompile(`"method"\s*:\s*"([^"\\]{0,128})`)
	nameField   = regexp.MustCompile(`"name"\s*:\s*"([^"\\]{0,512})`)
)

// refuse records one refused request, if the rate allows.
func (s *strangers) refuse(w http.ResponseWriter, r *http.Request, why string) {
	more, ok := s.log.take("unauthenticated requests")
	if !ok {
		return
	}
	method, tool, read := r.Method, "", 0
	if r.Method == http.MethodPost && r.Body != nil {
		prefix := readPrefix(w, r)
		read = len(prefix)
		if m := methodField.FindSubmatch(prefix); m != nil {
			method = string(m[1])
		}
		if m := nameField.FindSubmatch(prefix); m != nil && method == "tools/call" {
			tool = string(m[1])
		}
	}
	size := "size not declared, " + strconv.Itoa(read) + "+ bytes seen"
	if r.ContentLength >= 0 {
		size = strconv.FormatInt(r.ContentLength, 10) + " bytes"
	}
	reason := fmt.Sprintf("%s; %s %s from %s (%s)", why, r.Method, r.URL.Path, r.RemoteAddr, size)
	reason += more
	s.g.recordRefused(context.Background(), activity.Call{
		Actor: unauthenticated, Method: truncate(method, maxSummaryName), Tool: truncate(tool, maxSummaryName),
		ReceivedAt: s.g.now().UTC(), ProtocolVersion: optString(truncate(r.Header.Get("MCP-Protocol-Version"), 32)),
		Reason: truncate(reason, 512),
	})
}

// readPrefix reads at most strangerPrefix bytes of the body, within
// strangerWait: a slow stranger costs at most that.
func readPrefix(w http.ResponseWriter, r *http.Request) []byte {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(strangerWait))
	b, _ := io.ReadAll(io.LimitReader(r.Body, strangerPrefix))
	return b
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
