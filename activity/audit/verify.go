// Package audit verifies the activity log and exports it. Verification
// recomputes every hash from the stored record bytes and trusts nothing the
// database or export says about itself: not its hashes, not its tree, not
// its public key. What it checks, in order: seq continuity, chain links,
// record hashes, checkpoint signatures against the pinned key and origin,
// checkpoint roots against the recomputed Merkle tree, truncation below the
// newest checkpoint, and rollback or fork against a checkpoint kept
// elsewhere.
package audit

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mcpdup/mcpdup/activity"
)

// Options say what verification may trust.
type Options struct {
	// Key is the pinned verifier key (name+hash+key). Its name is the log
	// origin. Empty: signatures cannot be checked.
	Key string
	// KeyPinned is false when the key came from a file on this host rather
	// than from the operator; the report says so.
	KeyPinned bool
	// Trusted is a signed checkpoint kept outside the log (a ticket, a
	// teammate, another machine), used to detect rollback and forks.
	Trusted []byte
	// Progress, if set, is called now and then with records checked so far
	// and the total when known (0 otherwise).
	Progress func(done, total int64)
	// LogOnly skips the table check: the log is proven, the tables the
	// console reads are not (the report says "not checked").
	LogOnly bool
	// TrustedFrom says where Trusted came from, for the report ("the
	// witness file …"); empty: given by the operator.
	TrustedFrom string
	// Witness is the witness file UseWitness read ("" none was asked
	// for); WitnessFrom the size of its oldest checkpoint, -1 when it
	// holds none (missing, empty, unreadable); WitnessBad its lines that
	// hold no checkpoint. The report warns when witnessing began after
	// the log's first checkpoint.
	Witness     string
	WitnessFrom int64
	WitnessBad  int
}

// Check names, in the order they are reported.
const (
	CheckSeq         = "seq_continuity"
	CheckChain       = "chain_links"
	CheckHashes      = "record_hashes"
	CheckSignatures  = "checkpoint_signatures"
	CheckRoots       = "checkpoint_roots"
	CheckTruncation  = "truncation"
	CheckTrusted     = "rollback_fork"
	CheckSealed      = "sealed_tail"
	CheckTables      = "tables"
	checkCount       = 9
	maxProblemsKept  = 200
	progressInterval = 1 << 16
)

var checkTitles = map[string]string{
	CheckSeq:        "seq continuity",
	CheckChain:      "chain links",
	CheckHashes:     "record hashes",
	CheckSignatures: "checkpoint signatures",
	CheckRoots:      "checkpoint roots",
	CheckTruncation: "truncation",
	CheckTrusted:    "rollback / fork",
	CheckSealed:     "sealed tail",
	CheckTables:     "tables",
}

// Status of one check.
type Status string

