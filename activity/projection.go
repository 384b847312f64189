package activity

// The executions projection inside a transaction: executions read or
// changed are cached, and flush writes each changed one's row once.

import (
	"fmt"
)

type execEntry struct {
	e         Execution
	dirty     bool
	seq       int64 // updated_seq to write
	insertSeq int64 // seq of the accepting record
	pending   bool  // accepted in this transaction, row not yet inserted
}

// insertExecution adds the projection row of an execution accepted in
// this transaction to the rows flush inserts.
func (w *Tx) insertExecution(ent *execEntry) error {
	var b argsRow
	executionRow(&b, ent.e, ent.insertSeq, ent.seq)
	return w.insert(&w.execRows, execInsert, b.vals...)
}

func (w *Tx) cache(e Execution, dirty bool, seq int64) {
	if w.execs == nil {
		w.execs = map[ExecutionID]*execEntry{}
	}
	ent := w.execs[e.ID]
	if ent == nil {
		ent = &execEntry{}
		w.execs[e.ID] = ent
	}
	ent.e, ent.seq = e, seq
	if dirty && !ent.dirty {
		ent.dirty = true
		w.dirty = append(w.dirty, ent)
	}
}

// maxBulkDirty is how many imported executions may wait for flush.
const maxBulkDirty = 1024

// flush writes the projection rows of executions changed in this
// transaction: several transitions of one execution cost one UPDATE, and
// one accepted in it is inserted once, in its latest state, many rows per
// statement.
func (w *Tx) flush() error {
	for _, ent := range w.dirty {
		if ent.dirty && ent.pending {
			if err := w.insertExecution(ent); err != nil {
				return err
			}
			ent.dirty, ent.pending = false, false
		}
	}
	if err := w.insertRows(&w.execRows); err != nil {
		return err
	}
	for _, ent := range w.dirty {
		if !ent.dirty {
			continue
		}
		e := ent.e
		var b argsRow
		executionRow(&b, e, ent.insertSeq, ent.seq)
		if err := w.exec(executionUpdate, executionsTable.updateArgs(b.vals)...); err != nil {
			return fmt.Errorf("execution %s: %w", e.ID, err)
		}
		ent.dirty = false
	}
	w.dirty = w.dirty[:0]
	if w.bulk && len(w.execs) > maxBulkCache {
		for id, ent := range w.execs {
			if !ent.dirty {
				delete(w.execs, id)
			}
		}
	}
	return nil
}
