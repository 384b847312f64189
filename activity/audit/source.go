package audit

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
)

// VerifyStore verifies a database opened (read-only) as s. The log origin
// comes from the pinned key when there is one; otherwise from the database,
// and the report says it was not pinned.
func VerifyStore(ctx context.Context, s *activity.Store, opts Options) (*Report, error) {
	v, err := newVerifier(s.Origin(), opts)
	if err != nil {
		return nil, err
	}
	if v.total, err = s.LogSize(ctx); err != nil {
		return nil, err
	}
	stored, err := s.Checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	if opts.Trusted != nil {
		v.setTrusted(opts.Trusted)
	}
	// Checkpoints whose size no record reaches are checked in finish.
	next := 0
	feed := func() {
		for next < len(stored) && stored[next].Size <= v.pos {
			// The row's size only orders the notes; the signed size is what
			// addCheckpoint schedules the root check by.
			v.addCheckpoint(stored[next].Note, fmt.Sprintf("checkpoint at size %d", stored[next].Size))
			next++
		}
	}
	feed() // a checkpoint of size 0, should one exist
	// The tables are read on a snapshot taken before the log is: the log
	// only grows, so its first snap.Size records are the snapshot's.
	var tables *activity.TableCheck
	if !opts.LogOnly {
		snap, err := s.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		defer snap.Close()
		tables = snap.StartTableCheck(ctx)
	}
	// Reading rows and hashing them each take about half the time; on two
	// cores a reader goroutine feeding batches halves the wall time.
	err = scanBatches(ctx, s, 0, func(b *rowBatch) {
		for i := range b.seqs {
			v.addRecord(b.seqs[i], b.canonical[i], b.leaf[i], b.tree[i])
			if tables != nil {
				tables.Add(b.seqs[i], b.canonical[i])
			}
			feed()
		}
	})
	if tables != nil {
		tr, terr := tables.Finish()
		if err == nil && terr != nil {
			return nil, terr
		}
		if terr == nil {
			v.addTables(tr)
		}
	}
	if err != nil {
		return nil, err
	}
	for ; next < len(stored); next++ {
		v.addCheckpoint(stored[next].Note, fmt.Sprintf("checkpoint at size %d", stored[next].Size))
	}
	v.close()
	if err := v.checkSealingPolicy(ctx, s); err != nil {
		return nil, err
	}
	v.recovered = sealedByRecovery(v.decisions, stored)
	return v.report(s.Path(), opts.Key), nil
}

// sealedByRecovery returns the decisions whose first checkpoint is a
// recovery seal's (Open sealing a tail an earlier writer left).
func sealedByRecovery(decisions []decision, stored []activity.StoredCheckpoint) []int64 {
	var out []int64
	for _, d := range decisions {
		i, _ := slices.BinarySearchFunc(stored, d.seq+1, func(c activity.StoredCheckpoint, size int64) int { return cmp.Compare(c.Size, size) })
		if i < len(stored) && stored[i].Reason == string(activity.SealRecovery) {
			out = append(out, d.seq)
		}
	}
	return out
}

// seqList writes record numbers, the first ten.
func seqList(seqs []int64) string {
	var b strings.Builder
	for i, s := range seqs {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(seqs)-10)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, s)
	}
	return b.String()
}

// The store's own sealing policy, with room for a slow writer: a tail
// longer, or spanning more time up to the newest record, was not left by
// a writer following it (a crash stops the records too), so checkpoints
// were removed. activity.SealPolicy's defaults are 1,000 records and 60 s.
const (
	policyRecords = 2 * 1000
	policySpan    = 2 * time.Minute
)

// checkSealingPolicy fails an unsealed tail the policy cannot explain.
// Only with a key: without one nothing is verified, so everything is
// "unsealed".
func (v *verifier) checkSealingPolicy(ctx context.Context, s *activity.Store) error {
	tail := v.pos - v.sealed
	if tail <= 0 || v.verifiers == nil {
		return nil
	}
	v.checkDecisions()
	first, ferr := recordTime(ctx, s, v.sealed)
	last, lerr := recordTime(ctx, s, v.pos-1)
	if err := errors.Join(ferr, lerr); err != nil {
		if ctx.Err() != nil {
			return err
		}
		// A record whose time cannot be read was reported as bad by the
		// hash checks already; only the count speaks for the policy.
		first, last = time.Time{}, time.Time{}
	}
	if span := last.Sub(first); tail > policyRecords || span > policySpan {
		v.problem(CheckSealed, "unsealed_beyond_policy", v.sealed, "records %d..%d (%d records over %s) are signed by no checkpoint, more than the sealing policy ever leaves", v.sealed, v.pos-1, tail, span.Round(time.Second))
	}
	return nil
}

