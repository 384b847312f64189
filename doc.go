// Package mcpdup is the module's root. It holds no code: this map of the
// packages, and deps_test.go, which keeps the map true.
//
// Data flows one way; a package imports only what stands above it (and
// internal/):
//
//	gatewaylite/  importers/  demo/   producers: write through the model
//	        │
//	        ▼
//	activity/                         the model: types, state machine (Execution.Apply),
//	        │                         retry policy (Decide), signed log, store (Tx)
//	        ▼
//	analyze/                          suspects, the five questions, verdicts, what-if
//	        │
//	        ▼
//	report/                           timelines, Markdown and HTML reports, tables
//	        │
//	        ▼
//	tui/                              the console: Components held in slices
//	        │
//	        ▼
//	cmd/mcpdup/                       wiring: builds the pieces, hands the console
//	                                  its store and its importer
//
// A producer never imports a reader; analyze/, report/ and tui/ link no
// producer, no MCP SDK and no SSH; nothing imports tui/ or cmd/; and the
// shipped binary links no testing package. fixtures/ holds generated data
// and its generator.
package mcpdup
