package gatewaylite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpdup/mcpdup/activity"
)

// lookup asks a recoverable_by_lookup tool's status endpoint what became
// of an execution whose outcome is unknown, and records what it learned
// and how. 200: the target acted, and its answer becomes the result.
// Anything else but 404 leaves the outcome unknown.
//
// A 404, like an SSH host with no marker, means the target has no trace
// of it yet — not that it never will: the first send may still be on its
// way or queued. So it is not recorded as "never acted" (a retry would
// then start a second execution under a new key). When an agent is
// waiting (send != nil) it is sent again under the same execution id:
// the same Idempotency-Key for HTTP, which lets the target fold a late
// first send into it; the host's helper refuses to start one id twice.
func (g *Gateway) lookup(ctx context.Context, spec *toolSpec, exec activity.Execution, send map[string]any) activity.Execution {
	var out Outcome
	switch {
	case exec.State != activity.StateUnknown:
		return exec
	case spec.ssh != nil && spec.contract == activity.ContractRecoverableByLookup:
		out = spec.ssh.lookup(ctx, exec.ID)
	case spec.http != nil && spec.statusURL != "":
		out = spec.http.lookup(ctx, spec.statusURL, exec.ID)
	default:
		return exec
	}
	out = spec.withoutEchoes(out, send)
	if send == nil {
		// A recovery's lookup (another replica's execution, or one a
		// restart left) has no sent values to look for: the secrets are
		// known by their keyed hashes in the execution's arguments, and a
		// word of the result whose hash is one of them is cut.
		out = g.withoutHashedSecrets(out, exec.Arguments)
	}
	if out.NeverStarted && send != nil {
		g.lookups.Delete(exec.ID)
		return g.resend(ctx, spec, exec, send, "recovered by lookup: "+out.Reason+"; sent again under the same execution id")
	}
	if out.State == activity.StateUnknown {
		g.log.Info("status lookup inconclusive", "execution", exec.ID, "reason", out.Reason)
		g.lookups.Store(exec.ID, out)
		return exec
	}
	g.lookups.Delete(exec.ID)
	return g.recordOutcome(ctx, exec, out, "recovered by lookup: ")
}

func (h *httpTarget) lookup(ctx context.Context, tmpl string, id activity.ExecutionID) Outcome {
	target := strings.ReplaceAll(tmpl, "{execution_id}", url.PathEscape(string(id)))
	ctx, cancel := context.WithTimeout(ctx, h.tool.Timeout.Duration)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return Outcome{State: activity.StateUnknown, Reason: "build status request: " + err.Error()}
	}
	req.Header.Set("User-Agent", "mcpdup-gateway")
	if h.credHeader != "" {
		req.Header.Set(h.credHeader, h.credValue)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return Outcome{State: activity.StateUnknown, Reason: "status endpoint unreachable: " + scrub(err)}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxResultBytes))
	switch {
	case resp.StatusCode == http.StatusOK:
		return Outcome{State: activity.StateSucceeded, Status: activity.Some(resp.StatusCode), Result: httpResult(resp, data),
			Reason: "the status endpoint reports the action took effect"}
	case resp.StatusCode == http.StatusNotFound:
		return Outcome{State: activity.StateUnknown, NeverStarted: true,
			Reason: "the status endpoint has no record of it (404): the target has not acted"}
	}
	return Outcome{State: activity.StateUnknown, Reason: fmt.Sprintf("status endpoint answered %d", resp.StatusCode)}
}
