package audit

import (
	"fmt"
	"io"
	"strings"
)

var statusMarks = map[Status]string{
	StatusOK:      "ok  ",
	StatusFailed:  "FAIL",
	StatusWarning: "warn",
	StatusSkipped: "--  ",
}

// WriteText writes the report for a person: one line per check, in the
// order they ran, then each problem, then the verdict. Lines about records
// read "record N\tINVALID: ..." so they can be grepped.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "audit verify %s\n", r.Source)
	origin := r.Origin + " (from the log itself; pass --key to pin it)"
	if r.OriginPinned {
		origin = r.Origin + " (pinned by --key)"
	}
	if r.OriginPinned && !r.KeyPinned {
		origin = r.Origin + " (key read from this host's key directory, not pinned)"
	}
	fmt.Fprintf(&b, "  origin       %s\n", origin)
	fmt.Fprintf(&b, "  records      %d, %d checkpoints, sealed through %d, %d unsealed (checked in %.1fs)\n\n",
		r.Records, r.Checkpoints, r.SealedSize, r.Unsealed, float64(r.DurationMS)/1000)
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "  %s  %-22s %s\n", statusMarks[c.Status], c.Title, c.Detail)
	}
	if len(r.Problems) > 0 {
		b.WriteString("\n")
		for _, p := range r.Problems {
			where := "log"
			switch {
			case p.Seq >= 0:
				where = fmt.Sprintf("record %d", p.Seq)
			case p.Table != "":
				where = "table " + p.Table
			}
			fmt.Fprintf(&b, "%s\tINVALID: %s\n", where, p.Message)
		}
		if r.ProblemsOmitted > 0 {
			fmt.Fprintf(&b, "... and %d more problems (use -o json for the first %d)\n", r.ProblemsOmitted, maxProblemsKept)
		}
	}
	b.WriteString("\n")
	switch {
	case r.Tampered:
		fmt.Fprintf(&b, "result: TAMPERED: %d problem(s) found\n", len(r.Problems)+r.ProblemsOmitted)
	case r.Result == ResultUnsigned:
		b.WriteString("result: NOT VERIFIED: no key, so no signature was checked; the chain and tables agree, which anyone able to write this database could have made so (pass --key)\n")
	default:
		b.WriteString("result: OK: no tampering found in what could be checked\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
