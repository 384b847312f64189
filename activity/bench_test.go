package activity_test

import (
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
)

// BenchmarkAppend measures the durable append rate: each commit is on disk
// (WAL, synchronous=FULL) before Write returns. Sub-benchmarks run side by
// side so their events/s can be compared in one run:
//
//	go test ./activity -run '^$' -bench Append -benchtime 2000x
func BenchmarkAppend(b *testing.B) {
	for _, bc := range []struct {
		name  string
		batch int
	}{{"one_transition_per_commit", 1}, {"batched_100_per_commit", 100}} {
		b.Run(bc.name, func(b *testing.B) {
			s, _ := activitytest.Open(b, activity.Options{})
			// One long-lived execution bouncing between states would break
			// the state machine, so append call records: the same log
			// write, chain, tree and projection work as a transition.
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(bc.batch, b.N-done)
				_, err := s.Write(ctx, func(w *activity.Tx) error {
					for range n {
						if _, err := w.RecordCall(activity.Call{Actor: "agent:bench", Method: "tools/call", Tool: "deploy_release",
							JSONRPCID: activity.Some("1"), Disposition: activity.DispositionRefused, Reason: "bench"}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				done += n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkLifecycle measures a whole execution (call, accept, authorized,
// dispatched, succeeded, delivered: 6 records) with each step committed
// durably on its own, as the gateway does.
func BenchmarkLifecycle(b *testing.B) {
	s, _ := activitytest.Open(b, activity.Options{})
	b.ResetTimer()
	for range b.N {
		var id activity.ExecutionID
		if _, err := s.Write(ctx, func(w *activity.Tx) error {
			c, err := w.RecordCall(activity.Call{Actor: "agent:bench", Method: "tools/call", Tool: "t", Disposition: activity.DispositionNewExecution})
			if err != nil {
				return err
			}
			e, err := w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:bench", Tool: "t", Channel: activity.ChannelHTTP}, CreatedByCall: c.ID})
			id = e.ID
			return err
		}); err != nil {
			b.Fatal(err)
		}
		for _, to := range []activity.State{activity.StateAuthorized, activity.StateDispatched, activity.StateSucceeded, activity.StateDelivered} {
			if _, err := s.Write(ctx, func(w *activity.Tx) error {
				_, err := w.Transition(activity.Transition{ExecutionID: id, To: to})
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "executions/s")
}

// BenchmarkGatewayCall writes what one gateway tools/call writes, as the
// gateway writes it: the call with accept, authorized and dispatched,
// waited on (the promise before dispatch); then the outcome with its
// result, queued (WriteAsync), and the delivery, batched with the others
// as the gateway's delivery recorder batches them (gatewaylite/delivery.go:
// the first waits 25 ms for company, then one write records them all),
// behind its answer. From 1 and from 16 writers at once, with no
// HTTP and no MCP: the store alone. Its calls/s at 16 writers is a
// ceiling on the gateway's throughput at 16 clients, whatever its front
// costs. It reports CPU time per call (user+system, which the fsync wait
// does not count) beside the rate.
//
// records_only_floor/writers=16 writes, for each call, only six rows the
// size of its six records into one bare table, from 16 writers
// group-committed by one committer (WAL, synchronous=FULL): the least a
// call's records cost through this driver. The store's figure beside it
// is what the chain, the tree hashes, the projection tables and their
// indexes, the savepoints and the queued writes add.
//
//	go test ./activity -run '^$' -bench GatewayCall -benchtime 2000x
func BenchmarkGatewayCall(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) { benchGatewayCall(b, writers) })
	}
	b.Run("log_only/writers=16", func(b *testing.B) { benchGatewayCallLogOnly(b, 16) })
	b.Run("records_only_floor/writers=16", func(b *testing.B) { benchRecordsFloor(b, 16) })
}

// benchGatewayCallLogOnly is benchGatewayCall with the log alone: each
// call's six records through the store's own chain (encoding, leaf and
// tree hashes, group commit, seals) and the result's content, and no
// projection row (calls, executions, transitions). Tables that lag their
// log are not a design the store can ship as is: this is the ceiling of
// deferring the projections off the gateway's commits, measured.
func benchGatewayCallLogOnly(b *testing.B, writers int) {
	s, _ := activitytest.Open(b, activity.Options{})
	run := startBenchRun(b, s)
	args := []byte(`{"service":"api","version":"1.2.3"}`)
	var queued sync.WaitGroup
	runWriters(b, writers, func(i int64) error {
		id, err := logOnlyFirstWrite(s, run, args, i)
		if err != nil {
			return err
		}
		outcome := s.WriteAsync(ctx, func(w *activity.Tx) error {
			ref, err := w.PutResult([]byte(`{"content":[{"type":"text","text":"ok"}]}`))
			if err != nil {
				return err
			}
			if err := w.AppendOnly(activity.KindTransition, activity.Transition{ExecutionID: id, From: activity.StateDispatched, To: activity.StateSucceeded,
				TargetStatus: activity.Some(201), ResultRef: ref, At: activity.Some(w.Now())}); err != nil {
				return err
			}
			return w.AppendOnly(activity.KindTransition, activity.Transition{ExecutionID: id, From: activity.StateSucceeded, To: activity.StateDelivered, At: activity.Some(w.Now())})
		})
		waitAside(b, &queued, outcome)
		return nil
	}, queued.Wait)
}

// waitAside waits for a queued write on a goroutine of its own, counted
// in queued, as the gateway goes on once its answer is out.
func waitAside(b *testing.B, queued *sync.WaitGroup, outcome <-chan error) {
	queued.Add(1)
	go func() {
		defer queued.Done()
		if err := <-outcome; err != nil {
			b.Error(err)
		}
	}()
}

// startBenchRun records the run the benchmarks' calls belong to.
func startBenchRun(b *testing.B, s *activity.Store) activity.RunID {
	var run activity.Run
	if _, err := s.Write(ctx, func(w *activity.Tx) error {
		var err error
		run, err = w.StartRun(activity.Run{Actor: "agent:bench", IdentifiedBy: activity.RunByToken})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	return run.ID
}

// logOnlyFirstWrite is gatewayFirstWrite's match and four records (call,
// execution, authorized, dispatched), appended with no projection row.
func logOnlyFirstWrite(s *activity.Store, run activity.RunID, args []byte, i int64) (activity.ExecutionID, error) {
	var id activity.ExecutionID
	_, err := s.Write(ctx, func(w *activity.Tx) error {
		fp := fmt.Sprintf("%x", sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i))))
		if _, err := w.LatestMatch(fp, "agent:bench", "run"); err != nil {
			return err
		}
		now := w.Now()
		c := activity.Call{ID: activity.NewCallID(now), Actor: "agent:bench", Method: "tools/call", Tool: "deploy_release", RunID: run,
			Arguments: args, Disposition: activity.DispositionNewExecution, ReceivedAt: now, ExecutionID: activity.NewExecutionID(now)}
		id = c.ExecutionID
		if err := w.AppendOnly(activity.KindCall, c); err != nil {
			return err
		}
		e := activity.Execution{ID: id, Action: activity.Action{Actor: "agent:bench", Tool: "deploy_release", Channel: activity.ChannelHTTP,
			Target: "http://127.0.0.1:9400/v1/releases", Method: "POST", Arguments: args, IntentScope: "run"},
			Fingerprint: fp, RunID: run, CreatedByCall: c.ID, Contract: activity.ContractRepeatableWithKey, State: activity.StateAccepted}
		e.Times.Accepted = activity.Some(now)
		if err := w.AppendOnly(activity.KindExecution, e); err != nil {
			return err
		}
		if err := w.AppendOnly(activity.KindTransition, activity.Transition{ExecutionID: id, From: activity.StateAccepted, To: activity.StateAuthorized, At: activity.Some(now)}); err != nil {
			return err
		}
		return w.AppendOnly(activity.KindTransition, activity.Transition{ExecutionID: id, From: activity.StateAuthorized, To: activity.StateDispatched, At: activity.Some(now)})
	})
	return id, err
}

// benchRecordsFloor writes six record-sized rows per call from writers
// goroutines through one committer that commits whatever is queued at
// once.
func benchRecordsFloor(b *testing.B, writers int) {
	dsn := "file:" + filepath.Join(b.TempDir(), "floor.db") + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE log(seq INTEGER PRIMARY KEY, canonical BLOB NOT NULL, leaf BLOB NOT NULL, tree BLOB NOT NULL, kind TEXT NOT NULL, t TEXT NOT NULL) STRICT`); err != nil {
		b.Fatal(err)
	}
	// The sizes of a gateway call's records in a store the benchmarks
	// fill: the call, the execution, four transitions.
	sizes := []int{412, 718, 266, 266, 266, 266}
	hash := make([]byte, 32)
	calls := make(chan chan error, writers)
	go func() {
		seq := 0
		for first := range calls {
			batch := []chan error{first}
			for more := true; more; {
				select {
				case c, ok := <-calls:
					if ok {
						batch = append(batch, c)
					} else {
						more = false
					}
				default:
					more = false
				}
			}
			err := func() error {
				tx, err := db.Begin()
				if err != nil {
					return err
				}
				defer tx.Rollback()
				q := `INSERT INTO log(seq, canonical, leaf, tree, kind, t) VALUES (?,?,?,?,?,?)` + strings.Repeat(`,(?,?,?,?,?,?)`, len(batch)*len(sizes)-1)
				var args []any
				for range batch {
					for _, n := range sizes {
						args = append(args, seq, make([]byte, n), hash, hash, "transition", "2026-12-02T03:04:05.678Z")
						seq++
					}
				}
				if _, err := tx.Exec(q, args...); err != nil {
					return err
				}
				return tx.Commit()
			}()
			for _, c := range batch {
				c <- err
			}
		}
	}()
	defer close(calls)
	runWriters(b, writers, func(int64) error {
		done := make(chan error, 1)
		calls <- done
		return <-done
	}, nil)
}

// runWriters makes b.N calls of fn from writers goroutines at once, waits
// for them and for settle (writes queued aside), and reports calls/s and
// the process's CPU per call.
func runWriters(b *testing.B, writers int, fn func(i int64) error, settle func()) {
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := activitytest.CPUTime()
	b.ResetTimer()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if err := fn(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if settle != nil {
		settle()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric(float64((activitytest.CPUTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/call")
}

func benchGatewayCall(b *testing.B, writers int) {
	s, _ := activitytest.Open(b, activity.Options{})
	run := activity.Run{ID: startBenchRun(b, s)}
	args := []byte(`{"service":"api","version":"1.2.3"}`)
	deliveries := make(chan activity.ExecutionID, 4096)
	var delivered sync.WaitGroup
	go func() {
		for first := range deliveries {
			time.Sleep(25 * time.Millisecond)
			ids := []activity.ExecutionID{first}
			for more := true; more && len(ids) < 1024; {
				select {
				case id := <-deliveries:
					ids = append(ids, id)
				default:
					more = false
				}
			}
			if _, err := s.Write(ctx, func(w *activity.Tx) error {
				for _, id := range ids {
					if _, err := w.Execution(id); err != nil {
						return err
					}
					if _, err := w.Transition(activity.Transition{ExecutionID: id, To: activity.StateDelivered}); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Error(err)
			}
			for range ids {
				delivered.Done()
			}
		}
	}()
	defer close(deliveries)
	call := func(i int64) (<-chan error, error) {
		e, err := gatewayFirstWrite(s, run.ID, args, i)
		if err != nil {
			return nil, err
		}
		outcome := s.WriteAsync(ctx, func(w *activity.Tx) error {
			ref, err := w.PutResult([]byte(`{"content":[{"type":"text","text":"ok"}]}`))
			if err != nil {
				return err
			}
			_, err = w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateSucceeded, TargetStatus: activity.Some(201), ResultRef: ref})
			return err
		})
		delivered.Add(1)
		deliveries <- e.ID
		return outcome, nil
	}
	var queued sync.WaitGroup
	runWriters(b, writers, func(i int64) error {
		outcome, err := call(i)
		if err != nil {
			return err
		}
		// The writer goes on, as the agent has its answer; the queued
		// writes are waited on aside.
		waitAside(b, &queued, outcome)
		return nil
	}, func() {
		queued.Wait()
		delivered.Wait()
	})
}

// BenchmarkDurableCommitFloor sets the gateway's first commit (the one
// durable write before dispatch: call, accept, authorized, dispatched),
// and the same records appended with no projection row (log_only), beside
// the least any durable write through this driver costs: one
// one-row INSERT committed with the same WAL and synchronous=FULL. The
// difference is what fewer statements and pages could still win; the
// floor is what no schema can. Each reports the WAL frames (pages) one
// commit writes: SQLite checksums and writes each, so a commit's CPU
// grows with them.
//
// The bare commit runs twice: on a log that grows its file, and on one
// restarted at the start of a file already that long (as the store's
// RESTART reset leaves it), where the fsync need not commit the file's
// new size too.
//
//	go test ./activity -run '^$' -bench DurableCommitFloor -benchtime 2000x
func BenchmarkDurableCommitFloor(b *testing.B) {
	for _, overwrite := range []bool{false, true} {
		name := "bare_one_row_commit/wal=growing"
		if overwrite {
			name = "bare_one_row_commit/wal=restarted"
		}
		b.Run(name, func(b *testing.B) { benchBareCommit(b, overwrite) })
	}
	firsts := []struct {
		name  string
		write func(s *activity.Store, run activity.RunID, args []byte, i int64) error
	}{
		{"gateway_first_commit", func(s *activity.Store, run activity.RunID, args []byte, i int64) error {
			_, err := gatewayFirstWrite(s, run, args, i)
			return err
		}},
		// The same records with no projection row: the least this commit
		// could cost were the tables written later (the promise alone).
		{"log_only_first_commit", func(s *activity.Store, run activity.RunID, args []byte, i int64) error {
			_, err := logOnlyFirstWrite(s, run, args, i)
			return err
		}},
	}
	for _, f := range firsts {
		b.Run(f.name, func(b *testing.B) {
			path := activitytest.SQLite.DB(b)
			s, err := activity.Open(ctx, path, activity.Options{KeyDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			run := startBenchRun(b, s)
			args := []byte(`{"service":"api","version":"1.2.3"}`)
			frames := walFrames(b, path+"-wal")
			b.ResetTimer()
			for i := range b.N {
				if err := f.write(s, run, args, int64(i)); err != nil {
					b.Fatal(err)
				}
				frames.commit()
			}
			frames.report()
		})
	}
}

// benchBareCommit is one one-row durable commit, on a growing log or on
// one restarted over a file already written (overwrite).
func benchBareCommit(b *testing.B, overwrite bool) {
	path := filepath.Join(b.TempDir(), "floor.db")
	dsn := "file:" + path +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=wal_autocheckpoint(0)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t(seq INTEGER PRIMARY KEY, v BLOB NOT NULL) STRICT`); err != nil {
		b.Fatal(err)
	}
	v := make([]byte, 400) // about one canonical call record
	insert := func(i int) {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO t(seq, v) VALUES(?, ?)`, i, v); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if overwrite {
		// Grow the file past what the run writes, then restart the log.
		for i := range 2*b.N + 100 {
			insert(-1 - i)
		}
		if _, err := db.Exec(`PRAGMA wal_checkpoint(RESTART)`); err != nil {
			b.Fatal(err)
		}
	}
	frames := walFrames(b, path+"-wal")
	b.ResetTimer()
	for i := range b.N {
		insert(i)
		frames.commit()
	}
	frames.report()
}

// walCounter counts the frames commits add to a WAL. The store restarts
// its log now and then (past 32 MiB) at the start of the same file, so
// the file's size says nothing: the counter reads the frame headers past
// the last one it saw, and a log restarted (a new salt in the WAL header)
// is counted again from its first frame.
type walCounter struct {
	b       *testing.B
	path    string
	salt    [8]byte
	next    int64 // offset of the next frame to read
	frames  int64
	commits int
}

func walFrames(b *testing.B, path string) *walCounter {
	c := &walCounter{b: b, path: path}
	c.count()
	c.frames = 0
	return c
}

// count adds the frames written since the last count.
func (c *walCounter) count() {
	f, err := os.Open(c.path)
	if err != nil {
		return // not created yet
	}
	defer f.Close()
	var hdr [32]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return
	}
	page := int64(binary.BigEndian.Uint32(hdr[8:]))
	if [8]byte(hdr[16:24]) != c.salt {
		c.salt, c.next = [8]byte(hdr[16:24]), 32
	}
	var fh [24]byte
	for {
		if _, err := f.ReadAt(fh[:], c.next); err != nil || [8]byte(fh[8:16]) != c.salt {
			return // the end of this log; past it, an older log's frames
		}
		c.frames++
		c.next += 24 + page
	}
}

func (c *walCounter) commit() {
	c.b.StopTimer()
	c.count()
	c.commits++
	c.b.StartTimer()
}

// report gives frames (pages) per commit.
func (c *walCounter) report() {
	if c.commits > 0 {
		c.b.ReportMetric(float64(c.frames)/float64(c.commits), "wal-pages/commit")
	}
}

// BenchmarkPartialIndexWhere sets the two spellings of
// executions_one_unresolved's states side by side: the IN list of schema
// 17 and the OR terms of schema 18. SQLite builds and drops an ephemeral
// table for the IN list on every row it checks against the index, and
// an execution's row is checked on each of its state changes. Each
// operation updates one row of a thousand, out of and back into the
// covered states, in one transaction (synchronous=OFF: the statement
// alone, no fsync).
//
//	go test ./activity -run '^$' -bench PartialIndexWhere -benchtime 20000x
func BenchmarkPartialIndexWhere(b *testing.B) {
	for _, bc := range []struct{ name, states string }{
		{"in_list_schema_17", `state IN ('accepted', 'authorized', 'dispatched', 'unknown', 'pending_verification')`},
		{"or_terms_schema_18", `(state = 'accepted' OR state = 'authorized' OR state = 'dispatched' OR state = 'unknown' OR state = 'pending_verification')`},
	} {
		b.Run(bc.name, func(b *testing.B) { benchPartialIndexUpdate(b, bc.states) })
	}
}

func benchPartialIndexUpdate(b *testing.B, states string) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "partial.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`CREATE TABLE executions(id TEXT PRIMARY KEY, fingerprint TEXT, actor TEXT NOT NULL, intent_scope TEXT NOT NULL,
			contract TEXT NOT NULL, state TEXT NOT NULL, source_id TEXT, updated_seq INTEGER NOT NULL) STRICT`,
		`CREATE UNIQUE INDEX executions_one_unresolved ON executions(fingerprint, actor, intent_scope)
			WHERE source_id IS NULL AND fingerprint IS NOT NULL AND contract <> 'read_only' AND ` + states,
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	const rows = 1000
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	for i := range rows {
		if _, err := tx.Exec(`INSERT INTO executions VALUES (?, ?, 'agent:bench', 'run', 'repeatable_with_key', 'dispatched', NULL, 0)`,
			fmt.Sprint(i), fmt.Sprintf("fp%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	update, err := tx.Prepare(`UPDATE executions SET state = ?, updated_seq = ? WHERE id = ?`)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		state := "succeeded"
		if i/rows%2 == 1 {
			state = "dispatched"
		}
		if _, err := update.Exec(state, i, fmt.Sprint(i%rows)); err != nil {
			b.Fatal(err)
		}
	}
}

// gatewayFirstWrite is the gateway's one durable write before dispatch,
// as the store benchmarks make it: match, call, accept, the vault check,
// authorized and dispatched. Fingerprints are HMACs, random as the
// gateway's are.
func gatewayFirstWrite(s *activity.Store, run activity.RunID, args []byte, i int64) (activity.Execution, error) {
	var e activity.Execution
	_, err := s.Write(ctx, func(w *activity.Tx) error {
		fp := fmt.Sprintf("%x", sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i))))
		if _, err := w.LatestMatch(fp, "agent:bench", "run"); err != nil {
			return err
		}
		c, err := w.RecordCall(activity.Call{Actor: "agent:bench", Method: "tools/call", Tool: "deploy_release", RunID: run,
			Arguments: args, Disposition: activity.DispositionNewExecution})
		if err != nil {
			return err
		}
		e, err = w.Accept(activity.Execution{Action: activity.Action{Actor: "agent:bench", Tool: "deploy_release", Channel: activity.ChannelHTTP,
			Target: "http://127.0.0.1:9400/v1/releases", Method: "POST", Arguments: args, IntentScope: "run"},
			Fingerprint: fp, RunID: run, CreatedByCall: c.ID, Contract: activity.ContractRepeatableWithKey})
		if err != nil {
			return err
		}
		if _, _, err := w.VaultLocked(); err != nil {
			return err
		}
		if e, err = w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateAuthorized}); err != nil {
			return err
		}
		e, err = w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateDispatched})
		return err
	})
	return e, err
}
