package gatewaylite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpdup/mcpdup/activity"
)

// Keys an agent may put in a tools/call request's _meta.
const (
	// MetaRunID identifies the agent run (process) explicitly: the
	// strongest run evidence. Retries from the same run attach across
	// reconnects and gateway restarts.
	MetaRunID = "mcpdup.dev/run_id"
	// MetaIntentScope marks a deliberate repeat: a call with a different
	// scope is a different intent even with identical arguments.
	MetaIntentScope = "mcpdup.dev/intent_scope"
	// maxMetaID bounds a run id or intent scope an agent names: each is
	// kept in every execution's intent scope, its index and the log, and
	// the run tracker holds it in memory.
	maxMetaID = 256
	// MetaExecutionID is set on every result the gateway returns.
	MetaExecutionID = "mcpdup.dev/execution_id"
	// MetaExecution is set on every result: state, replayed, times.
	MetaExecution = "mcpdup.dev/execution"
)

// Headers the front sets after authenticating a request; clients cannot
// supply them (the front deletes any X-Mcpdup-* header it receives).
const (
	headerActor   = "X-Mcpdup-Actor"
	headerRPCID   = "X-Mcpdup-Rpc-Id"
	headerRequest = "X-Mcpdup-Request"
)

// afterAccept, set by a test, runs once a call's acceptance is durable,
// before the call goes on.
var afterAccept func()

// callInfo is what the front learned about the request carrying a call.
type callInfo struct {
	actor, rpcID, token, protocol, session string
}

func callInfoFrom(req *mcp.CallToolRequest) callInfo {
	var h http.Header
	if req.Extra != nil {
		h = req.Extra.Header
	}
	ci := callInfo{actor: h.Get(headerActor), rpcID: h.Get(headerRPCID), token: h.Get(headerRequest)}
	if req.Session != nil {
		ci.session = req.Session.ID()
		ci.protocol = req.ProtocolVersion()
	}
	if v := h.Get("MCP-Protocol-Version"); v != "" {
		ci.protocol = v
	}
	return ci
}

