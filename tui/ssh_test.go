package tui

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
)

// TestSSHExecutionInDetail: an SSH command whose session dropped, retried
// and attached, shows in the console like any other execution: the target
// is the account, host and host key; question 3 cites the exit code.
func TestSSHExecutionInDetail(t *testing.T) {
	dir := t.TempDir()
	s, err := activity.Open(ctx, filepath.Join(dir, "t.db"), activity.Options{KeyDir: filepath.Join(dir, "keys"), Now: activitytest.NewClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const target = "deploy@10.0.4.7:22 SHA256:Qm9vZ2xlIGhvc3Qga2V5IGZpbmdlcnByaW50AAAA"
	args := json.RawMessage(`{"version":"42"}`)
	var id activity.ExecutionID
	write := func(fn func(w *activity.Tx) error) {
		t.Helper()
		if _, err := s.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	write(func(w *activity.Tx) error {
		run, err := w.StartRun(activity.Run{Actor: "agent:ops", IdentifiedBy: activity.RunByMetaID, Evidence: "run-1"})
		if err != nil {
			return err
		}
		id = activity.NewExecutionID(w.Now())
		call, err := w.RecordCall(activity.Call{RunID: run.ID, Actor: run.Actor, Method: "tools/call", Tool: "run_migration",
			Arguments: args, Disposition: activity.DispositionNewExecution, ExecutionID: id})
		if err != nil {
			return err
		}
		_, err = w.Accept(activity.Execution{ID: id, RunID: run.ID, CreatedByCall: call.ID, Contract: activity.ContractRecoverableByLookup,
			Fingerprint: "hmac-sha256:" + strings.Repeat("ab", 32), FingerprintKeyID: "fp1",
			Action: activity.Action{Actor: run.Actor, Tool: "run_migration", Channel: activity.ChannelSSH, Target: target,
				Method: "exec ./migrate --to {version} (in /srv/app)", Arguments: args, IntentScope: "run:" + string(run.ID)}})
		if err != nil {
			return err
		}
		_, err = w.RecordCall(activity.Call{RunID: run.ID, Actor: run.Actor, Method: "tools/call", Tool: "run_migration",
			Arguments: args, Disposition: activity.DispositionAttached, ExecutionID: id, Reason: "same fingerprint, same run"})
		return err
	})
	for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateUnknown, activity.StateSucceeded, activity.StateDelivered} {
		write(func(w *activity.Tx) error {
			tr := activity.Transition{ExecutionID: id, To: to}
			switch to {
			case activity.StateUnknown:
				tr.Reason = "ssh: the connection was lost after the command started"
			case activity.StateSucceeded:
				tr.ExitCode, tr.Reason = activity.Some(0), "recovered by lookup: the host's marker records exit code 0"
			}
			_, err := w.Transition(tr)
			return err
		})
	}

	m := New(s, Options{Operator: "alice", Poll: -1})
	run(m, m.Init())
	m.Update(tea.WindowSizeMsg{Width: 140, Height: 40})
	if sel := m.suspects.Selected(); sel == nil || sel.Tool != "run_migration" {
		t.Fatalf("the SSH execution is not the suspect: %+v", sel)
	}
	run(m, press(m, "enter")) // the suspect is read whole
	if d := m.detail.Suspect(); d == nil || d.Executions[0].ID != id {
		t.Fatalf("the detail is not the SSH execution's suspect: %+v", d)
	}
	press(m, "enter", "enter")
	v := m.View()
	for _, want := range []string{"run_migration on exec ./migrate", target, "3. Did the gateway get a response or exit code from the target? YES", "exit code 0"} {
		if !strings.Contains(v, want) {
			t.Errorf("detail lacks %q:\n%s", want, v)
		}
	}
}
