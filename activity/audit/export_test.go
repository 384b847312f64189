package audit_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/activity/audit"
	"golang.org/x/mod/sumdb/tlog"
)

func (smp sample) export(t *testing.T) []byte {
	t.Helper()
	s, err := activity.Open(ctx, smp.path, activity.Options{ReadOnly: true, KeyDir: smp.keyDir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var buf bytes.Buffer
	sum, err := audit.Export(ctx, s, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != smp.size(t) || sum.Bytes != int64(buf.Len()) {
		t.Fatalf("export summary %+v for %d bytes", sum, buf.Len())
	}
	return buf.Bytes()
}

func verifyExport(t *testing.T, data []byte, pub string) *audit.Report {
	t.Helper()
	rep, err := audit.VerifyExport(bytes.NewReader(data), "export.jsonl", audit.Options{Key: pub, KeyPinned: true})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func lines(data []byte) []string { return strings.SplitAfter(string(data), "\n") }

func TestExportVerifiesWithoutDatabase(t *testing.T) {
	smp := newSample(t, 0)
	data := smp.export(t)
	if bytes.Contains(data, []byte("PRIVATE+KEY")) {
		t.Fatal("export contains a private key")
	}
	rep := verifyExport(t, data, smp.pub)
	wantClean(t, rep)
	if rep.Records != smp.size(t) || rep.Unsealed != 0 {
		t.Fatalf("export report: %d records, %d unsealed", rep.Records, rep.Unsealed)
	}
	// The records are the database's bytes, verbatim.
	db := smp.open(t)
	defer db.Close()
	var first []byte
	db.QueryRow(`SELECT canonical FROM audit_log WHERE seq = 0`).Scan(&first)
	if lines(data)[1] != string(first)+"\n" {
		t.Fatalf("line 2 is not record 0 verbatim:\n%s\n%s", lines(data)[1], first)
	}
}

func TestExportTamperMatrix(t *testing.T) {
	smp := newSample(t, 0)
	data := smp.export(t)
	ls := lines(data)
	recordLine := 6 // 0-based index into ls: record 5
	if !strings.HasPrefix(ls[recordLine], `{"v":1,"seq":5,`) {
		t.Fatalf("line %d is not record 5: %s", recordLine+1, ls[recordLine])
	}
	edit := func(f func([]string) []string) []byte {
		cp := append([]string(nil), ls...)
		return []byte(strings.Join(f(cp), ""))
	}
	cases := []struct {
		name  string
		data  []byte
		check string
		code  string
	}{
		{"one byte changed", edit(func(l []string) []string {
			b := []byte(l[recordLine])
			b[len(b)/2] ^= 0x01
			l[recordLine] = string(b)
			return l
		}), audit.CheckChain, "chain_break"},
		{"line removed", edit(func(l []string) []string { return append(l[:recordLine], l[recordLine+1:]...) }), audit.CheckSeq, "gap"},
		{"lines reordered", edit(func(l []string) []string {
			l[recordLine], l[recordLine+1] = l[recordLine+1], l[recordLine]
			return l
		}), audit.CheckSeq, "reordered"},
		{"CRLF", edit(func(l []string) []string {
			l[recordLine] = strings.TrimSuffix(l[recordLine], "\n") + "\r\n"
			return l
		}), audit.CheckSeq, "malformed_record"},
		{"reformatted JSON", edit(func(l []string) []string {
			l[recordLine] = strings.Replace(l[recordLine], `","kind":"`, `", "kind":"`, 1)
			return l
		}), audit.CheckChain, "chain_break"},
		{"last record removed", edit(func(l []string) []string {
			// Drop the final record line, keep the final checkpoint line.
			n := len(l) - 2 // l ends with "" after the last "\n"
			for !strings.HasPrefix(l[n], `{"v":1`) {
				n--
			}
			return append(l[:n], l[n+1:]...)
		}), audit.CheckTruncation, "truncated"},
		{"record appended after the checkpoint", edit(func(l []string) []string {
			return append(l[:len(l)-1], l[recordLine], "")
		}), audit.CheckSeq, "duplicate_seq"},
		{"file cut mid-line", edit(func(l []string) []string {
			l[len(l)-2] = l[len(l)-2][:10]
			return l
		}), audit.CheckTruncation, "cut"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := verifyExport(t, c.data, smp.pub)
			wantProblem(t, rep, c.check, c.code, -1)
		})
	}
	// Every single-byte change of a record line is caught.
	for i := 0; i < len(ls[recordLine])-1; i += 7 {
		b := []byte(ls[recordLine])
		b[i] ^= 0x20
		cp := append([]string(nil), ls...)
		cp[recordLine] = string(b)
		if rep := verifyExport(t, []byte(strings.Join(cp, "")), smp.pub); !rep.Tampered {
			t.Fatalf("byte %d of record 5 changed (%q), not detected", i, b[i])
		}
	}
}

func TestExportHeaderIsRequired(t *testing.T) {
	smp := newSample(t, 0)
	data := smp.export(t)
	for name, bad := range map[string][]byte{
		"BOM":       append([]byte("\ufeff"), data...),
		"no header": []byte(strings.Join(lines(data)[1:], "")),
		"empty":     nil,
	} {
		if _, err := audit.VerifyExport(bytes.NewReader(bad), "x.jsonl", audit.Options{Key: smp.pub}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCleanLogsNeverAlarm builds logs of many shapes (sizes around powers
// of two, checkpoint cadences, unsealed tails) and checks that neither the
// database nor its export raises an alarm.
func TestCleanLogsNeverAlarm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 12 {
		dir := t.TempDir()
		every := int64(1 + rng.IntN(40))
		s, err := activity.Open(ctx, filepath.Join(dir, "p.db"), activity.Options{KeyDir: filepath.Join(dir, "k"), Seal: activity.SealPolicy{EveryRecords: every}})
		if err != nil {
			t.Fatal(err)
		}
		n := rng.IntN(140)
		if err := activitytest.Fill(ctx, s, n, 1+rng.IntN(20)); err != nil {
			t.Fatal(err)
		}
		pub, _ := s.PublicKey()
		if rng.IntN(2) == 0 {
			s.Close() // seals the tail
			s, err = activity.Open(ctx, filepath.Join(dir, "p.db"), activity.Options{ReadOnly: true, KeyDir: filepath.Join(dir, "k")})
			if err != nil {
				t.Fatal(err)
			}
		}
		rep, err := audit.VerifyStore(ctx, s, audit.Options{Key: pub, KeyPinned: true})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := audit.Export(ctx, s, &buf); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if rep.Tampered {
			t.Fatalf("shape %d (n=%d every=%d): %+v", i, n, every, rep.Problems)
		}
		if rep := verifyExport(t, buf.Bytes(), pub); rep.Tampered {
			t.Fatalf("shape %d export: %+v", i, rep.Problems)
		}
	}
}

// TestWriterKilledMidAppend kills a real writer process with SIGKILL while
// it appends, then checks the log verifies clean and can be appended to.
func TestWriterKilledMidAppend(t *testing.T) {
	if os.Getenv("MCPDUP_TEST_WRITER_DB") != "" {
		t.Skip("helper process")
	}
	dir := t.TempDir()
	path, keys := filepath.Join(dir, "k.db"), filepath.Join(dir, "keys")
	s, err := activity.Open(ctx, path, activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := s.PublicKey()
	s.Close()

	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$")
		cmd.Env = append(os.Environ(), "MCPDUP_TEST_WRITER_DB="+path, "MCPDUP_TEST_WRITER_KEYS="+keys)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Let it write for a while, then kill it without warning.
		deadline := time.Now().Add(20 * time.Second)
		for {
			n := sizeOf(t, path)
			if n > int64(60*(round+1)) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		r, err := activity.Open(ctx, path, activity.Options{ReadOnly: true, KeyDir: keys})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := audit.VerifyStore(ctx, r, audit.Options{Key: pub, KeyPinned: true})
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if rep.Tampered || rep.Records == 0 {
			t.Fatalf("round %d: after SIGKILL: %d records, problems %+v", round, rep.Records, rep.Problems)
		}
		t.Logf("round %d: %d records, %d unsealed after SIGKILL", round, rep.Records, rep.Unsealed)
	}
}

func sizeOf(t *testing.T, path string) int64 {
	s, err := activity.Open(ctx, path, activity.Options{ReadOnly: true, KeyDir: t.TempDir()})
	if err != nil {
		return 0
	}
	defer s.Close()
	n, _ := s.LogSize(ctx)
	return n
}

// TestHelperWriter is the process TestWriterKilledMidAppend kills.
func TestHelperWriter(t *testing.T) {
	path := os.Getenv("MCPDUP_TEST_WRITER_DB")
	if path == "" {
		t.Skip("run by TestWriterKilledMidAppend")
	}
	s, err := activity.Open(ctx, path, activity.Options{KeyDir: os.Getenv("MCPDUP_TEST_WRITER_KEYS"), Seal: activity.SealPolicy{EveryRecords: 25}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	for {
		if err := activitytest.Fill(ctx, s, 6, 6); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	}
}

// TestExportsUnderLoad: exports taken while a writer appends and seals all
// the time are consistent snapshots: every one of them verifies.
func TestExportsUnderLoad(t *testing.T) {
	dir := t.TempDir()
	s, err := activity.Open(ctx, filepath.Join(dir, "busy.db"), activity.Options{KeyDir: filepath.Join(dir, "keys"),
		Seal: activity.SealPolicy{EveryRecords: 25}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pub, _ := s.PublicKey()
	stop := activitytest.Busy(ctx, s)
	ok := 0
	for i := range 100 {
		var buf bytes.Buffer
		sum, err := audit.Export(ctx, s, &buf)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := audit.VerifyExport(&buf, fmt.Sprintf("export %d", i), audit.Options{Key: pub, KeyPinned: true})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Tampered || rep.Records != sum.Records {
			t.Errorf("export %d (%d records): %s %+v", i, sum.Records, rep.Result, rep.Problems)
			continue
		}
		ok++
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of 100 exports taken under load verify", ok)
}

// TestExportWithARecordForgedAtItsEnd: a record chained onto the export's
// last one (no key needed for that) is caught by the header's count, and
// the check says records were added, not removed.
func TestExportWithARecordForgedAtItsEnd(t *testing.T) {
	smp := newSample(t, 0)
	data := smp.export(t)
	ls := lines(data)
	last := ""
	for _, l := range ls {
		if strings.HasPrefix(l, `{"v":1,`) {
			last = strings.TrimSuffix(l, "\n")
		}
	}
	seq, _, err := activity.ParseHead([]byte(last))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := activity.EncodeRecord(seq+1, tlog.RecordHash([]byte(last)), time.Now(), activity.KindResolution,
		map[string]any{"execution_id": "act_forged", "outcome": "verified", "operator": "mallory"})
	if err != nil {
		t.Fatal(err)
	}
	rep := verifyExport(t, append(append([]byte(nil), data...), append(forged.Bytes, '\n')...), smp.pub)
	wantProblem(t, rep, audit.CheckTruncation, "appended", -1)
	for _, c := range rep.Checks {
		if c.Name == audit.CheckTruncation && (!strings.Contains(c.Detail, "added") || strings.Contains(c.Detail, "removed")) {
			t.Errorf("the check says %q, want records added", c.Detail)
		}
	}
}
