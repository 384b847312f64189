package importers

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// sink is where a decoder writes: the transaction's writer, the source's
// id for provenance, and the file's report. Bad records go through bad,
// which refuses the file or, with --skip-bad, counts them.
// recorder is what a decoder writes through: the store's write
// transaction (*activity.Tx). The fuzzers hand decoders an in-memory one,
// because SQLite under the fuzzer's coverage instrumentation ran a few
// inputs a second.
type recorder interface {
	Now() time.Time
	AddSource(activity.Source) (activity.Source, error)
	StartRun(activity.Run) (activity.Run, error)
	EndRun(activity.RunID, time.Time) error
	AddGrant(activity.Grant) error
	RecordCall(activity.Call) (activity.Call, error)
	Accept(activity.Execution) (activity.Execution, error)
	Execution(activity.ExecutionID) (activity.Execution, error)
	Transition(activity.Transition) (activity.Execution, error)
	Resolve(activity.Resolution) (activity.Execution, error)
	ImportVault(activity.VaultEvent) error
	ImportApproval(activity.Approval) error
	Sync() error
	Appended() int64
	KnownCall(format string, c activity.Call, records []string) (activity.SourceID, error)
	ImportedFormat(format string) (bool, error)
	ImportedHead(origin string) (activity.SourceID, string, error)
	AnyImportedRequestID() (bool, error)
	ImportedRequests(id string, except activity.SourceID) ([]activity.ImportedRequest, error)
	ImportedRun(actor string, by activity.RunIdentification, evidence string) (activity.RunID, error)
}

type sink struct {
	w        recorder
	src      activity.SourceID
	file     string
	opts     *Options
	skip     bool
	rep      *FileReport
	extra    string // a decoder's finding for the source note (e.g. a chain check)
	progress func(done, total int64)
	size     int64
	in       *lines
	ticks    int
	seen     int64 // records read: lines, spans or entries
	// priorFormat: whether an earlier import was of this format (-1: not
	// asked yet); only then can a record be one already held.
	priorFormat int
	// unsignedFrom is the first line of records nothing signs (the
	// source's UnsignedFrom); 0: none.
	unsignedFrom int64
	// held: the file's first lines an earlier import holds (grownFrom),
	// passed over.
	held int64
	// hopsAsked, hopsPrior: whether the store was asked if an import
	// holds request ids, and its answer (importedHop).
	hopsAsked, hopsPrior bool
	// origin and head: where an mcpdup export's import ended in its log
	// (the source's Origin and Head).
	origin, head string
}

// at is the provenance of a line of this file.
func (k *sink) at(line int64) activity.Provenance {
	return activity.Provenance{Source: k.src, Line: line}
}

// atRecord is the provenance of one record inside a line: a span, a
// JSON-RPC message, a journal row.
func (k *sink) atRecord(line int64, record string) activity.Provenance {
	return activity.Provenance{Source: k.src, Line: line, Record: record}
}

// bad handles a malformed record: without --skip-bad it is the import's
// error (naming file, line and field); with it, it is counted and the
// first few are kept for the report.
func (k *sink) bad(line int64, field string, err error) error {
	cut := k.unfinished(line)
	if cut {
		err = fmt.Errorf("%w (%s: import it once the line is whole, or with --skip-bad to import the lines before it)", err, unfinishedWhy)
	}
	le := &LineError{File: k.file, Line: line, Field: field, Err: err}
	if !k.skip {
		return le
	}
	if cut {
		k.rep.Unfinished = line
	}
	k.seen++
	k.rep.Skipped++
	if len(k.rep.Errors) < maxReportedErrors {
		k.rep.Errors = append(k.rep.Errors, le.Error())
	}
	return nil
}

