// Package cells fits text into terminal cells: every view of the console
// cuts and pads its columns the same way.
package cells

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Clip cuts s to at most w cells, marking the cut with an ellipsis.
func Clip(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// Pad fills s with spaces to w cells; it never cuts.
func Pad(s string, w int) string {
	n := ansi.StringWidth(s)
	if n >= w {
		return s
	}
	return s + strings.Repeat(" ", w-n)
}

// Cursor marks the selected row of a list in text, not only in reverse
// video: with NO_COLOR (or a monochrome terminal) styles are dropped and
// the mark is all that shows where the cursor is. Unselected rows get the
// same width in spaces.
func Cursor(selected bool) string {
	if selected {
		return "› "
	}
	return "  "
}
