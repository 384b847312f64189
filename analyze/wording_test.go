package analyze

import (
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
)

func TestWeakRunsTextNamesAKindOnce(t *testing.T) {
	same := weakRunsText(activity.RunIdentification("mcp_session"), activity.RunIdentification("mcp_session"))
	if strings.Count(same, "mcp_session") != 1 {
		t.Fatalf("%q names mcp_session twice", same)
	}
	if two := weakRunsText("mcp_session", "token_idle"); !strings.Contains(two, "mcp_session and token_idle") {
		t.Fatalf("%q", two)
	}
}
