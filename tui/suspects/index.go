package suspects

import (
	"bytes"
	"slices"
	"sort"
	"strings"

	"github.com/mcpdup/mcpdup/analyze"
)

// index keeps what sorting, filtering and counting need per suspect, so
// that a key press with 100,000 suspects loaded does O(n) simple work at
// most: lower-cased search text, the sort keys, the verdict counts, and
// every sort order used so far (kept up to date by merging as suspects
// stream in, so changing the sort back and forth does not sort again).
type index struct {
	// hay is the lower-cased text the filter searches, every suspect's
	// fields one after another in one buffer (one pass of bytes.Index over
	// contiguous memory, not 100,000 scattered strings); suspect i is
	// hay[off[i]:off[i+1]-1], each ended by a newline.
	hay     []byte
	off     []int
	sev     []int   // severity rank, higher first
	verdict []int   // position in analyze.Verdicts
	first   []int64 // first call, Unix nanoseconds
	counts  analyze.Counts
	orders  map[int][]int32 // by sort; each holds every suspect
}

func (x *index) add(all []analyze.Row) {
	from := len(x.sev)
	if x.counts == nil {
		x.counts = analyze.Counts{}
		x.off = []int{0}
	}
	for _, s := range all[from:] {
		for _, f := range []string{string(s.Verdict), s.Tool, s.ID, string(s.Severity), s.Title, s.Target} {
			x.hay = append(x.hay, strings.ToLower(strings.ReplaceAll(f, "\n", " "))...)
			x.hay = append(x.hay, 0)
		}
		x.hay[len(x.hay)-1] = '\n'
		x.off = append(x.off, len(x.hay))
		x.sev = append(x.sev, s.Severity.Rank())
		x.verdict = append(x.verdict, slices.Index(analyze.Verdicts, s.Verdict))
		x.first = append(x.first, s.FirstAt.UnixNano())
		x.counts[s.Verdict]++
	}
	// Every order is kept, so that changing the sort is never a sort.
	for by := range sorts {
		if ord, ok := x.orders[by]; ok {
			x.orders[by] = x.merge(all, by, ord, from)
		} else {
			x.order(all, by)
		}
	}
}

// order is every suspect sorted by sort by; ties keep load order.
func (x *index) order(all []analyze.Row, by int) []int32 {
	if ord, ok := x.orders[by]; ok {
		return ord
	}
	ord := make([]int32, len(all))
	for i := range ord {
		ord[i] = int32(i)
	}
	slices.SortFunc(ord, x.compare(all, by))
	if x.orders == nil {
		x.orders = map[int][]int32{}
	}
	x.orders[by] = ord
	return ord
}

// merge adds suspects from..len(all) to an order. It always builds a new
// slice: a filtered view may still share the old one.
func (x *index) merge(all []analyze.Row, by int, ord []int32, from int) []int32 {
	more := make([]int32, 0, len(all)-from)
	for i := from; i < len(all); i++ {
		more = append(more, int32(i))
	}
	cmp := x.compare(all, by)
	slices.SortFunc(more, cmp)
	out := make([]int32, 0, len(ord)+len(more))
	i, j := 0, 0
	for i < len(ord) && j < len(more) {
		if cmp(ord[i], more[j]) <= 0 {
			out = append(out, ord[i])
			i++
		} else {
			out = append(out, more[j])
			j++
		}
	}
	out = append(out, ord[i:]...)
	return append(out, more[j:]...)
}

// compare returns the order of sort by; ties keep load order. The sort
// is chosen once, outside the comparisons.
func (x *index) compare(all []analyze.Row, by int) func(a, b int32) int {
	var c func(a, b int32) int
	switch sorts[by] {
	case "severity":
		c = func(a, b int32) int {
			if d := x.sev[b] - x.sev[a]; d != 0 {
				return d
			}
			return cmp64(x.first[a], x.first[b])
		}
	case "time":
		c = func(a, b int32) int { return cmp64(x.first[a], x.first[b]) }
	case "tool":
		c = func(a, b int32) int { return strings.Compare(all[a].Tool, all[b].Tool) }
	default: // verdict
		c = func(a, b int32) int { return x.verdict[a] - x.verdict[b] }
	}
	return func(a, b int32) int {
		if d := c(a, b); d != 0 {
			return d
		}
		return int(a - b)
	}
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// filter keeps the suspects of ord whose text contains q. Over many rows
// it searches the whole buffer once and marks the suspects hit; over few
// (a filter being narrowed) it looks at each row's text.
func (x *index) filter(ord []int32, q string) []int32 {
	out := make([]int32, 0, 64)
	needle := []byte(q)
	if len(ord) < len(x.sev)/8 {
		for _, i := range ord {
			if bytes.Contains(x.hay[x.off[i]:x.off[i+1]-1], needle) {
				out = append(out, i)
			}
		}
		return out
	}
	hit := make([]bool, len(x.sev))
	for at := 0; at < len(x.hay); {
		j := bytes.Index(x.hay[at:], needle)
		if j < 0 {
			break
		}
		// The suspect whose text holds the match; go on from its end.
		i := sort.SearchInts(x.off, at+j+1) - 1
		hit[i] = true
		at = x.off[i+1]
	}
	for _, i := range ord {
		if hit[i] {
			out = append(out, i)
		}
	}
	return out
}