// handleCall is the whole life of one tools/call: identify, match, record,
// dispatch or attach, record the outcome, answer truthfully.
func (g *Gateway) handleCall(ctx context.Context, spec *toolSpec, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	info := callInfoFrom(req)
	if info.actor == "" {
		return nil, errors.New("unauthenticated call reached the tool handler")
	}
	// The work below must finish even if the client goes away: a dropped
	// connection must not abandon a dispatch half-recorded.
	ctx = context.WithoutCancel(ctx)
	received := g.now().UTC()
	start := time.Now()
	call := activity.Call{Actor: info.actor, Method: "tools/call", Tool: spec.name, ReceivedAt: received,
		JSONRPCID: optString(info.rpcID), SessionID: optString(info.session), ProtocolVersion: optString(info.protocol)}

	hide := func(text string) string { return spec.withoutSentSecrets(text, req.Params.Arguments) }
	if err := spec.schema.check(req.Params.Arguments, spec.args.SecretArgs, hide); err != nil {
		call.Disposition, call.Reason = activity.DispositionRefused, "arguments do not match the tool's input_schema: "+err.Error()
		g.recordRefused(ctx, call)
		g.log.Info("call refused", "actor", call.Actor, "tool", call.Tool, "why", "input_schema")
		return errorResult("Invalid arguments for %s: %v. Nothing was sent to the target; correct the arguments and call again.", spec.name, err), nil
	}
	intent, err := g.fp.PrepareArgs(req.Params.Arguments, spec.args)
	if err != nil {
		call.Disposition, call.Reason = activity.DispositionRefused, "invalid arguments: "+err.Error()
		g.recordRefused(ctx, call)
		return errorResult("invalid arguments: %v", err), nil
	}
	call.Arguments = intent.Record
	meta := req.Params.Meta
	if err := checkMetaIDs(meta); err != nil {
		call.Disposition, call.Reason = activity.DispositionRefused, err.Error()
		g.recordRefused(ctx, call)
		return errorResult("%v", err), nil
	}
	run, err := g.runs.identify(ctx, info, meta)
	if err != nil {
		return g.notRecorded(call, "identify run", err), nil
	}
	call.RunID = run.id
	scope := run.scope
	if s, ok := meta[MetaIntentScope].(string); ok && s != "" {
		scope = "explicit:" + s
	}
	action := activity.Action{Actor: info.actor, Tool: spec.name, Channel: spec.channel, Target: spec.target,
		Method: spec.method, CredentialRef: spec.credentialRef, Arguments: intent.Effect, IntentScope: scope}
	fingerprint, err := g.fp.Fingerprint(action)
	if err != nil {
		call.Disposition, call.Reason = activity.DispositionRefused, "arguments cannot be fingerprinted: "+err.Error()
		g.recordRefused(ctx, call)
		return errorResult("invalid arguments: %v", err), nil
	}

	var exec activity.Execution
	var rec activity.Recovery
	var waiting []string              // approvals the new execution waits on
	var unproven activity.ExecutionID // the match, when the signed log does not prove it
	// reserved marks a new execution in hand before its acceptance
	// commits: a retry that reads it (accepted, waiting for an approval,
	// or not yet dispatched) must wait on this call, never take it over
	// as though its process were gone (which dispatched a payment whose
	// approval was still pending).
	var reserved func()
	_, err = g.store.Write(ctx, func(w *activity.Tx) error {
		if err := g.fence(w); err != nil {
			return err
		}
		prior, err := w.LatestMatch(fingerprint, info.actor, scope)
		if err != nil {
			return err
		}
		// A retry acts on what the match says it is: that must be what the
		// signed log says, or the store was edited behind its back.
		if prior != nil && spec.contract != activity.ContractReadOnly {
			if perr := w.ProvenExecution(*prior); errors.Is(perr, activity.ErrUnproven) {
				g.log.Error("refused: matched execution not proven by the signed log", "execution", prior.ID, "error", perr)
				call.Disposition = activity.DispositionRefused
				call.Reason = fmt.Sprintf("refused: execution %s in the database is not what the signed log says (%v); an operator must run mcpdup audit verify", prior.ID, perr)
				unproven = prior.ID
				_, err := w.RecordCall(call)
				return err
			} else if perr != nil {
				return perr
			}
		}
		var why string
		locked := true // a refusal by the lock stands unless the vault is provably unlocked
		if prior != nil && prior.RefusedByLock() {
			if l, _, err := w.VaultLocked(); err == nil {
				locked = l
			}
		}
		rec, why = activity.Decide(prior, spec.contract, received, spec.window, locked)
		if !run.strong && prior != nil && rec.Attaches() {
			why += "; run identity is weak (" + string(run.identifiedBy) + "), scope inferred from actor and window"
		}
		call.Reason = why
		if rec.Attaches() {
			// Its id now: the resend below names the call that caused it,
			// and the call's log line names the call.
			call.ID = activity.NewCallID(received)
			call.Disposition, call.ExecutionID = activity.DispositionAttached, prior.ID
			if _, err := w.RecordCall(call); err != nil {
				return err
			}
			exec = *prior
			if rec == activity.RecoveryResend {
				// Durable before the resend leaves, like the first dispatch.
				exec, err = w.Transition(activity.Transition{ExecutionID: exec.ID, From: activity.StateUnknown,
					To: activity.StateDispatched, CallID: call.ID, Reason: "resend with the same Idempotency-Key", Replica: g.lease.ID})
			}
			return err
		}
		call.Disposition = activity.DispositionNewExecution
		call.ID = activity.NewCallID(received)
		call.ExecutionID = activity.NewExecutionID(received)
		if reserved == nil {
			reserved = g.inflight.begin(call.ExecutionID)
		}
		if _, err := w.RecordCall(call); err != nil {
			return err
		}
		e := activity.Execution{ID: call.ExecutionID, Action: action, Fingerprint: fingerprint, FingerprintKeyID: g.fp.KeyID,
			RunID: run.id, Contract: spec.contract, CreatedByCall: call.ID, IdempotencyKey: activity.Some(""),
			Window: activity.Some(spec.window), Replica: g.lease.ID}
		if spec.channel == activity.ChannelHTTP {
			e.IdempotencyKey = activity.Some(string(e.ID))
		}
		if exec, err = w.Accept(e); err != nil {
			return err
		}
		exec, waiting, err = g.authorize(w, exec, spec, run, call.ID)
		return err
	})
	if reserved != nil {
		defer reserved() // executing it below begins it again: a no-op
	}
	if afterAccept != nil {
		afterAccept() // a test widens the window a retry could fall into
	}
	if err != nil {
		return g.notRecorded(call, "record call", err), nil
	}
	if unproven != "" {
		return errorResult("This call was refused: the gateway's record of execution %s, the first call of this intent, is not what its signed log says, "+
			"so it will not act on it. Nothing was sent to the target. An operator must check the gateway (mcpdup audit verify).", unproven), nil
	}
	if len(waiting) > 0 {
		done := g.inflight.begin(exec.ID) // a retry meanwhile waits on this, never asks again
		var ours bool
		if exec, ours = g.awaitApprovals(ctx, exec, waiting); ours {
			exec = g.execute(ctx, spec, exec, intent.Send)
		}
		done()
		res := g.respond(exec, rec, false)
		if outcomeState(activity.State(res.state)) {
			g.delivery.expect(info.token, exec.ID)
		}
		g.logCall(call, rec, res, start)
		return res.result, nil
	}
	res := g.proceed(ctx, spec, exec, rec, intent.Send, call.ID)
	if outcomeState(activity.State(res.state)) {
		g.delivery.expect(info.token, exec.ID)
	}
	g.logCall(call, rec, res, start)
	return res.result, nil
}

