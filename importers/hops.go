package importers

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// A request through a mesh is logged once by each proxy it crosses (an
// Istio sidecar on the caller's side and one on the target's, a front
// proxy and a service's), under the one request id the first proxy gave
// it. Two such lines are one send, not two: the second proxy's line lies
// within the first's time (it started after and ended before), with the
// same method and path. A client's resend starts after its first attempt
// ended, or after the proxy logged it gone (Envoy's DC): not within it.
//
// Each proxy writes its own log (one file per sidecar), so the other line
// is often in another file: one imported with this one, or before it.
// The store is asked for those (sink.importedHop).

// maxHops bounds each generation of remembered requests; two generations
// are kept, so the most recent maxHops to 2×maxHops.
const maxHops = 1 << 17

type hop struct {
	start, end   time.Time
	method, path string
	// via is where in the path the line was logged (Mapping.Via: an
	// Istio sidecar's outbound|… or inbound|… cluster), upstream where
	// the proxy sent it; empty: not recorded. Within one file a hop's
	// two lines name two (twoProxies): one proxy's two lines under one
	// id are a resend, the client reusing or propagating the id (Istio
	// asks apps to), or hedging it.
	via, upstream string
	// coarse: its time was logged in whole seconds (nginx's
	// $time_local), so it happened up to a second later than it shows.
	coarse bool
	// status is the line's answer (0: none): an outer hop that answered
	// 2xx relayed an inner hop's 2xx.
	status int
	// line is a digest of the line as logged: two lines that differ
	// anywhere (a request length, an upstream time) are two sends,
	// however alike their times, which whole seconds make alike.
	line uint64
}

// hopIndex remembers recent requests by their proxy request id.
type hopIndex struct {
	cur, prev map[string]hop
}

// seenAt reports whether h is the request id's earlier line seen again at
// another hop, or the very line again (again: byte for byte, as a log
// shipper that delivers at least once writes it twice), and remembers h
// otherwise.
func (x *hopIndex) seenAt(id string, h hop) (seen, again bool) {
	if len(id) < activity.MinRequestID {
		return false, false
	}
	if x.cur == nil {
		x.cur = map[string]hop{}
	}
	for _, m := range []map[string]hop{x.cur, x.prev} {
		if o, ok := m[id]; ok && o == h {
			return true, true
		} else if ok && twoProxies(h, o) && sameSend(h, o) {
			return true, false
		}
	}
	if len(x.cur) == maxHops {
		x.prev, x.cur = x.cur, map[string]hop{}
	}
	x.cur[id] = h
	return false, false
}

// importedHop reports whether a file imported before this one holds h's
// request under its request id, seen at another proxy, or the very line
// (again: the same target and times, as two overlapping exports of one
// log hold; a log that grew is known before, by its content: grown.go).
// The store is asked only once it holds a request id from any import
// (asked once a file).
func (k *sink) importedHop(id, target string, h hop) (seen, again bool, err error) {
	if len(id) < activity.MinRequestID {
		return false, false, nil
	}
	beside := k.opts.SeenIn // a dry run's: the database it stands beside
	if !k.hopsAsked {
		k.hopsAsked = true
		prior, err := k.w.AnyImportedRequestID()
		if err == nil && !prior && beside != nil {
			prior, err = beside.AnyImportedRequestID(context.Background())
		}
		if err != nil {
			return false, false, fmt.Errorf("import %s: %w", k.file, err)
		}
		k.hopsPrior = prior
	}
	if !k.hopsPrior {
		return false, false, nil
	}
	imported, err := k.w.ImportedRequests(id, k.src)
	if err == nil && beside != nil {
		var more []activity.ImportedRequest
		more, err = beside.ImportedRequests(context.Background(), id, k.src)
		imported = append(imported, more...)
	}
	if err != nil {
		return false, false, fmt.Errorf("import %s: %w", k.file, err)
	}
	for _, o := range imported {
		// The other proxy may name the host otherwise (a front proxy's
		// public name, a sidecar's service name): the path must agree.
		other := hop{start: o.Start, end: o.End, method: o.Method, path: targetPath(o.Target), coarse: coarseStored(o.Start, o.End), status: o.Status}
		if sameSend(h, other) {
			return true, o.Target == target && o.Start.Equal(h.start) && o.End.Equal(h.end), nil
		}
	}
	return false, false, nil
}

