package importers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpdup/mcpdup/activity"
	"github.com/mcpdup/mcpdup/activity/canon"
)

func init() {
	formats["sallyport"] = func(string) decoder { return &sallyport{} }
}

// spEvent is one row of a Sallyport activity export (the Activity
// screen's "Export": sorted keys, every field present, empty or 0 when
// unset; prev_hash and this_hash mirrored from the sealed journal).
type spEvent struct {
	Seq         *int64 `json:"seq"`
	TS          string `json:"ts"`
	Identity    string `json:"identity"`
	Session     string `json:"session"`
	Channel     string `json:"channel"`
	Tool        string `json:"tool"`
	Target      string `json:"target"`
	ArgsPreview string `json:"args_preview"`
	Decision    string `json:"decision"`
	Rule        string `json:"rule"`
	IsError     bool   `json:"is_error"`
	DurationMS  int64  `json:"duration_ms"`
	Origin      struct {
		Name     string `json:"name"`
		Path     string `json:"path"`
		App      string `json:"app"`
		PID      int64  `json:"pid"`
		Signed   bool   `json:"signed"`
		SignedBy string `json:"signedBy"`
		Chain    string `json:"chain"`
	} `json:"origin"`
	PrevHash string `json:"prev_hash"`
	ThisHash string `json:"this_hash"`
}

// sallyport imports a Sallyport activity export. Sallyport writes an
// intent row ("<decision>.start") before each side effect and a result
// row after it, but nothing links the two: they are paired here by
// session, tool and args_preview, oldest open intent first. A session is
// one live process (pid, start time, code signature): it becomes a run.
type sallyport struct {
	runs    map[string]activity.RunID
	open    map[string][]spOpen // pairing key → intents without a result, oldest first
	order   []string            // pairing keys in the order their intents opened
	prev    string              // this_hash of the previous row
	prevSeq int64
	line    int64
	paired  int64
	orphans int64 // result rows without an intent row
	// gaps: rows whose prev_hash does not link (--skip-bad imports them);
	// firstGap is the first one's line.
	gaps, firstGap int64
	dangle         int64 // intent rows without a result row
}

type spOpen struct {
	id   activity.ExecutionID
	line int64
}

func (d *sallyport) note() string {
	return fmt.Sprintf("sallyport activity export: intent and result rows paired by session + tool + args_preview, each result with the newest open intent "+
		"(Sallyport does not link them): %d paired, %d intents without a result (outcome unknown), %d results without an intent. "+
		"Not recorded: delivery to the agent, idempotency keys, target status codes, full arguments (args_preview is bounded, and its secrets redacted: "+
		"two actions with one preview are taken for one effect). prev_hash/this_hash links checked for continuity; "+
		"the hashes themselves cannot be re-verified from an export (the sealed rows are not in it). "+
		"Contracts are not recorded: GET/HEAD/OPTIONS previews are taken as read_only, everything else as blocked_after_unknown.",
		d.paired, d.dangle, d.orphans) + d.gapNote()
}

// gapNote says where the chain breaks, if it does (--skip-bad).
func (d *sallyport) gapNote() string {
	if d.gaps == 0 {
		return ""
	}
	return fmt.Sprintf(" The hash chain breaks %d times, first before line %d: rows are missing or reordered there (Sallyport's feed keeps its newest rows only), so an intent or a result of the rows around it may be missing: their suspects are incomplete.", d.gaps, d.firstGap)
}