// logCall is the one operational line per call: who, what, which
// execution, what the gateway decided and where it stands. Never the
// arguments: they may hold what secret_args does not name.
func (g *Gateway) logCall(c activity.Call, rec activity.Recovery, res answer, start time.Time) {
	g.log.Info("call", "actor", c.Actor, "tool", c.Tool, "execution", c.ExecutionID, "call", c.ID,
		"disposition", c.Disposition, "recovery", rec, "state", res.state, "ms", time.Since(start).Milliseconds())
}

// logTransition records, at debug level, a transition once committed.
func (g *Gateway) logTransition(e activity.Execution, why string) {
	g.log.Debug("transition", "execution", e.ID, "tool", e.Tool, "state", e.State, "why", why)
}

// authorize runs the authorization ladder inside the accepting
// transaction: a locked vault refuses everything; a run without its
// session grant (policy "ask") and a credential flagged for per-use
// approval need an operator's approval, and the execution waits in state
// accepted for them (returned as the approvals to wait on). Otherwise
// "dispatched" is made durable here, before any byte leaves.
func (g *Gateway) authorize(w *activity.Tx, e activity.Execution, spec *toolSpec, run runInfo, call activity.CallID) (activity.Execution, []string, error) {
	locked, reason, err := w.VaultLocked()
	if errors.Is(err, activity.ErrUnproven) {
		return g.refuseUnproven(w, e, call, "the vault's state", err)
	}
	if err != nil {
		return e, nil, err
	}
	if locked {
		e, err = w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateRejected, CallID: call,
			Reason: activity.VaultLockedReason(reason)})
		return e, nil, err
	}
	var waiting []string
	if g.cfg.SessionGrant == "ask" {
		granted, err := w.HasGrant(run.id, "session")
		if errors.Is(err, activity.ErrUnproven) {
			return g.refuseUnproven(w, e, call, "the run's session grant", err)
		}
		if err != nil {
			return e, nil, err
		}
		if !granted {
			a, err := w.PendingApproval(run.id, activity.ApprovalSession)
			if err != nil {
				return e, nil, err
			}
			if a == nil {
				req, err := w.RequestApproval(activity.Approval{Kind: activity.ApprovalSession, ExecutionID: e.ID, RunID: run.id,
					Actor: e.Actor, Tool: e.Tool, Summary: fmt.Sprintf("new agent run of %s (%s) wants to act; first call: %s", e.Actor, run.identifiedBy, e.Tool)})
				if err != nil {
					return e, nil, err
				}
				a = &req
			}
			waiting = append(waiting, a.ID)
		}
	}
	if spec.perUseApproval {
		a, err := w.RequestApproval(activity.Approval{Kind: activity.ApprovalPerUse, ExecutionID: e.ID, RunID: run.id,
			Actor: e.Actor, Tool: e.Tool, CredentialRef: e.CredentialRef,
			Summary: fmt.Sprintf("%s wants to use credential %s for %s %s", e.Actor, e.CredentialRef, e.Tool, e.Arguments)})
		if err != nil {
			return e, nil, err
		}
		waiting = append(waiting, a.ID)
	}
	if len(waiting) > 0 {
		return e, waiting, nil
	}
	e, err = g.authorizeAndDispatch(w, e, call, "")
	return e, nil, err
}