const (
	StatusOK      Status = "ok"
	StatusFailed  Status = "failed"
	StatusWarning Status = "warning"
	StatusSkipped Status = "not_checked"
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Title  string `json:"title"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
}

// Problem is one finding, tied to a record where there is one.
type Problem struct {
	Check   string `json:"check"`
	Code    string `json:"code"`
	Seq     int64  `json:"seq"` // -1 when not about one record
	Message string `json:"message"`
	// Table and Row name a projection row that differs from the log.
	Table string `json:"table,omitempty"`
	Row   string `json:"row,omitempty"`
}

// Report is the result of a verification.
type Report struct {
	SchemaVersion   int       `json:"schema_version"`
	Source          string    `json:"source"`
	Origin          string    `json:"origin"`
	OriginPinned    bool      `json:"origin_pinned"`
	Key             string    `json:"key,omitempty"`
	KeyPinned       bool      `json:"key_pinned"`
	Records         int64     `json:"records"`
	Checkpoints     int       `json:"checkpoints"`
	SealedSize      int64     `json:"sealed_size"`
	Unsealed        int64     `json:"unsealed"`
	Checks          []Check   `json:"checks"`
	Problems        []Problem `json:"problems"`
	ProblemsOmitted int       `json:"problems_omitted"`
	Tampered        bool      `json:"tampered"`
	Result          string    `json:"result"` // ok | tampered | unsigned (no key: nothing signed could be checked)
	// TablesThrough is how many records the table check covered, when it
	// covered fewer than Records (a Follower checks them less often).
	TablesThrough int64 `json:"tables_verified_through,omitempty"`
	DurationMS    int64 `json:"duration_ms"`
}

// verifier is fed the log in order, one record or checkpoint at a time,
// by a database or export reader, and keeps O(log n) state.
type verifier struct {
	opts      Options
	start     time.Time
	origin    string
	verifiers note.Verifiers

	pos      int64         // records fed so far
	prevHash tlog.Hash     // recomputed hash of the last record fed
	lastSeq  int64         // seq of the last record fed
	edge     activity.Edge // right edge of the recomputed Merkle tree
	expect   int64         // next seq expected
	missing  map[int64]bool

	checkpoints []checkpoint // seen, verified or not, by size
	pending     []checkpoint // size > pos: root checked when pos reaches size
	trusted     *checkpoint
	sealed      int64 // largest size whose root matched and whose signature verified

	problems []Problem
	omitted  int
	counts   map[string]int
	appended int // of counts[CheckTruncation]: an export longer than its header says
	total    int64
	tables   *activity.TableReport // nil: no tables to check (an export)
	// treeMismatches counts the stored tree hashes found to differ from
	// the recomputed tree (problems of CheckHashes, as leaf hashes are).
	treeMismatches int

	// A follower keeps the tree's root at every size past keepRootsFrom
	// (the newest checkpoint it has seen; 0: none kept), for a checkpoint
	// written after it read past that size.
	keepRootsFrom int64
	recent        map[int64]tlog.Hash

	// decisions are the operator decisions read (resolutions, the vault,
	// approvals answered), by seq: the store seals each as it writes it,
	// so one no checkpoint covers was written without the key.
	decisions []decision
	// recovered are those a recovery seal signed first: written without
	// the key, or by a writer that crashed before its seal (a database's
	// own checkpoint reasons; an export has none).
	recovered []int64
}

type decision struct {
	seq  int64
	kind string
	at   time.Time // what the record says
}

// maxDecisionsKept bounds the decisions remembered (they are operator
// actions: a few a day).
const maxDecisionsKept = 1 << 16

// maxRecentRoots bounds the roots a follower keeps (2 MiB): the store
// seals every 1,000 records, so a checkpoint is never that far behind.
const maxRecentRoots = 1 << 16

type checkpoint struct {
	size   int64
	root   tlog.Hash
	signed bool // signature verified against the pinned key
	where  string
}

func newVerifier(origin string, opts Options) (*verifier, error) {
	v := &verifier{opts: opts, start: time.Now(), origin: origin, missing: map[int64]bool{}, counts: map[string]int{}}
	if opts.Key != "" {
		nv, err := note.NewVerifier(opts.Key)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		v.verifiers = note.VerifierList(nv)
		v.origin = nv.Name() // the pinned key fixes the origin
	}
	v.prevHash = activity.GenesisHash(v.origin)
	return v, nil
}

func (v *verifier) problem(check, code string, seq int64, format string, args ...any) {
	v.counts[check]++
	if len(v.problems) >= maxProblemsKept {
		v.omitted++
		return
	}
	v.problems = append(v.problems, Problem{Check: check, Code: code, Seq: seq, Message: fmt.Sprintf(format, args...)})
}

// addRecord checks one record. rowSeq is the seq the container claims for
// it (the database row key), or -1 when the container has none (an export
// line). storedLeaf and storedTree are the cached leaf and tree hashes the
// database keeps, or nil (an export keeps neither).
func (v *verifier) addRecord(rowSeq int64, canonical, storedLeaf, storedTree []byte) {
	seq, prev, err := activity.ParseHead(canonical)
	label := seq
	if rowSeq >= 0 {
		label = rowSeq
	}
	switch {
	case err != nil:
		v.problem(CheckSeq, "malformed_record", label, "record %d: %v", label, err)
		seq = label
	case rowSeq >= 0 && seq != rowSeq:
		v.problem(CheckSeq, "misplaced_record", rowSeq, "record %d: row holds record %d (rows reordered or copied)", rowSeq, seq)
	}
	if rowSeq >= 0 {
		seq = rowSeq
	}
	v.checkSeq(seq)

	h := tlog.RecordHash(canonical)
	if storedLeaf != nil && !bytes.Equal(storedLeaf, h[:]) {
		v.problem(CheckHashes, "hash_mismatch", seq, "record %d: content does not match its stored hash (edited after it was written)", seq)
	}
	if err == nil && prev != v.prevHash {
		if v.pos == 0 {
			v.problem(CheckChain, "genesis_mismatch", seq, "record %d: does not start the chain of %s (another log, or records deleted before it)", seq, v.origin)
		} else {
			// The record named is the one before: its bytes no longer hash to
			// what the next record recorded when it was written. (Only when
			// this record's own prev field was edited is it this one, and
			// then its hash check fails too.)
			v.problem(CheckChain, "chain_break", v.lastSeq, "record %d was changed, or a record was removed or inserted after it: record %d's prev is not its hash", v.lastSeq, seq)
		}
	}
	v.prevHash, v.lastSeq = h, seq
	if kind, ok := activity.DecisionRecord(canonical); ok && len(v.decisions) < maxDecisionsKept {
		d := decision{seq: seq, kind: string(kind)}
		if rec, err := activity.ParseRecord(canonical); err == nil {
			d.at = rec.Time
		}
		v.decisions = append(v.decisions, d)
	}

	hashes, herr := tlog.StoredHashesForRecordHash(v.pos, h, &v.edge)
	if herr != nil {
		panic("audit: tree edge out of step: " + herr.Error()) // our own bookkeeping, not input
	}
	// The stored tree hashes are a cache nothing signs, but the store
	// reads it, never recomputing: inclusion proofs (the gateway's proven
	// decisions, --verify-records), the next record's tree hashes, and the
	// root the next checkpoint signs. One that differs from the tree
	// recomputed here is reported, as a stored leaf hash that differs is;
	// only while the records themselves are sound (after a record was
	// edited, removed or moved, the cache still holds the tree it was
	// written with: a symptom, reported above).
	sound := seq == v.pos && v.counts[CheckSeq]+v.counts[CheckChain]+v.counts[CheckHashes] == v.treeMismatches
	if storedLeaf != nil && sound && !activity.SameTreeHashes(storedTree, hashes) {
		v.treeMismatches++
		v.problem(CheckHashes, "tree_hash_mismatch", seq, "record %d: its stored Merkle tree hashes (tree_hashes) differ from the tree recomputed from the records: that cache was edited or damaged after it was written, the records are checked on their own; inclusion proofs through it fail (the gateway refuses what they prove) and a seal that reads it refuses to sign", seq)
	}
	v.edge.Add(v.pos, hashes)
	v.pos++
	if v.keepRootsFrom > 0 && v.pos > v.keepRootsFrom && len(v.recent) < maxRecentRoots {
		root, err := tlog.TreeHash(v.pos, &v.edge)
		if err != nil {
			panic("audit: tree edge out of step: " + err.Error())
		}
		v.recent[v.pos] = root
	}
	v.checkPending()
	if v.opts.Progress != nil && v.pos%progressInterval == 0 {
		v.opts.Progress(v.pos, v.total)
	}
}

// checkSeq tracks gaps and reordering: a seq that arrives after a later
// one was reported missing is a reorder, not a gap.
func (v *verifier) checkSeq(seq int64) {
	switch {
	case seq == v.expect:
		v.expect++
	case seq > v.expect:
		for s := v.expect; s < seq && len(v.missing) < 10000; s++ {
			v.missing[s] = true
		}
		v.expect = seq + 1
	case v.missing[seq]:
		delete(v.missing, seq)
		v.problem(CheckSeq, "reordered", seq, "record %d: appears after record %d (records reordered)", seq, v.expect-1)
	default:
		v.problem(CheckSeq, "duplicate_seq", seq, "record %d: appears twice", seq)
	}
}

// addCheckpoint checks a signed checkpoint note. Its root is compared once
// the recomputed tree reaches its size.
func (v *verifier) addCheckpoint(msg []byte, where string) {
	cp, ok := v.parseCheckpoint(msg, where, CheckSignatures)
	if !ok {
		return
	}
	for _, seen := range v.checkpoints {
		if seen.size == cp.size && seen.root != cp.root {
			v.problem(CheckRoots, "fork", -1, "%s: size %d has two different roots (%s and %s): the log was forked", where, cp.size, seen.where, where)
		}
	}
	v.checkpoints = append(v.checkpoints, cp)
	v.schedule(cp)
}

func (v *verifier) schedule(cp checkpoint) {
	switch {
	case cp.size == v.pos:
		v.checkRoot(cp)
	case cp.size > v.pos:
		// Kept in order of size (stably), so each record looks at the
		// first alone: a follower feeds every stored checkpoint before
		// the records, and a scan of them all per record grew with the
		// log's age (3,000 checkpoints at 6M records: a quarter of the
		// first pass).
		i, _ := slices.BinarySearchFunc(v.pending, cp.size, func(p checkpoint, size int64) int {
			if p.size <= size {
				return -1
			}
			return 1
		})
		v.pending = slices.Insert(v.pending, i, cp)
	case v.recent[cp.size] != tlog.Hash{}:
		// A follower read past this size before the checkpoint was
		// written: it kept the tree's roots since the newest checkpoint.
		v.compareRoot(cp, v.recent[cp.size])
	default:
		v.problem(CheckRoots, "misplaced_checkpoint", -1, "%s: covers %d records but appears after record %d; its root cannot be checked (export reordered)", cp.where, cp.size, v.pos-1)
	}
}

func (v *verifier) checkPending() {
	for len(v.pending) > 0 && v.pending[0].size == v.pos {
		v.checkRoot(v.pending[0])
		v.pending = v.pending[1:]
	}
}

func (v *verifier) checkRoot(cp checkpoint) {
	root, err := tlog.TreeHash(cp.size, &v.edge)
	if err != nil {
		panic("audit: tree edge out of step: " + err.Error())
	}
	v.compareRoot(cp, root)
}

// compareRoot checks a checkpoint against the tree's root at its size.
func (v *verifier) compareRoot(cp checkpoint, root tlog.Hash) {
	trusted := v.trusted != nil && cp == *v.trusted
	switch {
	case root == cp.root && cp.signed && cp.size > v.sealed:
		v.sealed = cp.size
	case root == cp.root:
	case trusted:
		v.problem(CheckTrusted, "fork", -1, "trusted checkpoint (size %d%s): the log's first %d records hash to %s, not %s: the log was rewritten or forked after that checkpoint was taken%s", cp.size, v.trustedFrom(), cp.size, root, cp.root, v.copyHint())
	default:
		v.problem(CheckRoots, "root_mismatch", -1, "%s: root does not match the records (the log was rewritten after it was signed)", cp.where)
	}
}

// trustedFrom says where the trusted checkpoint came from, for a
// problem's text: ", witnessed in …/keys/<origin>.witness", or "".
func (v *verifier) trustedFrom() string {
	if v.opts.TrustedFrom == "" {
		return ""
	}
	return ", " + v.opts.TrustedFrom
}

// copyHint is what else a witness file's disagreement may mean: a copy
// of the database that signed records of its own with the same key
// directory wrote its checkpoint there too.
func (v *verifier) copyHint() string {
	if !strings.HasPrefix(v.opts.TrustedFrom, "witnessed in ") {
		return ""
	}
	return "; or a copy of this database signed records of its own with the same key directory, whose witness file then holds the copy's checkpoint (give each copy its own --key-dir)"
}

// parseCheckpoint opens a signed note with the pinned key, or, with no key,
// reads its text unverified.
func (v *verifier) parseCheckpoint(msg []byte, where, check string) (checkpoint, bool) {
	cp := checkpoint{where: where}
	var text string
	if v.verifiers != nil {
		n, err := note.Open(msg, v.verifiers)
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &invalid):
			v.problem(check, "bad_signature", -1, "%s: signature by %s does not verify (the checkpoint was altered)", where, invalid.Name)
			return cp, false
		case errors.As(err, &unverified):
			whose := "the pinned key"
			if !v.opts.KeyPinned {
				whose = "this host's key"
			}
			v.problem(check, "unknown_signer", -1, "%s: not signed by %s %s (signed by another key)", where, whose, v.origin)
			return cp, false
		case err != nil:
			v.problem(check, "malformed_checkpoint", -1, "%s: %v", where, err)
			return cp, false
		}
		text, cp.signed = n.Text, true
	} else {
		t, ok := splitNote(msg)
		if !ok {
			v.problem(check, "malformed_checkpoint", -1, "%s: not a signed note", where)
			return cp, false
		}
		text = t
	}
	origin, size, root, err := activity.ParseCheckpointText(text)
	if err != nil {
		v.problem(check, "malformed_checkpoint", -1, "%s: %v", where, err)
		return cp, false
	}
	if origin != v.origin {
		v.problem(check, "origin_mismatch", -1, "%s: origin %q is not this log's %q", where, origin, v.origin)
		return cp, false
	}
	cp.size, cp.root = size, root
	return cp, true
}

func splitNote(msg []byte) (string, bool) {
	i := bytes.Index(msg, []byte("\n\n"))
	if i < 0 {
		return "", false
	}
	return string(msg[:i+1]), true
}

// setTrusted registers a checkpoint kept outside the log.
func (v *verifier) setTrusted(msg []byte) {
	cp, ok := v.parseCheckpoint(msg, "trusted checkpoint", CheckTrusted)
	if !ok {
		return
	}
	v.trusted = &cp
	v.schedule(cp)
}

// close reports what streaming could not: gaps never filled and
// checkpoints beyond the end (truncation).
func (v *verifier) close() {
	for s := range v.missing {
		v.problem(CheckSeq, "gap", s, "record %d: missing (seq gap)", s)
	}
	for _, cp := range v.pending {
		if v.trusted != nil && cp == *v.trusted {
			v.problem(CheckTrusted, "rollback", -1, "trusted checkpoint%s covers %d records but the log has %d: the log was truncated or rolled back%s", v.trustedFrom(), cp.size, v.pos, v.copyHint())
		} else {
			v.problem(CheckTruncation, "truncated", -1, "%s covers %d records but the log has %d: records were removed from the end", cp.where, cp.size, v.pos)
		}
	}
	v.pending = nil
}

// ResultUnsigned is the result of a log verified with no key: its chain
// and tables agree, which anyone able to write the database could have
// made so; no signature was checked.
const ResultUnsigned = "unsigned"

// report builds the report once the log has been read and closed.
func (v *verifier) report(source, key string) *Report {
	rep := new(Report)
	slices.SortStableFunc(v.problems, func(a, b Problem) int {
		if c := checkOrder(a.Check) - checkOrder(b.Check); c != 0 {
			return c
		}
		return int(a.Seq - b.Seq)
	})
	*rep = Report{
		SchemaVersion: 1, Source: source, Origin: v.origin, OriginPinned: v.verifiers != nil,
		Key: key, KeyPinned: v.opts.KeyPinned && key != "",
		Records: v.pos, Checkpoints: len(v.checkpoints), SealedSize: v.sealed,
		Problems: v.problems, ProblemsOmitted: v.omitted,
	}
	if rep.Problems == nil {
		rep.Problems = []Problem{}
	}
	if v.pos > v.sealed {
		rep.Unsealed = v.pos - v.sealed
	}
	rep.Checks = v.checks(rep)
	rep.Tampered = len(v.problems) > 0
	rep.DurationMS = time.Since(v.start).Milliseconds()
	switch {
	case rep.Tampered:
		rep.Result = "tampered"
	case v.verifiers == nil:
		rep.Result = ResultUnsigned
	default:
		rep.Result = "ok"
	}
	return rep
}

// failureText says, for each check, what its problems mean; each problem
// below the table names its record.
var failureText = map[string]string{
	CheckSeq:        "records are missing, repeated or out of order",
	CheckChain:      "a record no longer hashes to what the record after it recorded: it was changed, or records were removed or inserted",
	CheckHashes:     "a record's bytes, or the Merkle tree, no longer match the hashes stored with them: edited after they were written",
	CheckSignatures: "a checkpoint's signature does not verify with the key: forged, or signed by another key",
	CheckRoots:      "a signed checkpoint's root does not match the records: the log was rewritten after it was signed",
	CheckTruncation: "the log is shorter than a checkpoint it signed: records were removed from its end",
	CheckTrusted:    "the log does not extend the checkpoint kept elsewhere: it was rolled back, rewritten or forked",
	CheckSealed:     "records stay unsealed beyond the sealing policy: their checkpoints were removed, or their writer never sealed",
	CheckTables:     "rows differ from what the signed log implies",
}

// failure is failureText[name], unless the check's every problem says
// otherwise: an export longer than its header fails the length check
// with records added, not removed.
func (v *verifier) failure(name string) string {
	if name == CheckTruncation && v.appended == v.counts[name] {
		return "the export holds more records than its header says it was written with: records were added to its end"
	}
	return failureText[name]
}

func checkOrder(name string) int {
	for i, n := range []string{CheckSeq, CheckChain, CheckHashes, CheckSignatures, CheckRoots, CheckTruncation, CheckTrusted, CheckSealed, CheckTables} {
		if n == name {
			return i
		}
	}
	return checkCount
}

func (v *verifier) checks(rep *Report) []Check {
	out := make([]Check, 0, checkCount)
	add := func(name string, status Status, format string, args ...any) {
		detail := fmt.Sprintf(format, args...)
		if v.counts[name] > 0 {
			// A failure says what is wrong in its own words, not the
			// sentence that describes a pass.
			status, detail = StatusFailed, fmt.Sprintf("%d problem(s): %s", v.counts[name], v.failure(name))
		}
		out = append(out, Check{name, checkTitles[name], status, detail})
	}
	last := v.pos - 1
	if v.pos == 0 {
		add(CheckSeq, StatusOK, "empty log")
	} else {
		add(CheckSeq, StatusOK, "%d records, seq 0..%d", v.pos, last)
	}
	add(CheckChain, StatusOK, "every prev recomputed from the record before it")
	add(CheckHashes, StatusOK, "%d leaf hashes recomputed from the stored bytes", v.pos)
	switch {
	case v.verifiers == nil:
		add(CheckSignatures, StatusSkipped, "no public key: pass --key to check signatures (%d checkpoints read unverified)", len(v.checkpoints))
	case len(v.checkpoints) == 0:
		add(CheckSignatures, StatusWarning, "no checkpoints: nothing in this log is signed")
	case !rep.KeyPinned:
		add(CheckSignatures, StatusWarning, "%d checkpoints signed by %s, but the key was read from this host, not pinned (pass --key)", len(v.checkpoints), v.origin)
	default:
		add(CheckSignatures, StatusOK, "%d checkpoints signed by the pinned key %s", len(v.checkpoints), v.origin)
	}
	add(CheckRoots, StatusOK, "every checkpoint root matches the recomputed tree")
	newest := int64(0)
	for _, cp := range v.checkpoints {
		newest = max(newest, cp.size)
	}
	add(CheckTruncation, StatusOK, "log size %d ≥ newest checkpoint %d; removal after it cannot be ruled out without a trusted checkpoint", v.pos, newest)
	if gap := v.witnessGap(); gap != "" {
		add(CheckTrusted, StatusWarning, "%s", gap)
	} else if v.trusted == nil {
		add(CheckTrusted, StatusSkipped, "no trusted checkpoint: pass --trusted-checkpoint to detect rollback or a rewritten history")
	} else {
		from := ""
		if v.opts.TrustedFrom != "" {
			from = " (" + v.opts.TrustedFrom + ")"
		}
		add(CheckTrusted, StatusOK, "the log extends the trusted checkpoint at size %d%s", v.trusted.size, from)
	}
	switch {
	case v.counts[CheckSealed] > 0:
		out = append(out, Check{CheckSealed, checkTitles[CheckSealed], StatusFailed, fmt.Sprintf(
			"records %d..%d are unsealed for longer than the store's sealing policy allows: the checkpoints that covered them were removed, or their writer never sealed (after a crash the next start seals them, reason \"recovery\")", v.sealed, last)})
	case rep.Unsealed > 0:
		add(CheckSealed, StatusWarning, "%d records after the newest verified checkpoint are not sealed (records %d..%d); they are chained but unsigned", rep.Unsealed, v.sealed, last)
	case len(v.recovered) > 0:
		add(CheckSealed, StatusWarning, "every record is covered by a verified checkpoint, but %d operator decisions were first signed by a recovery seal, not as they were written (records %s): written without the key, or by a writer that crashed before its seal; check them", len(v.recovered), seqList(v.recovered))
	default:
		add(CheckSealed, StatusOK, "every record is covered by a verified checkpoint")
	}
	if v.verifiers == nil && rep.Unsealed > 0 && len(v.checkpoints) > 0 {
		out[len(out)-1].Detail = fmt.Sprintf("%d records: no checkpoint could be verified without a key", v.pos)
	}
	out = append(out, v.tablesCheck())
	return out
}

// addTables takes the table check's findings as problems of their own.
func (v *verifier) addTables(r *activity.TableReport) {
	v.tables = r
	for _, p := range r.Problems {
		v.problem(CheckTables, p.Code, p.Seq, "%s", p.Message)
		if last := len(v.problems) - 1; last >= 0 && v.problems[last].Check == CheckTables {
			v.problems[last].Table, v.problems[last].Row = p.Table, p.Row
		}
	}
	v.counts[CheckTables] += r.Omitted
	v.omitted += r.Omitted
}

// tablesCheck is the report line of the table check, in its own words.
func (v *verifier) tablesCheck() Check {
	c := Check{Name: CheckTables, Title: checkTitles[CheckTables]}
	switch {
	case v.tables == nil && v.opts.LogOnly:
		c.Status, c.Detail = StatusSkipped, "--log-only: the tables the console and the gateway read were not compared with the log"
	case v.tables == nil:
		c.Status, c.Detail = StatusSkipped, "an export holds no tables: verify the database to prove what the console reads"
	case v.counts[CheckTables] > 0:
		c.Status = StatusFailed
		c.Detail = fmt.Sprintf("%d row(s) differ from what the log implies: the console, the analysis and the gateway would read forged state", v.counts[CheckTables])
	default:
		c.Status = StatusOK
		c.Detail = fmt.Sprintf("%d rows in %d tables rebuilt from %d records and equal", v.tables.Rows, len(v.tables.Tables), v.tables.Records)
	}
	return c
}

// witnessGap says why the witness file cannot rule out a rollback of
// this log, or "": it holds no checkpoint though the database has some,
// or its first is later than the database's first (witnessing begun
// again: the file deleted, or a key directory copied without it), or it
// holds lines that are no checkpoint. The sealing host appends every
// checkpoint to it, so each of these is either a copy made elsewhere or
// someone's hand on the file.
func (v *verifier) witnessGap() string {
	if v.opts.Witness == "" || len(v.checkpoints) == 0 {
		return ""
	}
	first := v.checkpoints[0].size
	for _, cp := range v.checkpoints {
		first = min(first, cp.size)
	}
	switch {
	case v.opts.WitnessFrom < 0:
		return fmt.Sprintf("the witness file %s holds no checkpoint (missing, empty or unreadable) though the database has %d: a rollback to an earlier copy or a truncation cannot be ruled out; the host that seals this log appends each checkpoint there, so either this database was copied here without it or the file was removed", v.opts.Witness, len(v.checkpoints))
	case v.opts.WitnessFrom > first:
		return fmt.Sprintf("the witness file %s begins at checkpoint size %d, after the database's first at %d: witnessing began again (the file removed, or a key directory copied without it), and a rollback or truncation before size %d cannot be ruled out", v.opts.Witness, v.opts.WitnessFrom, first, v.opts.WitnessFrom)
	case v.opts.WitnessBad > 0:
		return fmt.Sprintf("the witness file %s holds %d line(s) that are no checkpoint: it was edited (a crash cuts at most its last line)", v.opts.Witness, v.opts.WitnessBad)
	}
	return ""
}
