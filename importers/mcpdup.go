package importers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/audit"
)

func init() {
	formats["mcpdup"] = func(string) decoder { return &ownExport{} }
}

// ownExport imports an mcpdup export: the chain is verified (a pass of
// its own, beside the import) and every record is applied to this
// database through the same writer the gateway uses, keeping ids, times
// and states, with each row's provenance pointing at its line.
type ownExport struct {
	verdict string
	// signed is how many of the export's records a verified checkpoint
	// covers; with AllowUnsealed the records after it are marked
	// unsigned. -1: not known yet (the import runs beside verification).
	signed int64
	// heldSeq is the last record of this log an earlier import holds
	// (heldHash its hash, heldFrom that import); -1: none.
	heldSeq  int64
	heldHash string
	heldFrom activity.SourceID
}

func (d *ownExport) note() string {
	return "mcpdup export: " + d.verdict
}

// decode verifies the export and imports it at once: verification reads
// the file on a goroutine of its own while records are written, and an
// export that does not verify fails the import, whose transaction then
// keeps nothing. (Verifying first, alone, left a core idle for ~7% of
// the import.) A failed verification stops the import at once, and
// whatever else went wrong, it is the error reported: it is the cause.
func (d *ownExport) decode(ctx context.Context, in *lines, k *sink) error {
	d.signed = -1
	if k.opts.AllowUnsealed {
		// Which records to mark is known only once verification ends:
		// verify first, then import.
		if err := d.verify(ctx, k); err != nil {
			return err
		}
		return d.importRecords(ctx, in, k)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	verified := make(chan error, 1)
	go func() {
		err := d.verify(ctx, k)
		if err != nil {
			cancel() // nothing of an altered export is kept: stop writing it
		}
		verified <- err
	}()
	err := d.importRecords(ctx, in, k)
	if verr := <-verified; verr != nil {
		return verr
	}
	return err
}

func (d *ownExport) importRecords(ctx context.Context, in *lines, k *sink) error {
	hdr, _, err := readHeader(in, k)
	if err != nil {
		return err
	}
	if err := d.continueFrom(k, hdr.Origin); err != nil {
		return err
	}
	return decodeAhead(ctx, in, k, 256, func(line []byte) (parsed, error) {
		var p parsed
		if bytes.HasPrefix(line, []byte(`{"checkpoint":`)) {
			p.checkpoint = true
			return p, nil
		}
		p.rec, p.err = activity.ParseRecord(line)
		if p.err == nil {
			p.ev, p.evErr = p.rec.Event()
		}
		return p, nil
	}, func(n int64, p parsed, _ error) error {
		if p.checkpoint {
			return nil
		}
		p.line = n
		if p.err == nil {
			k.head = fmt.Sprintf("%d:%s", p.rec.Seq, p.rec.Hash)
			if p.rec.Seq <= d.heldSeq {
				// An earlier import of this log holds it.
				if p.rec.Seq == d.heldSeq && p.rec.Hash.String() != d.heldHash {
					return fmt.Errorf("import %s line %d: record %d is not the one %s imported from %s: the log was rewritten or forked since; not imported",
						k.file, n, p.rec.Seq, d.heldFrom, hdr.Origin)
				}
				k.count()
				k.repeated(1)
				return nil
			}
		}
		if err := d.apply(k, p); err != nil {
			return err
		}
		k.count()
		return nil
	})
}

// continueFrom finds where an earlier import of this log ended: a longer
// export of the same log (the gateway exported again an hour later) holds
// those records again. The chain makes the record at that point stand for
// every one before it: if it is the same, so are they, and they are
// recognised and passed over; if not, the log was rewritten.
func (d *ownExport) continueFrom(k *sink, origin string) error {
	d.heldSeq = -1
	k.origin = origin
	from, head, err := k.w.ImportedHead(origin)
	if err != nil || head == "" {
		return err
	}
	seq, hash, ok := strings.Cut(head, ":")
	n, perr := strconv.ParseInt(seq, 10, 64)
	if !ok || perr != nil {
		return fmt.Errorf("import %s: the earlier import %s of %s has a malformed head %q", k.file, from, origin, head)
	}
	d.heldSeq, d.heldHash, d.heldFrom = n, hash, from
	k.rep.RepeatedFrom = appendOnce(k.rep.RepeatedFrom, from)
	return nil
}

// parsed is one export line, decoded ahead of the writer.
type parsed struct {
	line       int64
	rec        activity.Record
	ev         any
	err        error // the envelope
	evErr      error // the record's data
	checkpoint bool  // a checkpoint line: verified already, not imported
}

// verify checks the whole export: an altered log is refused, not
// imported.
func (d *ownExport) verify(ctx context.Context, k *sink) error {
	in, err := openLines(k.file)
	if err != nil {
		return err
	}
	defer in.Close()
	hdr, first, err := readHeader(in, k)
	if err != nil {
		return err
	}
	opts := audit.Options{Trusted: k.opts.TrustedCheckpoint}
	if k.opts.ExportKey != nil {
		if opts.Key, opts.KeyPinned, err = k.opts.ExportKey(hdr.Origin); err != nil {
			return fmt.Errorf("import %s: %w", k.file, err)
		}
	}
	whole := ctxReader{ctx, io.MultiReader(bytes.NewReader(append(append([]byte(nil), first...), '\n')), in.r)}
	rep, err := audit.VerifyExport(whole, k.file, opts)
	if err != nil {
		return fmt.Errorf("import %s: %w", k.file, err)
	}
	if rep.Tampered {
		first := "tampered"
		if len(rep.Problems) > 0 {
			first = rep.Problems[0].Message
		}
		return fmt.Errorf("import %s: the export does not verify (%s); an altered log is not imported", k.file, first)
	}
	d.verdict = fmt.Sprintf("chain and tree verified over %d records, %d checkpoints", rep.Records, rep.Checkpoints)
	switch {
	case rep.Key == "":
		d.verdict += "; signatures not checked (no key for origin " + rep.Origin + ")"
	case !rep.KeyPinned:
		d.verdict += "; signatures checked with this host's key for " + rep.Origin + " (not pinned)"
	default:
		d.verdict += "; signatures checked against the pinned key"
	}
	if unsigned := rep.Records - rep.SealedSize; unsigned > 0 {
		why := fmt.Sprintf("%d of its %d records (from record %d on) are signed by no checkpoint this host could verify", unsigned, rep.Records, rep.SealedSize)
		if rep.Key == "" {
			why = fmt.Sprintf("no key for origin %s: none of its %d records' signatures could be checked", rep.Origin, rep.Records)
		}
		if !k.opts.AllowUnsealed {
			return fmt.Errorf("import %s: %s, so anyone could have written them; not imported (pass --key, or --allow-unsealed to import them marked unsigned)", k.file, why)
		}
		d.verdict += "; " + why + ": imported marked unsigned (--allow-unsealed)"
	}
	if k.opts.AllowUnsealed {
		d.signed = rep.SealedSize // read by apply, which runs after verify in this mode
	}
	return nil
}

// readHeader reads an export's first line.
func readHeader(in *lines, k *sink) (audit.ExportHeader, []byte, error) {
	var hdr audit.ExportHeader
	first, err := in.Next()
	if err != nil {
		return hdr, nil, k.fail(1, err)
	}
	if err := json.Unmarshal(first, &hdr); err != nil || hdr.Format != audit.ExportFormat {
		return hdr, nil, &LineError{File: k.file, Line: 1, Field: "format", Err: fmt.Errorf("not an mcpdup export header")}
	}
	return hdr, first, nil
}

// apply writes one exported record into this database. verify checks
// every record's bytes against the chain (the import fails if they do not
// hold), so the envelope was read without re-encoding it.
func (d *ownExport) apply(k *sink, p parsed) error {
	n, rec, ev := p.line, p.rec, p.ev
	if p.err != nil {
		return k.bad(n, "", p.err)
	}
	if p.evErr != nil {
		return k.bad(n, "data", p.evErr)
	}
	if d.signed >= 0 && rec.Seq >= d.signed && k.unsignedFrom == 0 {
		k.unsignedFrom = n // this line and every later one: unsigned
	}
	var err error
	w, at := k.w, k.at(n)
	switch v := ev.(type) {
	case *activity.Source:
		return nil // the exporting log's own imports: its rows now point here
	case *activity.Run:
		v.Source = at
		_, err = k.run(*v)
	case *activity.RunEnd:
		err = w.EndRun(v.RunID, v.At)
	case *activity.Grant:
		err = w.AddGrant(*v)
	case *activity.Call:
		v.Source = at
		_, err = k.call(*v)
	case *activity.Execution:
		v.Source = at
		if d.signed >= 0 && rec.Seq >= d.signed {
			v.NotRecorded = append(v.NotRecorded, activity.FactSignature)
		}
		_, err = k.accept(*v)
	case *activity.Transition:
		if v.To == activity.StateVerified || v.To == activity.StateRejectedByOperator {
			return nil // written by the resolution just before it
		}
		v.Source = at
		_, err = w.Transition(*v)
	case *activity.Resolution:
		v.Source = at
		_, err = w.Resolve(*v)
	case *activity.VaultEvent:
		v.Source = at
		err = w.ImportVault(*v)
	case *activity.Approval:
		err = w.ImportApproval(*v)
	default:
		return k.bad(n, "kind", fmt.Errorf("unknown record kind %s", rec.Kind))
	}
	if err != nil {
		return k.fail(n, fmt.Errorf("record %d (%s): %w", rec.Seq, rec.Kind, err))
	}
	return nil
}

// ctxReader stops reading once ctx is done: a cancelled import does not
// wait for the verification of the rest of the file.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