// refuseUnproven refuses, and records why, a call whose authorization
// would rest on a row the signed log does not prove: someone edited the
// database behind the store's back.
func (g *Gateway) refuseUnproven(w *activity.Tx, e activity.Execution, call activity.CallID, what string, why error) (activity.Execution, []string, error) {
	g.log.Error("refused: state not proven by the signed log", "execution", e.ID, "what", what, "error", why)
	e, err := w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateRejected, CallID: call,
		Reason: fmt.Sprintf("refused: %s in the database is not what the signed log says (%v); an operator must run mcpdup audit verify", what, why)})
	return e, nil, err
}

func (g *Gateway) authorizeAndDispatch(w *activity.Tx, e activity.Execution, call activity.CallID, why string) (activity.Execution, error) {
	e, err := w.Transition(activity.Transition{ExecutionID: e.ID, From: activity.StateAccepted, To: activity.StateAuthorized, CallID: call, Reason: why})
	if err != nil {
		return e, err
	}
	// The caller's write has passed the fence (handleCall's, awaitApprovals').
	return w.Transition(activity.Transition{ExecutionID: e.ID, To: activity.StateDispatched, CallID: call, Replica: g.lease.ID})
}

// answer is a result plus the execution state it reports.
type answer struct {
	result *mcp.CallToolResult
	state  string
}

// proceed acts on the recovery decision once it is durable.
func (g *Gateway) proceed(ctx context.Context, spec *toolSpec, exec activity.Execution, rec activity.Recovery, send map[string]any, call activity.CallID) answer {
	replayed := rec.Attaches()
	switch rec {
	case activity.RecoveryNew, activity.RecoveryResend:
		if exec.State == activity.StateDispatched {
			exec = g.execute(ctx, spec, exec, send)
		}
	case activity.RecoveryContinue, activity.RecoveryWait:
		exec = g.waitFor(ctx, spec, exec, send)
	case activity.RecoveryLookup:
		exec = g.lookup(ctx, spec, exec, send)
	case activity.RecoveryBlock:
		exec = g.block(ctx, exec)
	}
	return g.respond(exec, rec, replayed)
}

// execute dispatches an execution whose "dispatched" is durable, records
// the outcome, and on an unknown outcome applies the contract's recovery
// once before answering.
func (g *Gateway) execute(ctx context.Context, spec *toolSpec, exec activity.Execution, send map[string]any) activity.Execution {
	done := g.inflight.begin(exec.ID)
	out := spec.dispatch(ctx, exec.ID, send)
	if out.State != activity.StateUnknown {
		// The one durable write on the path was "dispatched": the outcome
		// is committed behind the answer (group-committed with others'),
		// and a retry waiting on this execution reads it once it is.
		if next, ok := g.recordOutcomeAsync(ctx, exec, out, done); ok {
			g.results.put(next.ResultRef, out.Result)
			return next
		}
	}
	defer done()
	// Unknown: recorded before anything is resent or looked up.
	exec = g.recordOutcome(ctx, exec, out, "")
	g.results.put(exec.ResultRef, out.Result)
	if exec.State != activity.StateUnknown {
		return exec
	}
	switch exec.Contract {
	case activity.ContractRepeatableWithKey:
		return g.resend(ctx, spec, exec, send, "resend with the same Idempotency-Key after an unknown outcome")
	case activity.ContractRecoverableByLookup:
		return g.lookup(ctx, spec, exec, send)
	case activity.ContractReadOnly:
		return exec // a read changed nothing: the next one simply runs
	}
	return g.block(ctx, exec)
}

// resend dispatches an unknown execution again under its own id, once
// "dispatched" is durable again, and records the outcome. Only contracts
// whose target tells a resend from a new request may (the state machine
// refuses the others).
func (g *Gateway) resend(ctx context.Context, spec *toolSpec, exec activity.Execution, send map[string]any, why string) activity.Execution {
	next, err := g.transition(ctx, exec, activity.StateDispatched, why)
	if err != nil {
		return exec
	}
	done := g.inflight.begin(next.ID)
	defer done()
	out := spec.dispatch(ctx, next.ID, send)
	exec = g.recordOutcome(ctx, next, out, "after resend: ")
	g.results.put(exec.ResultRef, out.Result)
	return exec
}

