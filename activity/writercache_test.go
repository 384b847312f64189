package activity_test

import (
	"errors"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
)

// TestCommitterCacheFollowsTheDatabase: the committer keeps the
// executions and the vault state it last committed (writercache.go), and
// every read through a write still says what the database holds: after a
// request that failed, after an edit behind the store's back, after
// another store's write and after a vault record of its own.
func TestCommitterCacheFollowsTheDatabase(t *testing.T) {
	s, keyDir := activitytest.Open(t, activity.Options{})
	var e activity.Execution
	write := func(fn func(w *activity.Tx) error) error {
		_, err := s.Write(ctx, fn)
		return err
	}
	if err := write(func(w *activity.Tx) error {
		var err error
		e, err = w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:a", Tool: "deploy", Channel: activity.ChannelHTTP,
			Target: "http://127.0.0.1:1/v1", Method: "POST", Arguments: []byte(`{}`), IntentScope: "run"},
			Fingerprint: "fp-cache", Contract: activity.ContractRepeatableWithKey})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	state := func(step string, want activity.State) {
		t.Helper()
		var got activity.Execution
		if err := write(func(w *activity.Tx) error {
			var err error
			got, err = w.Execution(e.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got.State != want {
			t.Fatalf("%s: a write reads %s, the database holds %s", step, got.State, want)
		}
	}
	state("accepted", activity.StateAccepted)

	// A request that fails after a transition leaves nothing behind.
	failed := errors.New("refused")
	if err := write(func(w *activity.Tx) error {
		if _, err := w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateAuthorized}); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("the failing request: %v", err)
	}
	state("after a request that failed", activity.StateAccepted)

	if err := write(func(w *activity.Tx) error {
		_, err := w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateAuthorized})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	state("authorized", activity.StateAuthorized)

	// Behind the store's back: the cache must not hide the edit.
	edit(t, s.Path(), `UPDATE executions SET state = 'rejected' WHERE id = '`+string(e.ID)+`'`)
	state("after an edit behind the store", activity.StateRejected)
	edit(t, s.Path(), `UPDATE executions SET state = 'authorized' WHERE id = '`+string(e.ID)+`'`)
	state("after the edit was undone", activity.StateAuthorized)

	// Another store on the same database, as a CLI writer.
	other, err := activity.Open(ctx, s.Path(), activity.Options{KeyDir: keyDir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Write(ctx, func(w *activity.Tx) error {
		_, err := w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateDispatched})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	state("after another store's write", activity.StateDispatched)

	vault := func(step string, want bool) {
		t.Helper()
		var locked bool
		if err := write(func(w *activity.Tx) error {
			var err error
			locked, _, err = w.VaultLocked()
			return err
		}); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if locked != want {
			t.Fatalf("%s: the vault reads locked=%v, want %v", step, locked, want)
		}
	}
	vault("never locked", false)
	if _, err := other.Write(ctx, func(w *activity.Tx) error { return w.SetVault(true, "alice", "incident") }); err != nil {
		t.Fatal(err)
	}
	vault("locked by another store", true)
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := write(func(w *activity.Tx) error { return w.SetVault(false, "alice", "over") }); err != nil {
		t.Fatal(err)
	}
	vault("unlocked by this store", false)
	if err := write(func(w *activity.Tx) error {
		if err := w.SetVault(true, "alice", "again"); err != nil {
			return err
		}
		locked, _, err := w.VaultLocked()
		if err == nil && !locked {
			err = errors.New("the request that locked the vault reads it unlocked")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	vault("locked by this store", true)
}
