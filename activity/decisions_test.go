package activity_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
)

// decisionStore is the incident with one approval answered and one still
// pending, and a side connection through which a test edits rows the way
// someone with sqlite3 could.
func decisionStore(t *testing.T) (s *activity.Store, ids map[string]activity.ExecutionID, answered, pending string, db *sql.DB) {
	t.Helper()
	s, _ = activitytest.Open(t, activity.Options{})
	ids, err := activitytest.Incident(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Write(ctx, func(w *activity.Tx) error {
		a, err := w.RequestApproval(activity.Approval{Kind: activity.ApprovalPerUse, ExecutionID: ids["ticket"], Actor: "agent:deployer",
			CredentialRef: "stripe-live", Summary: "refund 100"})
		if err != nil {
			return err
		}
		p, err := w.RequestApproval(activity.Approval{Kind: activity.ApprovalPerUse, ExecutionID: ids["locked"], Actor: "agent:deployer",
			CredentialRef: "stripe-live", Summary: "refund 5"})
		answered, pending = a.ID, p.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecideApproval(ctx, answered, activity.ApprovalApproved, "alice", "customer called"); err != nil {
		t.Fatal(err)
	}
	db, err = sql.Open("sqlite", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return s, ids, answered, pending, db
}

func editRow(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func logSize(t *testing.T, s *activity.Store) int64 {
	t.Helper()
	n, err := s.LogSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// refusedUnproven checks that a decision failed as unproven and wrote nothing.
func refusedUnproven(t *testing.T, s *activity.Store, before int64, err error) {
	t.Helper()
	if !errors.Is(err, activity.ErrUnproven) {
		t.Fatalf("a decision on an edited row: err = %v, want %v", err, activity.ErrUnproven)
	}
	if after := logSize(t, s); after != before {
		t.Fatalf("the refused decision wrote %d records", after-before)
	}
}

// TestDecisionsRestOnTheSignedLog: an operator's approve, deny or resolve
// read the row it answers and signed it. A row edited behind the store's
// back (an approval put back to pending, an execution made unknown) was
// answered, the answer sealed, and audit verify then passed a log that
// held two contradicting decisions or failed for good.
func TestDecisionsRestOnTheSignedLog(t *testing.T) {
	t.Run("an answered approval put back to pending", func(t *testing.T) {
		s, _, answered, _, db := decisionStore(t)
		editRow(t, db, `UPDATE approvals SET state = 'pending', decided_at = NULL, operator = NULL, note = NULL, decided_seq = NULL WHERE id = ?`, answered)
		before := logSize(t, s)
		_, err := s.DecideApproval(ctx, answered, activity.ApprovalDenied, "mallory", "never approved")
		refusedUnproven(t, s, before, err)
		if !strings.Contains(err.Error(), "already answered") {
			t.Fatalf("the refusal does not say the log answered it: %v", err)
		}
	})
	t.Run("a pending approval's summary edited", func(t *testing.T) {
		s, _, _, pending, db := decisionStore(t)
		editRow(t, db, `UPDATE approvals SET summary = 'refund 5 (routine)' WHERE id = ?`, pending)
		before := logSize(t, s)
		_, err := s.DecideApproval(ctx, pending, activity.ApprovalApproved, "bob", "routine")
		refusedUnproven(t, s, before, err)
	})
	t.Run("a delivered execution made unknown", func(t *testing.T) {
		s, ids, _, _, db := decisionStore(t)
		editRow(t, db, `UPDATE executions SET state = 'unknown', outcome = NULL WHERE id = ?`, string(ids["deploy"]))
		before := logSize(t, s)
		_, _, err := s.Resolve(ctx, activity.Resolution{ExecutionID: ids["deploy"], Outcome: activity.ResolutionRejected,
			Operator: "mallory", Note: "did not happen"})
		refusedUnproven(t, s, before, err)
	})
	t.Run("a resolved execution rolled back to its unknown record", func(t *testing.T) {
		s, ids, _, _, db := decisionStore(t)
		var unknownSeq int64
		if err := db.QueryRow(`SELECT seq FROM transitions WHERE execution_id = ? AND to_state = 'unknown'`, string(ids["payment"])).Scan(&unknownSeq); err != nil {
			t.Fatal(err)
		}
		editRow(t, db, `UPDATE executions SET state = 'unknown', updated_seq = ? WHERE id = ?`, unknownSeq, string(ids["payment"]))
		before := logSize(t, s)
		_, _, err := s.Resolve(ctx, activity.Resolution{ExecutionID: ids["payment"], Outcome: activity.ResolutionRejected,
			Operator: "mallory", Note: "no charge"})
		refusedUnproven(t, s, before, err)
		if !strings.Contains(err.Error(), "changed it since") {
			t.Fatalf("the refusal does not name the later record: %v", err)
		}
	})
	t.Run("untouched rows are answered", func(t *testing.T) {
		s, ids, _, pending, _ := decisionStore(t)
		if _, err := s.DecideApproval(ctx, pending, activity.ApprovalDenied, "bob", "not today"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Resolve(ctx, activity.Resolution{ExecutionID: ids["ticket"], Outcome: activity.ResolutionVerified,
			Operator: "bob", Note: "ticket 88 exists"}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTableCheckRefusesASecondDecision: decisions are final, in the log
// as in the writer. A second decision on an answered approval was
// replayed as the row's new state, and audit verify passed a log in which
// a denial silently replaced a signed approval.
func TestTableCheckRefusesASecondDecision(t *testing.T) {
	s, _, answered, _, _ := decisionStore(t)
	_, err := s.Write(ctx, func(w *activity.Tx) error {
		a, err := w.Approval(answered)
		if err != nil {
			return err
		}
		a.State, a.Operator, a.Note = activity.ApprovalDenied, "mallory", "never approved"
		return w.ForceApprovalRecord(a)
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.CheckTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		if p.Code == activity.ProblemUnapplied && strings.Contains(p.Message, "decisions are final") {
			found = true
		}
	}
	if !found {
		t.Fatalf("a second decision on an approval: problems %+v", rep.Problems)
	}
}
