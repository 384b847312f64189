package importers

import "github.com/mcpdup/mcpdup/activity"

// toolDef is a tool as a logged tools/list result describes it.
type toolDef struct {
	Name        string `json:"name"`
	Annotations *struct {
		ReadOnly    *bool `json:"readOnlyHint"`
		Idempotent  *bool `json:"idempotentHint"`
		Destructive *bool `json:"destructiveHint"`
	} `json:"annotations"`
}

// contract is the contract a tool's MCP annotations give it when no
// written contract exists (design.md: they seed defaults, never override
// a contract): readOnlyHint is read_only; idempotentHint, repeating it is
// safe, is repeatable_with_key; anything else, destructive or not, stays
// blocked_after_unknown. ok is false when the tool has no annotations.
func (t toolDef) contract() (activity.Contract, bool) {
	a := t.Annotations
	switch {
	case a == nil:
		return "", false
	case a.ReadOnly != nil && *a.ReadOnly:
		return activity.ContractReadOnly, true
	case a.Idempotent != nil && *a.Idempotent:
		return activity.ContractRepeatableWithKey, true
	}
	return activity.ContractBlockedAfterUnknown, true
}
