package activity_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
)

var ctx = context.Background()

func TestOpenCreatesPrivateFiles(t *testing.T) {
	s, keyDir := activitytest.Open(t, activity.Options{})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.Path(), s.Path() + "-wal", s.Path() + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(p), fi.Mode().Perm())
		}
	}
	priv, _ := activity.KeyFiles(keyDir, s.Origin())
	fi, err := os.Stat(priv)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("signing key has mode %v, want 0600", fi.Mode().Perm())
	}
	if filepath.Dir(priv) == filepath.Dir(s.Path()) {
		t.Error("the signing key must live outside the database directory")
	}
}

// A new database gets the page size asked for, in WAL mode; an existing
// one keeps its own whatever is asked.
func TestOpenPageSize(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	pageSize := func(path string, opts activity.Options) int64 {
		t.Helper()
		opts.KeyDir = keys
		s, err := activity.Open(ctx, path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := activitytest.Incident(ctx, s); err != nil {
			t.Fatal(err)
		}
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path + "-wal"); err != nil {
			t.Errorf("%s: not in WAL mode: %v", path, err)
		}
		return st.PageSize
	}
	big, small := filepath.Join(dir, "import.db"), filepath.Join(dir, "gateway.db")
	if got := pageSize(big, activity.Options{PageSize: activity.ImportPageSize}); got != activity.ImportPageSize {
		t.Errorf("created with %d-byte pages, want %d", got, activity.ImportPageSize)
	}
	if got := pageSize(big, activity.Options{PageSize: 4096}); got != activity.ImportPageSize {
		t.Errorf("reopened: %d-byte pages, want the %d it was created with", got, activity.ImportPageSize)
	}
	if got := pageSize(small, activity.Options{}); got != activity.DefaultPageSize {
		t.Errorf("default: %d-byte pages, want %d", got, activity.DefaultPageSize)
	}
	bad := filepath.Join(dir, "bad.db")
	if _, err := activity.Open(ctx, bad, activity.Options{KeyDir: keys, PageSize: 3000}); err == nil || !strings.Contains(err.Error(), "page size 3000") {
		t.Errorf("page size 3000: %v", err)
	}
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused page size left %s behind: %v", bad, err)
	}
}

func TestSigningKeyNeverInDatabase(t *testing.T) {
	s, keyDir := activitytest.Open(t, activity.Options{})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(ctx, activity.SealManual); err != nil {
		t.Fatal(err)
	}
	priv, _ := activity.KeyFiles(keyDir, s.Origin())
	skey, err := os.ReadFile(priv)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(string(skey))
	// PRIVATE+KEY+<name>+<hash>+<base64>; the base64 may itself hold '+'.
	parts := strings.SplitN(secret, "+", 5)
	if len(parts) != 5 || len(parts[4]) < 40 {
		t.Fatalf("unexpected signing key format: %d parts", len(parts))
	}
	keyData := parts[4]
	for _, p := range []string{s.Path(), s.Path() + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(keyData)) || bytes.Contains(b, []byte("PRIVATE+KEY")) {
			t.Fatalf("%s contains the private signing key", p)
		}
	}
	pub, err := s.PublicKey()
	if err != nil || !strings.HasPrefix(pub, s.Origin()+"+") {
		t.Fatalf("PublicKey() = %q, %v", pub, err)
	}
}

