package analyze

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/activitytest"
)

// Check, folding by effect, must count exactly what the Checker counts
// over the history in log order, on a log with every kind of outcome.
func TestCheckAgreesWithTheLogOrderChecker(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := activity.Open(ctx, filepath.Join(dir, "h.db"), activity.Options{KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := activitytest.Incident(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := activitytest.FillMixed(ctx, s, 3000, 200, 7); err != nil {
		t.Fatal(err)
	}
	want, err := checkInLogOrder(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Check(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	want.Duplicates, got.Duplicates = nil, nil // the Checker does not read targets
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("by effect: %+v\nin log order: %+v", got, want)
	}
	if got.Invocations < 400 || got.Info == 0 || got.Recovered == 0 || got.Duplicated == 0 {
		t.Fatalf("the log lacks variety: %+v", got)
	}
}
