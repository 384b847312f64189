package analyze

import "time"

// Row is what a list of suspects shows of one: enough to sort, filter and
// draw it. A whole suspect (its calls, executions, transitions and five
// answers with evidence) is ~15 KB; a row is a few hundred bytes, so a
// console can list 100,000 of them, and reads one whole (Find, through an
// index) when it is opened.
type Row struct {
	ID         string
	EffectKey  string
	Tool       string
	Target     string
	Title      string
	Verdict    Verdict
	Severity   Severity
	Calls      int
	Executions int
	FirstAt    time.Time
}

// Row is the suspect's row.
func (s *Suspect) Row() Row {
	return Row{ID: s.ID, EffectKey: s.EffectKey, Tool: s.Tool, Target: s.Target, Title: s.Title, Verdict: s.Verdict,
		Severity: s.Severity, Calls: s.NCalls(), Executions: s.NExecutions(), FirstAt: s.FirstAt}
}
