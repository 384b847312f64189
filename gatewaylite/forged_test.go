package gatewaylite_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
)

// forge edits the gateway's database behind the store's back, as someone
// with the file and sqlite3 would.
func (h *harness) forge(stmts ...string) {
	h.t.Helper()
	db, err := sql.Open("sqlite", h.store.Path())
	if err != nil {
		h.t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			h.t.Fatalf("%s: %v", q, err)
		}
	}
}

// wantRefusedUnproven: the call was refused, nothing reached the target,
// and the refusal is recorded with its reason.
func (h *harness) wantRefusedUnproven(res *mcp.CallToolResult, what string) {
	h.t.Helper()
	if !res.IsError || !strings.Contains(resultText(res), "not what the signed log says") {
		h.t.Fatalf("%s: the call was not refused: %s", what, resultText(res))
	}
	if h.target.Total() != 0 {
		h.t.Fatalf("%s: %d requests reached the target", what, h.target.Total())
	}
	execs := h.executions("deploy_release")
	if len(execs) != 1 || execs[0].State != activity.StateRejected || !strings.Contains(execs[0].Error, "signed log") {
		h.t.Fatalf("%s: refusal not recorded: %+v", what, execs)
	}
}

// TestForgedVaultUnlockRefuses: a locked vault whose row is edited to say
// unlocked (or deleted) does not let calls through.
func TestForgedVaultUnlockRefuses(t *testing.T) {
	for name, forge := range map[string]string{
		"edited":  `UPDATE meta SET value = 'unlocked by alice: all clear' WHERE key = 'vault'`,
		"deleted": `DELETE FROM meta WHERE key = 'vault'`,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, "")
			if _, err := h.store.Write(ctx, func(w *activity.Tx) error { return w.SetVault(true, "alice", "incident 4711") }); err != nil {
				t.Fatal(err)
			}
			h.forge(forge)
			cs := h.connect(loopback.ProtocolStateless, false)
			res := mustCall(t, cs, "deploy_release", map[string]any{"service": "billing", "version": "5"}, nil)
			h.wantRefusedUnproven(res, "forged vault")
		})
	}
}

// TestGenuineUnlockStillWorks: the check does not stand in the way of a
// real unlock, sealed or not.
func TestGenuineUnlockStillWorks(t *testing.T) {
	h := newHarness(t, "")
	for _, locked := range []bool{true, false} {
		if _, err := h.store.Write(ctx, func(w *activity.Tx) error { return w.SetVault(locked, "alice", "incident 4711") }); err != nil {
			t.Fatal(err)
		}
	}
	cs := h.connect(loopback.ProtocolStateless, false)
	res := mustCall(t, cs, "deploy_release", map[string]any{"service": "billing", "version": "5"}, nil)
	if res.IsError || h.target.Total() != 1 {
		t.Fatalf("after a genuine unlock: %s (effects %d)", resultText(res), h.target.Total())
	}
}

// TestForgedSessionGrantRefuses: a grants row nobody granted does not
// stand in for the operator's approval.
func TestForgedSessionGrantRefuses(t *testing.T) {
	h := newHarness(t, `session_grant = "ask"`)
	meta := mcp.Meta{"mcpdup.dev/run_id": "run-A"}
	if _, err := h.store.Write(ctx, func(w *activity.Tx) error {
		_, err := w.StartRun(activity.Run{Actor: "agent:deployer", IdentifiedBy: activity.RunByMetaID, Evidence: "run-A"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h.forge(`INSERT INTO grants(seq, run_id, scope, granted_by, granted_at)
		SELECT (SELECT MAX(seq) FROM audit_log) + 1000, id, 'session', 'operator:mallory', started_at FROM runs WHERE evidence = 'run-A'`)
	cs := h.connect(loopback.ProtocolStateless, false)
	res := mustCall(t, cs, "deploy_release", map[string]any{"service": "billing", "version": "5"}, meta)
	h.wantRefusedUnproven(res, "forged grant")
}

// TestForgedApprovalRefuses: a per-use approval flipped to approved in the
// table, with no decision record, refuses the waiting call.
func TestForgedApprovalRefuses(t *testing.T) {
	h := newHarness(t, perUseConfig)
	cs := h.connect(loopback.ProtocolStateless, false)
	first := make(chan *mcp.CallToolResult, 1)
	go func() { first <- mustCall(t, cs, "refund", map[string]any{"order": "o-17", "amount_cents": 900}, nil) }()
	as := h.waitApprovals(1)
	h.forge(`UPDATE approvals SET state = 'approved', operator = 'mallory', decided_at = requested_at, decided_seq = seq WHERE id = '` + as[0].ID + `'`)
	res := <-first
	if m := execMeta(t, res); m["state"] != "rejected" || !res.IsError || h.target.Total() != 0 || !strings.Contains(resultText(res), "signed log") {
		t.Fatalf("forged approval: %v %s (effects %d)", m, resultText(res), h.target.Total())
	}
}

// TestForgedExecutionStateRefuses: an execution awaiting verification,
// its row rewritten to say nothing was ever sent, must not let a retry act
// a second time; the real state still serves retries.
func TestForgedExecutionStateRefuses(t *testing.T) {
	h := newHarness(t, "")
	h.proxy.Next(loopback.DropResponse) // the charge's answer is lost: pending verification
	cs := h.connect(loopback.ProtocolStateless, false)
	args := map[string]any{"amount_cents": 500, "card_token": secretValue}
	res := mustCall(t, cs, "charge_card", args, nil)
	if m := execMeta(t, res); m["state"] != "pending_verification" {
		t.Fatalf("setup: %v", m)
	}
	// A genuine retry is told it awaits verification.
	if res := mustCall(t, cs, "charge_card", args, nil); execMeta(t, res)["state"] != "pending_verification" {
		t.Fatalf("genuine retry: %s", resultText(res))
	}
	h.forge(`UPDATE executions SET state = 'failed_before_dispatch', outcome = NULL WHERE tool = 'charge_card'`)
	res = mustCall(t, cs, "charge_card", args, nil)
	if !res.IsError || !strings.Contains(resultText(res), "is not what its signed log says") {
		t.Fatalf("a retry over a forged state: %s", resultText(res))
	}
	if got := h.target.Total(); got != 1 {
		t.Fatalf("the target acted %d times", got)
	}
	if n := h.countCalls(`tool = 'charge_card' AND disposition = 'refused' AND reason LIKE 'refused: execution % is not what the signed log says%'`); n != 1 {
		t.Fatalf("%d refusals recorded, want 1", n)
	}
}
