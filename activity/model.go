// Package activity is mcpdup's one model of what agents asked for and what
// happened: agent runs, protocol calls, executions and their lifecycle,
// operator resolutions and import sources. It owns the state machine
// (Execution.Apply: how a transition changes an execution), the retry
// policy (Decide: what a matching call gets), the SQLite store and the
// tamper-evident log every change is written to. The gateway, the
// importers, the analysis and the console all read and write through it;
// nothing else defines an execution or decides a retry.
package activity

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Identifiers. The three the design keeps apart are the protocol
// correlation (Call.JSONRPCID, Call.SessionID, ...), the ExecutionID and the
// intent fingerprint (Execution.Fingerprint).
type (
	RunID       string // "run_" + ULID
	CallID      string // "call_" + ULID
	ExecutionID string // "act_" + ULID: which attempt to act in the world
	SourceID    string // "src_" + ULID
)

var (
	idMu      sync.Mutex
	idEntropy = ulid.Monotonic(rand.Reader, 0)
)

func newID(prefix string, t time.Time) string {
	// An imported log can carry any time; an id only needs one that ULID
	// can hold (1970 to the year 10889), so others are clamped.
	ms := ulid.Timestamp(t)
	switch {
	case t.Before(time.Unix(0, 0)):
		ms = 0
	case ms > ulid.MaxTime():
		ms = ulid.MaxTime()
	}
	idMu.Lock()
	defer idMu.Unlock()
	return prefix + ulid.MustNew(ms, idEntropy).String()
}

// NewRunID, NewCallID, NewExecutionID and NewSourceID return sortable,
// unique ids stamped with t.
func NewRunID(t time.Time) RunID             { return RunID(newID("run_", t)) }
func NewCallID(t time.Time) CallID           { return CallID(newID("call_", t)) }
func NewExecutionID(t time.Time) ExecutionID { return ExecutionID(newID("act_", t)) }
func NewSourceID(t time.Time) SourceID       { return SourceID(newID("src_", t)) }

// Channel is how an execution reaches its target.
type Channel string

const (
	ChannelHTTP Channel = "http"
	ChannelSSH  Channel = "ssh"
	ChannelMCP  Channel = "mcp" // an upstream MCP server
)

// Contract is a tool's declared behaviour after an unknown outcome.
type Contract string

const (
	ContractReadOnly            Contract = "read_only"
	ContractRepeatableWithKey   Contract = "repeatable_with_key"
	ContractRecoverableByLookup Contract = "recoverable_by_lookup"
	// ContractBlockedAfterUnknown is also the contract of a tool without one.
	ContractBlockedAfterUnknown Contract = "blocked_after_unknown"
)

// Contracts lists the contract classes, safest first.
var Contracts = []Contract{ContractReadOnly, ContractRepeatableWithKey, ContractRecoverableByLookup, ContractBlockedAfterUnknown}

