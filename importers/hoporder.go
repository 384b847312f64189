package importers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Proxy logs given together are read innermost first. A request crossing
// two proxies is logged by each under one request id, and the second line
// read of it is dropped as the same send seen at another hop (hops.go).
// The inner line (a target-side sidecar's) carries the send's own times;
// the outer one (an ingress, a gateway in front) spans every try the
// inner proxy made. Read outer first, a retry behind the ingress looked
// like its first send (Envoy Gateway in front of Istio, a per-try
// timeout: Q3 and Q4 described the retry). Which file is inner is told by
// what its lines name as where they were logged (the mapping's via:
// Envoy's upstream_cluster inbound|… on a target's sidecar).

// hopSample is how many lines of a file are read to place it.
const hopSample = 256

// hopDepth is the share of a file's first lines logged on a target's
// side, or 0 when its format names no such place.
func hopDepth(path string, opts Options) float64 {
	d := mappedFor(path, opts)
	if d == nil || len(d.m.Via.From) == 0 {
		return 0
	}
	in, err := openLines(path)
	if err != nil {
		return 0
	}
	defer in.Close()
	wrapper := unwrapper{bare: d.m.reads}
	inbound, seen := 0, 0
	for seen < hopSample {
		line, err := in.Next()
		if errors.Is(err, io.EOF) || err != nil {
			break
		}
		line, whole, err := wrapper.line(line)
		if err != nil || !whole || notJSON(line) {
			continue
		}
		doc, err := d.jsonLine(bytes.TrimSpace(line))
		if err != nil {
			continue
		}
		if via := d.m.Via.value(doc); via != "" {
			seen++
			if strings.HasPrefix(via, "inbound|") {
				inbound++
			}
		}
	}
	if seen == 0 {
		return 0
	}
	return float64(inbound) / float64(seen)
}

// mappedFor is the mapping a file is read through, or nil.
func mappedFor(path string, opts Options) *mapped {
	if opts.Mapping != nil {
		if opts.Mapping.Format == "otlp" {
			return nil
		}
		return &mapped{m: opts.Mapping}
	}
	format := opts.Format
	if format == "" || format == "auto" {
		h, err := head(path, detectHead)
		if err != nil {
			return nil
		}
		if format, err = Detect(h); err != nil {
			return nil
		}
	}
	newDecoder, ok := formats[format]
	if !ok {
		return nil
	}
	d, _ := newDecoder(path).(*mapped)
	return d
}

// innermostFirst orders paths so that proxy files logged nearer the
// target come first, the rest keeping their order; moved names the files
// that now come before files given ahead of them.
func innermostFirst(paths []string, opts Options) (ordered []string, moved map[string]string) {
	if len(paths) < 2 {
		return paths, nil
	}
	depth := make(map[string]float64, len(paths))
	placed := false
	for _, p := range paths {
		if depth[p] = hopDepth(p, opts); depth[p] > 0 {
			placed = true
		}
	}
	if !placed {
		return paths, nil
	}
	ordered = slices.Clone(paths)
	slices.SortStableFunc(ordered, func(a, b string) int {
		switch {
		case depth[a] > depth[b]:
			return -1
		case depth[a] < depth[b]:
			return 1
		}
		return 0
	})
	for i, p := range ordered {
		if j := slices.Index(paths, p); j > i {
			if moved == nil {
				moved = map[string]string{}
			}
			moved[p] = fmt.Sprintf("Read before the files given ahead of it: its lines were logged nearer the target (%.0f%% on a target's sidecar, inbound|), so a request logged at two hops takes this file's times for its send.", 100*depth[p])
		}
	}
	return ordered, moved
}
