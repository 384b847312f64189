package audit_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/activity/audit"
)

var ctx = context.Background()

// sample is a sealed log of a few hundred records, closed, ready to tamper
// with.
type sample struct {
	path, keyDir, origin, pub string
}

func newSample(t *testing.T, unsealedTail int) sample {
	t.Helper()
	dir := t.TempDir()
	smp := sample{path: filepath.Join(dir, "log.db"), keyDir: filepath.Join(dir, "keys")}
	s, err := activity.Open(ctx, smp.path, activity.Options{KeyDir: smp.keyDir, Seal: activity.SealPolicy{EveryRecords: 40}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := activitytest.Fill(ctx, s, 200, 12); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(ctx, activity.SealManual); err != nil {
		t.Fatal(err)
	}
	smp.origin = s.Origin()
	smp.pub, _ = s.PublicKey()
	if unsealedTail > 0 {
		// Write without the key so Close cannot seal the tail.
		s.Close()
		s, err = activity.Open(ctx, smp.path, activity.Options{KeyDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if err := activitytest.Fill(ctx, s, unsealedTail, unsealedTail); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return smp
}

func (smp sample) verify(t *testing.T, opts audit.Options) *audit.Report {
	t.Helper()
	s, err := activity.Open(ctx, smp.path, activity.Options{ReadOnly: true, KeyDir: smp.keyDir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if opts.Key == "" {
		opts.Key, opts.KeyPinned = smp.pub, true
	}
	rep, err := audit.VerifyStore(ctx, s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// tamper runs SQL on the database file directly, with the append-only
// triggers dropped, as someone with file access would.
func (smp sample) tamper(t *testing.T, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", smp.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, trig := range []string{"audit_log_no_update", "audit_log_no_delete",
		"audit_checkpoint_no_update", "audit_checkpoint_no_delete"} {
		if _, err := db.Exec("DROP TRIGGER IF EXISTS " + trig); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func (smp sample) size(t *testing.T) int64 {
	db, err := sql.Open("sqlite", smp.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow("SELECT COUNT(*) FROM audit_log").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantProblem asserts the report's first problem.
func wantProblem(t *testing.T, rep *audit.Report, check, code string, seq int64) {
	t.Helper()
	if !rep.Tampered || len(rep.Problems) == 0 {
		t.Fatalf("tampering not detected; report: %+v", rep.Checks)
	}
	p := rep.Problems[0]
	if p.Check != check || p.Code != code || (seq >= 0 && p.Seq != seq) {
		var all []string
		for _, q := range rep.Problems {
			all = append(all, fmt.Sprintf("%s/%s@%d: %s", q.Check, q.Code, q.Seq, q.Message))
		}
		t.Fatalf("first problem %s/%s at %d, want %s/%s at %d\n%s", p.Check, p.Code, p.Seq, check, code, seq, strings.Join(all, "\n"))
	}
	for _, c := range rep.Checks {
		if c.Name == check && c.Status != audit.StatusFailed {
			t.Fatalf("check %s is %s, want failed", check, c.Status)
		}
	}
}

func wantClean(t *testing.T, rep *audit.Report) {
	t.Helper()
	if rep.Tampered || len(rep.Problems) > 0 || rep.Result != "ok" {
		t.Fatalf("clean log raised an alarm: %+v", rep.Problems)
	}
}

func TestCleanLogVerifies(t *testing.T) {
	smp := newSample(t, 0)
	rep := smp.verify(t, audit.Options{})
	wantClean(t, rep)
	if rep.Unsealed != 0 || rep.SealedSize != rep.Records || rep.Records < 200 || rep.Checkpoints < 5 {
		t.Fatalf("report: records %d sealed %d unsealed %d checkpoints %d", rep.Records, rep.SealedSize, rep.Unsealed, rep.Checkpoints)
	}
	for _, c := range rep.Checks {
		want := audit.StatusOK
		if c.Name == audit.CheckTrusted {
			want = audit.StatusSkipped // no trusted checkpoint given
		}
		if c.Status != want {
			t.Errorf("check %s: %s (%s)", c.Name, c.Status, c.Detail)
		}
	}
}

func TestUnsealedTailIsReportedNotAlarmed(t *testing.T) {
	smp := newSample(t, 12)
	rep := smp.verify(t, audit.Options{})
	wantClean(t, rep)
	if rep.Unsealed != 12 {
		t.Fatalf("unsealed = %d, want 12", rep.Unsealed)
	}
	var buf bytes.Buffer
	rep.WriteText(&buf)
	if !strings.Contains(buf.String(), "12 records after the newest verified checkpoint are not sealed") {
		t.Fatalf("report does not name the unsealed tail:\n%s", buf.String())
	}
}

func TestTamperEditField(t *testing.T) {
	smp := newSample(t, 0)
	smp.tamper(t, `UPDATE audit_log SET canonical = CAST(replace(CAST(canonical AS TEXT), 'agent:deployer', 'agent:deployeR') AS BLOB) WHERE seq = 5`)
	rep := smp.verify(t, audit.Options{})
	// Both the chain (record 6's prev no longer matches) and the
	// recomputed hash name record 5, the one edited; and the failed rows
	// say what is wrong, not the sentence of a pass.
	wantProblem(t, rep, audit.CheckChain, "chain_break", 5)
	for _, c := range rep.Checks {
		if c.Status == audit.StatusFailed && (strings.Contains(c.Detail, "recomputed from") || strings.Contains(c.Detail, "matches the recomputed")) {
			t.Fatalf("a failed check reuses its success sentence: %s: %s", c.Name, c.Detail)
		}
	}
	if !hasProblem(rep, "hash_mismatch", 5) || !hasProblem(rep, "root_mismatch", -1) {
		t.Fatalf("edit not reported as a hash and root mismatch: %+v", rep.Problems)
	}
}

func TestTamperEditLastRecord(t *testing.T) {
	smp := newSample(t, 0)
	last := smp.size(t) - 1
	smp.tamper(t, fmt.Sprintf(`UPDATE audit_log SET canonical = CAST(replace(CAST(canonical AS TEXT), 'delivered', 'Delivered') AS BLOB), leaf_hash = zeroblob(32) WHERE seq = %d`, last))
	rep := smp.verify(t, audit.Options{})
	// No next record links to it: the signed root is what catches it.
	wantProblem(t, rep, audit.CheckHashes, "hash_mismatch", last)
	if !hasProblem(rep, "root_mismatch", -1) {
		t.Fatalf("last record edit not caught by the checkpoint root: %+v", rep.Problems)
	}
}

func TestTamperDeleteRow(t *testing.T) {
	smp := newSample(t, 0)
	smp.tamper(t, `DELETE FROM audit_log WHERE seq = 7`)
	rep := smp.verify(t, audit.Options{})
	wantProblem(t, rep, audit.CheckSeq, "gap", 7)
}

func TestTamperReorderRows(t *testing.T) {
	smp := newSample(t, 0)
	smp.tamper(t,
		`UPDATE audit_log SET seq = -1 WHERE seq = 3`,
		`UPDATE audit_log SET seq = 3 WHERE seq = 4`,
		`UPDATE audit_log SET seq = 4 WHERE seq = -1`)
	rep := smp.verify(t, audit.Options{})
	wantProblem(t, rep, audit.CheckSeq, "misplaced_record", 3)
	if !hasProblem(rep, "misplaced_record", 4) {
		t.Fatalf("second swapped row not reported: %+v", rep.Problems)
	}
}

func TestTamperTruncateTail(t *testing.T) {
	smp := newSample(t, 0)
	n := smp.size(t)
	smp.tamper(t, fmt.Sprintf(`DELETE FROM audit_log WHERE seq >= %d`, n-5))
	rep := smp.verify(t, audit.Options{})
	wantProblem(t, rep, audit.CheckTruncation, "truncated", -1)
}

func TestTamperTruncateTailAndItsCheckpoints(t *testing.T) {
	smp := newSample(t, 0)
	trusted := smp.latestCheckpoint(t)
	n := smp.size(t)
	smp.tamper(t,
		fmt.Sprintf(`DELETE FROM audit_log WHERE seq >= %d`, n-30),
		fmt.Sprintf(`DELETE FROM audit_checkpoint WHERE size > %d`, n-30))
	// The tables still hold what the removed records wrote.
	rep := smp.verify(t, audit.Options{})
	if !hasProblem(rep, activity.ProblemExtra, -1) {
		t.Fatalf("rows of removed records not reported: %+v", rep.Problems)
	}
	if c := check(rep, audit.CheckTrusted); c.Status != audit.StatusSkipped || !strings.Contains(c.Detail, "--trusted-checkpoint") {
		t.Fatalf("rollback check should be reported as not checked: %+v", c)
	}
	rep = smp.verify(t, audit.Options{Trusted: trusted})
	wantProblem(t, rep, audit.CheckTrusted, "rollback", -1)
}

func TestTamperRehashWithoutKey(t *testing.T) {
	smp := newSample(t, 0)
	smp.rewrite(t, 10, nil)
	rep := smp.verify(t, audit.Options{})
	// Chain and hashes are consistent again; only the signed roots know.
	wantProblem(t, rep, audit.CheckRoots, "root_mismatch", -1)
	if hasProblem(rep, "chain_break", -1) || hasProblem(rep, "hash_mismatch", -1) {
		t.Fatalf("forgery should have a consistent chain: %+v", rep.Problems)
	}
}

func TestTamperCheckpointSignedByAnotherKey(t *testing.T) {
	smp := newSample(t, 0)
	other := newSigner(t, smp.origin)
	smp.resignLatest(t, other)
	rep := smp.verify(t, audit.Options{})
	wantProblem(t, rep, audit.CheckSignatures, "unknown_signer", -1)
}

func TestTamperCheckpointTextEdited(t *testing.T) {
	smp := newSample(t, 0)
	db := smp.open(t)
	var size int64
	var msg string
	if err := db.QueryRow(`SELECT size, note FROM audit_checkpoint ORDER BY size DESC LIMIT 1`).Scan(&size, &msg); err != nil {
		t.Fatal(err)
	}
	db.Close()
	forged := strings.Replace(msg, fmt.Sprintf("\n%d\n", size), fmt.Sprintf("\n%d\n", size-1), 1)
	smp.tamper(t, fmt.Sprintf(`UPDATE audit_checkpoint SET note = '%s' WHERE size = %d`, forged, size))
	rep := smp.verify(t, audit.Options{})
	wantProblem(t, rep, audit.CheckSignatures, "bad_signature", -1)
}

func TestTamperSwappedKeyFile(t *testing.T) {
	smp := newSample(t, 0)
	// The attacker replaces the key file with their own key for the same
	// origin, rewrites history and re-signs every checkpoint with it, and
	// puts the new public key in the database's meta table.
	priv, pub := activity.KeyFiles(smp.keyDir, smp.origin)
	os.Remove(priv)
	os.Remove(pub)
	newPub, err := activity.CreateSigningKey(smp.keyDir, smp.origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, _, err := activity.LoadSigner(smp.keyDir, smp.origin)
	if err != nil {
		t.Fatal(err)
	}
	smp.rewrite(t, 10, signer)
	smp.tamper(t, fmt.Sprintf(`UPDATE meta SET value = '%s' WHERE key = 'public_key'`, newPub))

	rep := smp.verify(t, audit.Options{}) // pinned: the original public key
	wantProblem(t, rep, audit.CheckSignatures, "unknown_signer", -1)

	// With only the swapped local key, verification cannot know; the
	// report must not claim the key was pinned.
	rep = smp.verify(t, audit.Options{Key: newPub, KeyPinned: false})
	wantTablesForged(t, rep) // the tables still say what the log said
	smp.forgeCallActor(t)
	rep = smp.verify(t, audit.Options{Key: newPub, KeyPinned: false})
	wantClean(t, rep)
	if c := check(rep, audit.CheckSignatures); c.Status != audit.StatusWarning || !strings.Contains(c.Detail, "not pinned") {
		t.Fatalf("an unpinned key must be flagged: %+v", c)
	}
}

func TestTamperResignedWithStolenKeyCaughtByTrustedCheckpoint(t *testing.T) {
	smp := newSample(t, 0)
	trusted := smp.latestCheckpoint(t)
	signer, _, err := activity.LoadSigner(smp.keyDir, smp.origin)
	if err != nil {
		t.Fatal(err)
	}
	smp.rewrite(t, 10, signer)
	rep := smp.verify(t, audit.Options{})
	wantTablesForged(t, rep)
	smp.forgeCallActor(t) // and the tables too
	rep = smp.verify(t, audit.Options{})
	wantClean(t, rep) // indistinguishable locally: the attacker holds the key
	rep = smp.verify(t, audit.Options{Trusted: trusted})
	wantProblem(t, rep, audit.CheckTrusted, "fork", -1)
}

func TestTrustedCheckpointFromAnotherLog(t *testing.T) {
	smp := newSample(t, 0)
	other := newSample(t, 0)
	rep := smp.verify(t, audit.Options{Trusted: other.latestCheckpoint(t)})
	wantProblem(t, rep, audit.CheckTrusted, "unknown_signer", -1)
}

func TestCheckpointOfAnotherOriginSignedBySameName(t *testing.T) {
	smp := newSample(t, 0)
	// A checkpoint whose text names another origin, signed by a key that
	// claims this origin's name: the text check must still refuse it.
	smp.resignLatestText(t, func(text string) string {
		return strings.Replace(text, smp.origin, smp.origin+"-other", 1)
	})
	rep := smp.verify(t, audit.Options{})
	if !rep.Tampered {
		t.Fatal("checkpoint with a foreign origin accepted")
	}
}

func TestLogFromAnotherInstallDoesNotVerify(t *testing.T) {
	smp := newSample(t, 0)
	other := newSample(t, 0)
	rep := smp.verify(t, audit.Options{Key: other.pub, KeyPinned: true})
	wantProblem(t, rep, audit.CheckChain, "genesis_mismatch", 0)
}

func TestLeafHashCacheEditIsReported(t *testing.T) {
	smp := newSample(t, 0)
	smp.tamper(t, `UPDATE audit_log SET leaf_hash = zeroblob(32) WHERE seq = 9`)
	rep := smp.verify(t, audit.Options{})
	// The records are intact; the cache is not, and verification says so
	// rather than trusting either silently.
	wantProblem(t, rep, audit.CheckHashes, "hash_mismatch", 9)
	if hasProblem(rep, "chain_break", -1) || hasProblem(rep, "root_mismatch", -1) {
		t.Fatalf("recomputed hashes must not be affected by the cache: %+v", rep.Problems)
	}
}

func hasProblem(rep *audit.Report, code string, seq int64) bool {
	for _, p := range rep.Problems {
		if p.Code == code && (seq < 0 || p.Seq == seq) {
			return true
		}
	}
	return false
}

func check(rep *audit.Report, name string) audit.Check {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	return audit.Check{}
}

func (smp sample) open(t *testing.T) *sql.DB {
	db, err := sql.Open("sqlite", smp.path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func (smp sample) latestCheckpoint(t *testing.T) []byte {
	db := smp.open(t)
	defer db.Close()
	var msg string
	if err := db.QueryRow(`SELECT note FROM audit_checkpoint ORDER BY size DESC LIMIT 1`).Scan(&msg); err != nil {
		t.Fatal(err)
	}
	return []byte(msg)
}

func newSigner(t *testing.T, name string) note.Signer {
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (smp sample) resignLatest(t *testing.T, signer note.Signer) {
	smp.resignLatestText(t, func(s string) string { return s }, signer)
}

// resignLatestText rewrites the newest checkpoint's text and signs it with
// signer (default: a fresh key claiming the log's origin).
func (smp sample) resignLatestText(t *testing.T, edit func(string) string, signer ...note.Signer) {
	msg := smp.latestCheckpoint(t)
	text := string(msg[:bytes.Index(msg, []byte("\n\n"))+1])
	sg := newSigner(t, smp.origin)
	if len(signer) > 0 {
		sg = signer[0]
	}
	out, err := note.Sign(&note.Note{Text: edit(text)}, sg)
	if err != nil {
		t.Fatal(err)
	}
	smp.tamper(t, fmt.Sprintf(`UPDATE audit_checkpoint SET note = '%s' WHERE size = (SELECT MAX(size) FROM audit_checkpoint)`, out))
}

// rewrite edits record at and re-chains, re-hashes and re-trees everything
// after it, as a forger without (signer == nil) or with the key would. With
// a signer, every checkpoint is re-signed over the forged tree.
// wantTablesForged: the rewritten record 10 no longer says what the
// calls table holds.
func wantTablesForged(t *testing.T, rep *audit.Report) {
	t.Helper()
	for _, p := range rep.Problems {
		if p.Check == audit.CheckTables && p.Table == "calls" && strings.Contains(p.Message, "agent:forged-deployer") {
			return
		}
	}
	t.Fatalf("the rewritten call's row was not reported: %+v", rep.Problems)
}

// forgeCallActor makes the calls table agree with rewrite's record.
func (smp sample) forgeCallActor(t *testing.T) {
	smp.tamper(t, `UPDATE calls SET actor = 'agent:forged-deployer' WHERE actor = 'agent:deployer' AND seq = (SELECT MIN(seq) FROM calls WHERE seq >= 10)`)
}

func (smp sample) rewrite(t *testing.T, at int64, signer note.Signer) {
	db := smp.open(t)
	rows, err := db.Query(`SELECT canonical FROM audit_log ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	for rows.Next() {
		var b []byte
		rows.Scan(&b)
		recs = append(recs, b)
	}
	rows.Close()
	var sizes []int64
	rows, _ = db.Query(`SELECT size FROM audit_checkpoint ORDER BY size`)
	for rows.Next() {
		var n int64
		rows.Scan(&n)
		sizes = append(sizes, n)
	}
	rows.Close()
	db.Close()

	var stmts []string
	var tree []tlog.Hash
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = tree[x]
		}
		return out, nil
	})
	prev := activity.GenesisHash(smp.origin)
	forged := false
	for i, b := range recs {
		rec, err := activity.DecodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		data := rec.Data
		if int64(i) >= at && !forged && strings.Contains(string(data), "agent:") {
			data = json.RawMessage(strings.Replace(string(data), "agent:", "agent:forged-", 1))
			forged = true
		}
		if int64(i) >= at {
			rec, err = activity.EncodeRecord(rec.Seq, prev, rec.Time, rec.Kind, data)
			if err != nil {
				t.Fatal(err)
			}
		}
		hs, err := tlog.StoredHashesForRecordHash(int64(i), rec.Hash, reader)
		if err != nil {
			t.Fatal(err)
		}
		if int64(i) >= at {
			var treeHashes []byte
			for _, h := range hs[1:] {
				treeHashes = append(treeHashes, h[:]...)
			}
			stmts = append(stmts, fmt.Sprintf(`UPDATE audit_log SET canonical = X'%x', leaf_hash = X'%x', tree_hashes = X'%x' WHERE seq = %d`,
				rec.Bytes, rec.Hash[:], treeHashes, rec.Seq))
		}
		tree = append(tree, hs...)
		prev = rec.Hash
	}
	if !forged {
		t.Fatalf("no record after %d to forge", at)
	}
	if signer != nil {
		for _, n := range sizes {
			root, err := tlog.TreeHash(n, reader)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := note.Sign(&note.Note{Text: activity.CheckpointText(smp.origin, n, root)}, signer)
			if err != nil {
				t.Fatal(err)
			}
			stmts = append(stmts, fmt.Sprintf(`UPDATE audit_checkpoint SET note = '%s' WHERE size = %d`, msg, n))
		}
	}
	smp.tamper(t, stmts...)
}

// TestWitnessCatchesDeletedCheckpoints: a history rewritten in the
// database (record re-hashed, the tables made to agree) whose covering
// checkpoints were deleted passes on what the database alone holds, but
// the witness file the store appended every checkpoint to disagrees.
func TestWitnessCatchesDeletedCheckpoints(t *testing.T) {
	smp := newSample(t, 0)
	smp.rewrite(t, 10, nil)
	smp.forgeCallActor(t)
	smp.tamper(t, `DELETE FROM audit_checkpoint WHERE size > 10`)
	rep := smp.verify(t, audit.Options{})
	if rep.Tampered {
		t.Fatalf("without the witness this rewrite should pass the database's own checks (it is the witness's job): %+v", rep.Problems)
	}
	opts := audit.Options{}
	if err := audit.UseWitness(activity.WitnessFile(smp.keyDir, smp.origin), &opts); err != nil || opts.Trusted == nil {
		t.Fatalf("no witness read: %v", err)
	}
	rep = smp.verify(t, opts)
	if !hasProblem(rep, "fork", -1) && !hasProblem(rep, "rollback", -1) {
		t.Fatalf("the witness did not catch the rewrite: %+v", rep.Problems)
	}
	if c := check(rep, audit.CheckTrusted); c.Status != audit.StatusFailed {
		t.Fatalf("rollback check: %+v", c)
	}
}

// TestUnsealedBeyondPolicyFails: more unsealed records than the sealing
// policy ever leaves is a failure, not a warning; a short tail (a crash)
// is a warning, and the next writable open seals it, saying so.
func TestUnsealedBeyondPolicyFails(t *testing.T) {
	long := newSample(t, 2500)
	rep := long.verify(t, audit.Options{})
	wantProblem(t, rep, audit.CheckSealed, "unsealed_beyond_policy", -1)

	short := newSample(t, 30)
	rep = short.verify(t, audit.Options{})
	if rep.Tampered || check(rep, audit.CheckSealed).Status != audit.StatusWarning {
		t.Fatalf("a crash's short tail: %+v %+v", check(rep, audit.CheckSealed), rep.Problems)
	}
	s, err := activity.Open(ctx, short.path, activity.Options{KeyDir: short.keyDir})
	if err != nil {
		t.Fatal(err)
	}
	if s.Recovered() != 30 {
		t.Errorf("open sealed %d records left unsealed, want 30", s.Recovered())
	}
	cp, err := s.LatestCheckpoint(ctx)
	s.Close()
	if err != nil || cp == nil || cp.Reason != activity.SealRecovery {
		t.Fatalf("newest checkpoint %+v, want one with reason recovery", cp)
	}
	if rep := short.verify(t, audit.Options{}); rep.Tampered || rep.Unsealed != 0 {
		t.Fatalf("after the recovery seal: %+v", rep)
	}
}

// TestEveryCheckpointDeletedFails: a log with no checkpoint left and more
// records than the sealing policy ever leaves unsigned is a failure, not
// an unsealed tail (the whole history could then be re-chained).
func TestEveryCheckpointDeletedFails(t *testing.T) {
	smp := newSample(t, 0)
	s, err := activity.Open(ctx, smp.path, activity.Options{KeyDir: smp.keyDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := activitytest.Fill(ctx, s, 2100, 300); err != nil {
		t.Fatal(err)
	}
	s.Close()
	smp.tamper(t, `DELETE FROM audit_checkpoint`)
	rep := smp.verify(t, audit.Options{})
	wantProblem(t, rep, audit.CheckSealed, "unsealed_beyond_policy", -1)
}

// TestTornWitnessLine: a witness line a crash cut short is passed over,
// and the next checkpoint starts a line of its own.
func TestTornWitnessLine(t *testing.T) {
	dir := t.TempDir()
	s, err := activity.Open(ctx, filepath.Join(dir, "w.db"), activity.Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(s.WitnessPath(), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"size":99,"checkpoint":"mcpdup.loc`) // the crash
	f.Close()
	if err := activitytest.Fill(ctx, s, 6, 6); err != nil {
		t.Fatal(err)
	}
	cp, err := s.Seal(ctx, activity.SealManual)
	if err != nil {
		t.Fatal(err)
	}
	got, err := audit.ReadWitness(s.WitnessPath())
	if err != nil || string(got) != string(cp.Note) {
		t.Fatalf("newest witnessed checkpoint %q (%v), want the one just sealed", got, err)
	}
}

// TestExportLineBounded: an export line past the bound is refused, not
// read whole into memory.
func TestExportLineBounded(t *testing.T) {
	hdr := `{"format":"mcpdup-export/v1","origin":"x","records":1,"checkpoints":0,"exported_at":"2026-01-01T00:00:00.000000000Z"}` + "\n"
	long := io.MultiReader(strings.NewReader(hdr), io.LimitReader(zeros{}, 300<<20))
	if _, err := audit.VerifyExport(long, "long.jsonl", audit.Options{}); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("a 300 MiB line: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// TestDecisionWithoutItsSeal: the store seals an operator's decision as
// it writes it, so it writes none where it cannot sign. A decision found
// unsealed (written behind the store's back: here, its checkpoint
// removed) fails verify; once the next writable open's recovery seal
// has signed it, Open names it and verify warns, where both said nothing
// and the forged decision was signed as though it had been checked.
func TestDecisionWithoutItsSeal(t *testing.T) {
	smp := newSample(t, 0)
	unknown := func(s *activity.Store) activity.ExecutionID {
		ex, err := s.Executions(ctx, activity.ExecutionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ex {
			if e.State == activity.StateUnknown {
				return e.ID
			}
		}
		t.Fatal("no unknown execution in the sample")
		return ""
	}
	resolve := func(s *activity.Store) (int64, error) {
		recs, err := s.Write(ctx, func(w *activity.Tx) error {
			_, err := w.Resolve(activity.Resolution{ExecutionID: unknown(s), Outcome: activity.ResolutionVerified, Operator: "mallory", Note: "trust me"})
			return err
		})
		if err != nil {
			return 0, err
		}
		return recs[0].Seq, nil
	}

	keyless, err := activity.Open(ctx, smp.path, activity.Options{KeyDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(keyless); err == nil || !strings.Contains(err.Error(), "sealed as it is written") {
		t.Fatalf("a decision without the key: %v", err)
	}
	keyless.Close()

	// Written an hour ago by the clock the record carries (past the grace
	// a reader between a commit and its seal gets), then unsealed.
	hourAgo := func() time.Time { return time.Now().Add(-time.Hour) }
	s, err := activity.Open(ctx, smp.path, activity.Options{KeyDir: smp.keyDir, Now: hourAgo})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if rep := smp.verify(t, audit.Options{}); rep.Tampered {
		t.Fatalf("a decision sealed as written: %+v", rep.Problems)
	}
	smp.tamper(t, fmt.Sprintf(`DELETE FROM audit_checkpoint WHERE size > %d`, seq))
	rep := smp.verify(t, audit.Options{})
	wantProblem(t, rep, audit.CheckSealed, "unsealed_decision", seq)

	// With this host's witness the store refuses to sign over removed
	// checkpoints; without it (deleted too), the recovery seal signs.
	if err := os.Remove(activity.WitnessFile(smp.keyDir, smp.origin)); err != nil {
		t.Fatal(err)
	}
	s, err = activity.Open(ctx, smp.path, activity.Options{KeyDir: smp.keyDir})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.RecoveredDecisions(); !slices.Equal(got, []int64{seq}) {
		t.Errorf("Open's recovery seal names decisions %v, want [%d]", got, seq)
	}
	s.Close()
	rep = smp.verify(t, audit.Options{})
	if c := check(rep, audit.CheckSealed); rep.Tampered || c.Status != audit.StatusWarning || !strings.Contains(c.Detail, fmt.Sprint(seq)) {
		t.Fatalf("after the recovery seal: %+v %+v", c, rep.Problems)
	}
}

// TestTamperTreeHashes: the stored Merkle nodes (tree_hashes) are a cache
// nothing signs, but inclusion proofs and seals read it; one that differs
// from the recomputed tree is a finding, where it passed (while
// --verify-records, proving through it, said TAMPERED).
func TestTamperTreeHashes(t *testing.T) {
	smp := newSample(t, 0)
	// Record 63 completes levels 1..6: its last 32 bytes are the root of
	// records 0..63, on the proof path of every record after them.
	smp.tamper(t, `UPDATE audit_log SET tree_hashes = CAST(substr(tree_hashes, 1, 160) || zeroblob(32) AS BLOB) WHERE seq = 63`)
	rep := smp.verify(t, audit.Options{})
	wantProblem(t, rep, audit.CheckHashes, "tree_hash_mismatch", 63)
	if len(rep.Problems) != 1 {
		t.Fatalf("want the one cache row named, got %+v", rep.Problems)
	}
}
