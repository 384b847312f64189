package activity

// The committer's cache of what it last committed: executions and the
// vault's proven state, kept across transactions while no other
// connection writes the database.

import (
	"database/sql"
)

// maxCachedExecutions bounds the committer's cache; past it the cache
// starts again empty (a gateway touches the executions of the calls in
// flight and of their retries, a few hundred).
const maxCachedExecutions = 4096

// writerCache holds, between transactions of the SQLite committer, the
// executions its transactions read or wrote and the vault state they
// proved. A gateway read each execution back for every transition (the
// outcome, the delivery) and proved the vault for every call: four
// statements a call.
//
// It is valid only while no other connection writes the database: each
// batch starts by reading PRAGMA data_version, which changes when another
// connection commits (a CLI resolve, another store, an edit behind the
// store's back), and the cache is dropped then. data_version counts per
// connection, so a temporary table marks the connection it was read on:
// a new writer connection (database/sql replaces a broken one) lacks it,
// and the cache is dropped too. What a batch adds is staged and kept
// only once the batch commits. PostgreSQL replicas write concurrently:
// there it is never used. Only the committer goroutine touches it.
type writerCache struct {
	version int64 // data_version it was filled under; -1: nothing to trust
	execs   map[ExecutionID]Execution
	vault   *vaultState
	// This batch's, promoted at its commit. A request that wrote a vault
	// record empties vault at once: from then on only stagedVault holds.
	stagedExecs map[ExecutionID]Execution
	stagedVault *vaultState
}

// vaultState is VaultLocked's answer.
type vaultState struct {
	locked bool
	reason string
	seq    int64 // the vault record this process wrote for it, or 0
}

// begin starts a batch in tx: the cache stands if no other connection
// has committed since it was filled.
func (c *writerCache) begin(s *Store, tx *sql.Tx) {
	c.stagedExecs, c.stagedVault = nil, nil
	var v, marked int64
	err := s.queryIn(tx, `SELECT data_version, (SELECT count(*) FROM temp.sqlite_master WHERE name = 'mcpdup_writer')
		FROM pragma_data_version`).Scan(&v, &marked)
	if err == nil && marked == 1 && v == c.version {
		return
	}
	c.drop()
	if err == nil && marked == 0 {
		_, err = tx.Exec(`CREATE TEMP TABLE IF NOT EXISTS mcpdup_writer(x)`)
	}
	if err == nil {
		c.version = v
	}
}

// drop empties the cache.
func (c *writerCache) drop() {
	c.version, c.execs, c.vault = -1, nil, nil
	c.stagedExecs, c.stagedVault = nil, nil
}

// stage keeps what a request that succeeded read and wrote, for the
// requests after it in the batch and, once the batch commits, the next.
func (c *writerCache) stage(w *Tx) {
	if c.stagedExecs == nil {
		c.stagedExecs = map[ExecutionID]Execution{}
	}
	for id, ent := range w.execs {
		c.stagedExecs[id] = ent.e
	}
	if w.vaultMoved {
		c.vault = nil
		c.stagedVault = w.vaultState // nil after an imported vault record: read it again
	} else if w.vaultState != nil {
		c.stagedVault = w.vaultState
	}
}

// commit promotes the batch's staged entries: the batch is on disk. A
// vault record this process wrote becomes the newest one a decision
// rested on (Store.vaultSeen), as one proven would.
func (c *writerCache) commit(s *Store) {
	if c.version < 0 {
		return
	}
	if len(c.execs)+len(c.stagedExecs) > maxCachedExecutions {
		c.execs = nil
	}
	if c.execs == nil {
		c.execs = make(map[ExecutionID]Execution, len(c.stagedExecs))
	}
	for id, e := range c.stagedExecs {
		c.execs[id] = e
	}
	if c.stagedVault != nil {
		c.vault = c.stagedVault
		if c.vault.seq > s.vaultSeen.Load() {
			s.vaultSeen.Store(c.vault.seq)
		}
	}
	c.stagedExecs, c.stagedVault = nil, nil
}

// execution is the cached execution id, if any.
func (c *writerCache) execution(id ExecutionID) (Execution, bool) {
	if e, ok := c.stagedExecs[id]; ok {
		return e, true
	}
	e, ok := c.execs[id]
	return e, ok
}

// vaultLocked is the cached vault state, if any.
func (c *writerCache) vaultLocked() *vaultState {
	if c.stagedVault != nil {
		return c.stagedVault
	}
	return c.vault
}

// queryIn runs a query of the committer's own in tx, prepared once.
func (s *Store) queryIn(tx *sql.Tx, query string) *sql.Row {
	if stmt := s.prepared(query); stmt != nil {
		return tx.Stmt(stmt).QueryRow()
	}
	return tx.QueryRow(query)
}
