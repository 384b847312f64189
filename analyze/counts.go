package analyze

import (
	"fmt"
	"strings"
)

// Counts tallies suspects by verdict.
type Counts map[Verdict]int

// Add counts a suspect.
func (c Counts) Add(s *Suspect) { c[s.Verdict]++ }

// Total is the number of suspects counted.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// String lists the non-zero counts, most alarming first.
func (c Counts) String() string {
	var parts []string
	for _, v := range Verdicts {
		if c[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[v], v))
		}
	}
	if len(parts) == 0 {
		return "no suspects"
	}
	return strings.Join(parts, ", ")
}
