package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
	"github.com/mcpdup/mcpdup/activity/audit"
)

const benchRecords = 1_000_000

// benchLog returns a sealed log of about benchRecords records, built once
// through the real append path and kept in the temp directory between runs
// (building it takes about a minute).
func benchLog(b *testing.B) (path, keyDir, pub string) {
	b.Helper()
	path, keyDir = activitytest.Cached(b, fmt.Sprintf("verify-%d", benchRecords), func(ctx context.Context, s *activity.Store) error {
		return activitytest.Fill(ctx, s, benchRecords, 3000)
	})
	s, err := activity.Open(ctx, path, activity.Options{ReadOnly: true, KeyDir: keyDir})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pub, err = s.PublicKey()
	if err != nil {
		b.Fatal(err)
	}
	return path, keyDir, pub
}

// BenchmarkVerify times `audit verify` over a 1,000,000-record database
// and over its export, side by side:
//
//	go test ./activity/audit -run '^$' -bench Verify -benchtime 1x
//
// with -benchtime 3x for a steadier figure on a noisy machine.
func BenchmarkVerify(b *testing.B) {
	path, keyDir, pub := benchLog(b)
	s, err := activity.Open(ctx, path, activity.Options{ReadOnly: true, KeyDir: keyDir})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	exportPath := filepath.Join(filepath.Dir(path), "log.jsonl")
	if _, err := os.Stat(exportPath); err != nil {
		f, err := os.Create(exportPath)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := audit.Export(ctx, s, f); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	verifyDB := func(logOnly bool) func(b *testing.B) {
		return func(b *testing.B) {
			var records int64
			for range b.N {
				rep, err := audit.VerifyStore(ctx, s, audit.Options{Key: pub, KeyPinned: true, LogOnly: logOnly})
				if err != nil {
					b.Fatal(err)
				}
				if rep.Tampered {
					b.Fatalf("bench log reported tampered: %+v", rep.Problems[0])
				}
				records = rep.Records
			}
			b.ReportMetric(float64(records), "records")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/verify")
		}
	}
	// The log alone (what verify proved before the table check), then the
	// log and every table, side by side, after one untimed read that
	// brings the file into the page cache for both alike.
	if _, err := audit.VerifyStore(ctx, s, audit.Options{Key: pub, KeyPinned: true, LogOnly: true}); err != nil {
		b.Fatal(err)
	}
	b.Run("db-log-only", verifyDB(true))
	b.Run("db", verifyDB(false))
	// The console's check: a follower's first advance reads the whole log
	// as VerifyStore does (every stored checkpoint fed first).
	b.Run("follower-first-advance-log-only", func(b *testing.B) {
		var records int64
		for range b.N {
			f, err := audit.NewFollower(s, audit.Options{Key: pub, KeyPinned: true, LogOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			rep, err := f.Advance(ctx)
			if err != nil || rep.Tampered {
				b.Fatalf("follower: %v %+v", err, rep)
			}
			records = rep.Records
		}
		b.ReportMetric(float64(records), "records")
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/verify")
	})
	b.Run("export", func(b *testing.B) {
		var records int64
		for range b.N {
			rep, err := audit.VerifyExportFile(exportPath, audit.Options{Key: pub, KeyPinned: true})
			if err != nil {
				b.Fatal(err)
			}
			if rep.Tampered {
				b.Fatalf("bench export reported tampered: %+v", rep.Problems[0])
			}
			records = rep.Records
		}
		b.ReportMetric(float64(records), "records")
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/verify")
	})
}
