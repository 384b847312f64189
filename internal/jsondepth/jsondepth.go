// Package jsondepth bounds how deeply a JSON document nests before a
// recursive decoder sees it: segmentio/encoding/json (fast, used for the
// bulk of records and spans) has no limit of its own, and a few megabytes
// of '[' overflowed the goroutine stack and killed the process. The MCP Go
// SDK guards its own decoding the same way.
package jsondepth

import (
	"bytes"
	"fmt"
)

// Max is the nesting any log or record this tool reads needs, with a wide
// margin (the canonical form of a record allows 512).
const Max = 1000

// Check reports an error if data nests objects and arrays deeper than
// max. It skips over strings and does not otherwise validate: the decoder
// does that. It jumps from one structural byte to the next (a record or a
// span line is mostly strings), so it costs little beside the decode.
func Check(data []byte, max int) error {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			end, ok := stringEnd(data, i+1)
			if !ok {
				return nil // unterminated: the decoder says so
			}
			i = end
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

// stringEnd is the index of the quote that closes a string whose body
// starts at from: the next quote not escaped by an odd run of
// backslashes.
func stringEnd(data []byte, from int) (int, bool) {
	for {
		q := bytes.IndexByte(data[from:], '"')
		if q < 0 {
			return 0, false
		}
		at := from + q
		n := 0
		for j := at - 1; j >= from && data[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return at, true
		}
		from = at + 1
	}
}