// decisionGrace is how long a decision may show unsealed: the store
// seals it right after its commit, and a reader may look in between.
const decisionGrace = 10 * time.Second

// checkDecisions reports the operator decisions no verified checkpoint
// covers, once past decisionGrace (either way: a record dated ahead
// would never be): the store seals a decision as it writes it, and
// refuses to write one without the key, so such a decision was written
// behind its back (a forged resolution, which the next seal would
// otherwise sign as though it had been checked).
func (v *verifier) checkDecisions() {
	now := timeNow()
	for _, d := range v.decisions {
		if d.seq < v.sealed || now.Sub(d.at).Abs() < decisionGrace {
			continue
		}
		v.problem(CheckSealed, "unsealed_decision", d.seq, "record %d, an operator's decision (%s), is signed by no checkpoint: the store seals a decision as it writes it and writes none without the key, so this one was written behind its back (or its checkpoint removed)", d.seq, d.kind)
	}
}

// recordTime is when record seq says it was written (its own bytes, not
// the t column, which is a cache).
func recordTime(ctx context.Context, s *activity.Store, seq int64) (time.Time, error) {
	var t time.Time
	err := s.ScanLog(ctx, seq, func(n int64, canonical, _ []byte) error {
		rec, err := activity.ParseRecord(canonical)
		if err != nil {
			return err
		}
		t = rec.Time
		return errStopScan
	})
	if err == errStopScan {
		err = nil
	}
	return t, err
}

var errStopScan = errors.New("stop")

// ReadWitness returns the newest checkpoint in a witness file (the store
// appends every checkpoint it signs to it), or nil when there is none.
func ReadWitness(path string) ([]byte, error) {
	w, err := activity.ReadWitness(path)
	if err != nil || w.Checkpoint == "" {
		return nil, err
	}
	return []byte(w.Checkpoint), nil
}

var timeNow = time.Now

// rowBatch is a run of log rows copied out of SQLite into one arena.
type rowBatch struct {
	seqs                  []int64
	canonical, leaf, tree [][]byte
	arena                 []byte
}

const batchRows = 512

func (b *rowBatch) reset() {
	b.seqs, b.canonical, b.leaf, b.tree, b.arena = b.seqs[:0], b.canonical[:0], b.leaf[:0], b.tree[:0], b.arena[:0]
}

func (b *rowBatch) add(seq int64, canonical, leaf, tree []byte) {
	if need := len(b.arena) + len(canonical) + len(leaf) + len(tree); need > cap(b.arena) {
		// Earlier slices keep pointing into the old arena, which stays
		// alive until the batch is processed.
		b.arena = make([]byte, 0, max(2*cap(b.arena), need, 256<<10))
	}
	start := len(b.arena)
	b.arena = append(b.arena, canonical...)
	mid := len(b.arena)
	b.arena = append(b.arena, leaf...)
	end := len(b.arena)
	b.arena = append(b.arena, tree...)
	b.seqs = append(b.seqs, seq)
	b.canonical = append(b.canonical, b.arena[start:mid:mid])
	b.leaf = append(b.leaf, b.arena[mid:end:end])
	b.tree = append(b.tree, b.arena[end:len(b.arena):len(b.arena)])
}

