package audit

import (
	"fmt"
	"strings"
)

// Integrity is what a verification proved about the data something was
// computed from, in the words the console, every report and the README
// share: verified (log and tables, through record N), tampered, or not
// checked; and what it could not prove (key not pinned, unsealed tail).
type Integrity struct {
	State string `json:"state"` // verified | tampered | not_checked
	// Through is how many records the proof covers: the log's records
	// checked, and the tables rebuilt from them.
	Through   int64 `json:"verified_through"`
	KeyPinned bool  `json:"key_pinned"`
	// Unsealed records are chained but no verified checkpoint signs them.
	Unsealed int64 `json:"unsealed"`
	Tables   bool  `json:"tables_checked"`
	// TablesThrough is how many records the table check covered when it
	// is behind the log (a live console checks the tables less often).
	TablesThrough int64 `json:"tables_verified_through,omitempty"`
	// WitnessGap: the witness file cannot rule out a rollback (missing,
	// begun again, edited): the rollback_fork check's warning.
	WitnessGap bool `json:"witness_incomplete,omitempty"`
	// Proven is set when only the records an output rests on were proven
	// (RecordsProven), not the whole log.
	Proven   int    `json:"records_proven,omitempty"`
	Problems int    `json:"problems"`
	Text     string `json:"text"`
}

// Integrity states.
const (
	IntegrityVerified   = "verified"
	IntegrityTampered   = "tampered"
	IntegrityNotChecked = "not_checked"
)

// The phrases, one place for all of them (README "Integrity" uses them).
const (
	PhraseKeyNotPinned = "key not pinned"
	PhraseUnsealedTail = "unsealed tail"
	PhraseNoTables     = "tables not checked"
	PhraseTablesAt     = "tables at record"
	PhraseWitnessGap   = "witness incomplete"
	// PhraseNoKey: nothing signed could be checked.
	PhraseNoKey = "no key to check the log's signatures"
	// PhraseRestNotChecked: only some records were proven (RecordsProven).
	PhraseRestNotChecked = "the rest of the log not checked"
)

// Integrity summarises the report.
func (r *Report) Integrity() Integrity {
	in := Integrity{Through: r.Records, KeyPinned: r.KeyPinned, Unsealed: r.Unsealed, Problems: len(r.Problems) + r.ProblemsOmitted,
		TablesThrough: r.TablesThrough}
	for _, c := range r.Checks {
		if c.Name == CheckTables && c.Status != StatusSkipped {
			in.Tables = true
		}
		if c.Name == CheckTrusted && c.Status == StatusWarning {
			in.WitnessGap = true
		}
	}
	if r.Tampered {
		in.State = IntegrityTampered
		in.Text = fmt.Sprintf("TAMPERED: %d problem(s) in the log or its tables; run mcpdup audit verify to see them", in.Problems)
		return in
	}
	if r.Result == ResultUnsigned {
		// Chain and tables agree, but anyone who can write the database
		// can rewrite both: nothing here is proven by a signature.
		in.State = IntegrityNotChecked
		in.Text = "not checked: " + PhraseNoKey + " (its chain and tables agree, which anyone able to write the database could have made so); run where its signing key is, or pass the key: mcpdup audit verify --key"
		return in
	}
	in.State = IntegrityVerified
	caveats := in.caveats(": %d records")
	what := "log and tables"
	if !in.Tables {
		what = "log"
	}
	in.Text = fmt.Sprintf("verified: %s through record %d (%d records)", what, max(r.Records-1, 0), r.Records)
	if in.Tables && in.TablesThrough > 0 {
		in.Text = fmt.Sprintf("verified: log through record %d, tables through record %d", max(r.Records-1, 0), in.TablesThrough-1)
	}
	if r.Records == 0 {
		in.Text = "verified: empty log"
	}
	if len(caveats) > 0 {
		in.Text += " (" + strings.Join(caveats, ", ") + ")"
	}
	return in
}

// RecordsProven is the integrity of an output checked record by record:
// the records it rests on were proven part of the signed log and its rows
// compared with them (analyze.Prove), problems naming those that were not.
// It says so, and that the rest of the log was not read: a row deleted
// elsewhere is not seen.
func RecordsProven(records, unsealed int, problems []string) Integrity {
	in := Integrity{Proven: records, Problems: len(problems), Unsealed: int64(unsealed)}
	if len(problems) > 0 {
		in.State = IntegrityTampered
		in.Text = fmt.Sprintf("TAMPERED: %d of the records this rests on are not proven or differ from its rows (first: %s); run mcpdup audit verify", len(problems), problems[0])
		return in
	}
	in.State = IntegrityVerified
	where := "in the signed log"
	caveats := []string{PhraseKeyNotPinned}
	if unsealed > 0 {
		where = "in the log"
		caveats = append(caveats, fmt.Sprintf("%d of them in the %s: chained, not yet signed", unsealed, PhraseUnsealedTail))
	}
	in.Text = fmt.Sprintf("verified: the %d records this rests on are %s and its rows match them (%s); %s (mcpdup audit verify)",
		records, where, strings.Join(caveats, ", "), PhraseRestNotChecked)
	return in
}

// NotChecked is the integrity of data nobody verified, and why.
func NotChecked(why string) Integrity {
	return Integrity{State: IntegrityNotChecked, Text: "not checked: " + why}
}

// Short is the status bar's form: a mark and the fewest words.
func (in Integrity) Short() string {
	switch in.State {
	case IntegrityTampered:
		return fmt.Sprintf("audit ✗ TAMPERED (%d problems)", in.Problems)
	case IntegrityNotChecked:
		if strings.Contains(in.Text, PhraseNoKey) {
			return "audit – not checked (no key)"
		}
		return "audit – not checked"
	}
	s := "audit ✓ verified"
	if caveats := in.caveats(" %d"); len(caveats) > 0 {
		s += " · " + strings.Join(caveats, " · ")
	}
	return s
}

// caveats names what a verified state could not prove; tail formats the
// unsealed count after its phrase.
func (in Integrity) caveats(tail string) []string {
	var out []string
	if !in.KeyPinned {
		out = append(out, PhraseKeyNotPinned)
	}
	if in.Unsealed > 0 {
		out = append(out, PhraseUnsealedTail+fmt.Sprintf(tail, in.Unsealed))
	}
	if in.WitnessGap {
		out = append(out, PhraseWitnessGap)
	}
	if !in.Tables {
		out = append(out, PhraseNoTables)
	}
	if in.Tables && in.TablesThrough > 0 {
		out = append(out, fmt.Sprintf("%s %d", PhraseTablesAt, in.TablesThrough-1))
	}
	return out
}
