// Package importers reads activity logs into the activity model: mcpdup's
// own exports and the logs other systems write. Every imported row keeps
// its source, file and line; what a source does not record is marked "not
// recorded" so the analysis says "unknown" instead of guessing. A file is
// imported whole, in one transaction, or not at all, unless the caller
// asks to skip bad records.
package importers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/internal/gctune"
)

// Options control an import.
type Options struct {
	// Format names the format; empty or "auto" detects it from content.
	Format string
	// SkipBad skips malformed records instead of refusing the file, and
	// counts them.
	SkipBad bool
	// Progress, if set, is called now and then with the stored bytes read
	// so far and the file's size.
	Progress func(done, total int64)
	// Mapping, if set, reads every file as JSON Lines through it.
	Mapping *Mapping
	// DryRun reads and checks everything, reports what would be
	// imported, and writes nothing.
	DryRun bool
	// SeenIn, if set, is where a re-import is also looked up: a dry run
	// imports into a scratch store and asks the real one, opened
	// read-only, whether the file is already there.
	SeenIn *activity.Store
	// ExportKey returns the key that checks an mcpdup export's signatures
	// for its origin, and whether the operator pinned it. Nil: the chain
	// and tree are checked, signatures are not.
	ExportKey func(origin string) (key string, pinned bool, err error)
	// TrustedCheckpoint is a signed checkpoint of the exporting log kept
	// elsewhere: an export that rolls back or forks it is refused.
	TrustedCheckpoint []byte
	// AllowUnsealed imports an export's records that no verified
	// checkpoint signs (refused otherwise); they are marked unsigned.
	AllowUnsealed bool
}

// ErrNotSealed is returned, with the FileReport of a file imported whole,
// when the seal after it failed: the records were committed (an import
// that stops there loses nothing), but no checkpoint signs them.
var ErrNotSealed = errors.New("imported, but not sealed")