// waitFor attaches to an execution another goroutine is handling and waits
// (bounded) for its outcome. An execution nobody is handling any more
// (accepted or authorized by a process that died) is taken over.
func (g *Gateway) waitFor(ctx context.Context, spec *toolSpec, exec activity.Execution, send map[string]any) activity.Execution {
	deadline := time.Now().Add(g.cfg.AttachWait.Duration)
	if ch := g.inflight.wait(exec.ID); ch != nil {
		select {
		case <-ch:
		case <-time.After(g.cfg.AttachWait.Duration):
		}
		// Its outcome may still be queued behind the first call's answer
		// (recordOutcomeAsync; an execution that waited on an approval
		// is released before): read it once it is durable.
		return g.untilSettled(ctx, exec, deadline, 5*time.Millisecond)
	} else if (exec.State == activity.StateAccepted || exec.State == activity.StateAuthorized) && exec.Replica == g.lease.ID {
		// Ours, and no goroutine of ours is on it: taken over, by one
		// retry (another arriving meanwhile waits on this one). Another
		// replica's is its own until its lease runs out (recover.go).
		done, first := g.inflight.claim(exec.ID)
		if !first {
			return g.untilSettled(ctx, exec, deadline, 5*time.Millisecond)
		}
		defer done()
		return g.takeOver(ctx, spec, exec, send)
	}
	// In flight on another replica (or another process before this one):
	// poll the store.
	return g.untilSettled(ctx, exec, deadline, 50*time.Millisecond)
}

// takeOver carries on an execution of ours that no goroutine is on (the
// call that accepted it could not record what came next). One accepted
// while it waited on approvals goes through them again: a denial or an
// expiry rejects it, a pending one is waited on; it is never sent on the
// strength of having been accepted.
func (g *Gateway) takeOver(ctx context.Context, spec *toolSpec, exec activity.Execution, send map[string]any) activity.Execution {
	if exec.State == activity.StateAccepted {
		as, err := g.store.ApprovalsOf(ctx, []activity.ExecutionID{exec.ID})
		if err != nil {
			g.log.Error("take over: read approvals", "execution", exec.ID, "error", err)
			return g.current(ctx, exec)
		}
		if ids := approvalIDs(as[exec.ID]); len(ids) > 0 {
			next, ours := g.awaitApprovals(ctx, exec, ids)
			if ours {
				next = g.execute(ctx, spec, next, send)
			}
			return next
		}
	}
	_, err := g.store.Write(ctx, func(w *activity.Tx) error {
		if err := g.fence(w); err != nil {
			return err
		}
		var err error
		if exec.State == activity.StateAccepted {
			if exec, err = w.Transition(activity.Transition{ExecutionID: exec.ID, From: activity.StateAccepted, To: activity.StateAuthorized}); err != nil {
				return err
			}
		}
		exec, err = w.Transition(activity.Transition{ExecutionID: exec.ID, From: activity.StateAuthorized, To: activity.StateDispatched,
			Reason: "taken over: the process that accepted it is gone", Replica: g.lease.ID})
		return err
	})
	if err != nil {
		return g.current(ctx, exec)
	}
	return g.execute(ctx, spec, exec, send)
}

// current is exec as the store has it now (exec itself when it cannot
// be read).
func (g *Gateway) current(ctx context.Context, exec activity.Execution) activity.Execution {
	if e, err := g.store.Execution(ctx, exec.ID); err == nil {
		return e
	}
	return exec
}

// untilSettled reads an execution every poll until the store has it past
// accepted, authorized and dispatched, or the deadline passes (then as the
// store has it).
func (g *Gateway) untilSettled(ctx context.Context, exec activity.Execution, deadline time.Time, poll time.Duration) activity.Execution {
	for {
		e, err := g.store.Execution(ctx, exec.ID)
		switch {
		case err == nil && (!beforeOutcome(e.State) || !time.Now().Before(deadline)):
			return e
		case err != nil && !time.Now().Before(deadline):
			return exec
		}
		time.Sleep(poll)
	}
}

// blockReason is why an unknown execution waits for an operator.
func blockReason(c activity.Contract) string {
	return fmt.Sprintf("contract %s: not resent after an unknown outcome; verify at the target", c)
}

// beforeOutcome: a process is on its way to an outcome.
func beforeOutcome(s activity.State) bool {
	return s == activity.StateAccepted || s == activity.StateAuthorized || s == activity.StateDispatched
}

