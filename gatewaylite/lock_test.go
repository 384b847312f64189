package gatewaylite_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/gatewaylite"
)

// A second gateway on a database another one serves is refused before it
// recovers anything, and names the holder; once the first closes, the
// database is free again.
func TestSecondGatewayOnSameDatabaseIsRefused(t *testing.T) {
	h := newHarness(t, "")
	cs := h.connect("2026-07-28", false)
	mustCall(t, cs, "deploy_release", map[string]any{"service": "api", "version": "1"}, nil)
	cfg, err := gatewaylite.ParseConfig([]byte(testConfig(h.target.URL, h.proxy.URL, "")))
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(h.dir, "keys")
	second, err := activity.Open(ctx, filepath.Join(h.dir, "gw.db"), activity.Options{KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	before, _ := second.LogSize(ctx)
	_, err = gatewaylite.New(ctx, cfg, second, gatewaylite.Options{KeyDir: keys})
	var locked *gatewaylite.LockedError
	if !errors.As(err, &locked) || locked.PID != os.Getpid() || locked.ExitCode() != 2 {
		t.Fatalf("second gateway: %v (want a LockedError naming pid %d)", err, os.Getpid())
	}
	if after, _ := second.LogSize(ctx); after != before {
		t.Fatalf("the refused gateway wrote %d records", after-before)
	}
	h.gw.Close()
	gw, err := gatewaylite.New(ctx, cfg, second, gatewaylite.Options{KeyDir: keys})
	if err != nil {
		t.Fatalf("after the first gateway closed: %v", err)
	}
	gw.Close()
}
