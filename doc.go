// Package mcpdup is the module's root. It holds no code; deps_test.go
// keeps the packages' one-way flow true: producers (gatewaylite,
// importers, demo) → activity → analyze → tui → cmd/mcpdup, and a shipped
// binary that links no test scaffolding.
package mcpdup