// block moves an unknown execution to pending_verification: an operator
// must check the target before anything is sent again.
func (g *Gateway) block(ctx context.Context, exec activity.Execution) activity.Execution {
	if exec.State != activity.StateUnknown {
		return exec
	}
	next, err := g.transition(ctx, exec, activity.StatePendingVerification, blockReason(exec.Contract))
	if err != nil {
		return exec
	}
	return next
}

// recordOutcomeAsync queues the outcome's record and returns the execution
// as it will stand, without waiting for the fsync; then runs once the
// record is durable (or refused). A crash before that leaves the
// execution dispatched, which recovery turns into unknown: never a second
// dispatch. ok is false when the state machine refuses the outcome here
// (then nothing was queued, and the caller records it in the usual way).
func (g *Gateway) recordOutcomeAsync(ctx context.Context, exec activity.Execution, out Outcome, then func()) (activity.Execution, bool) {
	t := activity.Transition{ExecutionID: exec.ID, From: exec.State, To: out.State, TargetStatus: out.Status,
		ExitCode: out.ExitCode, Reason: out.Reason}
	if len(out.Result) > 0 {
		t.ResultRef = activity.ResultRef(out.Result)
	}
	next := exec
	local := t
	local.At = activity.Some(g.now().UTC()) // the record gets the commit's clock
	if err := next.Apply(local); err != nil {
		return exec, false
	}
	g.outcomes.add()
	write := func(w *activity.Tx) error {
		if failOutcomeWrite != nil {
			if err := failOutcomeWrite(); err != nil {
				return err
			}
		}
		if cur, err := w.Execution(exec.ID); err != nil {
			return err
		} else if cur.State != exec.State {
			return nil // recorded already (a write that did commit), or settled elsewhere
		}
		if len(out.Result) > 0 {
			if _, err := w.PutResult(out.Result); err != nil {
				return err
			}
		}
		_, err := w.Transition(t)
		return err
	}
	durable := g.store.WriteAsync(ctx, write)
	go func() {
		defer g.outcomes.done()
		defer then()
		// Until it is written: the agent has its answer, and left
		// dispatched while this replica lives (its lease renewed, so no
		// recovery runs) every retry on any replica was told "in
		// progress" for good (the database down a few seconds as the
		// answer came).
		err := <-durable
		for delay := 100 * time.Millisecond; err != nil; delay = min(2*delay, 10*time.Second) {
			g.log.Error("record outcome, again in a moment", "execution", exec.ID, "error", err, "retry_in", delay)
			select {
			case <-g.stop:
				return // dispatched on disk: the next start recovers it as unknown
			case <-time.After(delay):
			}
			_, err = g.store.Write(context.WithoutCancel(ctx), write)
		}
		g.logTransition(next, out.Reason)
	}()
	return next, true
}

// failOutcomeWrite, set by a test, fails an outcome's write while it
// returns an error (the database away when the answer came).
var failOutcomeWrite func() error

// recordOutcome stores the result and records the observed state.
func (g *Gateway) recordOutcome(ctx context.Context, exec activity.Execution, out Outcome, prefix string) activity.Execution {
	var next activity.Execution
	_, err := g.store.Write(ctx, func(w *activity.Tx) error {
		t := activity.Transition{ExecutionID: exec.ID, From: exec.State, To: out.State, TargetStatus: out.Status,
			ExitCode: out.ExitCode, Reason: prefix + out.Reason}
		if exec.Replica != g.lease.ID {
			// Settled here (a lookup of another replica's execution):
			// ours to deliver, and recovered with us if we die.
			t.Replica = g.lease.ID
		}
		if len(out.Result) > 0 {
			ref, err := w.PutResult(out.Result)
			if err != nil {
				return err
			}
			t.ResultRef = ref
		}
		var err error
		next, err = w.Transition(t)
		return err
	})
	if err != nil {
		// The outcome could not be recorded: leave the execution as the
		// store has it (dispatched), which recovery treats as unknown.
		g.log.Error("record outcome", "execution", exec.ID, "error", err)
		if e, rerr := g.store.Execution(ctx, exec.ID); rerr == nil {
			return e
		}
		return exec
	}
	g.logTransition(next, prefix+out.Reason)
	return next
}

