package activity

// replay rebuilds, from the log alone, every row the projection tables
// must hold: the same row functions the writer uses (tables.go), the same
// state machine (Execution.Apply). It is how `audit verify --db` proves
// the tables the console, the analysis and the gateway read.

import (
	"fmt"
)

// rowSink receives each row replay has finished (a row no later record
// can change): begin hands out the builder the row function fills, end
// takes the row.
type rowSink interface {
	begin(t *table) rowBuilder
	end(t *table)
}

// replay holds what later records may still change: executions not in a
// terminal state, runs (a run_end may follow), approvals (a decision may
// follow) and the vault.
type replay struct {
	sink      rowSink
	execs     map[ExecutionID]*replayExec
	runs      map[RunID]*replayRun
	runOrder  []RunID
	approvals map[string]*replayApproval
	apvOrder  []string
	vault     *VaultEvent
	// refs are the result refs transitions name: true where the store
	// must hold the content (a live execution's; an import names results
	// whose content stayed in the other log).
	refs     map[string]bool
	problems []TableProblem // records the model refuses
	records  int64
}

type replayExec struct {
	e            Execution
	seq, updated int64
}

type replayRun struct {
	r   Run
	seq int64
}

type replayApproval struct {
	a            Approval
	seq, decided int64
}

func newReplay(sink rowSink) *replay {
	return &replay{sink: sink, execs: map[ExecutionID]*replayExec{}, runs: map[RunID]*replayRun{},
		approvals: map[string]*replayApproval{}, refs: map[string]bool{}}
}

// add replays one record's canonical bytes (already in seq order).
func (p *replay) add(seq int64, canonical []byte) {
	p.records++
	var rec Record
	var err error
	var ok bool
	if rec.Seq, rec.Kind, rec.Data, ok = recordPayload(canonical); !ok {
		rec, err = ParseRecord(canonical)
	}
	if err == nil && rec.Seq != seq {
		err = fmt.Errorf("record claims seq %d", rec.Seq)
	}
	var ev any
	if err == nil {
		rec.Seq = seq
		ev, err = rec.eventOfProvenLog()
	}
	if err == nil {
		err = p.apply(seq, ev)
	}
	if err != nil {
		p.refuse(seq, err)
	}
}

// refuse notes a record the model cannot apply: the tables cannot be
// what a writer would have made of it.
func (p *replay) refuse(seq int64, err error) {
	p.problems = append(p.problems, TableProblem{Table: "audit_log", Row: fmt.Sprint(seq), Seq: seq, Code: ProblemUnapplied,
		Message: fmt.Sprintf("log record %d cannot be applied: %v", seq, err)})
}

func (p *replay) apply(seq int64, ev any) error {
	switch v := ev.(type) {
	case *Source:
		b := p.sink.begin(sourcesTable)
		sourceRow(b, *v, seq)
		p.sink.end(sourcesTable)
	case *Run:
		if p.runs[v.ID] != nil {
			return fmt.Errorf("run %s started twice", v.ID)
		}
		p.runs[v.ID] = &replayRun{*v, seq}
		p.runOrder = append(p.runOrder, v.ID)
	case *RunEnd:
		r := p.runs[v.RunID]
		if r == nil {
			return fmt.Errorf("run %s ends but never started", v.RunID)
		}
		r.r.EndedAt = Some(v.At)
	case *Grant:
		b := p.sink.begin(grantsTable)
		grantRow(b, *v, seq)
		p.sink.end(grantsTable)
	case *Call:
		b := p.sink.begin(callsTable)
		callRow(b, *v, seq)
		p.sink.end(callsTable)
	case *Execution:
		return p.accept(seq, *v)
	case *Transition:
		return p.transition(seq, *v)
	case *Resolution:
		b := p.sink.begin(resolutionsTable)
		resolutionRow(b, *v, seq)
		p.sink.end(resolutionsTable)
	case *VaultEvent:
		if v.Source.IsZero() { // an imported event leaves this vault alone
			p.vault = v
		}
		b := p.sink.begin(vaultIndexTable)
		b.int(seq)
		p.sink.end(vaultIndexTable)
	case *Approval:
		return p.approval(seq, *v)
	default:
		return fmt.Errorf("unexpected %T", ev)
	}
	return nil
}

func (p *replay) accept(seq int64, e Execution) error {
	if e.State != StateAccepted {
		return fmt.Errorf("execution %s is accepted in state %s", e.ID, e.State)
	}
	if p.execs[e.ID] != nil {
		return fmt.Errorf("execution %s accepted twice", e.ID)
	}
	p.execs[e.ID] = &replayExec{e: e, seq: seq, updated: seq}
	b := p.sink.begin(transitionsTable)
	transitionRow(b, Transition{ExecutionID: e.ID, To: StateAccepted, At: e.Times.Accepted, CallID: e.CreatedByCall}, seq)
	p.sink.end(transitionsTable)
	return nil
}

func (p *replay) transition(seq int64, t Transition) error {
	x := p.execs[t.ExecutionID]
	if x == nil {
		return fmt.Errorf("transition of execution %s, which is not accepted or already terminal", t.ExecutionID)
	}
	if err := x.e.Apply(t); err != nil {
		return err
	}
	x.updated = seq
	if t.ResultRef != "" {
		p.refs[t.ResultRef] = p.refs[t.ResultRef] || x.e.Source.IsZero()
	}
	b := p.sink.begin(transitionsTable)
	transitionRow(b, t, seq)
	p.sink.end(transitionsTable)
	if x.e.State.Terminal() { // nothing can change it now: finish its row
		b := p.sink.begin(executionsTable)
		executionRow(b, x.e, x.seq, x.updated)
		p.sink.end(executionsTable)
		delete(p.execs, t.ExecutionID)
	}
	return nil
}

// approval follows putApproval: a request is a row, a decision changes its
// request's row or, without one, is a row of its own.
func (p *replay) approval(seq int64, a Approval) error {
	x := p.approvals[a.ID]
	if x == nil {
		p.approvals[a.ID] = &replayApproval{a: a, seq: seq, decided: seq}
		p.apvOrder = append(p.apvOrder, a.ID)
		return nil
	}
	if err := a.answers(x.a); err != nil {
		return fmt.Errorf("approval %s %w", a.ID, err)
	}
	x.a.State, x.a.DecidedAt, x.a.Operator, x.a.Note = a.State, a.DecidedAt, a.Operator, a.Note
	x.decided = seq
	return nil
}

// finish hands over every row still open.
func (p *replay) finish() {
	for _, x := range p.execs {
		b := p.sink.begin(executionsTable)
		executionRow(b, x.e, x.seq, x.updated)
		p.sink.end(executionsTable)
	}
	for _, id := range p.runOrder {
		x := p.runs[id]
		b := p.sink.begin(runsTable)
		runRow(b, x.r, x.seq)
		p.sink.end(runsTable)
	}
	for _, id := range p.apvOrder {
		x := p.approvals[id]
		b := p.sink.begin(approvalsTable)
		approvalRow(b, x.a, x.seq, x.decided)
		p.sink.end(approvalsTable)
	}
	if p.vault != nil {
		b := p.sink.begin(metaTable)
		metaRow(b, "vault", vaultValue(*p.vault))
		p.sink.end(metaTable)
	}
}
