package activity

import (
	"testing"
	"time"
)

// TestParseStoreTimeAgreesWithTimeParse holds the fast path to
// time.Parse: the same time for every string in the store's shape, and a
// refusal (left to time.Parse, which names the fault) for any other.
func TestParseStoreTimeAgreesWithTimeParse(t *testing.T) {
	for _, s := range []string{
		"2026-11-30T00:00:00.100000000Z", "1970-01-01T00:00:00.000000000Z", "0001-01-01T00:00:00.000000000Z",
		"2024-02-29T23:59:59.999999999Z", "9999-12-31T23:59:59.999999999Z",
		"2025-02-29T00:00:00.000000000Z", "2026-13-01T00:00:00.000000000Z", "2026-11-31T00:00:00.000000000Z",
		"2026-11-30T24:00:00.000000000Z", "2026-11-30T00:60:00.000000000Z", "2026-11-30T00:00:60.000000000Z",
		"2026-11-30T00:00:00.100000000+", "2026-11-30 00:00:00.100000000Z", "2026-11-30T00:00:00.1Z",
		"2026-11-30T00:00:00.10000000xZ", "-026-11-30T00:00:00.100000000Z", "2026-00-30T00:00:00.000000000Z",
		"2026-11-00T00:00:00.000000000Z", "",
	} {
		want, werr := time.Parse(TimeFormat, s)
		got, err := parseTime(s)
		if (err == nil) != (werr == nil) || err == nil && !got.Equal(want) || err == nil && got.Location() != want.Location() {
			t.Errorf("parseTime(%q) = %v, %v; time.Parse: %v, %v", s, got, err, want, werr)
		}
	}
}

func FuzzParseStoreTime(f *testing.F) {
	f.Add("2026-11-30T00:00:00.100000000Z")
	f.Fuzz(func(t *testing.T, s string) {
		want, werr := time.Parse(TimeFormat, s)
		if got, ok := parseStoreTime(s); ok && (werr != nil || !got.Equal(want)) {
			t.Fatalf("parseStoreTime(%q) = %v; time.Parse: %v, %v", s, got, want, werr)
		}
	})
}
