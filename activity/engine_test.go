package activity_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// storeTests hold the store's behaviour whatever database holds it: each
// runs on SQLite and on PostgreSQL (a cluster the tests start, or
// MCPDUP_TEST_POSTGRES). Tests of one engine's own mechanics (file modes,
// page size, the WAL, PRAGMA user_version) stay ordinary tests.
var storeTests = []struct {
	name string
	fn   func(t *testing.T, eng activitytest.Engine)
}{
	{"IncidentModel", testIncidentModel},
	{"IllegalTransitionWritesNothing", testIllegalTransitionWritesNothing},
	{"WriteIsVisibleToAnotherConnectionAtOnce", testWriteIsVisibleToAnotherConnectionAtOnce},
	{"SealCadence", testSealCadence},
	{"SealCadenceUnderConcurrentWriters", testSealCadenceUnderConcurrentWriters},
	{"WritesDuringASealAreSealedAfterIt", testWritesDuringASealAreSealedAfterIt},
	{"WithoutKeyRecordsStayUnsealed", testWithoutKeyRecordsStayUnsealed},
	{"ConcurrentWritersShareOneChain", testConcurrentWritersShareOneChain},
	{"NotRecordedStaysNotRecorded", testNotRecordedStaysNotRecorded},
	{"GroupCommitIsolatesFailures", testGroupCommitIsolatesFailures},
	{"InsertStoppedPartwayKeepsNothing", testInsertStoppedPartwayKeepsNothing},
	{"SameIntentAgainAfterCompletionInOneTransaction", testSameIntentAgainAfterCompletionInOneTransaction},
	{"AcceptAndDispatchInOneWrite", testAcceptAndDispatchInOneWrite},
	{"BulkRowErrorNamesTheLine", testBulkRowErrorNamesTheLine},
	{"ApplyRebuildsEveryStoredExecution", testApplyRebuildsEveryStoredExecution},
	{"OneExecutionAcrossWriters", testOneExecutionAcrossWriters},
	{"SecondUnresolvedRefusedByTheDatabase", testSecondUnresolvedRefusedByTheDatabase},
	{"TablesProvenByTheLog", testTablesProvenByTheLog},
	{"LeaseClaimedOnce", testLeaseClaimedOnce},
	{"PartialIDsIgnoreCase", testPartialIDsIgnoreCase},
	{"ImportedRequestsByRequestID", testImportedRequestsByRequestID},
}

func TestStore(t *testing.T) {
	for _, eng := range activitytest.Engines {
		t.Run(string(eng), func(t *testing.T) {
			for _, st := range storeTests {
				t.Run(st.name, func(t *testing.T) { st.fn(t, eng) })
			}
		})
	}
}

// TestPostgresOpen: what opening a PostgreSQL database says on its own
// terms — an empty database is missing for a reader, a newer schema is
// refused, and a password never shows in the store's name or its errors.
func TestPostgresOpen(t *testing.T) {
	db := activitytest.Postgres.DB(t)
	keys := t.TempDir()
	if _, err := activity.Open(ctx, db, activity.Options{ReadOnly: true, KeyDir: keys}); !errors.Is(err, activity.ErrNotExist) {
		t.Fatalf("read-only open of an empty database: %v", err)
	}
	s, err := activity.Open(ctx, db, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := activitytest.Postgres.Raw(t, db).Exec(`UPDATE mcpdup_schema SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := activity.Open(ctx, db, activity.Options{KeyDir: keys}); err == nil || !strings.Contains(err.Error(), "newer than this mcpdup") {
		t.Fatalf("newer schema: %v", err)
	}
	// The servers the tests start trust their socket, so a password is
	// accepted and ignored: whichever form it takes, it is not shown.
	for _, withPassword := range []string{db + "&password=s3cret-pw", strings.Replace(db, "postgres:///", "postgres://mcpdup:s3cret-pw@/", 1)} {
		s, err := activity.Open(ctx, withPassword, activity.Options{ReadOnly: true, KeyDir: keys})
		if err == nil {
			if strings.Contains(s.Path(), "s3cret-pw") {
				t.Errorf("the store's name shows the password: %s", s.Path())
			}
			s.Close()
		} else if strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("an error shows the password: %v", err)
		}
		if _, err := activity.Open(ctx, withPassword, activity.Options{KeyDir: keys, PageSize: 1000}); err == nil || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("a refused option: %v", err)
		}
	}
	u, _ := url.Parse(db)
	u.User = url.UserPassword("mcpdup", "s3cret-pw")
	u.RawQuery = strings.Replace(u.RawQuery, "user=mcpdup", "user=nobody-here", 1)
	_, err = activity.Open(ctx, u.String(), activity.Options{KeyDir: keys})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("open with a password: %v", err)
	}
}