// ParseContract checks s names a contract class.
func ParseContract(s string) (Contract, error) {
	for _, c := range Contracts {
		if string(c) == s {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown contract %q (want one of read_only, repeatable_with_key, recoverable_by_lookup, blocked_after_unknown)", s)
}

// RunIdentification says what evidence identified an agent run, strongest
// first. Analysis question 1 weighs it.
type RunIdentification string

const (
	RunByMetaID     RunIdentification = "meta_run_id"  // explicit run id the agent sends in _meta
	RunByPeer       RunIdentification = "process_peer" // unix-socket peer: pid, start time, executable hash
	RunByToken      RunIdentification = "token_idle"   // one run per bearer token until an idle timeout
	RunBySession    RunIdentification = "mcp_session"  // MCP session id: the weakest hint
	RunBySourceSpan RunIdentification = "source"       // whatever run notion an imported log has
)

// Run is one agent process as the Sessions log saw it.
type Run struct {
	Seq          int64             `json:"-"` // log record, when read from the store
	ID           RunID             `json:"id"`
	Actor        string            `json:"actor"`
	IdentifiedBy RunIdentification `json:"identified_by"`
	// Evidence is the identifying value itself: the _meta run id, the peer
	// description, the session id. Never a token.
	Evidence  string          `json:"evidence"`
	StartedAt time.Time       `json:"started_at"`
	EndedAt   Opt[time.Time]  `json:"ended_at,omitzero"`
	Source    Provenance      `json:"source,omitzero"`
	Grants    []Grant         `json:"-"` // loaded from the grants table
	Detail    json.RawMessage `json:"detail,omitempty"`
}

// Grant is a permission a run holds (a per-session grant, an approval).
type Grant struct {
	RunID     RunID     `json:"run_id"`
	Scope     string    `json:"scope"` // e.g. a credential_ref or tool name
	GrantedBy string    `json:"granted_by"`
	GrantedAt time.Time `json:"granted_at"`
}

// Disposition is what the gateway did with a call.
type Disposition string

const (
	DispositionNewExecution Disposition = "new_execution" // created an execution
	DispositionAttached     Disposition = "attached"      // matched an existing execution
	DispositionRefused      Disposition = "refused"       // unauthenticated or invalid: no execution
	DispositionNotRecorded  Disposition = "not_recorded"  // an imported call whose fate the log does not show
	// DispositionInquiry: the agent asked the gateway about an execution
	// (its status tool, a verification request); nothing was sent to a
	// target. The execution asked about is in the arguments, not in
	// ExecutionID, so an inquiry is never grouped as a retry.
	DispositionInquiry Disposition = "inquiry"
)

// Call is one protocol request as received: the protocol correlation. A
// call is not an action; it creates an execution or attaches to one.
type Call struct {
	Seq    int64  `json:"-"` // log record, when read from the store
	ID     CallID `json:"id"`
	RunID  RunID  `json:"run_id,omitempty"`
	Actor  string `json:"actor"`
	Method string `json:"method"` // JSON-RPC method, e.g. tools/call
	Tool   string `json:"tool,omitempty"`
	// JSONRPCID is the request id exactly as sent (a JSON number or string).
	JSONRPCID       Opt[string] `json:"jsonrpc_id,omitzero"`
	SessionID       Opt[string] `json:"session_id,omitzero"`
	StreamID        Opt[string] `json:"stream_id,omitzero"`
	EventID         Opt[string] `json:"event_id,omitzero"` // Last-Event-ID on a resumed stream
	ProtocolVersion Opt[string] `json:"protocol_version,omitzero"`
	ReceivedAt      time.Time   `json:"received_at"`
	// Arguments are the canonical tool arguments with secrets replaced.
	Arguments   json.RawMessage `json:"arguments,omitempty"`
	Disposition Disposition     `json:"disposition"`
	ExecutionID ExecutionID     `json:"execution_id,omitempty"`
	Reason      string          `json:"reason,omitempty"` // why it was refused or how it attached
	Source      Provenance      `json:"source,omitzero"`
}

// Action is the canonical action record: the requested effect, and the only
// input of the intent fingerprint. It never holds a secret: credentials
// appear as a reference and secret arguments as a keyed hash.
type Action struct {
	Actor         string          `json:"actor"`
	Tool          string          `json:"tool"`
	Channel       Channel         `json:"channel"`
	Target        string          `json:"target"`
	Method        string          `json:"method"`
	CredentialRef string          `json:"credential_ref"`
	Arguments     json.RawMessage `json:"arguments"`
	IntentScope   string          `json:"intent_scope"`
}

// Outcome is the observed result of an execution at its target.
type Outcome string

const (
	OutcomeSuccess Outcome = "success" // the target acted (succeeded, or verified by an operator)
	OutcomeFailure Outcome = "failure" // the target answered that it did not
)

// EffectKey names the requested effect independently of who asked: tool,
// target, method and canonical arguments, hashed the same way for every
// source. The fingerprint also covers actor and scope; grouping by effect
// lets analysis tell two processes asking for the same thing apart.
func (a Action) EffectKey() string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(a.Tool), []byte(a.Target), []byte(a.Method), a.Arguments} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return "eff:" + hex.EncodeToString(h.Sum(nil))[:24]
}

