package activity

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// SealReason says why a checkpoint was written.
type SealReason string

const (
	SealResolution SealReason = "resolution" // after an operator resolution
	SealRecords    SealReason = "records"    // EveryRecords unsealed records
	SealInterval   SealReason = "interval"   // the oldest unsealed record is older than Every
	SealShutdown   SealReason = "shutdown"   // clean shutdown
	SealManual     SealReason = "manual"     // mcpdup audit checkpoint
	SealImport     SealReason = "import"     // after an imported file, a unit of its own
	SealRecovery   SealReason = "recovery"   // at open: records an earlier writer left unsealed (a crash)
)

// Checkpoint is a signed statement of the log's size and Merkle root, in
// the C2SP tlog-checkpoint form: "<origin>\n<size>\n<base64 root>\n" plus
// the signed-note signature block.
type Checkpoint struct {
	Origin    string
	Size      int64
	Root      tlog.Hash
	Note      []byte // the signed note, exactly as stored
	CreatedAt time.Time
	Reason    SealReason
}

// CheckpointText is the signed body of a checkpoint.
func CheckpointText(origin string, size int64, root tlog.Hash) string {
	return fmt.Sprintf("%s\n%d\n%s\n", origin, size, root)
}

// ParseCheckpointText strictly parses a checkpoint body: three lines,
// canonical decimal size, base64 of exactly 32 bytes, no extension lines.
func ParseCheckpointText(text string) (origin string, size int64, root tlog.Hash, err error) {
	lines := strings.Split(text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return "", 0, root, errors.New("checkpoint body is not exactly origin, size and root lines")
	}
	origin = lines[0]
	if err := checkOrigin(origin); err != nil {
		return "", 0, root, fmt.Errorf("checkpoint %w", err)
	}
	size, err = strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || lines[1] != strconv.FormatInt(size, 10) {
		return "", 0, root, fmt.Errorf("checkpoint size %q is not a canonical decimal", lines[1])
	}
	root, err = tlog.ParseHash(lines[2])
	if err != nil || lines[2] != root.String() {
		return "", 0, root, fmt.Errorf("checkpoint root %q is not base64 of 32 bytes", lines[2])
	}
	return origin, size, root, nil
}

// Seal writes a signed checkpoint over the whole log unless the newest one
// already covers it, and returns the newest checkpoint. Before signing it
// checks the tree still matches the previous checkpoint, so the store never
// signs a fork of its own history.
func (s *Store) Seal(ctx context.Context, reason SealReason) (Checkpoint, error) {
	s.sealMu.Lock()
	cp, err := s.sealLocked(ctx, reason)
	s.sealMu.Unlock()
	if s.sealAsked.Load() {
		// Writers that finished meanwhile went on (sealIfDue); what they
		// wrote after this seal's snapshot may be due. An error surfaces
		// on a later write, as the policy's do.
		_, _ = s.sealIfDue(ctx, "")
	}
	return cp, err
}

// sealLocked is Seal with sealMu held.
func (s *Store) sealLocked(ctx context.Context, reason SealReason) (Checkpoint, error) {
	if s.opts.ReadOnly {
		return Checkpoint{}, ErrReadOnly
	}
	if s.signer == nil {
		return Checkpoint{}, fmt.Errorf("cannot seal %s: %w", s.origin, s.keyErr)
	}
	began := s.Now()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Checkpoint{}, err
	}
	defer tx.Rollback()
	if err := s.lockWrites(ctx, tx); err != nil {
		return Checkpoint{}, err
	}
	cp, err := s.seal(ctx, tx, reason)
	if err != nil {
		return cp, fmt.Errorf("seal %s: %w", s.origin, err)
	}
	if err := tx.Commit(); err != nil {
		return cp, err
	}
	s.tail.noteSeal(cp.Size, began)
	if s.sealedHook != nil {
		s.sealedHook()
	}
	if cp.Note != nil {
		if err := appendWitness(s.WitnessPath(), cp); err != nil {
			return cp, fmt.Errorf("seal %s: checkpoint %d signed but not witnessed: %w", s.origin, cp.Size, err)
		}
	}
	return cp, nil
}