// scanBatches reads the log in a goroutine and hands batches of rows to fn
// in order, recycling a few batches so memory stays bounded.
func scanBatches(ctx context.Context, s *activity.Store, from int64, fn func(*rowBatch)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	full := make(chan *rowBatch, 2)
	free := make(chan *rowBatch, 3)
	for range cap(free) {
		free <- new(rowBatch)
	}
	errc := make(chan error, 1)
	go func() {
		defer close(full)
		b := <-free
		err := s.ScanLogHashes(ctx, from, func(seq int64, canonical, leaf, tree []byte) error {
			b.add(seq, canonical, leaf, tree)
			if len(b.seqs) < batchRows {
				return nil
			}
			full <- b
			select {
			case b = <-free:
			case <-ctx.Done():
				return ctx.Err()
			}
			b.reset()
			return nil
		})
		if err == nil && len(b.seqs) > 0 {
			full <- b
		}
		errc <- err
	}()
	for b := range full {
		fn(b)
		free <- b
	}
	return <-errc
}

// ExportFormat is the first line's format tag.
const ExportFormat = "mcpdup-export/v1"

// ExportHeader is the first line of an export. It is a hint for readers;
// verification trusts none of it except as a cross-check.
type ExportHeader struct {
	Format      string `json:"format"`
	Origin      string `json:"origin"`
	Records     int64  `json:"records"`
	Checkpoints int    `json:"checkpoints"`
	ExportedAt  string `json:"exported_at"`
}

type checkpointLine struct {
	Checkpoint string `json:"checkpoint"`
}

// ExportSummary says what Export wrote.
type ExportSummary struct {
	Origin      string `json:"origin"`
	Records     int64  `json:"records"`
	Checkpoints int    `json:"checkpoints"`
	SealedSize  int64  `json:"sealed_size"`
	Bytes       int64  `json:"bytes"`
}

// Export writes the whole log as JSONL: a header line, then every record's
// canonical bytes verbatim, one per line, with each checkpoint line placed
// right after the record that completes it. Nothing is re-encoded, so
// `audit verify --export` checks exactly the bytes the database holds. No
// key material is written. Seal the store first so the export ends at a
// checkpoint.
func Export(ctx context.Context, s *activity.Store, w io.Writer) (ExportSummary, error) {
	sum := ExportSummary{Origin: s.Origin()}
	// One read transaction: a gateway writing meanwhile cannot make the
	// header, the records and the checkpoints disagree.
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return sum, err
	}
	defer snap.Close()
	size := snap.Size
	cps, err := snap.Checkpoints(ctx)
	if err != nil {
		return sum, err
	}
	cps = slices.DeleteFunc(cps, func(c activity.StoredCheckpoint) bool { return c.Size > size })
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	hdr, _ := json.Marshal(ExportHeader{ExportFormat, s.Origin(), size, len(cps), activity.FormatTime(timeNow())})
	cw.Write(append(hdr, '\n'))
	next := 0
	writeCheckpoints := func(pos int64) {
		for next < len(cps) && cps[next].Size == pos {
			line, _ := json.Marshal(checkpointLine{string(cps[next].Note)})
			cw.Write(append(line, '\n'))
			sum.SealedSize = pos
			next++
		}
	}
	writeCheckpoints(0)
	err = snap.ScanLog(ctx, func(seq int64, canonical []byte) error {
		if bytes.IndexByte(canonical, '\n') >= 0 {
			return fmt.Errorf("record %d contains a newline; it cannot be exported as a line", seq)
		}
		cw.Write(canonical)
		cw.Write([]byte{'\n'})
		sum.Records++
		writeCheckpoints(sum.Records)
		return ctx.Err()
	})
	if err != nil {
		return sum, fmt.Errorf("export: %w", err)
	}
	if cw.err != nil {
		return sum, fmt.Errorf("export: %w", cw.err)
	}
	sum.Checkpoints = next
	sum.Bytes = cw.n
	return sum, bw.Flush()
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// VerifyExportFile verifies an export file. Without a pinned key the
// origin comes from the export header and the report says so.
func VerifyExportFile(path string, opts Options) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return VerifyExport(f, path, opts)
}

