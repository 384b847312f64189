package audit_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/activity/audit"
)

// TestFollowerVerifiesOnlyWhatIsNew: a follower's report after records
// are appended says what a full verify says of the log (records,
// checkpoints, sealed size), the tables stay proven as of its last check
// until it checks them again, and a new record altered before the
// follower reads it is caught.
func TestFollowerVerifiesOnlyWhatIsNew(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log.db")
	s, err := activity.Open(ctx, path, activity.Options{KeyDir: filepath.Join(dir, "keys"), Seal: activity.SealPolicy{EveryRecords: 40}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	pub, _ := s.PublicKey()
	opts := audit.Options{Key: pub, KeyPinned: true}
	f, err := audit.NewFollower(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	first, err := f.Advance(ctx)
	if err != nil || first.Tampered || first.TablesThrough != 0 {
		t.Fatalf("first advance: %+v %v", first, err)
	}
	if in := first.Integrity(); in.State != audit.IntegrityVerified || !in.Tables {
		t.Fatalf("first advance: %+v", in)
	}
	for round := range 3 {
		if err := activitytest.Fill(ctx, s, 90, 9); err != nil {
			t.Fatal(err)
		}
		got, err := f.Advance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, err := audit.VerifyStore(ctx, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got.Tampered || got.Records != want.Records || got.Checkpoints != want.Checkpoints || got.SealedSize != want.SealedSize ||
			got.Unsealed != want.Unsealed {
			t.Fatalf("round %d: follower %d records, %d checkpoints, sealed %d, unsealed %d; verify %d, %d, %d, %d", round,
				got.Records, got.Checkpoints, got.SealedSize, got.Unsealed, want.Records, want.Checkpoints, want.SealedSize, want.Unsealed)
		}
		if got.TablesThrough != first.Records {
			t.Fatalf("round %d: tables proven through %d, want %d (the first check)", round, got.TablesThrough, first.Records)
		}
		if in := got.Integrity(); in.TablesThrough != first.Records {
			t.Fatalf("round %d: integrity %+v", round, in)
		}
	}
	f.TablesEvery = 1 // due at once
	if rep, err := f.Advance(ctx); err != nil || rep.TablesThrough != 0 || rep.Tampered {
		t.Fatalf("a table check due covers the whole log: %+v %v", rep, err)
	}

	// A record appended and altered before the follower reads it.
	size, _ := s.LogSize(ctx)
	if err := activitytest.Fill(ctx, s, 5, 5); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"DROP TRIGGER audit_log_no_update",
		fmt.Sprintf(`UPDATE audit_log SET canonical = CAST(canonical || X'20' AS BLOB) WHERE seq = %d`, size+1)} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := f.Advance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Tampered {
		t.Fatal("an altered new record was not caught")
	}
}

// TestFollowerSeesATruncatedLog: records removed from the end, below a
// checkpoint the store signed, are a truncation for a follower as for a
// whole verification (a follower that only looked at checkpoints within
// what it had read said "verified").
func TestFollowerSeesATruncatedLog(t *testing.T) {
	smp := newSample(t, 0)
	smp.tamper(t, fmt.Sprintf("DELETE FROM audit_log WHERE seq >= %d", smp.size(t)-4))
	s, err := activity.Open(ctx, smp.path, activity.Options{ReadOnly: true, KeyDir: smp.keyDir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opts := audit.Options{Key: smp.pub, KeyPinned: true, LogOnly: true}
	want, err := audit.VerifyStore(ctx, s, opts)
	if err != nil || !want.Tampered {
		t.Fatalf("verify: %v %+v", err, want)
	}
	f, err := audit.NewFollower(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Advance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Tampered || got.Checkpoints != want.Checkpoints {
		t.Fatalf("follower: tampered %v, %d checkpoints; verify: tampered, %d checkpoints", got.Tampered, got.Checkpoints, want.Checkpoints)
	}
}