// WitnessFile is where a log's checkpoints are witnessed by default: the
// key directory, beside the key, outside the database. A history
// rewritten in the database and its checkpoints deleted there still
// disagrees with it.
func WitnessFile(keyDir, origin string) string {
	_, pub := KeyFiles(keyDir, origin)
	return strings.TrimSuffix(pub, ".pub") + ".witness"
}

// WitnessLine is one line of a witness file.
type WitnessLine struct {
	Size       int64  `json:"size"`
	Checkpoint string `json:"checkpoint"`
}

// checkWitnessed refuses a newest checkpoint older than w, the newest
// this host witnessed (read before the database was): the database's
// later checkpoints were removed, and a proof or a seal over what they
// covered would accept a rewrite.
func (s *Store) checkWitnessed(w WitnessLine, dbSize int64) error {
	if w.Size > dbSize {
		return fmt.Errorf("the database's checkpoints end at %d records but this host witnessed one at %d (%s): checkpoints were removed", dbSize, w.Size, s.WitnessPath())
	}
	return nil
}

// appendWitness adds a signed checkpoint to the witness file, on disk
// before it returns (0600, created in a 0700 directory).
func appendWitness(path string, cp Checkpoint) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(WitnessLine{cp.Size, string(cp.Note)})
	// A line a crash cut short is ended first, so this one stands alone.
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if r, err := os.Open(path); err == nil {
			r.ReadAt(last, fi.Size()-1)
			r.Close()
		}
		if last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (s *Store) seal(ctx context.Context, tx *sql.Tx, reason SealReason) (Checkpoint, error) {
	var size int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq)+1, 0) FROM audit_log`).Scan(&size); err != nil {
		return Checkpoint{}, err
	}
	last, err := latestCheckpoint(ctx, tx)
	if err != nil {
		return Checkpoint{}, err
	}
	if last != nil && last.Size >= size {
		return *last, nil
	}
	lastSize := int64(0)
	if last != nil {
		lastSize = last.Size
	}
	// Under the write lock no checkpoint commits meanwhile, and every
	// witnessed one was committed first: here the two reads' order does
	// not matter.
	w, err := s.witness.read(s.WitnessPath())
	if err != nil {
		return Checkpoint{}, err
	}
	if err := s.checkWitnessed(w, lastSize); err != nil {
		return Checkpoint{}, fmt.Errorf("refusing to sign: %w", err)
	}
	if size == 0 {
		return Checkpoint{}, nil // nothing to seal
	}
	root, err := sealRoot(ctx, tx, last, size)
	if err != nil {
		return Checkpoint{}, err
	}
	msg, err := note.Sign(&note.Note{Text: CheckpointText(s.origin, size, root)}, s.signer)
	if err != nil {
		return Checkpoint{}, err
	}
	now := s.Now().UTC()
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_checkpoint(size, note, created_at, reason) VALUES (?,?,?,?)`,
		size, string(msg), FormatTime(now), string(reason)); err != nil {
		return Checkpoint{}, err
	}
	return Checkpoint{Origin: s.origin, Size: size, Root: root, Note: msg, CreatedAt: now, Reason: reason}, nil
}