// fail wraps an error writing a well-formed record: the model refused it
// (an impossible state change, an id already in this database). Such a
// file is never half imported, with or without --skip-bad.
func (k *sink) fail(line int64, err error) error {
	// Rows are written in batches: a refused row names its own line.
	if re := (*activity.RowError)(nil); errors.As(err, &re) && re.Line > 0 {
		line = re.Line
	}
	if line <= 0 { // a reading error names its own line
		return fmt.Errorf("import %s: %w", k.file, err)
	}
	return fmt.Errorf("import %s line %d: %w", k.file, line, err)
}

// known reports whether an earlier import of this format holds the call
// under one of these record ids, with the same facts: it is then not
// imported again.
func (k *sink) known(c activity.Call, records []string) (bool, error) {
	if k.priorFormat == 0 {
		return false, nil
	}
	if k.priorFormat < 0 {
		prior, err := k.w.ImportedFormat(k.rep.Format)
		if err != nil {
			return false, fmt.Errorf("import %s: %w", k.file, err)
		}
		if k.priorFormat = 0; prior {
			k.priorFormat = 1
		}
		if !prior {
			return false, nil
		}
	}
	src, err := k.w.KnownCall(k.rep.Format, c, records)
	if err != nil {
		return false, fmt.Errorf("import %s line %d: %w", k.file, c.Source.Line, err)
	}
	if src != "" && src != k.src {
		k.rep.RepeatedFrom = appendOnce(k.rep.RepeatedFrom, src)
	}
	return src != "", nil
}

func appendOnce(ids []activity.SourceID, id activity.SourceID) []activity.SourceID {
	for _, x := range ids {
		if x == id {
			return ids
		}
	}
	return append(ids, id)
}

// repeated counts records this file holds again: its own, or an earlier
// import's.
func (k *sink) repeated(n int64) { k.rep.Repeated += n }

// count counts a well-formed record read (bad counts the others).
func (k *sink) count() { k.seen++ }

// noise counts a line that is not part of the protocol: passed over, not
// an error.
func (k *sink) noise(line int64) {
	k.rep.Noise++
	if k.unfinished(line) {
		k.rep.Unfinished = line
	}
}

// unfinishedWhy says why the last line may not read.
const unfinishedWhy = "the last line has no line end, as when a log is copied while it is being written"

// unfinished reports whether line is the file's last and has no line
// end: most likely one its writer had not finished, which does not
// read (or reads as noise) now and whole once the log has grown. A
// line like that which reads is imported as it is.
func (k *sink) unfinished(line int64) bool {
	return k.in != nil && line > 0 && k.in.cut.Load() == line
}

// notRecorded counts a record imported without a fact the importer would
// like (field names it).
func (k *sink) notRecorded(field string) {
	if k.rep.NotRecorded == nil {
		k.rep.NotRecorded = map[string]int64{}
	}
	k.rep.NotRecorded[field]++
}

// tick reports progress every few thousand lines.
func (k *sink) tick() {
	k.ticks++
	if k.progress != nil && k.ticks%4096 == 0 {
		k.progress(k.in.Read(), k.size)
	}
}

// run starts a run, counting it.
func (k *sink) run(r activity.Run) (activity.Run, error) {
	r, err := k.w.StartRun(r)
	if err == nil {
		k.rep.Runs++
	}
	return r, err
}

// call records a call, counting it.
func (k *sink) call(c activity.Call) (activity.Call, error) {
	c, err := k.w.RecordCall(c)
	if err == nil {
		k.rep.Calls++
	}
	return c, err
}

// accept records an execution, counting it.
func (k *sink) accept(e activity.Execution) (activity.Execution, error) {
	e, err := k.w.Accept(e)
	if err == nil {
		k.rep.Executions++
	}
	return e, err
}

// httpContract is the contract an HTTP request from a log implies: safe
// methods are read-only, a request carrying an Idempotency-Key is
// repeatable with that key, anything else is blocked after an unknown
// outcome.
func httpContract(method, key string) activity.Contract {
	switch {
	case activity.SafeMethod(method):
		return activity.ContractReadOnly
	case key != "":
		return activity.ContractRepeatableWithKey
	}
	return activity.ContractBlockedAfterUnknown
}