// VerifyExport verifies an export read from r in one pass. Lines are read
// as raw bytes: a CR, a byte-order mark, trailing spaces or a reformatted
// record all change the bytes and are caught.
func VerifyExport(r io.Reader, name string, opts Options) (*Report, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	first, err := readLine(br)
	if err != nil {
		return nil, fmt.Errorf("%s line 1: %w", name, err)
	}
	var hdr ExportHeader
	dec := json.NewDecoder(bytes.NewReader(first))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hdr); err != nil || hdr.Format != ExportFormat {
		return nil, fmt.Errorf("%s line 1: not an mcpdup export header (want {\"format\":%q,...})", name, ExportFormat)
	}
	v, err := newVerifier(hdr.Origin, opts)
	if err != nil {
		return nil, err
	}
	v.total = hdr.Records
	if opts.Trusted != nil {
		v.setTrusted(opts.Trusted)
	}
	lineNo := 1
	for {
		line, err := readLine(br)
		if err == io.EOF {
			break
		}
		lineNo++
		if errors.Is(err, errCut) {
			v.problem(CheckTruncation, "cut", -1, "%s line %d: %v", name, lineNo, err)
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, lineNo, err)
		}
		switch {
		case bytes.HasPrefix(line, []byte(`{"checkpoint":`)):
			var cl checkpointLine
			if err := json.Unmarshal(line, &cl); err != nil {
				v.problem(CheckSignatures, "malformed_checkpoint", -1, "%s line %d: %v", name, lineNo, err)
				continue
			}
			v.addCheckpoint([]byte(cl.Checkpoint), "checkpoint on line "+strconv.Itoa(lineNo))
		default:
			// A CR or trailing space breaks the strict record syntax or
			// the hash chain; no separate check is needed.
			v.addRecord(-1, line, nil, nil)
		}
	}
	v.close()
	switch {
	case v.pos > hdr.Records:
		// Chained like the rest, and unsigned unless a checkpoint was
		// forged too: only the header's count gives them away.
		v.appended++
		v.problem(CheckTruncation, "appended", -1, "%s: header says %d records, the file has %d: %d added after the export was written", name, hdr.Records, v.pos, v.pos-hdr.Records)
	case v.pos < hdr.Records:
		v.problem(CheckTruncation, "count_mismatch", -1, "%s: header says %d records, the file has %d", name, hdr.Records, v.pos)
	}
	return v.report(name, opts.Key), nil
}

var errCut = errors.New("the last line has no newline: the file was cut short")

// readLine returns one line without its LF. A final line without LF is an
// error: exports always end with one, and a cut file must not pass.
// maxExportLine bounds one line of an export: a record is a few hundred
// bytes; the importers' reader stops at the same size.
const maxExportLine = 256 << 20

func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		buf := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			if len(buf) > maxExportLine {
				return nil, fmt.Errorf("a line longer than %d MiB: not an export record", maxExportLine>>20)
			}
			line, err = br.ReadSlice('\n')
			buf = append(buf, line...)
		}
		line = buf
	}
	switch {
	case err == io.EOF && len(line) == 0:
		return nil, io.EOF
	case err == io.EOF:
		return nil, errCut
	case err != nil:
		return nil, err
	}
	return line[:len(line)-1], nil
}

// ReadExportHeader reads an export's first line. The origin it names is a
// hint used to find a local key; verification does not trust it.
func ReadExportHeader(path string) (ExportHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return ExportHeader{}, err
	}
	defer f.Close()
	line, err := readLine(bufio.NewReaderSize(f, 64<<10))
	var hdr ExportHeader
	if err != nil || json.Unmarshal(line, &hdr) != nil || hdr.Format != ExportFormat {
		return hdr, fmt.Errorf("%s line 1: not an mcpdup export header (want {\"format\":%q,...})", path, ExportFormat)
	}
	return hdr, nil
}

// UseWitness makes the newest checkpoint of a witness file the trusted
// one, unless the operator gave one: a rewrite of the database that also
// deleted its checkpoints then shows as a fork or rollback.
func UseWitness(path string, opts *Options) error {
	if path == "" {
		return nil
	}
	oldest, newest, bad, err := activity.WitnessSpan(path)
	if err != nil {
		return err
	}
	opts.Witness, opts.WitnessFrom, opts.WitnessBad = path, oldest.Size, bad
	if newest.Checkpoint == "" {
		opts.WitnessFrom = -1
		return nil
	}
	if opts.Trusted == nil {
		opts.Trusted, opts.TrustedFrom = []byte(newest.Checkpoint), "witnessed in "+path
	}
	return nil
}