// Fact names a lifecycle fact a source may be unable to show.
type Fact string

const (
	FactAuthorization  Fact = "authorization"
	FactDispatch       Fact = "dispatch"
	FactOutcome        Fact = "outcome"
	FactDelivery       Fact = "delivery"
	FactIdempotencyKey Fact = "idempotency_key"
	FactRunIdentity    Fact = "run_identity"
	FactFingerprint    Fact = "fingerprint"
	// FactArguments: the source does not record the call's arguments, so
	// nothing shows two calls asked for the same thing.
	FactArguments Fact = "arguments"
	// FactSignature: no signed checkpoint the importing host verified
	// covers the record (an export imported with --allow-unsealed).
	FactSignature Fact = "signature"
)

// Execution is one attempt to act in the world.
type Execution struct {
	Seq int64       `json:"-"` // the log record that accepted it, when read from the store
	ID  ExecutionID `json:"id"`
	Action
	// Fingerprint is "hmac-sha256:<hex>" over the canonical Action, keyed
	// by the gateway key named FingerprintKeyID.
	Fingerprint      string   `json:"fingerprint,omitempty"`
	FingerprintKeyID string   `json:"fingerprint_key_id,omitempty"`
	RunID            RunID    `json:"run_id,omitempty"`
	Contract         Contract `json:"contract"`
	State            State    `json:"state"`
	CreatedByCall    CallID   `json:"created_by_call,omitempty"`
	// Window is the tool's attach window: how long a matching call counts
	// as a retry of this execution. Imported logs rarely record it.
	Window         Opt[time.Duration] `json:"attach_window,omitzero"`
	IdempotencyKey Opt[string]        `json:"idempotency_key,omitzero"` // sent to the target
	// Outcome as the target reported it.
	TargetStatus Opt[int] `json:"target_status,omitzero"` // HTTP status
	ExitCode     Opt[int] `json:"exit_code,omitzero"`     // SSH exit code
	ResultRef    string   `json:"result_ref,omitempty"`
	// Created is what the target's answer says it created, as the source
	// shows it (a Location, an id in the result); empty: not shown.
	Created string `json:"created,omitempty"`
	// Replayed is the target's own mark that its answer replays an
	// earlier request's (Idempotent-Replayed: true); empty: none shown.
	Replayed string `json:"replayed,omitempty"`
	Error    string `json:"error,omitempty"` // last failure or rejection reason
	// Replica is the gateway replica that last took the execution in hand
	// (accepted or dispatched it): whose lease's end means nobody is
	// dispatching it any more (lease.go). Empty: not a gateway's, or
	// written before replicas held leases.
	Replica string `json:"replica,omitempty"`
	// Outcome is what the target's answer said, kept after delivery moves
	// the state on: "success", "failure", or empty while unknown.
	Outcome Outcome `json:"outcome,omitempty"`
	// Times, one per transition that happened and was recorded.
	Times Times `json:"times"`
	// NotRecorded lists facts the source cannot show, so analysis says
	// "unknown" instead of guessing.
	NotRecorded []Fact     `json:"not_recorded,omitempty"`
	Source      Provenance `json:"source,omitzero"`
	// Attached lists calls that matched this execution after the first
	// (loaded from the calls table).
	Attached []CallID `json:"attached,omitempty"`
}

// Records reports whether the execution's source records fact f.
func (e *Execution) Records(f Fact) bool {
	for _, n := range e.NotRecorded {
		if n == f {
			return false
		}
	}
	return true
}

