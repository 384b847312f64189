// Package jsondepth bounds how deeply a JSON document nests before a
// recursive decoder sees it: segmentio/encoding/json (fast, used for the
// bulk of records and spans) has no limit of its own, and a few megabytes
// of '[' overflowed the goroutine stack and killed the process. The MCP Go
// SDK guards its own decoding the same way.
package jsondepth

import "fmt"

// Max is the nesting any log or record this tool reads needs, with a wide
// margin (the canonical form of a record allows 512).
const Max = 1000

// Check reports an error if data nests objects and arrays deeper than
// max. It skips over strings and does not otherwise validate: the decoder
// does that.
func Check(data []byte, max int) error {
	depth := 0
	inString, escaped := false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > max {
				return fmt.Errorf("JSON nested deeper than %d levels", max)
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
