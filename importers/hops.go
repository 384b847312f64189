package importers

import "time"

// A request through a mesh is logged once by each proxy it crosses (an
// Istio sidecar on the caller's side and one on the target's, a front
// proxy and a service's), under the one request id the first proxy gave
// it. Two such lines are one send, not two: the second proxy's line lies
// within the first's time (it started after and ended before), with the
// same method and path. A client's resend starts after its first attempt
// ended, or after the proxy logged it gone (Envoy's DC): not within it.

// minHopID is the shortest request id taken for a proxy's: x-request-id is
// a UUID, nginx's $request_id 32 hex digits. Shorter ids (JSON-RPC's 1, 2,
// 3 …) repeat across sessions.
const minHopID = 16

// maxHops bounds each generation of remembered requests; two generations
// are kept, so the most recent maxHops to 2×maxHops.
const maxHops = 1 << 17

type hop struct {
	start, end   time.Time
	method, path string
}

// hopIndex remembers recent requests by their proxy request id.
type hopIndex struct {
	cur, prev map[string]hop
}

// seenAt reports whether h is the request id's earlier line seen again at
// another hop, and remembers h otherwise.
func (x *hopIndex) seenAt(id string, h hop) bool {
	if len(id) < minHopID {
		return false
	}
	if x.cur == nil {
		x.cur = map[string]hop{}
	}
	for _, m := range []map[string]hop{x.cur, x.prev} {
		if o, ok := m[id]; ok && o.method == h.method && o.path == h.path && (within(h, o) || within(o, h)) {
			return true
		}
	}
	if len(x.cur) == maxHops {
		x.prev, x.cur = x.cur, map[string]hop{}
	}
	x.cur[id] = h
	return false
}

// within reports whether a lies inside b's time.
func within(a, b hop) bool {
	return !a.start.Before(b.start) && !a.end.After(b.end)
}