// Times holds when each lifecycle step happened, as far as recorded.
type Times struct {
	Accepted   Opt[time.Time] `json:"accepted,omitzero"`
	Authorized Opt[time.Time] `json:"authorized,omitzero"`
	Rejected   Opt[time.Time] `json:"rejected,omitzero"`
	Dispatched Opt[time.Time] `json:"dispatched,omitzero"`
	Observed   Opt[time.Time] `json:"observed,omitzero"`
	Delivered  Opt[time.Time] `json:"delivered,omitzero"`
	Resolved   Opt[time.Time] `json:"resolved,omitzero"`
}

// Transition is one recorded lifecycle step. Outcome fields are set on the
// step that observed them.
type Transition struct {
	Seq         int64       `json:"-"`
	ExecutionID ExecutionID `json:"execution_id"`
	From        State       `json:"from,omitempty"` // empty on accepted
	To          State       `json:"to"`
	// At is when the step happened; an imported log may not record it.
	At           Opt[time.Time] `json:"at,omitzero"`
	TargetStatus Opt[int]       `json:"target_status,omitzero"`
	ExitCode     Opt[int]       `json:"exit_code,omitzero"`
	ResultRef    string         `json:"result_ref,omitempty"`
	Created      string         `json:"created,omitempty"`  // what the answer says the target created
	Replayed     string         `json:"replayed,omitempty"` // the target's mark that the answer is a replay
	// Shows is the ids a read's answer lists (GET /v1/vms: vm-71, vm-72):
	// a later listing that shows two created ids proves two effects.
	Shows  []string `json:"shows,omitempty"`
	Reason string   `json:"reason,omitempty"`
	CallID CallID   `json:"call_id,omitempty"` // the call that caused it, when one did
	// Replica is the gateway replica that takes the execution in hand with
	// this step (a dispatch, a resend); empty: the owner does not change.
	Replica string `json:"replica,omitempty"`
	// Implied: the source does not record this step; a later one implies
	// it (an importer's dispatch before a recorded answer). It is drawn as
	// such and never cited as evidence.
	Implied bool       `json:"implied,omitempty"`
	Source  Provenance `json:"source,omitzero"` // the imported record it came from
}

// ResolutionOutcome is an operator's finding about an unknown outcome.
type ResolutionOutcome string

const (
	// ResolutionVerified: the operator confirmed the action took effect.
	ResolutionVerified ResolutionOutcome = "verified"
	// ResolutionRejected: the operator confirmed it did not take effect
	// (or must not be counted); a new call may act again.
	ResolutionRejected ResolutionOutcome = "rejected"
)

// State returns the execution state a resolution moves to.
func (o ResolutionOutcome) State() State {
	if o == ResolutionVerified {
		return StateVerified
	}
	return StateRejectedByOperator
}

// Resolution is an operator's decision about an execution whose outcome
// was unknown.
type Resolution struct {
	Seq         int64             `json:"-"`
	ExecutionID ExecutionID       `json:"execution_id"`
	Outcome     ResolutionOutcome `json:"outcome"`
	Operator    string            `json:"operator"`
	Note        string            `json:"note"`
	Evidence    string            `json:"evidence,omitempty"` // a ticket, a target record id, a URL
	At          time.Time         `json:"at"`
	// Source is where an imported resolution came from; its transition
	// carries it.
	Source Provenance `json:"source,omitzero"`
}

// ApprovalKind says what an approval grants.
type ApprovalKind string

const (
	// ApprovalSession grants a new agent run its per-session grant.
	ApprovalSession ApprovalKind = "session"
	// ApprovalPerUse lets one execution use a credential flagged for
	// per-use approval.
	ApprovalPerUse ApprovalKind = "per_use"
)

// ApprovalState is where an approval stands.
type ApprovalState string

const (
	ApprovalPending  ApprovalState = "pending"
	ApprovalApproved ApprovalState = "approved"
	ApprovalDenied   ApprovalState = "denied"
	ApprovalExpired  ApprovalState = "expired" // nobody answered in time
)

