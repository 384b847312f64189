// Package analyze finds suspected duplicate actions in the activity model
// and walks each through the five questions of design.md ("Sequence
// analysis"), citing the records that prove every answer and saying
// "unknown" where the records are silent. It works on whatever filled the
// store: the gateway or an importer. It also replays a suspect's calls
// through the gateway's own retry policy (WhatIf, with contracts given as
// data) and checks the lifecycle as a history. It decides; report/ renders.
package analyze

import "github.com/mcpdup/mcpdup/activity"

// Verdict is the conclusion about a suspect, from a fixed set.
type Verdict string

const (
	// VerdictAttached: one action. Every later call attached to the first
	// execution and was answered from it (its stored result, or its
	// progress).
	VerdictAttached Verdict = "one_action_attached"
	// VerdictRefused: one action at most. The later calls were refused:
	// the same rejection, or "pending verification", was returned.
	VerdictRefused Verdict = "one_action_refused"
	// VerdictFirstNoEffect: one action at most. The first execution had no
	// effect (refused, failed before anything was sent, or the target
	// answered that it failed); only a later one may have acted.
	VerdictFirstNoEffect Verdict = "one_action_first_no_effect"
	// VerdictDuplicate: a transport retry created a second execution and
	// the target acted twice.
	VerdictDuplicate Verdict = "duplicate"
	// VerdictDuplicateRisk: the first outcome was unknown and the call was
	// sent again as a new execution: the target may have acted twice.
	VerdictDuplicateRisk Verdict = "duplicate_risk"
	// VerdictTwoProcesses: two distinct agent processes each sent the
	// action: a planning problem, not a transport one.
	VerdictTwoProcesses Verdict = "two_processes"
	// VerdictIntentional: the agent asked again after it had received the
	// result: a deliberate (or confused) repeat, not a transport retry.
	VerdictIntentional Verdict = "intentional_repeat"
	// VerdictReadOnly: repeats of a read-only tool: harmless.
	VerdictReadOnly Verdict = "harmless_read_only"
	// VerdictInsufficient: the records cannot decide; Missing says what.
	VerdictInsufficient Verdict = "insufficient_evidence"
)

// Verdicts lists the verdict set, most alarming first.
var Verdicts = []Verdict{VerdictDuplicate, VerdictDuplicateRisk, VerdictTwoProcesses, VerdictInsufficient,
	VerdictIntentional, VerdictRefused, VerdictFirstNoEffect, VerdictAttached, VerdictReadOnly}

// verdictInfo is the documented meaning and the recommended fix.
var verdictInfo = map[Verdict]struct{ title, fix string }{
	VerdictAttached: {"one action: the retry attached to the first execution",
		"Nothing acted twice. If the agent retried because a result was lost, make sure it resumes streams (Last-Event-ID) before resending."},
	VerdictRefused: {"one action at most: the retry was refused or had no effect",
		"Nothing acted twice. If the first outcome is still unknown, resolve it (mcpdup resolve) so the agent gets a definite answer."},
	VerdictFirstNoEffect: {"one action at most: the first attempt had no effect",
		"Nothing acted twice: the first attempt was refused, failed before any byte was sent, or the target answered that it failed, so sending again was safe."},
	VerdictDuplicate: {"duplicate: a retry created a second execution and the target acted twice",
		"Put the tool behind the gateway with a written contract (repeatable_with_key and an Idempotency-Key the target honours, or blocked_after_unknown), so a retry attaches instead of acting; compensate the second effect now."},
	VerdictDuplicateRisk: {"duplicate risk: the outcome was unknown, then the call was sent again",
		"Check the target for two effects now. Give the tool a contract that never resends blindly after an unknown outcome (resend with the same key, a status lookup, or pending verification)."},
	VerdictTwoProcesses: {"two agent processes each sent the action",
		"A planning problem, not a transport one: two runs decided to do the same thing. Coordinate the agents (a lock, a single owner, or an explicit intent scope)."},
	VerdictIntentional: {"intentional repeat: the agent asked again after it had the result",
		"The first result was delivered; the agent chose to act again. If that was not intended, fix the agent's plan; if it was, name the repeat with an intent scope."},
	VerdictReadOnly: {"harmless read-only repeat",
		"No action needed: reads have no effect to duplicate."},
	VerdictInsufficient: {"insufficient evidence",
		"The records do not show enough to decide (see what is missing). Record those facts at the source, or check the target directly."},
}

// Title is the verdict in words.
func (v Verdict) Title() string { return verdictInfo[v].title }

// Fix is the recommended fix.
func (v Verdict) Fix() string { return verdictInfo[v].fix }

// Glyph marks a verdict without relying on colour.
func (v Verdict) Glyph() string {
	switch v {
	case VerdictDuplicate:
		return "✗"
	case VerdictDuplicateRisk, VerdictInsufficient:
		return "?"
	case VerdictTwoProcesses, VerdictIntentional:
		return "!"
	}
	return "✓"
}

// Severity says how much a verdict matters for the tool's contract.
type Severity string

const (
	SeverityNone     Severity = "none"
	SeverityLow      Severity = "low"
	SeverityMedium   Severity = "medium"
	SeverityHigh     Severity = "high"
	SeverityCritical Severity = "critical"
)

// Severities in increasing order.
var Severities = []Severity{SeverityNone, SeverityLow, SeverityMedium, SeverityHigh, SeverityCritical}

// Rank orders severities (higher is worse).
func (s Severity) Rank() int {
	for i, x := range Severities {
		if x == s {
			return i
		}
	}
	return 0
}

// severity follows the contract class: the same double effect is worse
// for a tool that cannot be resent safely than for one a key protects.
func severity(v Verdict, c activity.Contract) Severity {
	contractRank := map[activity.Contract]Severity{
		activity.ContractReadOnly:            SeverityNone,
		activity.ContractRepeatableWithKey:   SeverityMedium,
		activity.ContractRecoverableByLookup: SeverityMedium,
		activity.ContractBlockedAfterUnknown: SeverityHigh,
	}[c]
	if contractRank == "" {
		contractRank = SeverityHigh // no written contract
	}
	switch v {
	case VerdictDuplicate:
		return raise(contractRank, 1)
	case VerdictDuplicateRisk, VerdictTwoProcesses:
		return contractRank
	case VerdictInsufficient, VerdictIntentional:
		return raise(contractRank, -1)
	case VerdictRefused:
		return SeverityLow
	}
	return SeverityNone
}

func raise(s Severity, by int) Severity {
	i := min(max(s.Rank()+by, 0), len(Severities)-1)
	if s == SeverityNone {
		return SeverityNone
	}
	return Severities[i]
}