func (d *sallyport) decode(ctx context.Context, in *lines, k *sink) error {
	d.runs, d.open = map[string]activity.RunID{}, map[string][]spOpen{}
	err := eachLine(ctx, in, k, func(n int64, line []byte) error {
		d.line = n
		if notJSON(line) {
			k.noise(n)
			return nil
		}
		var ev spEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			d.prev = "" // the next row's link cannot be checked against this one
			return k.bad(n, "", fmt.Errorf("not a JSON object: %w", err))
		}
		// Sallyport bounds its previews but says they may still hold
		// secrets (docs/06-audit.md): redacted as any imported text is.
		ev.ArgsPreview = activity.RedactText(ev.ArgsPreview)
		at, field, err := d.check(&ev)
		var gap *brokenLink
		if errors.As(err, &gap) && k.skip {
			// --skip-bad: the row is whole, the rows before it are not
			// all there. It is imported (the later row may be the second
			// send of a suspect), and the gap is in the note.
			if d.gaps++; d.firstGap == 0 {
				d.firstGap = n
			}
			at, field, err = d.fields(&ev)
		}
		if err != nil {
			return k.bad(n, field, err)
		}
		if err := d.row(k, &ev, at); err != nil {
			return err
		}
		k.count()
		return nil
	})
	if err != nil {
		return err
	}
	if k.seen == 0 && k.rep.Noise > 0 && k.rep.Skipped == 0 {
		return fmt.Errorf("%s: none of its %d lines is a Sallyport activity row (JSON Lines of its activity export)", k.file, k.rep.Noise)
	}
	// Intents that never got a result: the action may have run. Unknown is
	// the importer's inference from a missing row, not something the
	// journal shows: implied.
	for _, key := range d.order {
		for _, o := range d.open[key] {
			d.dangle++
			if _, err := k.w.Transition(activity.Transition{ExecutionID: o.id, To: activity.StateUnknown, Implied: true,
				Reason: "intent row with no result row: the action may have run (Sallyport writes the result row after the side effect)"}); err != nil {
				return k.fail(o.line, err)
			}
		}
	}
	return nil
}

// check validates a row's link to the previous row and its required
// fields. The chain moves on to this row either way, so one bad row is
// one error, not one per row after it.
func (d *sallyport) check(ev *spEvent) (time.Time, string, error) {
	prev, prevSeq := d.prev, d.prevSeq
	d.prev = ev.ThisHash
	if ev.Seq != nil {
		d.prevSeq = *ev.Seq
	}
	if prev != "" && ev.PrevHash != prev {
		return time.Time{}, "prev_hash", &brokenLink{prevSeq}
	}
	return d.fields(ev)
}

// brokenLink: a row's prev_hash is not the previous row's this_hash.
type brokenLink struct{ prevSeq int64 }

func (b *brokenLink) Error() string {
	return fmt.Sprintf("does not link to the previous row's this_hash (seq %d): rows were removed, reordered or edited", b.prevSeq)
}

// fields checks a row's required fields and reads its time.
func (d *sallyport) fields(ev *spEvent) (time.Time, string, error) {
	switch {
	case ev.Seq == nil:
		return time.Time{}, "seq", errors.New("missing")
	case ev.Channel == "":
		return time.Time{}, "channel", errors.New("missing")
	case ev.Tool == "":
		return time.Time{}, "tool", errors.New("missing")
	case ev.Decision == "" && ev.Channel != "session" && ev.Channel != "vault":
		return time.Time{}, "decision", errors.New("missing")
	}
	at, err := time.Parse(time.RFC3339Nano, ev.TS)
	if err != nil {
		return at, "ts", fmt.Errorf("%q is not an RFC 3339 time", ev.TS)
	}
	return at, "", nil
}