// FileReport says what importing one file did.
type FileReport struct {
	// Refused is why the file was not imported (nothing of it was
	// written), for a caller's list of every file; "" when it was.
	Refused         string            `json:"refused,omitempty"`
	File            string            `json:"file"`
	Format          string            `json:"format"`
	SHA256          string            `json:"sha256"`
	Source          activity.SourceID `json:"source,omitempty"`
	AlreadyImported bool              `json:"already_imported"`
	Lines           int64             `json:"lines"`
	Read            int64             `json:"records_read"` // lines, spans or entries, as the format counts records
	Records         int64             `json:"records"`      // log records the import appended
	Runs            int64             `json:"runs"`
	Calls           int64             `json:"calls"`
	Executions      int64             `json:"executions"`
	Skipped         int64             `json:"skipped"`
	// Repeated counts records the file holds again, by their own ids: a
	// span it repeats, or one an earlier import (RepeatedFrom) holds. They
	// are not imported twice, so a re-export never changes a verdict.
	Repeated     int64               `json:"repeated"`
	RepeatedFrom []activity.SourceID `json:"repeated_from,omitempty"`
	// Held counts the first lines an earlier import (HeldIn) holds: the
	// file is that log, grown since. They are not imported again.
	Held   int64             `json:"held_lines,omitempty"`
	HeldIn activity.SourceID `json:"held_in,omitempty"`
	// Noise counts lines that are not part of the protocol (a server's
	// stderr in a host log, a log/slog line, a wrapped entry): recognised
	// and passed over, not errors.
	Noise int64 `json:"noise"`
	// Unfinished is the number of the file's last line when it has no
	// line end and did not read (passed over as noise, or skipped with
	// --skip-bad): a line its writer had not finished, most likely, read
	// whole when the log, grown, is imported again.
	Unfinished int64 `json:"unfinished_line,omitempty"`
	// NotRecorded counts records imported with a fact the log lacks, by
	// field ("host", "arguments", "outcome"): imported, marked not
	// recorded, never refused for it.
	NotRecorded map[string]int64 `json:"not_recorded,omitempty"`
	Errors      []string         `json:"errors,omitempty"` // the first skipped records, as file:line: reason
	Note        string           `json:"note,omitempty"`   // what the source does not record, how it was checked
	// NotSealed is why the file, imported, was not sealed: its records
	// are in the log, committed, but no checkpoint signs them yet.
	NotSealed  string `json:"not_sealed,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// Summary says in one line what the import added, for a status bar or a
// log line: "imported activity.jsonl (sallyport): 10 calls, 10
// executions, 0 skipped", or that the file was imported before.
func (r FileReport) Summary() string {
	if r.AlreadyImported {
		return fmt.Sprintf("%s was imported before (%s): nothing added", filepath.Base(r.File), r.Source)
	}
	s := fmt.Sprintf("imported %s (%s): %d calls, %d executions, %d skipped", filepath.Base(r.File), r.Format, r.Calls, r.Executions, r.Skipped)
	if r.Noise > 0 {
		s += fmt.Sprintf(", %d noise lines", r.Noise)
	}
	if r.Unfinished > 0 {
		s += fmt.Sprintf(", last line %d unfinished (no line end)", r.Unfinished)
	}
	if r.Repeated > 0 {
		s += fmt.Sprintf(", %d records already held", r.Repeated)
	}
	if nr := r.NotRecordedText(); nr != "" {
		s += ", not recorded: " + nr
	}
	return s
}

// NotRecordedText lists the not-recorded counts: "host ×2, arguments ×5".
func (r FileReport) NotRecordedText() string {
	fields := make([]string, 0, len(r.NotRecorded))
	for f := range r.NotRecorded {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for i, f := range fields {
		fields[i] = fmt.Sprintf("%s ×%d", f, r.NotRecorded[f])
	}
	return strings.Join(fields, ", ")
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// maxReportedErrors is how many skipped records a report lists.
const maxReportedErrors = 10

// decoder reads one format into the model through a sink.
type decoder interface {
	// note says what the format does not record, for the source row.
	note() string
	decode(ctx context.Context, in *lines, k *sink) error
}

// formats maps a format name to a new decoder for one file.
var formats = map[string]func(path string) decoder{}

// Formats lists the format names --format accepts.
func Formats() []string {
	names := make([]string, 0, len(formats))
	for n := range formats {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LineError is a bad record: the file, its line and the field at fault.
type LineError struct {
	File  string
	Line  int64
	Field string
	Err   error
}

func (e *LineError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s:%d: field %s: %v", e.File, e.Line, e.Field, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// detectHead is how much of a file detection reads: its first line whole,
// up to the line reader's buffer (a proxy line carrying a large body or
// header runs past 64 KiB).
const detectHead = 1 << 20

// Import reads one file into the store. A file already imported (same
// sha256) adds nothing and says so.
func Import(ctx context.Context, s *activity.Store, path string, opts Options) (FileReport, error) {
	p, rep, err := prepare(ctx, s, path, opts)
	if err != nil || p == nil {
		return rep, err
	}
	return p.write(ctx, s, &opts)
}

// plan is a file checked and ready to be written: its sums, format and
// decoder.
type plan struct {
	path  string
	start time.Time
	rep   FileReport
	sums  fileSums
	dec   decoder
	grown grownFrom
}

// prepare checks a file and chooses its decoder, writing nothing. A nil
// plan with no error is a file already imported (its report says so).
func prepare(ctx context.Context, s *activity.Store, path string, opts Options) (*plan, FileReport, error) {
	start := time.Now()
	rep := FileReport{File: path}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, rep, fmt.Errorf("import %s: a directory: give the files in it (%s)", path, filepath.Join(path, "*.log"))
	}
	sums, err := fileSum(path)
	if err != nil {
		return nil, rep, fmt.Errorf("import %s: %w", path, err)
	}
	rep.SHA256 = sums.stored
	prior, err := s.SourceBySHA256(ctx, sums.stored, sums.content)
	if opts.SeenIn != nil && errors.Is(err, activity.ErrNotFound) {
		// A dry run: the real database first, then what this run would
		// already have added (a copy of a file given twice).
		prior, err = opts.SeenIn.SourceBySHA256(ctx, sums.stored, sums.content)
	}
	if err == nil {
		rep.AlreadyImported, rep.Source, rep.Format = true, prior.ID, prior.Format
		rep.Note = fmt.Sprintf("already imported on %s as %s; nothing added", prior.ImportedAt.UTC().Format(time.RFC3339), prior.ID)
		return nil, rep, nil
	} else if !errors.Is(err, activity.ErrNotFound) {
		return nil, rep, fmt.Errorf("import %s: %w", path, err)
	}
	rep.Format = opts.Format
	if opts.Mapping != nil && opts.Mapping.Format == "otlp" {
		rep.Format = "otlp"
	} else if opts.Mapping != nil {
		rep.Format = "mapping:" + opts.Mapping.Name
	} else if rep.Format == "" || rep.Format == "auto" {
		h, err := head(path, detectHead)
		if err != nil {
			return nil, rep, fmt.Errorf("import %s: %w", path, err)
		}
		if rep.Format, err = Detect(h); err != nil {
			return nil, rep, fmt.Errorf("import %s: %w", path, err)
		}
	}
	var dec decoder
	switch {
	case opts.Mapping != nil && opts.Mapping.Format == "otlp":
		dec = &otlp{attrs: opts.Mapping.OTLP}
	case opts.Mapping != nil:
		dec = &mapped{m: opts.Mapping}
	default:
		newDecoder, ok := formats[rep.Format]
		if !ok {
			return nil, rep, fmt.Errorf("import %s: unknown format %q (one of %v)", path, rep.Format, Formats())
		}
		dec = newDecoder(path)
	}
	var grown grownFrom
	switch dec.(type) {
	case *mapped, *mcpLog, *sallyport: // lines with no ids of their own (OTLP's spans have; an mcpdup export continues by its chain)
		if grown, err = shorterCopy(ctx, s, &opts, path, rep.Format, sums); err != nil {
			return nil, rep, fmt.Errorf("import %s: %w", path, err)
		}
	}
	if _, lineByLine := dec.(*mapped); grown.lines > 0 && !lineByLine {
		// The rest alone would lose the pairs across the cut.
		return nil, rep, fmt.Errorf("import %s: its first %d lines are %s (%s, imported %s), a shorter copy of this log; "+
			"this format pairs a call with its answer across lines, so the rest alone would lose pairs and the whole would hold those lines twice: "+
			"import the longer file into a database of its own (--db)", path, grown.lines, grown.src.ID, grown.src.File, grown.src.ImportedAt.UTC().Format(time.RFC3339))
	}
	return &plan{path: path, start: start, rep: rep, sums: sums, dec: dec, grown: grown}, rep, nil
}

// write imports a prepared file in one transaction, and seals it.
func (p *plan) write(ctx context.Context, s *activity.Store, opts *Options) (FileReport, error) {
	rep := p.rep
	in, err := openLines(p.path)
	if err != nil {
		return rep, fmt.Errorf("import %s: %w", p.path, err)
	}
	defer in.Close()
	defer gctune.Raise(importGCPercent)()
	_, err = s.WriteBulk(ctx, func(w *activity.Tx) error {
		return decodeInto(ctx, w, p.dec, in, p.path, p.sums, p.grown, opts, &rep)
	})
	rep.DurationMS = time.Since(p.start).Milliseconds()
	return sealed(ctx, s, p.path, rep, err)
}

// sealed finishes an import's write: a dry run's report, or the seal of
// what it wrote.
func sealed(ctx context.Context, s *activity.Store, path string, rep FileReport, err error) (FileReport, error) {
	if errors.Is(err, errDryRun) {
		rep.Source = ""
		return rep, nil
	}
	if err != nil {
		rep.Source = ""
		return rep, err
	}
	// An imported file is a unit: sign its end, so the log verifies as
	// sealed right away (where this host has the signing key).
	if _, err := s.Seal(ctx, activity.SealImport); err != nil && !errors.Is(err, activity.ErrNoKey) {
		rep.NotSealed = err.Error()
		return rep, fmt.Errorf("import %s: %w: %w", path, ErrNotSealed, err)
	}
	return rep, nil
}

// decodeInto reads a file through its decoder into w and records the
// source; a dry run ends with errDryRun, so nothing is kept.
func decodeInto(ctx context.Context, w recorder, dec decoder, in *lines, path string, sums fileSums, grown grownFrom, opts *Options, rep *FileReport) error {
	f := &fileRead{path: path, sums: sums, grown: grown, rep: rep, from: w.Appended()}
	if err := f.read(ctx, w, dec, in, opts); err != nil {
		return err
	}
	if err := f.record(w, dec); err != nil {
		return err
	}
	if opts.DryRun {
		return errDryRun
	}
	return nil
}

// fileRead is one file read into a transaction, whose source row is
// written once what came from it is known (at once for a file alone; for
// a set of files read as one stream, at the set's end: ImportSet).
type fileRead struct {
	path  string
	sums  fileSums
	grown grownFrom
	rep   *FileReport
	k     *sink
	in    *lines
	// from and to are the transaction's records before and after the
	// file was read: what it appended.
	from, to int64
}

// read decodes the file into w.
func (f *fileRead) read(ctx context.Context, w recorder, dec decoder, in *lines, opts *Options) error {
	f.in = in
	f.k = &sink{w: w, file: f.path, opts: opts, skip: opts.SkipBad, rep: f.rep, src: activity.NewSourceID(w.Now()),
		progress: opts.Progress, size: f.sums.size, in: in, priorFormat: -1, held: f.grown.lines}
	if err := dec.decode(ctx, in, f.k); err != nil {
		return err
	}
	// Rows are written in batches, behind the decoder: a refused one
	// is reported here, with its line, before the file is recorded.
	if err := w.Sync(); err != nil {
		return f.k.fail(in.Line(), err)
	}
	f.rep.Lines, f.to = in.Line(), w.Appended()
	return nil
}

// record writes the file's source row, with the note that says what the
// format does not record and what came of the file.
func (f *fileRead) record(w recorder, dec decoder) error {
	rep, k := f.rep, f.k
	rep.Note = dec.note()
	if n, ok := dec.(interface{ noteFor(*sink) string }); ok {
		rep.Note = n.noteFor(k)
	}
	if k.extra != "" {
		rep.Note += " " + k.extra
	}
	if rep.Repeated > 0 {
		rep.Note += fmt.Sprintf(" %d records are ones already held (recognised by their ids): not imported again.", rep.Repeated)
	}
	if rep.Unfinished > 0 {
		rep.Note += fmt.Sprintf(" Line %d, the last, has no line end and did not read as a record: if the log was copied while it was being written, import it again once it has grown, to read that line whole.", rep.Unfinished)
	}
	if f.grown.lines > 0 {
		rep.Held, rep.HeldIn = f.grown.lines, f.grown.src.ID
		rep.Note += " " + f.grown.note()
	}
	rep.Read = k.seen
	src, err := w.AddSource(activity.Source{ID: k.src, Format: rep.Format, File: filepath.Base(f.path), SHA256: f.sums.stored, Content: f.sums.content, ContentSize: f.sums.contentSize,
		Records: rep.Read - rep.Skipped - rep.Repeated, Skipped: rep.Skipped, Note: rep.Note, UnsignedFrom: k.unsignedFrom,
		Origin: k.origin, Head: k.head})
	if err != nil {
		return err
	}
	rep.Source = src.ID
	rep.Records = f.to - f.from + 1 // and its source record
	return nil
}
