package mcpdup_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mcpdup/mcpdup"

// goList runs go list in the module root and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}

// TestShippedBinaryLinksNoTestScaffolding: mcpdup is product code all the
// way down; the demo runs on parts that are not test helpers.
func TestShippedBinaryLinksNoTestScaffolding(t *testing.T) {
	deps := goList(t, "-deps", "./cmd/mcpdup")
	for _, bad := range []string{"testing", "net/http/httptest", module + "/fixtures",
		module + "/activity/activitytest", module + "/gatewaylite/gatewaytest"} {
		if slices.Contains(deps, bad) {
			t.Errorf("./cmd/mcpdup links %s", bad)
		}
	}
}

// TestReadersImportNoProducer: the analysis and the console read the
// model; they link neither a producer (the gateway, the importers, the
// demo) nor what only producers need (the MCP SDK, SSH).
func TestReadersImportNoProducer(t *testing.T) {
	banned := []string{module + "/gatewaylite", module + "/importers", module + "/demo",
		"github.com/modelcontextprotocol/go-sdk", "golang.org/x/crypto/ssh"}
	for _, pkg := range []string{"./analyze"} {
		for _, dep := range goList(t, "-deps", pkg) {
			for _, b := range banned {
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
}