// Approval is a request for an operator's permission, and its answer.
// Each request and each decision is a record of its own.
type Approval struct {
	ID            string         `json:"id"` // "apv_" + ULID
	Kind          ApprovalKind   `json:"kind"`
	State         ApprovalState  `json:"state"`
	ExecutionID   ExecutionID    `json:"execution_id,omitempty"` // the execution waiting on it
	RunID         RunID          `json:"run_id,omitempty"`
	Actor         string         `json:"actor"`
	Tool          string         `json:"tool,omitempty"`
	CredentialRef string         `json:"credential_ref,omitempty"`
	Summary       string         `json:"summary,omitempty"` // what is being asked, for the operator
	RequestedAt   time.Time      `json:"requested_at"`
	DecidedAt     Opt[time.Time] `json:"decided_at,omitzero"`
	Operator      string         `json:"operator,omitempty"`
	Note          string         `json:"note,omitempty"`
	// Seq and DecidedSeq are the log records of the request and of the
	// decision (0: not decided yet), what a timeline cites. Read from the
	// table; never part of the record itself.
	Seq        int64 `json:"-"`
	DecidedSeq int64 `json:"-"`
}

// Source is where records came from: the live gateway, or an imported file.
type Source struct {
	ID     SourceID `json:"id"`
	Format string   `json:"format"` // "gateway", "mcpdup-export", "sallyport", ...
	File   string   `json:"file,omitempty"`
	SHA256 string   `json:"sha256,omitempty"`
	// Content is the sha256 of what the file says, whatever its
	// packaging: decompressed, CRLF read as LF, trailing blank space
	// dropped. The same log gzipped, or saved again with a final newline,
	// is the same content and is not imported twice.
	Content string `json:"content_sha256,omitempty"`
	// ContentSize is how many bytes Content hashes: a longer file whose
	// first ContentSize bytes hash to Content is this log, grown.
	ContentSize int64     `json:"content_size,omitempty"`
	ImportedAt  time.Time `json:"imported_at"`
	Records     int64     `json:"records"`
	Skipped     int64     `json:"skipped"`
	// Note says what the source could not show or how it was checked, e.g.
	// "intent and result rows paired by session+tool+args" or
	// "chain verified".
	Note string `json:"note,omitempty"`
	// UnsignedFrom is the first line of the file whose records no
	// verified checkpoint signs (an mcpdup export imported with
	// --allow-unsealed): every row imported from it or a later line is
	// unsigned, whatever it is (a call, an execution, a transition). 0:
	// none.
	UnsignedFrom int64 `json:"unsigned_from_line,omitempty"`
	// Origin is the log an mcpdup export came from, and Head where the
	// import ended in it ("<seq>:<record hash>"): a longer export of the
	// same log is imported from there on, its first records recognised as
	// these.
	Origin string `json:"origin,omitempty"`
	Head   string `json:"head,omitempty"`
}

// Unsigned reports whether a row with this provenance came from a record
// nothing signs.
func (src Source) Unsigned(p Provenance) bool {
	return src.UnsignedFrom > 0 && p.Source == src.ID && p.Line >= src.UnsignedFrom
}

// Provenance ties a model row to the source record it came from: the
// line, and the record inside it where a line holds several (an OTLP
// batch) or a record has an identity of its own.
type Provenance struct {
	Source SourceID `json:"source,omitempty"`
	Line   int64    `json:"line,omitempty"` // 1-based line (a HAR's entry number)
	// Record names the record within its line: "span 00f067aa0ba902b7",
	// "entry 6", "id 17 request", "seq 42".
	Record string `json:"record,omitempty"`
}

// IsZero reports whether the row came from no external source (the live
// gateway).
func (p Provenance) IsZero() bool { return p.Source == "" }

// validateText rejects control characters in identifiers that operators
// will read and search.
func validateText(field, s string) error {
	if strings.ContainsAny(s, "\x00\r\n") {
		return fmt.Errorf("%s: control characters are not allowed", field)
	}
	return nil
}
