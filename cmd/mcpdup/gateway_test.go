package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/demo/loopback"
	"github.com/mcpdup/mcpdup/internal/pgtest"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// buildBinary builds the real mcpdup binary once per test run; TestMain
// removes it.
func buildBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "mcpdup-bin-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "mcpdup")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

const gatewayToken = "binary-test-token-0123456789"

// startGateway runs `mcpdup gateway` on loopback with one tool,
// deploy_release, that reaches targetURL; its database and keys are in
// dir. It returns the MCP endpoint, the environment the other commands
// need to reach the same database, and the process (killed at cleanup).
func startGateway(t *testing.T, bin, dir, targetURL string, moreConfig ...string) (string, []string, *exec.Cmd) {
	t.Helper()
	return startGatewayOn(t, bin, dir, filepath.Join(dir, "gw.db"), targetURL, "", moreConfig...)
}

// startGatewayOn is startGateway on database db (a file or a URL), with
// top-level configuration keys top.
func startGatewayOn(t *testing.T, bin, dir, db, targetURL, top string, moreConfig ...string) (string, []string, *exec.Cmd) {
	t.Helper()
	cfg := filepath.Join(dir, "gateway.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen = "127.0.0.1:0"
`+top+`
[[actor]]
name = "agent:ci"
token_env = "MCPDUP_TOKEN_CI"
[[tool]]
name = "deploy_release"
url = "%s/v1/releases"
contract = "repeatable_with_key"
`, targetURL)+strings.Join(moreConfig, "\n")), 0o600)
	env := append(os.Environ(), "MCPDUP_DB="+db, "MCPDUP_KEY_DIR="+filepath.Join(dir, "keys"),
		"MCPDUP_TOKEN_CI="+gatewayToken, "USER=ops")
	cmd := exec.Command(bin, "gateway", "--config", cfg)
	cmd.Env = env
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	var endpoint string
	var said []string
	for lines.Scan() {
		said = append(said, lines.Text())
		if _, rest, ok := strings.Cut(lines.Text(), "listening on "); ok {
			endpoint = strings.Fields(rest)[0]
			break
		}
	}
	if endpoint == "" {
		cmd.Wait()
		t.Fatalf("the gateway never said where it listens (%v):\n%s", cmd.ProcessState, strings.Join(said, "\n"))
	}
	go func() {
		for lines.Scan() {
		}
	}()
	return endpoint, env, cmd
}

// TestGatewayBinary runs `mcpdup gateway` as a real process: a call
// through it, `mcpdup lock` while it runs, SIGTERM, and the sealed log
// verifies afterwards.
func TestGatewayBinary(t *testing.T) {
	bin := buildBinary(t)
	target := loopback.NewTarget()
	defer target.Close()
	dir := t.TempDir()
	endpoint, env, cmd := startGateway(t, bin, dir, target.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := loopback.Connect(ctx, endpoint, gatewayToken, loopback.ProtocolStateless)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"v": 1}})
	if err != nil || res.IsError {
		t.Fatalf("call through the binary: %v %+v", err, res)
	}
	// A second gateway on the same database is refused, naming the holder,
	// and touches nothing: the first one's executions stay its own.
	second := exec.Command(bin, "gateway", "--config", filepath.Join(dir, "gateway.toml"))
	second.Env = env
	secondOut, _ := second.CombinedOutput()
	if code := second.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(secondOut), fmt.Sprintf("process %d", cmd.Process.Pid)) {
		t.Fatalf("second gateway: exit %d (want 2), output:\n%s", code, secondOut)
	}
	run := func(args ...string) string {
		c := exec.Command(bin, args...)
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("mcpdup %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("lock", "--reason", "test")
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "deploy_release", Arguments: map[string]any{"v": 2}})
	if err != nil || !res.IsError {
		t.Fatalf("a locked vault must refuse: %v %+v", err, res)
	}
	run("unlock", "--reason", "test over")
	cs.Close()

	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("gateway exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("gateway did not stop on SIGTERM")
	}
	out := run("audit", "verify")
	if !strings.Contains(out, "result: OK") || !strings.Contains(out, "every record is covered by a verified checkpoint") {
		t.Fatalf("after a clean shutdown the log must verify and be sealed:\n%s", out)
	}
	s, err := activity.Open(context.Background(), filepath.Join(dir, "gw.db"), activity.Options{ReadOnly: true, KeyDir: filepath.Join(dir, "keys")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The unlock, an operator's decision, was sealed at once; the
	// shutdown seals whatever came after it.
	cps, _ := s.Checkpoints(context.Background())
	size, _ := s.LogSize(context.Background())
	if len(cps) == 0 || cps[len(cps)-1].Size != size {
		t.Fatalf("the log is not sealed to its end (%d records): %+v", size, cps)
	}
	if target.Total() != 1 {
		t.Fatalf("target acted %d times", target.Total())
	}
}