func (d *sallyport) row(k *sink, ev *spEvent, at time.Time) error {
	switch ev.Channel {
	case "vault":
		locked := ev.Tool == "vault.locked"
		if !locked && ev.Tool != "vault.unlocked" {
			return nil // quarantine and other vault rows say nothing about actions
		}
		if err := k.w.ImportVault(activity.VaultEvent{Locked: locked, Operator: "sallyport", Reason: firstOf(ev.ArgsPreview, ev.Rule), At: at,
			Source: d.at(k)}); err != nil {
			return k.fail(d.line, err)
		}
		return nil
	case "session":
		// Lifecycle rows name their session in target.
		if ev.Session == "" {
			ev.Session = ev.Target
		}
		run, err := d.run(k, ev, at)
		if err != nil {
			return err
		}
		if ev.Tool == "session.ended" || ev.Tool == "session.revoked" {
			if err := k.w.EndRun(run, at); err != nil {
				return k.fail(d.line, err)
			}
		}
		return nil // session.orphaned: the end time is not known
	}
	run, err := d.run(k, ev, at)
	if err != nil {
		return err
	}
	key := ev.Session + "\x00" + ev.Tool + "\x00" + ev.ArgsPreview
	if base, ok := strings.CutSuffix(ev.Decision, ".start"); ok {
		id, err := d.intent(k, ev, run, at, base)
		if err != nil {
			return err
		}
		if len(d.open[key]) == 0 {
			d.order = append(d.order, key)
		}
		d.open[key] = append(d.open[key], spOpen{id: id, line: d.line})
		return nil
	}
	if denied(ev.Decision) {
		return d.denial(k, ev, run, at)
	}
	// A result row belongs to the newest open intent of its key: within a
	// session an earlier one still open was abandoned (its outcome could
	// not be written: SALLYPORT_UNAVAILABLE), not answered late.
	if q := d.open[key]; len(q) > 0 {
		last := q[len(q)-1]
		d.open[key] = q[:len(q)-1]
		if len(d.open[key]) == 0 {
			delete(d.open, key)
			d.dropOrder(key)
		}
		d.paired++
		return d.result(k, ev, last.id, at)
	}
	// A result row with no intent: the journal started after the intent,
	// or a row that never had one (a credential request).
	d.orphans++
	id, err := d.newExecution(k, ev, run, at, false)
	if err != nil {
		return err
	}
	if _, err := k.w.Transition(activity.Transition{ExecutionID: id, To: activity.StateAuthorized, Reason: ev.Decision + " (" + ev.Rule + ")"}); err != nil {
		return k.fail(d.line, err)
	}
	if _, err := k.w.Transition(activity.Transition{ExecutionID: id, To: activity.StateDispatched}); err != nil {
		return k.fail(d.line, err)
	}
	return d.result(k, ev, id, at)
}

func (d *sallyport) dropOrder(key string) {
	for i, k := range d.order {
		if k == key {
			d.order = append(d.order[:i], d.order[i+1:]...)
			return
		}
	}
}

// run returns the run of a session, starting it at its first row. A row
// without a session (Sallyport could not identify the process) has none.
func (d *sallyport) run(k *sink, ev *spEvent, at time.Time) (activity.RunID, error) {
	if ev.Session == "" {
		k.notRecorded("session")
		return "", nil
	}
	if id, ok := d.runs[ev.Session]; ok {
		return id, nil
	}
	signed := "unsigned"
	if ev.Origin.Signed {
		signed = "signed by " + firstOf(ev.Origin.SignedBy, "an unnamed signer")
	}
	evidence := fmt.Sprintf("session %s: %s pid %d, %s", ev.Session, firstOf(ev.Origin.Name, "unknown process"), ev.Origin.PID, signed)
	if ev.Origin.Chain != "" {
		evidence += " (" + ev.Origin.Chain + ")"
	}
	r, err := k.run(activity.Run{Actor: firstOf(ev.Identity, "sallyport:"+ev.Session), IdentifiedBy: activity.RunByPeer,
		Evidence: evidence, StartedAt: at, Source: d.at(k)})
	if err != nil {
		return "", k.fail(d.line, err)
	}
	d.runs[ev.Session] = r.ID
	return r.ID, nil
}

// intent records an intent row: the call, its execution, authorized by
// the decision, and dispatched (Sallyport writes the intent immediately
// before the side effect, and denies the call if it cannot).
func (d *sallyport) intent(k *sink, ev *spEvent, run activity.RunID, at time.Time, decision string) (activity.ExecutionID, error) {
	id, err := d.newExecution(k, ev, run, at, true)
	if err != nil {
		return "", err
	}
	for _, t := range []activity.Transition{
		{ExecutionID: id, To: activity.StateAuthorized, At: activity.Some(at), Reason: decision + " (" + ev.Rule + ")"},
		{ExecutionID: id, To: activity.StateDispatched, At: activity.Some(at)},
	} {
		if _, err := k.w.Transition(t); err != nil {
			return "", k.fail(d.line, err)
		}
	}
	return id, nil
}