func TestKeyFileMustBePrivate(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	s, err := activity.Open(ctx, filepath.Join(dir, "a.db"), activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	origin := s.Origin()
	s.Close()
	priv, _ := activity.KeyFiles(keys, origin)
	if err := os.Chmod(priv, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = activity.Open(ctx, filepath.Join(dir, "a.db"), activity.Options{KeyDir: keys})
	if err == nil || !strings.Contains(err.Error(), "must be 0600") {
		t.Fatalf("opening with a world-readable key: %v", err)
	}
}

func TestMigrationsAndNewerSchema(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.db")
	opts := activity.Options{KeyDir: filepath.Join(dir, "keys")}
	s, err := activity.Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	origin := s.Origin()
	s.Close()

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != activity.SchemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", v, err, activity.SchemaVersion)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}

	// Reopening keeps the origin and runs no migration twice.
	s, err = activity.Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Origin() != origin {
		t.Fatalf("origin changed on reopen: %s → %s", origin, s.Origin())
	}
	s.Close()

	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = activity.Open(ctx, path, opts)
	if err == nil || !strings.Contains(err.Error(), "newer than this mcpdup") {
		t.Fatalf("opening a newer schema: %v", err)
	}
}

func TestReadOnlyOpenOfMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.db")
	_, err := activity.Open(ctx, path, activity.Options{ReadOnly: true})
	if !errors.Is(err, activity.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a read-only open must not create the file")
	}
}

func testIncidentModel(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	ids, err := activitytest.Incident(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]activity.State{
		"deploy": activity.StateDelivered, "payment": activity.StateVerified, "ticket": activity.StateUnknown,
		"read1": activity.StateDelivered, "deployB": activity.StateDelivered, "locked": activity.StateRejected,
		"refused_conn": activity.StateFailedBefore,
	}
	for name, state := range want {
		e, err := s.Execution(ctx, ids[name])
		if err != nil {
			t.Fatal(err)
		}
		if e.State != state {
			t.Errorf("%s: state %s, want %s", name, e.State, state)
		}
	}
	deploy, _ := s.Execution(ctx, ids["deploy"])
	if len(deploy.Attached) != 1 {
		t.Errorf("deploy: %d attached calls, want 1", len(deploy.Attached))
	}
	if !deploy.TargetStatus.OK || deploy.TargetStatus.V != 201 || deploy.ResultRef == "" {
		t.Errorf("deploy outcome not recorded: %+v", deploy)
	}
	if !deploy.Times.Dispatched.OK || !deploy.Times.Delivered.OK || deploy.Times.Dispatched.V.After(deploy.Times.Delivered.V) {
		t.Errorf("deploy times: %+v", deploy.Times)
	}
	result, err := s.Result(ctx, deploy.ResultRef)
	if err != nil || !json.Valid(result) {
		t.Fatalf("stored result: %q, %v", result, err)
	}
	trs, err := s.Transitions(ctx, ids["deploy"])
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, tr := range trs {
		path = append(path, string(tr.To))
	}
	if got := strings.Join(path, ">"); got != "accepted>authorized>dispatched>succeeded>delivery_failed>delivered" {
		t.Errorf("deploy lifecycle: %s", got)
	}
	res, err := s.Resolutions(ctx, ids["payment"])
	if err != nil || len(res) != 1 || res[0].Operator != "alice" || res[0].Outcome != activity.ResolutionVerified {
		t.Fatalf("payment resolutions: %+v, %v", res, err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Executions != 8 || st.Runs != 2 || st.Resolutions != 1 || st.Sources != 1 || st.ByState[activity.StateUnknown] != 1 {
		t.Errorf("stats: %+v", st)
	}
	if st.Checkpoints == 0 || st.SealedSize != st.Records {
		t.Errorf("a resolution must be followed by a checkpoint covering it: %+v", st)
	}
}

func testIllegalTransitionWritesNothing(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	ids, err := activitytest.Incident(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := s.LogSize(ctx)
	cases := []struct {
		name string
		fn   func(w *activity.Tx) error
		want string
	}{
		{"second dispatch", func(w *activity.Tx) error {
			_, err := w.Transition(activity.Transition{ExecutionID: ids["deploy"], To: activity.StateDispatched})
			return err
		}, "delivered is terminal"},
		{"delivered before observed", func(w *activity.Tx) error {
			_, err := w.Transition(activity.Transition{ExecutionID: ids["ticket"], To: activity.StateDelivered})
			return err
		}, "no outcome has been observed yet"},
		{"verified by transition instead of resolution", func(w *activity.Tx) error {
			_, err := w.Transition(activity.Transition{ExecutionID: ids["ticket"], To: activity.StateVerified})
			return err
		}, "operator resolution"},
		{"resolve a delivered execution", func(w *activity.Tx) error {
			_, err := w.Resolve(activity.Resolution{ExecutionID: ids["read1"], Outcome: activity.ResolutionVerified, Operator: "bob", Note: "x"})
			return err
		}, "not unknown"},
		{"resolve twice", func(w *activity.Tx) error {
			_, err := w.Resolve(activity.Resolution{ExecutionID: ids["payment"], Outcome: activity.ResolutionRejected, Operator: "bob", Note: "x"})
			return err
		}, "not unknown"},
		{"resolve without a note", func(w *activity.Tx) error {
			_, err := w.Resolve(activity.Resolution{ExecutionID: ids["ticket"], Outcome: activity.ResolutionVerified, Operator: "bob"})
			return err
		}, "note is required"},
		{"unknown execution", func(w *activity.Tx) error {
			_, err := w.Transition(activity.Transition{ExecutionID: "act_nope", To: activity.StateAuthorized})
			return err
		}, "not found"},
		{"stale expected state", func(w *activity.Tx) error {
			_, err := w.Transition(activity.Transition{ExecutionID: ids["ticket"], From: activity.StateDispatched, To: activity.StateSucceeded})
			return err
		}, "expected state dispatched, found unknown"},
		{"attach to a missing execution", func(w *activity.Tx) error {
			_, err := w.RecordCall(activity.Call{Actor: "a", Method: "tools/call", Disposition: activity.DispositionAttached, ExecutionID: "act_missing"})
			return err
		}, "not found"},
		{"partial batch", func(w *activity.Tx) error {
			if _, err := w.Transition(activity.Transition{ExecutionID: ids["ticket"], To: activity.StateSucceeded}); err != nil {
				return err
			}
			_, err := w.Transition(activity.Transition{ExecutionID: ids["ticket"], To: activity.StateUnknown})
			return err
		}, "illegal transition succeeded → unknown"},
	}
	for _, c := range cases {
		_, err := s.Write(ctx, c.fn)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	after, _ := s.LogSize(ctx)
	if after != before {
		t.Fatalf("failed writes appended %d records", after-before)
	}
	if e, _ := s.Execution(ctx, ids["ticket"]); e.State != activity.StateUnknown {
		t.Fatalf("a rolled-back batch changed the ticket to %s", e.State)
	}
}

func testWriteIsVisibleToAnotherConnectionAtOnce(t *testing.T, eng activitytest.Engine) {
	s, keyDir := eng.Open(t, activity.Options{})
	reader, err := activity.Open(ctx, s.Path(), activity.Options{ReadOnly: true, KeyDir: keyDir})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	ids, err := activitytest.Incident(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	e, err := reader.Execution(ctx, ids["ticket"])
	if err != nil || e.State != activity.StateUnknown {
		t.Fatalf("read-only view: %v, %v", e.State, err)
	}
	if _, err := reader.Write(ctx, func(*activity.Tx) error { return nil }); !errors.Is(err, activity.ErrReadOnly) {
		t.Fatalf("write through a read-only store: %v", err)
	}
}

func testSealCadence(t *testing.T, eng activitytest.Engine) {
	clock := activitytest.NewClock()
	s, keyDir := eng.Open(t, activity.Options{Now: clock.Now, Seal: activity.SealPolicy{EveryRecords: 10, Every: time.Hour}})
	if err := activitytest.Fill(ctx, s, 25, 3); err != nil {
		t.Fatal(err)
	}
	cps, _ := s.Checkpoints(ctx)
	if len(cps) != 2 || cps[0].Size < 10 || cps[1].Size < 20 || cps[0].Reason != "records" {
		t.Fatalf("checkpoints after 25+ records with EveryRecords=10: %+v", cps)
	}
	// Time: an unsealed record older than Every is sealed on the next write.
	if _, err := s.Seal(ctx, activity.SealManual); err != nil {
		t.Fatal(err)
	}
	if err := activitytest.Fill(ctx, s, 1, 1); err != nil {
		t.Fatal(err)
	}
	clock.T = clock.T.Add(2 * time.Hour)
	if err := activitytest.Fill(ctx, s, 1, 1); err != nil {
		t.Fatal(err)
	}
	cps, _ = s.Checkpoints(ctx)
	if last := cps[len(cps)-1]; last.Reason != "interval" {
		t.Fatalf("expected an interval checkpoint, got size %d reason %s", last.Size, last.Reason)
	}
	// Clean shutdown seals the tail.
	if err := activitytest.Fill(ctx, s, 1, 1); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := activity.Open(ctx, path, activity.Options{ReadOnly: true, KeyDir: keyDir})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st, _ := r.Stats(ctx)
	cps, _ = r.Checkpoints(ctx)
	if st.SealedSize != st.Records || cps[len(cps)-1].Reason != "shutdown" {
		t.Fatalf("after Close: sealed %d of %d, last %+v", st.SealedSize, st.Records, cps[len(cps)-1])
	}
}

// testSealCadenceUnderConcurrentWriters: sixteen writers finishing at
// once all ask whether a seal is due; one seals, a checkpoint signed for
// its record count always follows EveryRecords new records, and what a
// writer committed while a seal ran is not left behind it: once the
// writers are done, fewer than EveryRecords records are unsealed.
func testSealCadenceUnderConcurrentWriters(t *testing.T, eng activitytest.Engine) {
	const every = 50
	s, _ := eng.Open(t, activity.Options{Seal: activity.SealPolicy{EveryRecords: every, Every: time.Hour}})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- activitytest.Fill(ctx, s, 60, 2)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cps, err := s.Checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var prev int64
	for _, cp := range cps {
		if cp.Reason == string(activity.SealRecords) && cp.Size-prev < every {
			t.Errorf("checkpoint at %d signed for its record count %d records after the one before", cp.Size, cp.Size-prev)
		}
		prev = cp.Size
	}
	if limit := st.Records/every + 1; int64(len(cps)) > limit {
		t.Errorf("%d checkpoints over %d records with EveryRecords=%d, want at most %d", len(cps), st.Records, every, limit)
	}
	if st.Records-prev >= every {
		t.Errorf("%d records left unsealed after the last checkpoint (at %d) with EveryRecords=%d", st.Records-prev, prev, every)
	}
	if len(cps) < 2 {
		t.Errorf("%d checkpoints over %d records with EveryRecords=%d: the policy did not seal", len(cps), st.Records, every)
	}
}

// testWritesDuringASealAreSealedAfterIt: writers that finish while a
// seal runs go on without waiting for it; what they wrote after its
// snapshot is sealed when it lets go, not when some later write comes.
func testWritesDuringASealAreSealedAfterIt(t *testing.T, eng activitytest.Engine) {
	const every = 10
	s, _ := eng.Open(t, activity.Options{Seal: activity.SealPolicy{EveryRecords: every, Every: time.Hour}})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.SetSealedHook(func() { once.Do(func() { close(entered); <-release }) })
	first := make(chan error, 1)
	go func() { first <- activitytest.Fill(ctx, s, every, every) }() // its seal holds on in the hook
	select {
	case <-entered:
	case err := <-first:
		t.Fatalf("the first %d records were not sealed (%v)", every, err)
	}
	if err := activitytest.Fill(ctx, s, 2*every, 2); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := s.LatestCheckpoint(ctx)
	if err != nil || cp == nil {
		t.Fatalf("no checkpoint: %v", err)
	}
	if cp.Size != st.Records {
		t.Fatalf("after the seal let go: the newest checkpoint covers %d of %d records", cp.Size, st.Records)
	}
}

func testWithoutKeyRecordsStayUnsealed(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	path := s.Path()
	s.Close()
	other, err := activity.Open(ctx, path, activity.Options{KeyDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := activitytest.Fill(ctx, other, 6, 6); err != nil {
		t.Fatalf("writing without the key must still work: %v", err)
	}
	if _, err := other.Seal(ctx, activity.SealManual); !errors.Is(err, activity.ErrNoKey) {
		t.Fatalf("Seal without a key: %v", err)
	}
}

func testConcurrentWritersShareOneChain(t *testing.T, eng activitytest.Engine) {
	s, keyDir := eng.Open(t, activity.Options{})
	second, err := activity.Open(ctx, s.Path(), activity.Options{KeyDir: keyDir})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, st := range []*activity.Store{s, second} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- activitytest.Fill(ctx, st, 120, 6)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Every record links to the one before it.
	var prev []byte
	var n int64
	err = s.ScanLog(ctx, 0, func(seq int64, canonical, leaf []byte) error {
		rec, err := activity.DecodeRecord(canonical)
		if err != nil {
			return err
		}
		if seq != n || (n > 0 && !bytes.Equal(rec.Prev[:], prev)) {
			t.Fatalf("record %d does not link to record %d", seq, n-1)
		}
		prev = append(prev[:0], rec.Hash[:]...)
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 240 {
		t.Fatalf("%d records, want at least 240", n)
	}
}

// TestNotRecordedStaysNotRecorded imports an execution the way an importer
// will: from a log that shows the request and the target's answer but not
// authorization times, the idempotency key or delivery. The store must
// keep those as "not recorded", never fill them in.
func testNotRecordedStaysNotRecorded(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	req := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	var id activity.ExecutionID
	_, err := s.Write(ctx, func(w *activity.Tx) error {
		src, err := w.AddSource(activity.Source{Format: "har", File: "incident.har", SHA256: "ab12", Records: 2})
		if err != nil {
			return err
		}
		prov := activity.Provenance{Source: src.ID, Line: 42}
		c, err := w.RecordCall(activity.Call{Actor: "agent:unknown", Method: "tools/call", Tool: "deploy_release",
			ReceivedAt: req, Disposition: activity.DispositionNotRecorded, Source: prov})
		if err != nil {
			return err
		}
		e, err := w.Accept(activity.Execution{
			Action:   activity.Action{Actor: "agent:unknown", Tool: "deploy_release", Channel: activity.ChannelHTTP, Target: "api.example/v1/releases", Method: "POST"},
			Contract: activity.ContractBlockedAfterUnknown, CreatedByCall: c.ID, Source: prov,
			NotRecorded: []activity.Fact{activity.FactAuthorization, activity.FactDelivery, activity.FactIdempotencyKey},
		})
		if err != nil {
			return err
		}
		id = e.ID
		for _, tr := range []activity.Transition{
			{ExecutionID: id, To: activity.StateAuthorized},
			{ExecutionID: id, To: activity.StateDispatched, At: activity.Some(req)},
			{ExecutionID: id, To: activity.StateSucceeded, At: activity.Some(req.Add(900 * time.Millisecond)), TargetStatus: activity.Some(201)},
		} {
			if _, err := w.Transition(tr); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Execution(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if e.Times.Accepted.OK || e.Times.Authorized.OK || e.Times.Delivered.OK {
		t.Errorf("times the source does not record were filled in: %+v", e.Times)
	}
	if !e.Times.Dispatched.OK || !e.Times.Dispatched.V.Equal(req) || e.TargetStatus.V != 201 {
		t.Errorf("recorded facts lost: %+v", e)
	}
	if e.IdempotencyKey.OK || e.IdempotencyKey.String() != activity.NotRecorded {
		t.Errorf("idempotency key: %+v", e.IdempotencyKey)
	}
	if e.Records(activity.FactDelivery) || !e.Records(activity.FactOutcome) {
		t.Errorf("not_recorded facts: %v", e.NotRecorded)
	}
	if e.Source.Line != 42 || e.Source.Source == "" {
		t.Errorf("provenance lost: %+v", e.Source)
	}
	// And in the raw table, not-recorded is NULL.
	db := eng.Raw(t, s.Path())
	var accepted, key sql.NullString
	if err := db.QueryRow(`SELECT accepted_at, idempotency_key FROM executions WHERE id = '`+string(id)+`'`).Scan(&accepted, &key); err != nil {
		t.Fatal(err)
	}
	if accepted.Valid || key.Valid {
		t.Errorf("not-recorded columns are not NULL: %v %v", accepted, key)
	}
}

// TestGroupCommitIsolatesFailures runs many concurrent writes, some of
// which fail after appending: shared commits must keep exactly the
// successful ones, with an unbroken chain.
// testInsertStoppedPartwayKeepsNothing: a request whose rows go in one
// multi-row INSERT that stops at its third row (SQLite's OR FAIL keeps
// the two before it in the transaction) fails naming that row, and keeps
// none of its rows, whether it ran alone or beside others in a batch.
func testInsertStoppedPartwayKeepsNothing(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	var taken activity.CallID
	if _, err := s.Write(ctx, func(w *activity.Tx) error {
		c, err := w.RecordCall(activity.Call{Actor: "a", Method: "tools/call", Tool: "t", Disposition: activity.DispositionRefused})
		taken = c.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Four calls in one request (one INSERT at its end), the third with
	// an id already taken.
	failing := func(ids *[]activity.CallID) func(w *activity.Tx) error {
		return func(w *activity.Tx) error {
			for i := range 4 {
				c := activity.Call{Actor: "a", Method: "tools/call", Tool: "t", Disposition: activity.DispositionRefused,
					ID: activity.NewCallID(time.Now().Add(time.Duration(i) * time.Millisecond))}
				if i == 2 {
					c.ID = taken
				}
				*ids = append(*ids, c.ID)
				if _, err := w.RecordCall(c); err != nil {
					return err
				}
			}
			return nil
		}
	}
	check := func(name string, err error, ids []activity.CallID) {
		t.Helper()
		var re *activity.RowError
		if !errors.As(err, &re) || re.Row != "call "+string(taken) {
			t.Fatalf("%s: %v, want the row of call %s named", name, err, taken)
		}
		var kept []activity.CallID
		s.ScanCalls(ctx, func(c *activity.CallRow) error {
			if slices.Contains(ids, c.ID) && c.ID != taken {
				kept = append(kept, c.ID)
			}
			return nil
		})
		if len(kept) > 0 {
			t.Fatalf("%s: calls %v of the failed request were kept", name, kept)
		}
	}
	before, _ := s.LogSize(ctx)
	var alone []activity.CallID
	_, err := s.Write(ctx, failing(&alone))
	check("alone", err, alone)
	// In a batch: queued writes commit with it; they stay, it does not.
	var batched []activity.CallID
	var others []<-chan error
	for range 8 {
		others = append(others, s.WriteAsync(ctx, func(w *activity.Tx) error {
			_, err := w.RecordCall(activity.Call{Actor: "a", Method: "tools/call", Tool: "t", Disposition: activity.DispositionRefused})
			return err
		}))
	}
	_, err = s.Write(ctx, failing(&batched))
	check("in a batch", err, batched)
	for _, c := range others {
		if err := <-c; err != nil {
			t.Fatalf("a write beside the failed one: %v", err)
		}
	}
	if after, _ := s.LogSize(ctx); after != before+8 {
		t.Fatalf("log grew by %d records, want the 8 beside the failed request", after-before)
	}
}

func testGroupCommitIsolatesFailures(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	const n = 48
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Write(ctx, func(w *activity.Tx) error {
				if _, err := w.RecordCall(activity.Call{Actor: "agent:g", Method: "tools/call", Tool: fmt.Sprint(i),
					Disposition: activity.DispositionRefused}); err != nil {
					return err
				}
				if i%3 == 0 {
					return fmt.Errorf("write %d fails on purpose", i)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	kept := map[string]bool{}
	for i, err := range errs {
		if (err != nil) != (i%3 == 0) {
			t.Fatalf("write %d: %v", i, err)
		}
		if err == nil {
			kept[fmt.Sprint(i)] = true
		}
	}
	var tools []string
	var prev activity.Record
	err := s.ScanLog(ctx, 0, func(seq int64, canonical, _ []byte) error {
		rec, err := activity.DecodeRecord(canonical)
		if err != nil {
			return err
		}
		if seq > 0 && rec.Prev != prev.Hash {
			t.Fatalf("chain broken at %d", seq)
		}
		prev = rec
		ev, err := rec.Event()
		if err != nil {
			return err
		}
		tools = append(tools, ev.(*activity.Call).Tool)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != len(kept) {
		t.Fatalf("%d records, want %d", len(tools), len(kept))
	}
	for _, tool := range tools {
		if !kept[tool] {
			t.Fatalf("a failed write's record %s was committed", tool)
		}
	}
}

// TestSameIntentAgainAfterCompletionInOneTransaction: the deferred
// projection writes must not make the unique index see a stale state.
func testSameIntentAgainAfterCompletionInOneTransaction(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	_, err := s.Write(ctx, func(w *activity.Tx) error {
		for range 2 {
			e, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "a", Tool: "t", Channel: activity.ChannelHTTP},
				Fingerprint: "hmac-sha256:same", Contract: activity.ContractRepeatableWithKey})
			if err != nil {
				return err
			}
			for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded, activity.StateDelivered} {
				if _, err := w.Transition(activity.Transition{ExecutionID: e.ID, To: to}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// While one is unresolved, a second is refused by the store itself.
	_, err = s.Write(ctx, func(w *activity.Tx) error {
		for range 2 {
			if _, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "a", Tool: "t", Channel: activity.ChannelHTTP},
				Fingerprint: "hmac-sha256:other", Contract: activity.ContractRepeatableWithKey}); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "unique") {
		t.Fatalf("two unresolved executions of one intent: %v", err)
	}
}

// TestAcceptAndDispatchInOneWrite: the row of an execution accepted and
// moved on in one request is inserted once, in the state the request left
// it in; accepting an id that exists fails the whole write.
func testAcceptAndDispatchInOneWrite(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	var id activity.ExecutionID
	_, err := s.Write(ctx, func(w *activity.Tx) error {
		e, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "a", Tool: "t", Channel: activity.ChannelHTTP},
			Fingerprint: "hmac-sha256:one", Contract: activity.ContractRepeatableWithKey})
		if err != nil {
			return err
		}
		id = e.ID
		for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched} {
			if e, err = w.Transition(activity.Transition{ExecutionID: e.ID, To: to}); err != nil {
				return err
			}
		}
		if got, err := w.Execution(id); err != nil || got.State != activity.StateDispatched {
			return fmt.Errorf("inside the write: %s, %v", got.State, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Execution(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if e.State != activity.StateDispatched || !e.Times.Accepted.OK || !e.Times.Authorized.OK || !e.Times.Dispatched.OK {
		t.Fatalf("stored row: state %s, times %+v", e.State, e.Times)
	}
	ts, err := s.Transitions(ctx, id)
	if err != nil || len(ts) != 3 {
		t.Fatalf("transitions: %d, %v", len(ts), err)
	}
	before, _ := s.Stats(ctx)
	_, err = s.Write(ctx, func(w *activity.Tx) error {
		_, err := w.Accept(activity.Execution{ID: id, Action: activity.Action{Actor: "a", Tool: "t", Channel: activity.ChannelHTTP},
			Fingerprint: "hmac-sha256:two"})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), string(id)) {
		t.Fatalf("accepting an existing id: %v", err)
	}
	if after, _ := s.Stats(ctx); after.Records != before.Records || after.Executions != before.Executions {
		t.Fatalf("a failed write changed the store: %+v -> %+v", before, after)
	}
}

// TestBulkRowErrorNamesTheLine: imported executions and calls are
// inserted many per statement; one the store refuses is still named, with
// the line of the file it came from, and nothing of the write is kept.
func testBulkRowErrorNamesTheLine(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	var src activity.Source
	var taken activity.ExecutionID
	_, err := s.Write(ctx, func(w *activity.Tx) error {
		var err error
		if src, err = w.AddSource(activity.Source{Format: "test", File: "a.jsonl", SHA256: strings.Repeat("a", 64)}); err != nil {
			return err
		}
		e, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "a", Tool: "t", Channel: activity.ChannelHTTP},
			Source: activity.Provenance{Source: src.ID, Line: 1}})
		taken = e.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := s.LogSize(ctx)
	_, err = s.WriteBulk(ctx, func(w *activity.Tx) error {
		for line := int64(1); line <= 300; line++ {
			e := activity.Execution{Action: activity.Action{Actor: "a", Tool: "t", Channel: activity.ChannelHTTP},
				Source: activity.Provenance{Source: src.ID, Line: line}}
			if line == 170 {
				e.ID = taken
			}
			if _, err := w.Accept(e); err != nil {
				return err
			}
		}
		return nil
	})
	var re *activity.RowError
	if !errors.As(err, &re) || re.Line != 170 || !strings.Contains(err.Error(), string(taken)) || !strings.Contains(strings.ToLower(err.Error()), "unique") {
		t.Fatalf("duplicate execution id: %v (%+v)", err, re)
	}
	if after, _ := s.LogSize(ctx); after != before {
		t.Fatalf("a refused write kept %d records", after-before)
	}
}

// TestMigrationFromVersion1: a database written by schema 1 opens, gets
// the executions_match index with seq, and keeps its data and chain.
func TestMigrationFromVersion1(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v1.db")
	opts := activity.Options{KeyDir: filepath.Join(dir, "keys")}
	s, err := activity.Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := activitytest.Incident(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Put the database back as schema 1 left it.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	undo := []string{"DROP INDEX executions_match", "CREATE INDEX executions_match ON executions(fingerprint, actor, intent_scope)", "DROP INDEX audit_log_vault",
		"DROP INDEX sources_content", "ALTER TABLE sources DROP COLUMN content_sha256", "DROP INDEX approvals_execution",
		"DROP INDEX calls_source_record", "ALTER TABLE sources DROP COLUMN unsigned_from", "DROP INDEX executions_by_effect", "DROP INDEX executions_seq",
		"DROP INDEX sources_origin", "ALTER TABLE sources DROP COLUMN origin", "ALTER TABLE sources DROP COLUMN head",
		"DROP INDEX executions_replica", "DROP TABLE replicas", "DROP TABLE mcp_sessions", "DROP TABLE mcp_events", "DROP INDEX calls_run", "DROP INDEX runs_open", "DROP INDEX calls_request_id", "ALTER TABLE sources DROP COLUMN content_size"}
	for table, cols := range map[string][]string{ // migrations 3, 4 and 13's columns
		"executions": {"created", "replayed", "source_record", "replica"}, "calls": {"source_record"}, "runs": {"source_record"},
		"transitions": {"created", "replayed", "implied", "source_id", "source_line", "source_record", "shows", "replica"},
	} {
		for _, c := range cols {
			undo = append(undo, "ALTER TABLE "+table+" DROP COLUMN "+c)
		}
	}
	for _, q := range append(undo, "PRAGMA user_version = 1") {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err = activity.Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, _ = sql.Open("sqlite", path)
	defer db.Close()
	var v int
	var def string
	db.QueryRow("PRAGMA user_version").Scan(&v)
	db.QueryRow("SELECT sql FROM sqlite_master WHERE name = 'executions_match'").Scan(&def)
	if v != activity.SchemaVersion || !strings.Contains(def, "intent_scope, seq)") {
		t.Fatalf("after migration: user_version %d, index %q", v, def)
	}
	e, err := s.Execution(ctx, ids["ticket"])
	if err != nil || e.State != activity.StateUnknown {
		t.Fatalf("data after migration: %+v %v", e, err)
	}
	if _, err := s.Write(ctx, func(w *activity.Tx) error {
		m, err := w.LatestMatch(e.Fingerprint, e.Actor, e.IntentScope)
		if err != nil || m == nil || m.ID != e.ID {
			return fmt.Errorf("latest match after migration: %+v %v", m, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestApplyRebuildsEveryStoredExecution holds the store's projection to
// the model's one state machine: every execution, rebuilt from the state
// it was accepted in and its recorded transitions through Execution.Apply,
// is the row the writer stored.
func testApplyRebuildsEveryStoredExecution(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := activitytest.Fill(ctx, s, 40, 8); err != nil {
		t.Fatal(err)
	}
	execs, err := s.Executions(ctx, activity.ExecutionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]activity.ExecutionID, len(execs))
	for i, e := range execs {
		ids[i] = e.ID
	}
	trs, err := s.TransitionsOf(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	states := map[activity.State]bool{}
	for _, stored := range execs {
		x := stored.AsAccepted()
		for _, tr := range trs[stored.ID] {
			if tr.To == activity.StateAccepted {
				continue
			}
			if err := x.Apply(tr); err != nil {
				t.Fatalf("#%d: %v", tr.Seq, err)
			}
		}
		stored.Attached = nil
		if !reflect.DeepEqual(x, stored) {
			t.Errorf("%s rebuilt:\n%+v\nstored:\n%+v", stored.ID, x, stored)
		}
		states[stored.State] = true
	}
	if len(states) < 5 {
		t.Fatalf("only %d distinct final states (%v): the check covers too little", len(states), states)
	}
}

// TestWALStaysBounded: under continuous writes, with a reader reading
// beside them and checkpoints running while commits land, a PASSIVE
// checkpoint alone lets the WAL grow (a commit lands while it copies, so
// the log never restarts); the store's step also resets it past WALLimit,
// so it stays near the limit. Both run side by side on the same load.
func TestWALStaysBounded(t *testing.T) {
	const limit = 1 << 20
	grow := func(step func(*activity.Store)) int64 {
		s, _ := activitytest.Open(t, activity.Options{WALLimit: limit})
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(1)
		go func() { // short reads, far more often than a console's
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					s.LogSize(ctx)
					time.Sleep(2 * time.Millisecond)
				}
			}
		}()
		var peak atomic.Int64
		wg.Add(1)
		go func() { // the checkpointer, as fast as it can go
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				step(s)
				if st, err := os.Stat(s.Path() + "-wal"); err == nil && st.Size() > peak.Load() {
					peak.Store(st.Size())
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		for range 60 {
			if err := activitytest.Fill(ctx, s, 100, 10); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
		return peak.Load()
	}
	passive := grow((*activity.Store).CheckpointPassive)
	bounded := grow((*activity.Store).CheckpointStep)
	t.Logf("peak WAL under 600 commits: %d KiB with PASSIVE checkpoints alone, %d KiB with the store's step (limit %d KiB)",
		passive>>10, bounded>>10, limit>>10)
	if bounded > 3*limit {
		t.Fatalf("the WAL reached %d KiB, past 3× the %d KiB limit", bounded>>10, limit>>10)
	}
}

// testOneExecutionAcrossWriters: two stores on one database, as two
// gateway replicas are, each take the same intent from many goroutines at
// once and match it the way the gateway does (the newest execution of the
// fingerprint, else a new one, dispatched in the same write). Exactly one
// execution is created; every other request finds it.
func testOneExecutionAcrossWriters(t *testing.T, eng activitytest.Engine) {
	s, keyDir := eng.Open(t, activity.Options{})
	second, err := activity.Open(ctx, s.Path(), activity.Options{KeyDir: keyDir})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	const perStore = 12
	var created, attached atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2*perStore)
	for _, st := range []*activity.Store{s, second} {
		for range perStore {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := st.Write(ctx, func(w *activity.Tx) error {
					prior, err := w.LatestMatch("fp-deploy", "agent:a", "run")
					if err != nil {
						return err
					}
					if prior != nil {
						attached.Add(1)
						return nil
					}
					e, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:a", Tool: "deploy", Channel: activity.ChannelHTTP, IntentScope: "run"},
						Fingerprint: "fp-deploy", Contract: activity.ContractRepeatableWithKey})
					if err != nil {
						return err
					}
					for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched} {
						if _, err := w.Transition(activity.Transition{ExecutionID: e.ID, To: to}); err != nil {
							return err
						}
					}
					created.Add(1)
					return nil
				})
				errs <- err
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if created.Load() != 1 || attached.Load() != 2*perStore-1 {
		t.Fatalf("%d executions created, %d requests attached; want 1 and %d", created.Load(), attached.Load(), 2*perStore-1)
	}
	st, _ := second.Stats(ctx)
	if st.Executions != 1 || st.ByState[activity.StateDispatched] != 1 {
		t.Fatalf("stored: %+v", st)
	}
}

// testSecondUnresolvedRefusedByTheDatabase: whatever a writer does, the
// database itself refuses a second unresolved execution of one intent.
func testSecondUnresolvedRefusedByTheDatabase(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	accept := func() error {
		_, err := s.Write(ctx, func(w *activity.Tx) error {
			_, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:a", Tool: "deploy", Channel: activity.ChannelHTTP, IntentScope: "run"},
				Fingerprint: "fp-deploy", Contract: activity.ContractRepeatableWithKey})
			return err
		})
		return err
	}
	if err := accept(); err != nil {
		t.Fatal(err)
	}
	err := accept()
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "unique") {
		t.Fatalf("second unresolved execution of one intent: %v", err)
	}
	if st, _ := s.Stats(ctx); st.Executions != 1 {
		t.Fatalf("%d executions stored", st.Executions)
	}
}

// testTablesProvenByTheLog: the tables rebuilt from the log equal the
// stored ones, and a row edited behind the store's back is named.
func testTablesProvenByTheLog(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	rep, err := s.CheckTables(ctx)
	if err != nil || len(rep.Problems) != 0 || rep.Rows == 0 {
		t.Fatalf("untouched: %v, %+v", err, rep)
	}
	res, err := eng.Raw(t, s.Path()).Exec(`UPDATE executions SET state = 'delivered' WHERE state = 'unknown'`)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("tamper: %v, %d rows", err, n)
	}
	rep, err = s.CheckTables(ctx)
	if err != nil || len(rep.Problems) != 1 || rep.Problems[0].Table != "executions" || !strings.Contains(rep.Problems[0].Message, `state is "delivered"`) {
		t.Fatalf("edited state: %v, %+v", err, rep)
	}
}

// testLeaseClaimedOnce: a replica's lease is claimed only once it has run
// out, by exactly one of many concurrent claimants, and its holder then
// learns it lost it; a lease renewed in time is never claimed.
func testLeaseClaimedOnce(t *testing.T, eng activitytest.Engine) {
	s, keyDir := eng.Open(t, activity.Options{})
	other, err := activity.Open(ctx, s.Path(), activity.Options{KeyDir: keyDir})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	claim := func(st *activity.Store, id, by string) bool {
		var got bool
		if _, err := st.Write(ctx, func(w *activity.Tx) (err error) {
			got, err = w.ClaimLease(id, by, false)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	live, err := s.StartLease(ctx, "a", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	short, err := s.StartLease(ctx, "b", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if claim(other, short.ID, "gw_other") {
		t.Fatal("a lease was claimed before it ran out")
	}
	// The live one is renewed throughout; the short one is left to lapse.
	stop := make(chan struct{})
	renewed := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				renewed <- nil
				return
			case <-time.After(100 * time.Millisecond):
				if err := s.RenewLease(ctx, live); err != nil {
					renewed <- err
					return
				}
			}
		}
	}()
	time.Sleep(400 * time.Millisecond)
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		st := []*activity.Store{s, other}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if claim(st, short.ID, fmt.Sprintf("gw_%d", i)) {
				wins.Add(1)
			}
			if claim(st, live.ID, fmt.Sprintf("gw_%d", i)) {
				t.Errorf("a renewed lease was claimed")
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-renewed; err != nil {
		t.Fatalf("renewing the live lease: %v", err)
	}
	if wins.Load() != 1 {
		t.Fatalf("a lapsed lease was claimed %d times, want once", wins.Load())
	}
	if err := s.RenewLease(ctx, short); !errors.Is(err, activity.ErrLeaseLost) {
		t.Fatalf("renewing a claimed lease: %v", err)
	}
	if _, err := s.Write(ctx, func(w *activity.Tx) error { return w.HoldsLease(short.ID) }); !errors.Is(err, activity.ErrLeaseLost) {
		t.Fatalf("fence of a claimed lease: %v", err)
	}
	if _, err := s.Write(ctx, func(w *activity.Tx) error { return w.HoldsLease(live.ID) }); err != nil {
		t.Fatalf("fence of a live lease: %v", err)
	}
	leases, err := other.Leases(ctx)
	if err != nil || len(leases) != 2 {
		t.Fatalf("leases: %v %+v", err, leases)
	}
}

// testPartialIDsIgnoreCase: an id typed from a screen in lower case finds
// its execution on either engine.
func testPartialIDsIgnoreCase(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	ids, err := activitytest.Incident(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	want := ids["ticket"]
	for _, typed := range []string{strings.ToLower(string(want)[len(want)-6:]), strings.ToLower(string(want))} {
		got, err := s.FindExecutionID(ctx, typed)
		if err != nil || got != want {
			t.Errorf("%q: %v %v, want %s", typed, got, err, want)
		}
	}
}

// testImportedRequestsByRequestID: an import finds what other imports
// read under a proxy's request id (when, until when, what), never the
// gateway's own calls, its own source's, or a short id.
func testImportedRequestsByRequestID(t *testing.T, eng activitytest.Engine) {
	s, _ := eng.Open(t, activity.Options{})
	const rid = "84961386-6d84-929d-98bd-c5aee93b5c88"
	start := time.Date(2026, 3, 2, 10, 15, 4, 409_000_000, time.UTC)
	var a, b activity.SourceID
	var any0 bool
	write := func(src *activity.SourceID, id string, end time.Time) func(w *activity.Tx) error {
		return func(w *activity.Tx) error {
			var at activity.Provenance
			if src != nil {
				if *src == "" {
					got, err := w.AddSource(activity.Source{Format: "envoy", File: "access.log"})
					if err != nil {
						return err
					}
					*src = got.ID
				}
				at = activity.Provenance{Source: *src, Line: 1}
			}
			eid := activity.NewExecutionID(start)
			c, err := w.RecordCall(activity.Call{Actor: "proxy-client:unknown", Method: "http", Tool: "http POST payments:8000/v1/payments",
				ReceivedAt: start, JSONRPCID: activity.Some(id), Disposition: activity.DispositionNewExecution, ExecutionID: eid, Source: at})
			if err != nil {
				return err
			}
			if _, err := w.Accept(activity.Execution{ID: eid, Action: activity.Action{Actor: "proxy-client:unknown", Tool: c.Tool, Channel: activity.ChannelHTTP,
				Target: "payments:8000/v1/payments", Method: "POST", Arguments: []byte("null")}, Contract: activity.ContractBlockedAfterUnknown,
				CreatedByCall: c.ID, Times: activity.Times{Accepted: activity.Some(start)}, Source: at}); err != nil {
				return err
			}
			for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched} {
				if _, err := w.Transition(activity.Transition{ExecutionID: eid, To: to, At: activity.Some(start)}); err != nil {
					return err
				}
			}
			if !end.IsZero() {
				_, err = w.Transition(activity.Transition{ExecutionID: eid, To: activity.StateSucceeded, At: activity.Some(end), TargetStatus: activity.Some(201)})
			}
			return err
		}
	}
	check := func(what string, fn func(w *activity.Tx) error) {
		t.Helper()
		if _, err := s.Write(ctx, fn); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	check("gateway call", write(nil, rid, start.Add(time.Second)))
	check("short id", write(&a, "17", start.Add(time.Second)))
	check("asked", func(w *activity.Tx) (err error) { any0, err = w.AnyImportedRequestID(); return err })
	if any0 {
		t.Errorf("only the gateway's calls and a short id hold the request id, yet an import is said to hold one")
	}
	end := start.Add(40 * time.Millisecond)
	check("imported", write(&a, rid, end))
	check("without an end", write(&b, rid, time.Time{}))
	check("read", func(w *activity.Tx) error {
		anyNow, err := w.AnyImportedRequestID()
		if err != nil || !anyNow {
			return fmt.Errorf("after an import under %s: %v %v", rid, anyNow, err)
		}
		got, err := w.ImportedRequests(rid, b)
		if err != nil {
			return err
		}
		want := []activity.ImportedRequest{{Start: start, End: end, Method: "POST", Target: "payments:8000/v1/payments", Status: 201}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("other imports than b: %v, want %v", got, want)
		}
		if got, err = w.ImportedRequests(rid, a); err != nil || len(got) != 1 || !got[0].End.Equal(start) {
			return fmt.Errorf("other imports than a: %v %v, want b's, ending when it started", got, err)
		}
		if got, err = w.ImportedRequests("17", ""); err != nil || got != nil {
			return fmt.Errorf("a short id: %v %v", got, err)
		}
		return nil
	})
}

// TestStoreRefusesASecondUnresolvedExecution: while an intent's execution
// is in a state that must answer its retries (UnresolvedStates), the
// store itself refuses a second execution of it (the
// executions_one_unresolved index), whatever its caller does; once it
// has an outcome, or for a read, a second one is accepted.
func TestStoreRefusesASecondUnresolvedExecution(t *testing.T) {
	s, _ := activitytest.Open(t, activity.Options{})
	path := []activity.State{activity.StateAccepted, activity.StateAuthorized, activity.StateDispatched, activity.StateUnknown,
		activity.StatePendingVerification}
	accept := func(w *activity.Tx, fp string, c activity.Contract) (activity.Execution, error) {
		return w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:a", Tool: "deploy", Channel: activity.ChannelHTTP,
			Arguments: []byte(`{}`), IntentScope: "run"}, Fingerprint: fp, Contract: c})
	}
	// second accepts fp's first execution, moves it through to, then
	// tries a second.
	second := func(fp string, c activity.Contract, to []activity.State) error {
		if _, err := s.Write(ctx, func(w *activity.Tx) error {
			e, err := accept(w, fp, c)
			for _, st := range to {
				if err != nil {
					return err
				}
				e, err = w.Transition(activity.Transition{ExecutionID: e.ID, To: st})
			}
			return err
		}); err != nil {
			t.Fatalf("%s: first execution: %v", fp, err)
		}
		_, err := s.Write(ctx, func(w *activity.Tx) error {
			_, err := accept(w, fp, c)
			return err
		})
		return err
	}
	for i, st := range path {
		fp := "fp-" + string(st)
		if err := second(fp, activity.ContractBlockedAfterUnknown, path[1:i+1]); err == nil {
			t.Errorf("a second execution was accepted while the first is %s", st)
		}
	}
	if err := second("fp-succeeded", activity.ContractBlockedAfterUnknown, []activity.State{activity.StateAuthorized,
		activity.StateDispatched, activity.StateSucceeded}); err != nil {
		t.Errorf("a second execution after the first succeeded: %v", err)
	}
	if err := second("fp-read", activity.ContractReadOnly, []activity.State{activity.StateAuthorized, activity.StateDispatched}); err != nil {
		t.Errorf("a second read while the first is dispatched: %v", err)
	}
	db, err := sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var def string
	if err := db.QueryRow("SELECT sql FROM sqlite_master WHERE name = 'executions_one_unresolved'").Scan(&def); err != nil {
		t.Fatal(err)
	}
	for _, st := range activity.UnresolvedStates {
		if !strings.Contains(def, "'"+string(st)+"'") {
			t.Errorf("executions_one_unresolved does not name %s: %s", st, def)
		}
	}
	if strings.Contains(def, " IN (") {
		t.Errorf("executions_one_unresolved checks its states through an IN list (an ephemeral table per row): %s", def)
	}
}
