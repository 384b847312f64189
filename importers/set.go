package importers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/internal/gctune"
)

// Files given together. A trace is often split across the files an
// OpenTelemetry collector writes: its file exporter rotates (max_megabytes,
// max_days), and with group_by each service's spans go to a file of their
// own, so an agent's client spans and the gateway's server spans of one
// tools/call land apart. Read file by file, each half was a call of its
// own: an invented duplicate_risk beside the right verdict, a lost attach,
// a delivery or a run identity the other file held. OTLP files given
// together are read as one stream instead, each keeping its own source,
// lines and report.

// ImportFiles imports paths in order, calling done with each one's report
// (a file's refusal in err, as Import gives it); proxy logs logged nearer
// the target go first (innermostFirst). Consecutive OTLP files
// are read together (ImportSet), so that a trace continues across them;
// should that fail, they are imported one by one, so that one bad file
// does not keep the others out. start, if set, is called before each
// file and returns its progress function.
func ImportFiles(ctx context.Context, s *activity.Store, paths []string, opts Options,
	start func(path string) func(done, total int64), done func(rep FileReport, err error)) {
	paths, moved := innermostFirst(paths, opts)
	if len(moved) > 0 {
		given := done
		done = func(rep FileReport, err error) {
			if why := moved[rep.File]; why != "" && err == nil {
				rep.Note += " " + why
			}
			given(rep, err)
		}
	}
	one := func(path string) {
		o := opts
		if start != nil {
			o.Progress = start(path)
		}
		done(Import(ctx, s, path, o))
	}
	for i := 0; i < len(paths); {
		n := 1
		for i+n < len(paths) && isOTLP(paths[i], opts) && isOTLP(paths[i+n], opts) {
			n++
		}
		if n == 1 {
			one(paths[i])
			i++
			continue
		}
		reps, err := ImportSet(ctx, s, paths[i:i+n], opts, start)
		if err != nil && !errors.Is(err, ErrNotSealed) {
			for _, p := range paths[i : i+n] {
				one(p)
			}
		} else {
			for _, rep := range reps {
				if err != nil && rep.NotSealed != "" {
					done(rep, fmt.Errorf("import %s: %w: %s", rep.File, ErrNotSealed, rep.NotSealed))
				} else {
					done(rep, nil)
				}
			}
		}
		i += n
	}
}

// isOTLP reports whether path is read as OTLP: by the format or mapping
// asked for, else by its content.
func isOTLP(path string, opts Options) bool {
	switch {
	case opts.Mapping != nil:
		return opts.Mapping.Format == "otlp"
	case opts.Format != "" && opts.Format != "auto":
		return opts.Format == "otlp"
	}
	h, err := head(path, detectHead)
	if err != nil {
		return false
	}
	f, err := Detect(h)
	return err == nil && f == "otlp"
}

// ImportSet imports OTLP files as one stream, in one transaction: a trace
// whose spans are in several of them is one trace, each span keeping its
// file and line; a tools/call is counted in the report of the file of its
// main span (the server's, else the client's). Files already imported are
// skipped, as Import skips them. The files are imported together or not
// at all, and sealed together.
func ImportSet(ctx context.Context, s *activity.Store, paths []string, opts Options, start func(path string) func(done, total int64)) ([]FileReport, error) {
	t0 := time.Now()
	reps := make([]FileReport, len(paths))
	var plans []*plan
	var at []int // each plan's index in paths
	for i, path := range paths {
		p, rep, err := prepare(ctx, s, path, opts)
		reps[i] = rep
		if err != nil {
			return reps, err
		}
		if p == nil {
			continue // already imported
		}
		if _, ok := p.dec.(*otlp); !ok {
			return reps, fmt.Errorf("import %s: read as %s, not OTLP: files are read together only as OTLP traces", path, p.rep.Format)
		}
		plans, at = append(plans, p), append(at, i)
	}
	if len(plans) == 0 {
		return reps, nil
	}
	defer gctune.Raise(importGCPercent)()
	dec := plans[0].dec.(*otlp) // one decoder: its open traces go on from file to file
	dec.set = true
	_, err := s.WriteBulk(ctx, func(w *activity.Tx) error {
		files := make([]*fileRead, len(plans))
		for j, p := range plans {
			in, err := openLines(p.path)
			if err != nil {
				return fmt.Errorf("import %s: %w", p.path, err)
			}
			o := opts
			if start != nil {
				o.Progress = start(p.path)
			}
			dec.hold = j < len(plans)-1
			// The report the file's sink counts into stays in place: a
			// trace completed in a later file counts in it.
			reps[at[j]] = p.rep
			files[j] = &fileRead{path: p.path, sums: p.sums, grown: p.grown, rep: &reps[at[j]], from: w.Appended()}
			err = files[j].read(ctx, w, dec, in, &o)
			in.Close()
			if err != nil {
				return err
			}
		}
		// Every trace is written now: each file's source row says what
		// came of it (what a trace completed later brought it included).
		files[len(files)-1].to = w.Appended() // the set's last writes: the traces still open at its end
		for _, f := range files {
			if err := f.record(w, dec); err != nil {
				return err
			}
			f.rep.Note += fmt.Sprintf(" Read as one stream with the %d OTLP files given together: a trace that continues across them is one trace, its calls counted with the file of its main span.", len(files))
			if dec.shedInSet > 0 {
				f.rep.Note += fmt.Sprintf(" More than %d spans were held open at once, so the oldest traces were taken as complete %d time(s) before the set ended: a trace split across the files may have been read as two there.", setHeldSpans, dec.shedInSet)
			}
		}
		if opts.DryRun {
			return errDryRun
		}
		return nil
	})
	elapsed := time.Since(t0).Milliseconds()
	for _, i := range at {
		reps[i].DurationMS = elapsed
	}
	if errors.Is(err, errDryRun) {
		for _, i := range at {
			reps[i].Source = ""
		}
		return reps, nil
	}
	if err != nil {
		for _, i := range at {
			reps[i].Source = ""
		}
		return reps, err
	}
	// The set is a unit: one seal signs it; should it fail, every file of
	// it is in the log unsigned, and each report says so.
	if _, err := s.Seal(ctx, activity.SealImport); err != nil && !errors.Is(err, activity.ErrNoKey) {
		for _, i := range at {
			reps[i].NotSealed = err.Error()
		}
		return reps, fmt.Errorf("import %s: %w: %w", strings.Join(paths, ", "), ErrNotSealed, err)
	}
	return reps, nil
}
