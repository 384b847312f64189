package importers

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
)

// TestGrownLogImportsOnlyItsNewLines: an access log imported, then again
// once it has grown, is the longer file's requests once each, whether the
// first copy ended at a line end or mid-line, gzipped or not; a grown log
// of a format that pairs lines across the cut is refused, not doubled.
func TestGrownLogImportsOnlyItsNewLines(t *testing.T) {
	full, err := os.ReadFile("testdata/mapping/nginx-text.log")
	if err != nil {
		t.Fatal(err)
	}
	alone, err := Import(ctx, newStore(t), writeFile(t, "access.log", full), Options{})
	if err != nil {
		t.Fatal(err)
	}
	third := bytes.IndexByte(full[bytes.IndexByte(full, '\n')+1:], '\n') + bytes.IndexByte(full, '\n') + 1 // the second line's end
	for _, c := range []struct {
		name    string
		first   []byte
		held    int64
		gzipped bool
	}{
		{"cut at a line end", full[:third+1], 2, false},
		{"cut mid-line", full[:third+10], 2, false},
		{"grown and gzipped", full[:third+1], 2, true},
	} {
		s := newStore(t)
		first, err := Import(ctx, s, writeFile(t, "access.log", c.first), Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		grown := full
		if c.gzipped {
			var b bytes.Buffer
			z := gzip.NewWriter(&b)
			z.Write(full)
			z.Close()
			grown = b.Bytes()
		}
		rep, err := Import(ctx, s, writeFile(t, "access.log.gz", grown), Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := first.Executions + rep.Executions; got != alone.Executions || rep.Held != c.held || rep.HeldIn != first.Source {
			t.Errorf("%s: %d + %d executions (%d lines held in %s), want %d as the whole log imported once (%d lines held in %s)",
				c.name, first.Executions, rep.Executions, rep.Held, rep.HeldIn, alone.Executions, c.held, first.Source)
		}
		if !strings.Contains(rep.Note, "a shorter copy of this log") {
			t.Errorf("%s: the note says %q", c.name, rep.Note)
		}
	}
	// The earlier copy's last line ended in blank space (a log_format
	// that ends in a space), which its content left out.
	var spaced []byte
	for _, l := range bytes.SplitAfter(full, []byte("\n")) {
		if len(l) > 1 {
			spaced = append(append(spaced, bytes.TrimSuffix(l, []byte("\n"))...), " \n"...)
		}
	}
	cutSpaced := spaced[:bytes.Index(spaced[bytes.IndexByte(spaced, '\n')+1:], []byte("\n"))+bytes.IndexByte(spaced, '\n')+2]
	s0 := newStore(t)
	first, err := Import(ctx, s0, writeFile(t, "access.log", cutSpaced), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Import(ctx, s0, writeFile(t, "access.log", spaced), Options{})
	if err != nil || rep.Held != 2 || first.Executions+rep.Executions != alone.Executions {
		t.Errorf("lines ending in a space: %d + %d executions, %d lines held (%v); want %d, 2 held", first.Executions, rep.Executions, rep.Held, err, alone.Executions)
	}
	// Another log that happens to start alike is not the first one grown.
	s := newStore(t)
	if _, err := Import(ctx, s, writeFile(t, "access.log", full[:third+1]), Options{}); err != nil {
		t.Fatal(err)
	}
	other := append(bytes.Replace(full[:third+1], []byte("/coffee"), []byte("/cocoa"), 1), full[third+1:]...)
	if rep, err := Import(ctx, s, writeFile(t, "other.log", other), Options{}); err != nil || rep.Held != 0 {
		t.Errorf("a log that is not the first one grown: %d lines held, %v", rep.Held, err)
	}
	// A Claude Desktop log, grown: refused, with the way out.
	mcp, err := os.ReadFile("testdata/mcp-log/mcp-server-tickets.log")
	if err != nil {
		t.Fatal(err)
	}
	s = newStore(t)
	half := mcp[:bytes.LastIndexByte(mcp[:len(mcp)/2], '\n')+1]
	if _, err := Import(ctx, s, writeFile(t, "mcp-server-deploy.log", half), Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, s, writeFile(t, "mcp-server-deploy.log", mcp), Options{}); err == nil || !strings.Contains(err.Error(), "a shorter copy of this log") || !strings.Contains(err.Error(), "--db") {
		t.Errorf("a grown MCP log: %v", err)
	}
}

// TestGrownLogAcrossASplitLine: a node's CRI log caught after the first
// half of a line the runtime split (a P line): the earlier import read
// neither half; the grown log's joined line is imported.
func TestGrownLogAcrossASplitLine(t *testing.T) {
	const ts = "2026-03-02T10:15:04.512345678Z"
	var lines []string
	for i := range 3 {
		lines = append(lines, fmt.Sprintf(`{"start_time":"2026-03-02T10:15:0%d.000Z","method":"POST","path":"/v1/orders/%d","response_code":201,"authority":"api","upstream_host":"10.0.4.12:8080","duration":30,"request_id":"6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a2%d"}`, i, i, i))
	}
	first := ts + " stdout F " + lines[0] + "\n" + ts + " stdout P " + lines[1][:40] + "\n"
	full := first + ts + " stdout F " + lines[1][40:] + "\n" + ts + " stdout F " + lines[2] + "\n"
	s := newStore(t)
	a, err := Import(ctx, s, writeFile(t, "access.log", []byte(first)), Options{Format: "envoy"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Import(ctx, s, writeFile(t, "access.log", []byte(full)), Options{Format: "envoy"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Executions+b.Executions != 3 || b.Held != 2 {
		t.Errorf("%d + %d executions, %d lines held; want 3 in all, 2 held (the F line and the P line)", a.Executions, b.Executions, b.Held)
	}
}

// TestGrownLogAmongManyImports: one pod's log, grown, among seventeen
// pods' logs imported before: it is known, whichever was imported last.
func TestGrownLogAmongManyImports(t *testing.T) {
	s := newStore(t)
	var grown0 []byte
	for pod := range 17 {
		var b []byte
		for i := range 3 {
			b = fmt.Appendf(b, `10.0.0.%d - - [15/Jan/2026:20:44:%02d +0000] "POST /orders/%d HTTP/1.1" 201 161 "-" "curl/8.7.1"`+"\n", pod, i, i)
		}
		if pod == 0 {
			grown0 = fmt.Appendf(append([]byte(nil), b...), `10.0.0.0 - - [15/Jan/2026:20:45:00 +0000] "POST /orders/9 HTTP/1.1" 201 161 "-" "curl/8.7.1"`+"\n")
		}
		if _, err := Import(ctx, s, writeFile(t, fmt.Sprintf("pod-%d.log", pod), b), Options{Format: "nginx"}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Import(ctx, s, writeFile(t, "pod-0.log", grown0), Options{Format: "nginx"})
	if err != nil || rep.Executions != 1 || rep.Held != 3 {
		t.Errorf("the first pod's log grown by one line: %d executions, %d held (%v); want 1 and 3", rep.Executions, rep.Held, err)
	}
	// Grown by a partial line only: nothing to add, and not refused as a
	// log of another format.
	rep, err = Import(ctx, s, writeFile(t, "pod-0.log", append(grown0[:len(grown0):len(grown0)], `10.0.0.0 - - [15/Jan/2026:20:45:01 +0000] "POST /ord`...)), Options{})
	if err != nil || rep.Executions != 0 || rep.Held != 4 {
		t.Errorf("grown by a partial line: %d executions, %d held, %v", rep.Executions, rep.Held, err)
	}
}

// TestPrefixHashHoldsWholeLines: for random logs (CRLF and LF, blank
// lines, lines ending in blank space, long lines across read chunks) cut
// anywhere, the lines held are exactly the earlier copy's lines that the
// longer file holds whole: each held line is the same in both, and the
// next line is not whole in the earlier copy.
func TestPrefixHashHoldsWholeLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	for round := range 200 {
		var full []byte
		for range 1 + rng.IntN(40) {
			line := bytes.Repeat([]byte{'a' + byte(rng.IntN(26))}, rng.IntN(3)*rng.IntN(20000))
			if rng.IntN(5) == 0 {
				line = append(line, ' ')
			}
			end := "\n"
			if rng.IntN(3) == 0 {
				end = "\r\n"
			}
			full = append(append(full, line...), end...)
		}
		cut := rng.IntN(len(full))
		if ends := bytes.IndexByte(full[cut:], '\n'); rng.IntN(2) == 0 && ends >= 0 {
			cut = min(len(full)-1, max(0, cut+ends+rng.IntN(5)-2)) // at or beside a line end
		}
		first := full[:cut]
		fp, gp := filepath.Join(dir, fmt.Sprintf("first-%d.log", round)), filepath.Join(dir, fmt.Sprintf("full-%d.log", round))
		os.WriteFile(fp, first, 0o600)
		os.WriteFile(gp, full, 0o600)
		fs, err := fileSum(fp)
		if err != nil {
			t.Fatal(err)
		}
		gs, _ := fileSum(gp)
		if fs.contentSize == 0 || fs.content == gs.content {
			continue // an empty copy, or the same content: not a shorter copy
		}
		p := &prefixHash{h: sha256.New(), cands: []activity.Source{{ContentSize: fs.contentSize, Content: fs.content}}}
		if _, err := readContent(gp, io.Discard, &contentHash{h: p}); err != nil && !errors.Is(err, errPrefixDone) {
			t.Fatal(err)
		}
		held := p.found.lines
		if p.found.src.Content == "" {
			t.Fatalf("round %d: a copy cut at %d of %d bytes is not found to be the longer one's start", round, cut, len(full))
		}
		// Line by line, as an import reads them.
		lines := func(b []byte) []string {
			return strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
		}
		a, b := lines(first), lines(full)
		clip := func(s string) string { return fmt.Sprintf("%.40q (%d bytes)", s, len(s)) }
		for i := range held {
			if strings.TrimRight(a[i], " \t\r") != strings.TrimRight(b[i], " \t\r") {
				t.Fatalf("round %d: held line %d differs: %s in the copy, %s in the log", round, i+1, clip(a[i]), clip(b[i]))
			}
		}
		// Not held: only blank lines of the copy (never records), and its
		// unended last line unless the log ends that line there too.
		last := len(a) - 1 // a[last] is what follows the copy's last line end
		if int(held) > len(a) {
			t.Fatalf("round %d: %d lines held of a copy of %d", round, held, len(a))
		}
		for i := int(held); i < last; i++ {
			if strings.TrimSpace(a[i]) != "" {
				t.Fatalf("round %d: the copy's whole line %d (%s) is not held (%d held)", round, i+1, clip(a[i]), held)
			}
		}
		tail := strings.TrimRight(a[last], " \t\r")
		whole := tail != "" && strings.TrimRight(b[last], " \t\r") == tail
		if whole != (int(held) == len(a)) {
			t.Fatalf("round %d: the copy's unended line %s, the log's %s: held %d of %d", round, clip(a[last]), clip(b[last]), held, len(a))
		}
	}
}

// TestUnfinishedLastLine: a log copied while its writer was writing ends
// mid-line. That line does not read: a JSON format's import is refused
// with the way out named (the line whole, or --skip-bad), a text format
// passes it over; either way the report names it, and the log imported
// again once grown reads it whole, each request once. A last line that
// lacks only its line end reads as it is.
func TestUnfinishedLastLine(t *testing.T) {
	for _, name := range []string{"envoy.jsonl", "kong.jsonl", "nginx-text.log", "envoy-text.log"} {
		full, err := os.ReadFile("testdata/mapping/" + name)
		if err != nil {
			t.Fatal(err)
		}
		full = bytes.TrimRight(full, "\n")
		if strings.HasSuffix(name, ".log") {
			// These end in a line of noise (a TLS handshake, a TCP
			// probe); a request is what a cut would hide.
			full = full[:bytes.LastIndexByte(full, '\n')]
		}
		lines := int64(bytes.Count(full, []byte("\n")) + 1)
		alone, err := Import(ctx, newStore(t), writeFile(t, name, full), Options{})
		if err != nil {
			t.Fatalf("%s without its last line end: %v", name, err)
		}
		if alone.Unfinished != 0 || alone.Lines != lines {
			t.Errorf("%s without its last line end: line %d unfinished, %d lines read, want none and %d", name, alone.Unfinished, alone.Lines, lines)
		}
		cut := full[:len(full)-len(full[bytes.LastIndexByte(full, '\n')+1:])/2]
		s := newStore(t)
		first, err := Import(ctx, s, writeFile(t, name, cut), Options{})
		if strings.HasSuffix(name, ".jsonl") {
			var le *LineError
			if !errors.As(err, &le) || le.Line != lines || !strings.Contains(err.Error(), "no line end") || !strings.Contains(err.Error(), "--skip-bad") {
				t.Fatalf("%s cut mid-line: %v, want line %d refused with the way out", name, err, lines)
			}
			first, err = Import(ctx, s, writeFile(t, name, cut), Options{SkipBad: true})
		}
		if err != nil {
			t.Fatalf("%s cut mid-line: %v", name, err)
		}
		if first.Unfinished != lines || !strings.Contains(first.Note, fmt.Sprintf("Line %d, the last, has no line end", lines)) {
			t.Errorf("%s cut mid-line: line %d unfinished, note %q; want line %d named", name, first.Unfinished, first.Note, lines)
		}
		rep, err := Import(ctx, s, writeFile(t, name, append(full, '\n')), Options{})
		if err != nil {
			t.Fatalf("%s grown: %v", name, err)
		}
		if got := first.Executions + rep.Executions; got != alone.Executions || rep.Held != lines-1 {
			t.Errorf("%s cut, then grown: %d + %d executions (%d lines held), want %d (%d held)", name, first.Executions, rep.Executions, rep.Held, alone.Executions, lines-1)
		}
	}
	// A gzipped log cut short is refused, saying so.
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	z.Write(bytes.Repeat([]byte(`{"start_time":"2026-03-02T10:15:04.000Z","method":"POST","path":"/v1/payments","response_code":201}`+"\n"), 200))
	z.Close()
	_, err := Import(ctx, newStore(t), writeFile(t, "access.log.gz", b.Bytes()[:b.Len()-12]), Options{})
	if err == nil || !strings.Contains(err.Error(), "gzip data ends early") {
		t.Errorf("a gzipped log cut short: %v", err)
	}
}
