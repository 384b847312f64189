package activity_test

import (
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
)

// BenchmarkCommitPages counts the WAL pages a gateway call's commits
// write, by the b-tree each page belongs to (dbstat), at one call per
// commit as a lone client makes them: the call, accept, authorized and
// dispatched of call N share a commit with the outcome and delivery of
// call N-1. SQLite writes every page a commit dirtied as a frame of its
// own (two pwrites and a checksum each), so each b-tree a call touches
// costs about a page per commit whatever it writes there: this is the
// figure fewer projection tables and indexes on the gateway's path would
// cut. It reports wal-pages/call and logs the pages of each b-tree.
//
//	go test ./activity -run '^$' -bench CommitPages -benchtime 200x -v
func BenchmarkCommitPages(b *testing.B) {
	t := b
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	s, err := activity.Open(ctx, path, activity.Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var run activity.Run
	s.Write(ctx, func(w *activity.Tx) error {
		run, err = w.StartRun(activity.Run{Actor: "agent:bench", IdentifiedBy: activity.RunByToken})
		return err
	})
	args := []byte(`{"service":"api","version":"1.2.3"}`)
	var prevOut <-chan error
	call := func(i int) {
		e, err := gatewayFirstWrite(s, run.ID, args, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		if prevOut != nil {
			<-prevOut
		}
		id := e.ID
		prevOut = s.WriteAsync(ctx, func(w *activity.Tx) error {
			ref, err := w.PutResult([]byte(fmt.Sprintf(`{"content":[{"type":"text","text":"ok %d"}]}`, i)))
			if err != nil {
				return err
			}
			if _, err = w.Transition(activity.Transition{ExecutionID: id, To: activity.StateSucceeded, TargetStatus: activity.Some(201), ResultRef: ref}); err != nil {
				return err
			}
			_, err = w.Transition(activity.Transition{ExecutionID: id, To: activity.StateDelivered})
			return err
		})
	}
	// A store of some size first: b-trees of one page would share it.
	for i := 0; i < 3000; i++ {
		call(i)
	}
	<-prevOut
	prevOut = nil
	db, _ := sql.Open("sqlite", "file:"+path)
	defer db.Close()
	if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	N := b.N
	b.ResetTimer()
	for i := 0; i < N; i++ {
		call(1_000_000 + i)
	}
	<-prevOut
	b.StopTimer()
	wal, _ := os.ReadFile(path + "-wal")
	names := map[int64]string{}
	rows, err := db.Query("SELECT name, pageno, pagetype FROM dbstat")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n, pt string
		var p int64
		rows.Scan(&n, &p, &pt)
		names[p] = n + "/" + pt
	}
	rows.Close()
	count := map[string]int{}
	frames, commits := 0, 0
	for off := 32; off+24+4096 <= len(wal); off += 24 + 4096 {
		pg := int64(binary.BigEndian.Uint32(wal[off:]))
		if binary.BigEndian.Uint32(wal[off+4:]) != 0 {
			commits++
		}
		n := names[pg]
		if n == "" {
			n = fmt.Sprintf("free/%d", pg)
			if pg == 1 {
				n = "page1"
			}
		}
		count[n]++
		frames++
	}
	type kv struct {
		k string
		v int
	}
	var l []kv
	for k, v := range count {
		l = append(l, kv{k, v})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v })
	b.ReportMetric(float64(frames)/float64(N), "wal-pages/call")
	b.ReportMetric(float64(commits)/float64(N), "commits/call")
	for _, e := range l {
		if N < 50 {
			break // the benchmark's first, one-call run: too few to tell
		}
		t.Logf("%6.2f pages/call  %s", float64(e.v)/float64(N), e.k)
	}
}
