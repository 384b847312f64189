// Package activitytest builds activity stores for tests, benchmarks and
// fixtures: a temporary store with its own key directory, a small scripted
// incident that touches every kind of record, and bulk filling.
package activitytest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver for Raw
	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/internal/pgtest"
)

// Clock is a deterministic clock: each call advances it by Step.
type Clock struct {
	T    time.Time
	Step time.Duration
}

// Now returns the current time and advances the clock.
func (c *Clock) Now() time.Time {
	t := c.T
	c.T = c.T.Add(c.Step)
	return t
}

// NewClock starts at 2026-11-30 09:00 UTC and ticks by 250ms.
func NewClock() *Clock {
	return &Clock{T: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), Step: 250 * time.Millisecond}
}

// Open creates a SQLite store in a temporary directory, with its key
// directory beside it, closed when the test ends.
func Open(tb testing.TB, opts activity.Options) (*activity.Store, string) {
	tb.Helper()
	return SQLite.Open(tb, opts)
}

// Engine is a database the store runs on; store tests run on each.
type Engine string

const (
	SQLite   Engine = "sqlite"
	Postgres Engine = "postgres" // a throwaway cluster (pgtest), or MCPDUP_TEST_POSTGRES
)

// Engines are the engines store tests run on.
var Engines = []Engine{SQLite, Postgres}

// DB returns a new, empty database on e: a file path or a URL.
func (e Engine) DB(tb testing.TB) string {
	tb.Helper()
	if e == Postgres {
		return pgtest.DB(tb)
	}
	return filepath.Join(tb.TempDir(), "mcpdup.db")
}

