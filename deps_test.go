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
	for _, pkg := range []string{"./analyze", "./report", "./tui"} {
		for _, dep := range goList(t, "-deps", pkg) {
			for _, b := range banned {
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
}

// mayImport is, for each top-level part of the module, the parts it may
// import (besides itself): the flow producers → activity → analyze →
// report → tui → cmd, with nothing above a part imported by it. Tests may
// import more; this holds the shipped packages.
var mayImport = map[string][]string{
	"activity":    {"internal"},
	"internal":    {},
	"marker":      {},
	"gatewaylite": {"activity", "internal", "marker"},
	"importers":   {"activity", "internal"},
	"demo":        {"activity", "gatewaylite"},
	"analyze":     {"activity"},
	"report":      {"activity", "analyze", "internal"},
	"tui":         {"activity", "analyze", "report", "internal"},
	"fixtures":    {"activity"}, // its generator
	"cmd":         {"activity", "internal", "marker", "gatewaylite", "importers", "demo", "analyze", "report", "tui"},
}

// TestImportsFlowOneWay checks every package's own imports against
// mayImport.
func TestImportsFlowOneWay(t *testing.T) {
	part := func(pkg string) string {
		rest := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		first, _, _ := strings.Cut(rest, "/")
		return first
	}
	lines := goList(t, "-f", "{{.ImportPath}}={{join .Imports \",\"}}", "./...")
	seen := 0
	for _, line := range lines {
		pkg, imports, _ := strings.Cut(line, "=")
		from := part(pkg)
		if pkg == module || strings.HasSuffix(pkg, "test") || strings.Contains(pkg, "test/") {
			continue // the root holds no code; test helpers serve tests
		}
		allowed, ok := mayImport[from]
		if !ok {
			t.Errorf("%s: part %q has no rule in mayImport", pkg, from)
			continue
		}
		seen++
		for _, imp := range strings.Split(imports, ",") {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if to := part(imp); to != from && !slices.Contains(allowed, to) {
				t.Errorf("%s imports %s: %s may import only %v", pkg, imp, from, allowed)
			}
		}
	}
	if seen < len(mayImport) {
		t.Fatalf("checked %d packages: go list found too few", seen)
	}
}
