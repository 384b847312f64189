// Package demo is the scripted incident behind mcpdup demo: the real
// embedded gateway in front of a real target API on loopback, fault
// proxies that lose answers and cut requests, agents with a naive retry
// layer, and a plain pass-through proxy for comparison, producing every
// verdict the analysis knows and a few executions whose outcome is
// unknown. Its parts (demo/loopback) are product code, shared with the
// gateway's tests; nothing here links a testing package.
package demo

// Scenario is one part of the scripted incident: the tool it uses (each
// scenario its own, so its suspect is easy to find) and the verdict the
// analysis must reach.
type Scenario struct {
	Name    string
	Tool    string
	Verdict string
	Story   string
}

// Scenarios of the incident, one per verdict class. The first seven run
// through the real gateway with real faults on loopback; the last three
// are what a plain pass-through proxy in front of the same target logged
// (the kind of third-party log an importer brings in), because the
// gateway itself never lets those happen.
var Scenarios = []Scenario{
	{"attached", "deploy_release", "one_action_attached", "the answer was lost on its way to the agent; the retry got the stored result"},
	{"pending", "charge_card", "one_action_refused", "alice approved the card charge (per-use credential); the target's answer was lost; the blocked tool went to pending verification and the retry was told so"},
	{"locked", "rotate_credential", "one_action_refused", "the vault was locked; the retry got the same refusal"},
	{"failed_first", "send_invoice", "one_action_first_no_effect", "the target answered 503 without acting; the agent tried again and it worked"},
	{"two_runs", "scale_service", "two_processes", "two agent runs each decided to scale the same service"},
	{"repeat", "publish_notes", "intentional_repeat", "the agent had the result and published again under a new intent scope"},
	{"read_only", "get_health", "harmless_read_only", "a read-only check, repeated"},
	{"pt_duplicate", "pt_create_order", "duplicate", "through a plain proxy: the answer was lost, the retry created a second order"},
	{"pt_risk", "pt_transfer_funds", "duplicate_risk", "through a plain proxy: the target's answer was lost, the proxy logged an error, the retry sent it again"},
	{"pt_no_outcome", "pt_send_email", "insufficient_evidence", "through a proxy whose log records requests but no responses"},
}