// Open creates a store on e, with a key directory of its own, closed
// when the test ends.
func (e Engine) Open(tb testing.TB, opts activity.Options) (*activity.Store, string) {
	tb.Helper()
	if opts.KeyDir == "" {
		opts.KeyDir = filepath.Join(tb.TempDir(), "keys")
	}
	s, err := activity.Open(context.Background(), e.DB(tb), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, opts.KeyDir
}

// Incident writes a small incident through the store's public API: two
// agent runs, a refused call, a completed deploy whose result was not
// delivered and a retry that attached to it, a payment with an unknown
// outcome that an operator verifies, a ticket still unknown, a pending
// verification, read-only repeats, an authorization rejection and a
// failure before dispatch. It returns the execution ids by name.
func Incident(ctx context.Context, s *activity.Store) (map[string]activity.ExecutionID, error) {
	ids := map[string]activity.ExecutionID{}
	var runA, runB activity.Run
	_, err := s.Write(ctx, func(w *activity.Tx) error {
		if _, err := w.AddSource(activity.Source{Format: "gateway", Note: "activitytest incident"}); err != nil {
			return err
		}
		var err error
		runA, err = w.StartRun(activity.Run{Actor: "agent:deployer", IdentifiedBy: activity.RunByMetaID, Evidence: "run-7f3a"})
		if err != nil {
			return err
		}
		runB, err = w.StartRun(activity.Run{Actor: "agent:deployer", IdentifiedBy: activity.RunByMetaID, Evidence: "run-91c2"})
		if err != nil {
			return err
		}
		if err := w.AddGrant(activity.Grant{RunID: runA.ID, Scope: "deploy-service", GrantedBy: "policy:session"}); err != nil {
			return err
		}
		_, err = w.RecordCall(activity.Call{Actor: "unknown", Method: "tools/call", Tool: "deploy_release",
			JSONRPCID: activity.Some("1"), Disposition: activity.DispositionRefused, Reason: "401: no valid bearer token"})
		return err
	})
	if err != nil {
		return nil, err
	}
	steps := []struct {
		name, tool string
		run        activity.Run
		contract   activity.Contract
		args       string
		path       []activity.State
		retry      bool
	}{
		{"deploy", "deploy_release", runA, activity.ContractRepeatableWithKey, `{"region":"us-east-1","service":"billing","version":"2.4.1"}`,
			[]activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded, activity.StateDeliveryFailed}, true},
		{"payment", "charge_card", runA, activity.ContractBlockedAfterUnknown, `{"amount_cents":4200,"customer":"cus_123"}`,
			[]activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateUnknown, activity.StatePendingVerification}, true},
		{"ticket", "open_ticket", runA, activity.ContractRecoverableByLookup, `{"title":"disk full on db-3"}`,
			[]activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateUnknown}, false},
		{"read1", "get_status", runA, activity.ContractReadOnly, `{"service":"billing"}`,
			[]activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded, activity.StateDelivered}, false},
		{"read2", "get_status", runA, activity.ContractReadOnly, `{"service":"billing"}`,
			[]activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded, activity.StateDelivered}, false},
		{"deployB", "deploy_release", runB, activity.ContractRepeatableWithKey, `{"region":"us-east-1","service":"billing","version":"2.4.1"}`,
			[]activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded, activity.StateDelivered}, false},
		{"locked", "rotate_credential", runB, activity.ContractBlockedAfterUnknown, `{"credential":"ref:db-admin"}`,
			[]activity.State{activity.StateRejected}, false},
		{"refused_conn", "deploy_release", runB, activity.ContractRepeatableWithKey, `{"region":"eu-west-1","service":"billing","version":"2.4.1"}`,
			[]activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateFailedBefore}, false},
	}
	for i, st := range steps {
		var id activity.ExecutionID
		_, err := s.Write(ctx, func(w *activity.Tx) error {
			id = activity.NewExecutionID(w.Now())
			call, err := w.RecordCall(activity.Call{RunID: st.run.ID, Actor: st.run.Actor, Method: "tools/call", Tool: st.tool,
				JSONRPCID: activity.Some(fmt.Sprint(i + 2)), SessionID: activity.Some("mcp-sess-" + string(st.run.Evidence)),
				ProtocolVersion: activity.Some("2025-11-25"), Arguments: json.RawMessage(st.args), Disposition: activity.DispositionNewExecution,
				ExecutionID: id})
			if err != nil {
				return err
			}
			e, err := w.Accept(activity.Execution{ID: id,
				Action: activity.Action{Actor: st.run.Actor, Tool: st.tool, Channel: activity.ChannelHTTP,
					Target: "http://127.0.0.1:9400/v1/" + st.tool, Method: "POST", CredentialRef: "deploy-service",
					Arguments: json.RawMessage(st.args), IntentScope: "run:" + string(st.run.ID)},
				Fingerprint: fmt.Sprintf("hmac-sha256:%064x", len(st.args)*7919+len(st.tool)), FingerprintKeyID: "fp1",
				RunID: st.run.ID, Contract: st.contract, CreatedByCall: call.ID,
			})
			if err != nil {
				return err
			}
			id = e.ID
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
		ids[st.name] = id
		for _, to := range st.path {
			_, err := s.Write(ctx, func(w *activity.Tx) error {
				t := activity.Transition{ExecutionID: id, To: to}
				switch to {
				case activity.StateSucceeded:
					ref, err := w.PutResult([]byte(`{"content":[{"type":"text","text":"ok"}]}`))
					if err != nil {
						return err
					}
					t.TargetStatus, t.ResultRef = activity.Some(201), ref
				case activity.StateUnknown:
					t.Reason = "connection reset after the request body was written"
				case activity.StateRejected:
					t.Reason = "vault locked"
				case activity.StateFailedBefore:
					t.Reason = "connect: connection refused"
				}
				_, err := w.Transition(t)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("%s → %s: %w", st.name, to, err)
			}
		}
		if st.retry {
			_, err := s.Write(ctx, func(w *activity.Tx) error {
				_, err := w.RecordCall(activity.Call{RunID: st.run.ID, Actor: st.run.Actor, Method: "tools/call", Tool: st.tool,
					JSONRPCID: activity.Some(fmt.Sprint(100 + i)), Arguments: json.RawMessage(st.args),
					Disposition: activity.DispositionAttached, ExecutionID: id, Reason: "same fingerprint, same run"})
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("%s retry: %w", st.name, err)
			}
		}
	}
	_, err = s.Write(ctx, func(w *activity.Tx) error {
		if _, err := w.Transition(activity.Transition{ExecutionID: ids["deploy"], To: activity.StateDelivered, Reason: "stored result returned to the retry"}); err != nil {
			return err
		}
		_, err := w.Resolve(activity.Resolution{ExecutionID: ids["payment"], Outcome: activity.ResolutionVerified, Operator: "alice",
			Note: "charge ch_9 present in the processor dashboard", Evidence: "https://dashboard.example/ch_9"})
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// Fill appends about n records in transactions of batch records: calls,
// executions and full lifecycles, as a busy gateway would write them.
func Fill(ctx context.Context, s *activity.Store, n, batch int) error {
	written := 0
	for written < n {
		recs, err := s.Write(ctx, func(w *activity.Tx) error {
			for len(w.Records()) < batch && written+len(w.Records()) < n {
				if err := oneExecution(w, written+len(w.Records())); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		written += len(recs)
	}
	return nil
}

func oneExecution(w *activity.Tx, i int) error {
	args := json.RawMessage(fmt.Sprintf(`{"service":"svc-%d","version":"1.%d.0"}`, i%97, i%13))
	id := activity.NewExecutionID(w.Now())
	call, err := w.RecordCall(activity.Call{Actor: "agent:bulk", Method: "tools/call", Tool: "deploy_release",
		JSONRPCID: activity.Some(fmt.Sprint(i)), Arguments: args, Disposition: activity.DispositionNewExecution, ExecutionID: id})
	if err != nil {
		return err
	}
	e, err := w.Accept(activity.Execution{ID: id,
		Action: activity.Action{Actor: "agent:bulk", Tool: "deploy_release", Channel: activity.ChannelHTTP,
			Target: "http://127.0.0.1:9400/v1/releases", Method: "POST", CredentialRef: "deploy-service", Arguments: args},
		Fingerprint: fmt.Sprintf("hmac-sha256:%064x", i), FingerprintKeyID: "fp1",
		Contract: activity.ContractRepeatableWithKey, CreatedByCall: call.ID,
	})
	if err != nil {
		return err
	}
	for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded, activity.StateDelivered} {
		t := activity.Transition{ExecutionID: e.ID, To: to}
		if to == activity.StateSucceeded {
			t.TargetStatus = activity.Some(201)
		}
		if _, err := w.Transition(t); err != nil {
			return err
		}
	}
	return nil
}

// FillMixed appends about n records of gateway-like traffic in which one
// execution in every suspectEvery is retried: alternately by a call that
// attaches to it and by a second execution of the same arguments. The
// rest are distinct effects. Calls are received 100ms apart from
// 2026-11-30 00:00 UTC, so a million records span hours, as real traffic
// would. It is the shape analysis benchmarks read.
func FillMixed(ctx context.Context, s *activity.Store, n, batch, suspectEvery int) error {
	written, i := 0, 0
	for written < n {
		recs, err := s.Write(ctx, func(w *activity.Tx) error {
			for len(w.Records()) < batch && written+len(w.Records()) < n {
				i++
				args := json.RawMessage(fmt.Sprintf(`{"n":%d,"service":"svc-%d"}`, i, i%97))
				at := mixedStart.Add(time.Duration(i) * 100 * time.Millisecond)
				id, err := mixedExecution(w, i, args, at)
				if err != nil {
					return err
				}
				if suspectEvery > 0 && i%suspectEvery == 0 {
					at = at.Add(30 * time.Millisecond)
					if (i/suspectEvery)%2 == 0 {
						_, err = w.RecordCall(activity.Call{Actor: "agent:bulk", Method: "tools/call", Tool: "deploy_release", ReceivedAt: at,
							JSONRPCID: activity.Some(fmt.Sprint(i, "r")), Arguments: args, Disposition: activity.DispositionAttached, ExecutionID: id})
					} else {
						_, err = mixedExecution(w, i, args, at)
					}
					if err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		written += len(recs)
	}
	return nil
}

var mixedStart = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// FillHot appends n executions of one effect (the same tool, target and
// arguments, service naming it), received every apart from from on: an
// effect called all day, whose calls fall into group after group.
func FillHot(ctx context.Context, s *activity.Store, service string, from time.Time, n int, every time.Duration) error {
	args, err := json.Marshal(map[string]string{"service": service})
	if err != nil {
		return err
	}
	_, err = s.Write(ctx, func(w *activity.Tx) error {
		for k := range n {
			at := from.Add(time.Duration(k) * every)
			if _, err := mixedExecution(w, int(at.UnixMilli()), args, at); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

func mixedExecution(w *activity.Tx, i int, args json.RawMessage, at time.Time) (activity.ExecutionID, error) {
	id := activity.NewExecutionID(at)
	call, err := w.RecordCall(activity.Call{Actor: "agent:bulk", Method: "tools/call", Tool: "deploy_release", ReceivedAt: at,
		JSONRPCID: activity.Some(fmt.Sprint(i)), Arguments: args, Disposition: activity.DispositionNewExecution, ExecutionID: id})
	if err != nil {
		return id, err
	}
	_, err = w.Accept(activity.Execution{ID: id,
		Action: activity.Action{Actor: "agent:bulk", Tool: "deploy_release", Channel: activity.ChannelHTTP,
			Target: "127.0.0.1:9400/v1/releases", Method: "POST", Arguments: args},
		Fingerprint: fmt.Sprintf("hmac-sha256:%064x", i), FingerprintKeyID: "fp1", IdempotencyKey: activity.Some(string(id)),
		Contract: activity.ContractRepeatableWithKey, CreatedByCall: call.ID, Window: activity.Some(time.Hour),
	})
	if err != nil {
		return id, err
	}
	for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded, activity.StateDelivered} {
		t := activity.Transition{ExecutionID: id, To: to}
		if to == activity.StateSucceeded {
			t.TargetStatus = activity.Some(201)
		}
		if _, err := w.Transition(t); err != nil {
			return id, err
		}
	}
	return id, nil
}

// Cached returns a store that build filled once and that is kept in the
// temp directory between runs, named by name and the schema, so the
// benchmarks that read a million records do not rebuild it every time.
// A half-built store (build failed or was interrupted) is rebuilt.
func Cached(tb testing.TB, name string, build func(context.Context, *activity.Store) error) (path, keyDir string) {
	tb.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("mcpdup-bench-%s-%s", name, activity.SchemaID()))
	path, keyDir = filepath.Join(dir, "log.db"), filepath.Join(dir, "keys")
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return path, keyDir
	}
	os.RemoveAll(dir)
	ctx := context.Background()
	s, err := activity.Open(ctx, path, activity.Options{KeyDir: keyDir})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("building the %s store in %s (once; minutes for a million records)", name, dir)
	if err := build(ctx, s); err != nil {
		tb.Fatal(err)
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path, keyDir
}

// MillionMixed is the cached 1,000,000-record store of FillMixed traffic
// (one execution in 20 retried) that the analysis and console benchmarks
// read.
func MillionMixed(tb testing.TB) (path, keyDir string) { return Mixed(tb, 1_000_000) }

// Mixed is MillionMixed at another size (6,000,000 records is about a
// million calls), cached under its size.
func Mixed(tb testing.TB, records int) (path, keyDir string) {
	return Cached(tb, fmt.Sprintf("analyze-%d", records), func(ctx context.Context, s *activity.Store) error {
		return FillMixed(ctx, s, records, 3000, 20)
	})
}

// PeakHeap samples the heap in use every 5ms until stop is called, and
// returns the peak in MB: benchmarks report what memory the work needed,
// not where it ended.
func PeakHeap() (stop func() float64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() float64 {
		close(done)
		<-finished
		return float64(peak.Load()) / (1 << 20)
	}
}

// CPUTime is the CPU time (user and system) this process has used so far:
// a benchmark's CPU cost per operation, which waiting on fsync does not
// inflate the way it inflates wall time.
func CPUTime() time.Duration {
	ru := rusage()
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MaxRSS is the most resident memory this process has had, in MiB: Go's
// heap plus what SQLite allocates outside it (its page cache).
func MaxRSS() float64 {
	return float64(rusage().Maxrss) / 1024 // Linux reports KiB
}

// rusage is this process's resource usage (zero if it cannot be read).
func rusage() syscall.Rusage {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru
}

// Busy keeps a writer committing small transactions on s until the
// returned stop is called, which returns the writer's first error: a
// gateway's load beside whatever a test checks.
func Busy(ctx context.Context, s *activity.Store) (stop func() error) {
	quit := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-quit:
				done <- nil
				return
			default:
			}
			if err := Fill(ctx, s, 12, 6); err != nil {
				done <- err
				return
			}
		}
	}()
	return func() error {
		close(quit)
		return <-done
	}
}

// CopyFile copies a file (a database to tamper with, a store to start a
// test from); to is overwritten.
func CopyFile(tb testing.TB, from, to string) {
	tb.Helper()
	in, err := os.Open(from)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
}

// CopyDir copies the files of a directory (a key directory), not its
// subdirectories.
func CopyDir(tb testing.TB, from, to string) {
	tb.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		tb.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			CopyFile(tb, filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
		}
	}
}

// Raw opens db (a path or URL from DB) with its driver alone, for a test
// that reads or edits tables behind the store's back; closed when tb ends.
func (e Engine) Raw(tb testing.TB, db string) *sql.DB {
	tb.Helper()
	driver := "sqlite"
	if e == Postgres {
		driver = "pgx"
	}
	r, err := sql.Open(driver, db)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}