// result closes an execution with a result row.
func (d *sallyport) result(k *sink, ev *spEvent, id activity.ExecutionID, at time.Time) error {
	t := activity.Transition{ExecutionID: id, To: activity.StateSucceeded, At: activity.Some(at)}
	if ev.IsError {
		t.To = activity.StateUnknown
		t.Reason = "the result row says is_error; the journal does not say whether the target acted"
	}
	if _, err := k.w.Transition(t); err != nil {
		return k.fail(d.line, err)
	}
	return nil
}

// denial records a refused call: Sallyport writes no intent for it.
func (d *sallyport) denial(k *sink, ev *spEvent, run activity.RunID, at time.Time) error {
	id, err := d.newExecution(k, ev, run, at, true)
	if err != nil {
		return err
	}
	_, err = k.w.Transition(activity.Transition{ExecutionID: id, To: activity.StateRejected, At: activity.Some(at),
		Reason: ev.Decision + " (" + ev.Rule + ")"})
	if err != nil {
		return k.fail(d.line, err)
	}
	return nil
}

// newExecution records the call and its execution for a row.
func (d *sallyport) newExecution(k *sink, ev *spEvent, run activity.RunID, at time.Time, timed bool) (activity.ExecutionID, error) {
	args, err := canon.Transform(mustJSON(map[string]string{"args_preview": ev.ArgsPreview}))
	if err != nil {
		return "", k.fail(d.line, err)
	}
	accepted := activity.Some(at)
	if !timed {
		accepted = activity.Opt[time.Time]{}
	}
	id := activity.NewExecutionID(at)
	actor := firstOf(ev.Identity, "sallyport:"+ev.Session)
	c, err := k.call(activity.Call{RunID: run, Actor: actor, Method: "tools/call", Tool: ev.Tool, ReceivedAt: at,
		Arguments: args, Disposition: activity.DispositionNewExecution, ExecutionID: id, Source: d.at(k)})
	if err != nil {
		return "", k.fail(d.line, err)
	}
	nr := []activity.Fact{activity.FactDelivery, activity.FactIdempotencyKey, activity.FactFingerprint}
	if run == "" {
		nr = append(nr, activity.FactRunIdentity)
	}
	method := httpMethod(ev.ArgsPreview)
	contract := activity.ContractBlockedAfterUnknown
	if activity.SafeMethod(method) {
		contract = activity.ContractReadOnly
	}
	_, err = k.accept(activity.Execution{ID: id, Action: activity.Action{Actor: actor, Tool: ev.Tool, Channel: spChannel(ev.Channel),
		Target: ev.Target, Method: method, Arguments: args}, RunID: run, Contract: contract, CreatedByCall: c.ID,
		NotRecorded: nr, Times: activity.Times{Accepted: accepted}, Source: d.at(k)})
	if err != nil {
		return "", k.fail(d.line, err)
	}
	return id, nil
}

// at is the provenance of the current row: its line and its journal seq.
func (d *sallyport) at(k *sink) activity.Provenance {
	return k.atRecord(d.line, fmt.Sprintf("seq %d", d.prevSeq))
}

func denied(decision string) bool {
	return decision == "deny" || strings.HasPrefix(decision, "ask→") || strings.HasPrefix(decision, "ask->") || decision == "credential-declined"
}

func spChannel(c string) activity.Channel {
	switch c {
	case "ssh":
		return activity.ChannelSSH
	case "mcp":
		return activity.ChannelMCP
	}
	return activity.ChannelHTTP
}

// httpMethod reads the HTTP method an http.request preview starts with.
func httpMethod(preview string) string {
	word, _, _ := strings.Cut(strings.TrimSpace(preview), " ")
	switch word {
	case "GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE":
		return word
	}
	return ""
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