func (g *Gateway) transition(ctx context.Context, exec activity.Execution, to activity.State, reason string) (activity.Execution, error) {
	var next activity.Execution
	_, err := g.store.Write(ctx, func(w *activity.Tx) error {
		t := activity.Transition{ExecutionID: exec.ID, From: exec.State, To: to, Reason: reason}
		if to == activity.StateDispatched { // a resend: ours from now on
			if err := g.fence(w); err != nil {
				return err
			}
			t.Replica = g.lease.ID
		}
		var err error
		next, err = w.Transition(t)
		return err
	})
	if err != nil {
		g.log.Error("record transition", "execution", exec.ID, "to", to, "error", err)
	} else {
		g.logTransition(next, reason)
	}
	return next, err
}

// notRecorded answers a call whose first record could not be written.
// Nothing was dispatched ("dispatched" is committed before any byte
// leaves), so the agent may retry; the store's error is for the operator
// only: it may name tables and values an agent has no business seeing.
func (g *Gateway) notRecorded(c activity.Call, step string, err error) *mcp.CallToolResult {
	g.log.Error("call not recorded: nothing was sent", "step", step, "actor", c.Actor, "tool", c.Tool, "error", err)
	return errorResult("The gateway could not record this call in its log, so nothing was sent to the target. " +
		"It is safe to retry later; if this persists, the gateway's operator has the details.")
}

// recordRefused records a call that created no execution.
func (g *Gateway) recordRefused(ctx context.Context, c activity.Call) {
	c.Disposition = activity.DispositionRefused
	if _, err := g.store.Write(ctx, func(w *activity.Tx) error {
		_, err := w.RecordCall(c)
		return err
	}); err != nil {
		g.log.Error("record refused call", "error", err)
	}
}

// dispatch sends through the tool's channel.
func (s *toolSpec) dispatch(ctx context.Context, id activity.ExecutionID, send map[string]any) Outcome {
	var out Outcome
	switch {
	case s.http != nil:
		out = s.http.dispatch(ctx, id, send)
	case s.ssh != nil:
		out = s.ssh.dispatch(ctx, id, send)
	case s.upstream != nil:
		out = s.upstream.dispatch(ctx, id, send, s.timeout)
	default:
		return Outcome{State: activity.StateFailedBefore, Reason: "tool has no dispatcher"}
	}
	return s.withoutEchoes(out, send)
}

func optString(s string) activity.Opt[string] {
	if s == "" {
		return activity.Opt[string]{}
	}
	return activity.Some(s)
}

// outcomeState reports whether an answer in state s carries the target's
// result, whose delivery is then tracked.
func outcomeState(s activity.State) bool {
	switch s {
	case activity.StateSucceeded, activity.StateFailed, activity.StateDeliveryFailed, activity.StateNotDelivered:
		return true
	}
	return false
}

func errorResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// everyCall sees every tools/call the SDK dispatches, whatever its tool:
// one for a tool that does not exist is recorded (refused) before the SDK
// answers it with its standard JSON-RPC error, and each call's end is
// reported to the delivery tracker exactly once.
func (g *Gateway) everyCall(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		cr, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok {
			return next(ctx, method, req)
		}
		info := callInfoFrom(cr)
		defer g.delivery.handled(info.token)
		name := cr.Params.Name
		if _, ok := g.tools[name]; !ok && name != ToolExecutionStatus && name != ToolRequestVerification {
			g.recordRefused(context.WithoutCancel(ctx), activity.Call{Actor: info.actor, Method: method, Tool: truncate(name, maxSummaryName),
				ReceivedAt: g.now().UTC(), JSONRPCID: optString(info.rpcID), SessionID: optString(info.session),
				ProtocolVersion: optString(info.protocol), Reason: "no such tool"})
		}
		return next(ctx, method, req)
	}
}

// checkMetaIDs refuses a run id or intent scope in _meta that is too long
// or holds control characters (a 2 MB run id cost 6 MB of database and
// 1 MB of memory for as long as the gateway ran).
func checkMetaIDs(meta map[string]any) error {
	for _, k := range []string{MetaRunID, MetaIntentScope} {
		s, ok := meta[k].(string)
		if !ok {
			continue
		}
		if len(s) > maxMetaID {
			return fmt.Errorf("_meta[%q]: %d bytes, at most %d", k, len(s), maxMetaID)
		}
		// Any control character (an ESC would reach an operator's
		// terminal through every listing of the run), not only NUL and
		// line ends.
		if strings.ContainsFunc(s, unicode.IsControl) {
			return fmt.Errorf("_meta[%q]: control characters are not allowed", k)
		}
	}
	return nil
}
