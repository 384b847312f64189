package activity

import "sync"

// inserter runs a bulk writer's batched INSERTs on a goroutine of its own,
// so the next records are checked, encoded and hashed while SQLite writes
// the last ones: an import is otherwise one goroutine doing both in turn.
// Every other statement first waits until the inserts queued before it
// are done (sync), so reads see them and the first failure surfaces.
type inserter struct {
	jobs chan insertJob
	wg   sync.WaitGroup
	mu   sync.Mutex
	err  error // the first insert that failed
}

// insertJob is an insert to run, or (done set) a point to signal once
// everything queued before it has run.
type insertJob struct {
	run  func() error
	done chan struct{}
}

func newInserter() *inserter {
	// 32 batches may wait: with 8 the writer stalled on the inserter's
	// bursts (see importers' aheadBatches for the figures).
	in := &inserter{jobs: make(chan insertJob, 32)}
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		for j := range in.jobs {
			switch {
			case j.done != nil:
				close(j.done)
			case in.failed() != nil:
				// The write is lost anyway: skip what is left.
			default:
				if err := j.run(); err != nil {
					in.mu.Lock()
					in.err = err
					in.mu.Unlock()
				}
			}
		}
	}()
	return in
}

func (in *inserter) failed() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.err
}

// queue runs fn after the jobs queued before it.
func (in *inserter) queue(fn func() error) error {
	if err := in.failed(); err != nil {
		return err
	}
	in.jobs <- insertJob{run: fn}
	return nil
}

// sync waits for every queued job and reports the first failure.
func (in *inserter) sync() error {
	done := make(chan struct{})
	in.jobs <- insertJob{done: done}
	<-done
	return in.failed()
}

// stop ends the goroutine after the queued jobs and reports the first
// failure.
func (in *inserter) stop() error {
	close(in.jobs)
	in.wg.Wait()
	return in.err
}