// sealRoot is the root of the first size records, for a checkpoint to
// sign. The stored tree hashes are a cache nothing signs, so it takes from
// them only the subtrees the previous checkpoint's root is made of, checked
// against that signed root, and recomputes the rest from the records' own
// bytes, comparing each record's cached leaf and tree hashes as it goes. A
// cache edited or damaged in the unsealed tail once had the store sign a
// root its records do not make: a true log that audit verify then called
// rewritten, witness file included.
func sealRoot(ctx context.Context, tx *sql.Tx, last *Checkpoint, size int64) (tlog.Hash, error) {
	var edge Edge // no fallback: every hash it holds is checked or recomputed
	from := int64(0)
	if last != nil {
		_, _, prevRoot, err := ParseCheckpointText(noteText(last.Note))
		if err != nil {
			return tlog.Hash{}, fmt.Errorf("checkpoint %d: %w", last.Size, err)
		}
		var idx []int64
		var at []int
		for level := 63; level >= 0; level-- {
			if last.Size>>uint(level)&1 == 1 {
				idx = append(idx, tlog.StoredHashIndex(level, last.Size>>uint(level)-1))
				at = append(at, level)
			}
		}
		hs, err := txHashReader{ctx, tx}.ReadHashes(idx)
		if err != nil {
			return tlog.Hash{}, err
		}
		for i, level := range at {
			edge.seed(level, last.Size>>uint(level)-1, hs[i])
		}
		now, err := tlog.TreeHash(last.Size, &edge)
		if err != nil {
			return tlog.Hash{}, err
		}
		if now != prevRoot {
			return tlog.Hash{}, fmt.Errorf("refusing to sign: the stored tree at size %d no longer makes its checkpoint's root (the log or its tree_hashes cache was altered; run mcpdup audit verify)", last.Size)
		}
		from = last.Size
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, canonical, leaf_hash, tree_hashes FROM audit_log WHERE seq >= ? AND seq < ? ORDER BY seq`, from, size)
	if err != nil {
		return tlog.Hash{}, err
	}
	defer rows.Close()
	want := from
	for rows.Next() {
		var seq int64
		var canonical, leaf, tree sql.RawBytes
		if err := rows.Scan(&seq, &canonical, &leaf, &tree); err != nil {
			return tlog.Hash{}, err
		}
		if seq != want {
			return tlog.Hash{}, fmt.Errorf("refusing to sign: record %d is missing from the log", want)
		}
		h := tlog.RecordHash(canonical)
		hashes, err := tlog.StoredHashesForRecordHash(seq, h, &edge)
		if err != nil {
			return tlog.Hash{}, fmt.Errorf("record %d: tree: %w", seq, err)
		}
		if !bytes.Equal(leaf, h[:]) || !SameTreeHashes(tree, hashes) {
			return tlog.Hash{}, fmt.Errorf("refusing to sign: record %d's stored leaf or tree hashes are not what its bytes make (the log or its hash cache was altered; run mcpdup audit verify)", seq)
		}
		edge.Add(seq, hashes)
		want++
	}
	if err := rows.Err(); err != nil {
		return tlog.Hash{}, err
	}
	if want != size {
		return tlog.Hash{}, fmt.Errorf("refusing to sign: record %d is missing from the log", want)
	}
	return tlog.TreeHash(size, &edge)
}

// SameTreeHashes reports whether stored, a row's tree_hashes, holds the
// level ≥ 1 nodes of hashes (tlog.StoredHashesForRecordHash's result).
func SameTreeHashes(stored []byte, hashes []tlog.Hash) bool {
	if len(hashes) == 0 || len(stored) != (len(hashes)-1)*tlog.HashSize {
		return false
	}
	for i, h := range hashes[1:] {
		if !bytes.Equal(stored[i*tlog.HashSize:(i+1)*tlog.HashSize], h[:]) {
			return false
		}
	}
	return true
}

// sealIfDue seals when the policy says so: always for a resolution, or
// when enough records or time have gone by unsealed. The periodic loop asks
// the database (other processes write too); after this process's own
// writes, the in-memory account avoids a query per commit.
//
// Every writer that finishes asks. Should a seal or a check be running,
// the writer goes on and asks its holder to check again once it lets go
// (sealAsked): what the writer committed may be after that seal's
// snapshot. One that waited for the lock instead would seal again, a few
// records later: 16 concurrent writers signed 277 checkpoints where 18
// were due, each a commit and two fsyncs on the writer's connection.
func (s *Store) sealIfDue(ctx context.Context, reason SealReason) (Checkpoint, error) {
	if reason == SealResolution {
		return s.Seal(ctx, reason)
	}
	// The seal may be on behalf of writers that went on: it must not end
	// with this caller's request.
	ctx = context.WithoutCancel(ctx)
	for {
		if !s.sealMu.TryLock() {
			s.sealAsked.Store(true)
			// The holder may have let go before it could see the flag.
			if !s.sealMu.TryLock() {
				return Checkpoint{}, nil
			}
		}
		s.sealAsked.Store(false)
		cp, err := s.sealDue(ctx, reason)
		s.sealMu.Unlock()
		if err != nil || !s.sealAsked.Load() {
			return cp, err
		}
		reason = "" // asked by a writer: this process's account holds its records
	}
}

// sealDue seals if the policy says so, with sealMu held.
func (s *Store) sealDue(ctx context.Context, reason SealReason) (Checkpoint, error) {
	var unsealed int64
	var oldest time.Time
	s.tail.mu.Lock()
	known := s.tail.known
	if known {
		unsealed, oldest = s.tail.size-s.tail.sealed, s.tail.firstUnsealed
	}
	s.tail.mu.Unlock()
	if !known || reason == sealCheck {
		var err error
		if unsealed, oldest, err = s.unsealed(ctx); err != nil {
			return Checkpoint{}, err
		}
	}
	if unsealed <= 0 {
		return Checkpoint{}, nil
	}
	switch {
	case s.Now().Sub(oldest) >= s.opts.Seal.Every:
		return s.sealLocked(ctx, SealInterval)
	case unsealed >= s.opts.Seal.EveryRecords:
		return s.sealLocked(ctx, SealRecords)
	}
	return Checkpoint{}, nil
}

// sealCheck asks sealIfDue to count from the database.
const sealCheck SealReason = "check"

// tailState is this process's account of the unsealed tail.
type tailState struct {
	mu            sync.Mutex
	known         bool
	size, sealed  int64
	firstUnsealed time.Time
}

// noteWrite updates the account after a commit that left the log at size,
// with its first new record written at first.
func (t *tailState) noteWrite(size int64, first time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.known {
		return
	}
	if t.size <= t.sealed && size > t.sealed {
		t.firstUnsealed = first
	}
	t.size = max(t.size, size)
}

// noteSeal notes a checkpoint at size, signed in a transaction begun at
// began. Records committed meanwhile (the account may count them
// already) stay unsealed, the oldest of them written about then.
func (t *tailState) noteSeal(size int64, began time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.known {
		t.known, t.size, t.sealed = true, size, size
		return
	}
	t.sealed = max(t.sealed, size)
	t.size = max(t.size, t.sealed)
	t.firstUnsealed = time.Time{}
	if t.size > t.sealed {
		t.firstUnsealed = began
	}
}

func (t *tailState) set(size, sealed int64, first time.Time) {
	t.mu.Lock()
	t.known, t.size, t.sealed, t.firstUnsealed = true, size, sealed, first
	t.mu.Unlock()
}

// unsealed counts records after the newest checkpoint and the time of the
// first of them, with index lookups only (no scan of the tail).
func (s *Store) unsealed(ctx context.Context) (int64, time.Time, error) {
	var size, sealed int64
	err := s.r.QueryRowContext(ctx, `SELECT (SELECT COALESCE(MAX(seq)+1, 0) FROM audit_log),
		(SELECT COALESCE(MAX(size), 0) FROM audit_checkpoint)`).Scan(&size, &sealed)
	if err != nil {
		return 0, time.Time{}, err
	}
	if size <= sealed {
		s.tail.set(size, sealed, time.Time{})
		return 0, time.Time{}, nil
	}
	var first string
	if err := s.r.QueryRowContext(ctx, `SELECT t FROM audit_log WHERE seq = ?`, sealed).Scan(&first); err != nil {
		return 0, time.Time{}, err
	}
	t, err := parseTime(first)
	s.tail.set(size, sealed, t)
	return size - sealed, t, err
}

func (s *Store) sealLoop() {
	defer s.stopped.Done()
	tick := time.NewTicker(s.opts.Seal.Every / 4)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			// Errors surface on the next Write or at Close; a background
			// loop has no one to tell.
			_, _ = s.sealIfDue(context.Background(), sealCheck)
		}
	}
}

func latestCheckpoint(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (*Checkpoint, error) {
	var cp Checkpoint
	var msg, at, reason string
	err := q.QueryRowContext(ctx, `SELECT size, note, created_at, reason FROM audit_checkpoint ORDER BY size DESC LIMIT 1`).
		Scan(&cp.Size, &msg, &at, &reason)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cp.Note, cp.Reason = []byte(msg), SealReason(reason)
	cp.CreatedAt, _ = parseTime(at)
	return &cp, nil
}

// noteText returns the body of a signed note (the text before the blank
// line that starts the signatures).
func noteText(msg []byte) string {
	s := string(msg)
	if i := strings.Index(s, "\n\n"); i >= 0 {
		return s[:i+1]
	}
	return s
}

// StoredCheckpoint is a checkpoint row as stored, before any verification.
type StoredCheckpoint struct {
	Size      int64
	Note      []byte
	CreatedAt string
	Reason    string
}

// Checkpoints returns every stored checkpoint in ascending size. They are
// unverified: audit verify checks them against a pinned key.
func (s *Store) Checkpoints(ctx context.Context) ([]StoredCheckpoint, error) {
	return readCheckpoints(ctx, s.r, -1)
}

// CheckpointsAfter is Checkpoints of size above size only: what a
// follower has not seen yet.
func (s *Store) CheckpointsAfter(ctx context.Context, size int64) ([]StoredCheckpoint, error) {
	return readCheckpoints(ctx, s.r, size)
}

func readCheckpoints(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, above int64) ([]StoredCheckpoint, error) {
	rows, err := q.QueryContext(ctx, `SELECT size, note, created_at, reason FROM audit_checkpoint WHERE size > ? ORDER BY size`, above)
	if err != nil {
		return nil, fmt.Errorf("read checkpoints: %w", err)
	}
	defer rows.Close()
	var out []StoredCheckpoint
	for rows.Next() {
		var c StoredCheckpoint
		var msg string
		if err := rows.Scan(&c.Size, &msg, &c.CreatedAt, &c.Reason); err != nil {
			return nil, err
		}
		c.Note = []byte(msg)
		out = append(out, c)
	}
	return out, rows.Err()
}

// LatestCheckpoint returns the newest stored checkpoint note, or nil.
func (s *Store) LatestCheckpoint(ctx context.Context) (*Checkpoint, error) {
	return latestCheckpoint(ctx, s.r)
}

// ScanLogHashes is ScanLog with each row's tree_hashes too: the Merkle
// nodes the record completed (levels 1..), which inclusion proofs, the
// append path and the seal read, and a verifier compares with the tree it
// recomputes. The bytes passed to fn are only valid during the call.
func (s *Store) ScanLogHashes(ctx context.Context, from int64, fn func(seq int64, canonical, leafHash, treeHashes []byte) error) error {
	rows, err := s.r.QueryContext(ctx, `SELECT seq, canonical, leaf_hash, tree_hashes FROM audit_log WHERE seq >= ? ORDER BY seq`, from)
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var canonical, leaf, tree sql.RawBytes
		if err := rows.Scan(&seq, &canonical, &leaf, &tree); err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		if err := fn(seq, canonical, leaf, tree); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ScanLog streams the raw log rows in seq order, starting at from. The
// bytes passed to fn are only valid during the call.
func (s *Store) ScanLog(ctx context.Context, from int64, fn func(seq int64, canonical, leafHash []byte) error) error {
	rows, err := s.r.QueryContext(ctx, `SELECT seq, canonical, leaf_hash FROM audit_log WHERE seq >= ? ORDER BY seq`, from)
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var canonical, leaf sql.RawBytes
		if err := rows.Scan(&seq, &canonical, &leaf); err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		if err := fn(seq, canonical, leaf); err != nil {
			return err
		}
	}
	return rows.Err()
}

// LogSize returns the number of records (the highest seq + 1).
func (s *Store) LogSize(ctx context.Context) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq)+1, 0) FROM audit_log`).Scan(&n)
	return n, err
}