// lineSum is a line's digest (hop.line), spaces around it aside.
func lineSum(line []byte) uint64 {
	f := fnv.New64a()
	f.Write(bytes.TrimSpace(line))
	return f.Sum64()
}

// twoProxies reports whether two lines of one file are two proxies'
// (a log holding several sidecars'): they were logged at two places in
// the path (via), or, where that is not recorded, sent to two upstreams
// at once (a resend or a hedge to another replica starts later than a
// request reaches the next proxy). Without either, the file is taken for
// one proxy's: two sends.
func twoProxies(a, b hop) bool {
	if a.via != "" && b.via != "" {
		return a.via != b.via
	}
	return a.upstream != "" && b.upstream != "" && a.upstream != b.upstream &&
		a.start.Sub(b.start).Abs() <= hopDelay
}

// hopDelay is how much later than the first proxy the next one sees a
// request, at most: milliseconds on a mesh, queueing included.
const hopDelay = 100 * time.Millisecond

// hopSlack is how far a line may lie outside the other's time and still
// be within it. Proxies log whole milliseconds, start and duration each
// truncated, so a line's end shows up to 2 ms early, and the other
// line's by as much: the inner line may seem to end just after the outer.
// Two proxies' clocks (a sidecar on each node) differ by a few ms more.
const hopSlack = 5 * time.Millisecond

// msTruncation is how much earlier than it happened a whole-millisecond
// log shows a line's end.
const msTruncation = 2 * time.Millisecond

// sameSend reports whether two lines under one request id are one send
// seen at two proxies: the same method and path, one within the other,
// and answers the outer could have relayed from the inner.
func sameSend(a, b hop) bool {
	return a.method == b.method && a.path == b.path && (within(a, b) && relays(b, a) || within(b, a) && relays(a, b))
}

// relays reports whether the outer hop's answer could be the inner's: an
// outer 2xx passed on an inner 2xx. An inner hop that got no answer, or
// saw its client (the outer proxy) leave, or was refused, makes the outer
// answer an error, not a success: a short refused line inside a success
// under one request id is a client's resend reusing the id (ingress-nginx
// keeps a client's X-Request-ID), two sends.
func relays(outer, inner hop) bool {
	return !success(outer.status) || success(inner.status)
}

func success(status int) bool { return status >= 200 && status < 300 }

// within reports whether a lies inside b's time. The two must also
// overlap (but for truncation): a short line that ended before b began is
// b's predecessor (a refused send, then the client's resend 4 ms later),
// however close their starts.
//
// A line logged in whole seconds (coarse) happened up to a second later
// than it shows. within asks whether some such shift of the two puts a
// inside b: d, how much later a happened than b against what they show,
// lies in [-b's shift, a's shift] and meets every bound.
func within(a, b hop) bool {
	lo := max(b.start.Sub(a.start)-hopSlack, b.start.Sub(a.end)-msTruncation)
	hi := min(b.end.Sub(a.end)+hopSlack, b.end.Sub(a.start)+msTruncation)
	return lo <= hi && lo <= shift(a) && hi >= -shift(b)
}

// shift is how much later than it shows a line may have happened.
func shift(h hop) time.Duration {
	if h.coarse {
		return time.Second - time.Millisecond
	}
	return 0
}

// coarseTime reports whether a logged time has whole seconds only: no
// fraction written ("28/Nov/2026:11:00:07 +0000", an RFC 3339 time
// without one).
func coarseTime(raw string, t time.Time) bool {
	return t.Nanosecond() == 0 && !strings.ContainsAny(raw, ".,")
}

// coarseStored reports whether a stored request's times show it was
// logged in whole seconds as it ended (nginx's time_at = "end"): an end on
// a whole second, a start that is not (the end less a duration in ms).
func coarseStored(start, end time.Time) bool {
	return end.Nanosecond() == 0 && start.Nanosecond() != 0
}

// targetPath is the path of a target a mapped import stored (its host,
// then its path: request.target).
func targetPath(target string) string {
	if i := strings.IndexByte(target, '/'); i >= 0 {
		return target[i:]
	}
	return ""
}
