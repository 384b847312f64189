package activity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/note"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DefaultDB is where the database lives unless --db or MCPDUP_DB says
// otherwise: $XDG_DATA_HOME/mcpdup/mcpdup.db (~/.local/share/...).
func DefaultDB() string {
	if p := os.Getenv("MCPDUP_DB"); p != "" {
		return p
	}
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "mcpdup.db"
		}
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "mcpdup", "mcpdup.db")
}

// Options configure Open.
type Options struct {
	// KeyDir holds signing keys; empty means DefaultKeyDir().
	KeyDir string
	// ReadOnly opens an existing database without writing to it.
	ReadOnly bool
	// Origin names the log of a new database; empty picks
	// "mcpdup.local/<ulid>". Ignored for an existing database.
	Origin string
	// Seal sets checkpoint cadence; zero fields take the defaults.
	Seal SealPolicy
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// PageSize is the page size of a database this Open creates (a power
	// of two, 512 to 65536); 0 means DefaultPageSize. An existing database
	// keeps the size it was created with.
	PageSize int
	// Witness is the file every checkpoint this store signs is appended
	// to, outside the database; empty means WitnessFile(KeyDir, origin).
	Witness string
	// WALLimit is the WAL size past which the background checkpoint also
	// resets the WAL (see checkpointStep); 0 means DefaultWALLimit.
	WALLimit int64
}

// DefaultWALLimit bounds the WAL under continuous writes: past it, each
// background checkpoint also tries to restart the log.
const DefaultWALLimit = 32 << 20

// walResetWait is the most a WAL reset waits for readers, holding off
// writers meanwhile (a reset must wait for no reader to use the WAL). A
// reset that cannot happen in time is tried again a second later.
const walResetWait = 25 * time.Millisecond

// DefaultPageSize suits a gateway's database: each of its commits writes
// every page it touched to the WAL, whole, and with 16 KiB pages a
// tools/call through the gateway took 5.2–5.8 ms p50 instead of 3.8.
const DefaultPageSize = 4096

// ImportPageSize suits a database filled by imports: one long
// transaction of appends, with fewer pages to split, log and copy when
// they are larger. 200k own-export records imported in 3.0–3.4 s (CPU
// 5.1–5.7 s) instead of 3.4–4.2 s (5.6–6.7 s) with 4 KiB pages, and the
// close's checkpoint took 0.65–0.75 s instead of 0.82–0.95 s. mcpdup
// import creates its databases with it.
const ImportPageSize = 16384

// SealPolicy says when a signed checkpoint is written: after every operator
// resolution, after EveryRecords unsealed records, when the oldest unsealed
// record is older than Every, and at Close.
type SealPolicy struct {
	EveryRecords int64         // default 1000
	Every        time.Duration // default 60s; the store checks on this interval
}

func (p SealPolicy) withDefaults() SealPolicy {
	if p.EveryRecords <= 0 {
		p.EveryRecords = 1000
	}
	if p.Every <= 0 {
		p.Every = time.Minute
	}
	return p
}

// Store is the activity store: a SQLite file (the embedded default) or a
// PostgreSQL database several gateways share (postgres.go).
type Store struct {
	path   string // the file, or the URL without its password
	dsn    string // PostgreSQL: the URL to connect with
	pg     bool
	ops    *sql.DB // PostgreSQL: writes outside the write lock (event streams)
	renew  *sql.DB // PostgreSQL: lease renewals, on a connection nothing else waits on
	w      *sql.DB // one connection: BEGIN IMMEDIATE serialises writers
	r      *sql.DB // readers; WAL lets them run beside the writer
	ckpt   *sql.DB // WAL checkpoints, off the commit path
	origin string
	opts   Options

	signer note.Signer // nil when this host has no key for the origin
	vkey   string
	keyErr error // why signer is nil
	// recoveredDecisions: operator decisions Open's recovery seal signed.
	recoveredDecisions []int64
	stmts              sync.Map // query → *sql.Stmt on the writer connection
	knownRuns          sync.Map // RunID → true: runs committed, so requireRun skips a query
	rstmts             sync.Map // query → *sql.Stmt on the reader pool
	proven             sync.Map // seq → provenLeaf: records proven into the signed log
	rootCache          sync.Map // checkpoint note → signedTree whose signature verified
	witness            witnessTail
	wc                 writerCache // the committer's; see writercache.go
	edgeMu             sync.Mutex
	edge               Edge  // tree edge after this process's last commit
	edgeSize           int64 // log size edge describes; -1: none
	sealMu             sync.Mutex
	sealAsked          atomic.Bool // a writer found sealMu held and went on (sealIfDue)
	sealedHook         func()      // tests: runs after a seal commits, sealMu held
	tail               tailState
	closeOnce          sync.Once
	stop               chan struct{}
	closing            chan struct{} // closed when Close starts: no new writes
	// hard is the context of every write transaction; abort cancels it
	// (Abort, or Close after CloseGrace) so a database that stopped
	// answering fails the writes in flight instead of holding them.
	hard  context.Context
	abort context.CancelFunc
	// clockOffset is the database's clock minus this host's, in ns
	// (clock.go).
	clockOffset atomic.Int64
	writes      chan *writeReq // to the committer
	committer   sync.WaitGroup
	// walReset asks the committer to reset the WAL (checkpointStep).
	walReset  atomic.Bool
	pageBytes atomic.Int64 // the database's page size, once read
	stopped   sync.WaitGroup
	recovered int64        // records Open sealed for an earlier writer
	sig       commitSignal // wakes Committed's waiters
	vaultSeen atomic.Int64 // the newest vault record a decision rested on
}

// ErrNotExist is returned when a read-only open finds no database.
var ErrNotExist = errors.New("database does not exist")

// Open opens or creates the database at path: a SQLite file, or a
// postgres:// URL (IsPostgres). A new database file is created 0600 in a
// 0700 directory; a new database of either kind gets a fresh origin and
// signing key.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Seal = opts.Seal.withDefaults()
	if opts.KeyDir == "" {
		opts.KeyDir = DefaultKeyDir()
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if n := opts.PageSize; n < 512 || n > 65536 || n&(n-1) != 0 {
		shown := path
		if IsPostgres(path) {
			shown = RedactURL(path)
		}
		return nil, fmt.Errorf("open %s: page size %d: must be a power of two from 512 to 65536", shown, n)
	}
	s := &Store{path: path, opts: opts, stop: make(chan struct{}), closing: make(chan struct{}),
		writes: make(chan *writeReq), edgeSize: -1}
	s.hard, s.abort = context.WithCancel(context.Background())
	created, err := s.openPools(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.init(ctx, created); err != nil {
		s.closePools()
		return nil, fmt.Errorf("open %s: %w", s.path, err)
	}
	if !opts.ReadOnly {
		s.committer.Add(1)
		go s.commitLoop()
		if !s.pg {
			s.stopped.Add(1)
			go s.checkpointLoop()
		}
	}
	if !opts.ReadOnly && s.signer != nil {
		// Records an earlier writer left unsealed (it crashed between a
		// commit and its seal) are sealed now, and the checkpoint says so.
		// Not on PostgreSQL: there the tail may be a live replica's.
		if n, _, err := s.unsealed(ctx); err == nil && n > 0 && !s.pg {
			cp, err := s.Seal(ctx, SealRecovery)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("open %s: seal %d records left unsealed: %w", s.path, n, err)
			}
			s.recovered = n
			if s.recoveredDecisions, err = s.decisionsIn(ctx, cp.Size-n, cp.Size); err != nil {
				s.Close()
				return nil, fmt.Errorf("open %s: read the records left unsealed: %w", s.path, err)
			}
		}
		s.stopped.Add(1)
		go s.sealLoop()
	}
	return s, nil
}

// Recovered is how many records an earlier writer had left unsealed that
// Open sealed (reason "recovery"): a crash, to be said.
func (s *Store) Recovered() int64 { return s.recovered }

// RecoveredDecisions are the operator decisions among them: the store
// seals a decision as it writes it and writes none without the key, so
// each was written behind its back or by a writer that crashed between
// its commit and its seal. audit verify names them too.
func (s *Store) RecoveredDecisions() []int64 { return s.recoveredDecisions }

// decisionsIn returns the operator decisions among records from..to-1.
func (s *Store) decisionsIn(ctx context.Context, from, to int64) ([]int64, error) {
	var out []int64
	stop := errors.New("past the range")
	err := s.ScanLog(ctx, from, func(seq int64, canonical, _ []byte) error {
		if seq >= to {
			return stop
		}
		if _, ok := DecisionRecord(canonical); ok {
			out = append(out, seq)
		}
		return nil
	})
	if errors.Is(err, stop) {
		err = nil
	}
	return out, err
}

// WitnessPath is the file the store appends its checkpoints to.
func (s *Store) WitnessPath() string {
	if s.opts.Witness != "" {
		return s.opts.Witness
	}
	return WitnessFile(s.opts.KeyDir, s.origin)
}

func ensureFile(path string, readOnly bool) (created bool, err error) {
	fi, err := os.Stat(path)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		// SQLite would say "disk I/O error" of a directory.
		return false, fmt.Errorf("open %s: not a database file: it is a %s", path, fileKind(fi.Mode()))
	case err == nil:
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("open %s: %w", path, err)
	case readOnly:
		return false, fmt.Errorf("open %s: %w", path, ErrNotExist)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	// Create the file ourselves so it is 0600 from the first byte; SQLite
	// gives the -wal and -shm files the same mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, fmt.Errorf("create %s: %w", path, err)
	}
	return true, f.Close()
}

// fileKind names what a path that is not a regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// setPageSize gives a new, empty database file its page size and WAL
// mode. The size is fixed once page 1 is written, which switching to WAL
// does; the driver runs a DSN's pragmas in lexical order (journal_mode
// before page_size), so the DSN cannot set it.
func setPageSize(ctx context.Context, path string, size int) error {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size=%d", size)); err != nil {
		return fmt.Errorf("set page size: %w", err)
	}
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return fmt.Errorf("set WAL mode: %w", err)
	}
	return nil
}

// openPools opens the connections to the database, creating a missing
// SQLite file; created says this open made the database.
func (s *Store) openPools(ctx context.Context) (created bool, err error) {
	if IsPostgres(s.path) {
		s.pg, s.dsn, s.path = true, s.path, RedactURL(s.path)
		return false, s.openPostgresPools() // init creates the schema
	}
	created, err = ensureFile(s.path, s.opts.ReadOnly)
	if err != nil {
		return false, err
	}
	if created {
		if err := setPageSize(ctx, s.path, s.opts.PageSize); err != nil {
			return false, fmt.Errorf("create %s: %w", s.path, err)
		}
	}
	return created, s.openSQLitePools()
}

func (s *Store) openSQLitePools() error {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	if s.opts.ReadOnly {
		q.Set("mode", "ro")
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		// FULL: a commit is on disk when Exec returns. The gateway relies on
		// "dispatched" being durable before the first byte goes out.
		q.Add("_pragma", "synchronous(FULL)")
		// 32 MB of page cache: a long import transaction otherwise spills
		// dirty pages to the WAL long before it commits.
		q.Add("_pragma", "cache_size(-32768)")
		// Statement journals (the undo of a multi-row INSERT inside the
		// import's transaction, a savepoint's pages) in memory: on disk they
		// spill past 64 KiB to a temp file, page by page, and nothing after
		// a crash needs them. A 200k-span import wrote 170k pages there.
		q.Add("_pragma", "temp_store(MEMORY)")
		// Checkpoints run on their own connection (checkpointLoop) so a
		// commit never waits for the WAL to be copied into the database.
		q.Add("_pragma", "wal_autocheckpoint(0)")
		// A WAL that restarts after growing (a burst, an import) is cut
		// back to this size instead of keeping its high-water mark.
		q.Add("_pragma", "journal_size_limit(67108864)")
		q.Set("_txlock", "immediate")
	}
	dsn := "file:" + (&url.URL{Path: s.path}).EscapedPath() + "?" + q.Encode()
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fmt.Errorf("open %s: %w", s.path, err)
	}
	w.SetMaxOpenConns(1)
	s.w = w
	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(10000)")
	rq.Add("_pragma", "query_only(1)")
	// No mmap_size: mapping the file made a million-record scan no faster
	// (verify 2.86 s mapped, 3.02 s not; analysis 2.81 s, 2.68 s) and
	// each pooled connection maps it again, so the console's resident
	// memory reached 3.4 GB on an 861 MB database.
	r, err := sql.Open("sqlite", "file:"+(&url.URL{Path: s.path}).EscapedPath()+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return fmt.Errorf("open %s: %w", s.path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4) // reopening a connection costs more than most queries
	s.r = r
	if !s.opts.ReadOnly {
		cq := url.Values{}
		cq.Add("_pragma", "busy_timeout(10000)")
		c, err := sql.Open("sqlite", "file:"+(&url.URL{Path: s.path}).EscapedPath()+"?"+cq.Encode())
		if err != nil {
			r.Close()
			w.Close()
			return fmt.Errorf("open %s: %w", s.path, err)
		}
		c.SetMaxOpenConns(1)
		s.ckpt = c
	}
	return nil
}

// checkpointLoop copies the WAL into the database file in the background,
// without blocking writers (PASSIVE), so the WAL stays small.
func (s *Store) checkpointLoop() {
	defer s.stopped.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.checkpointStep()
		}
	}
}

// checkpointStep copies the WAL into the database without blocking
// writers (PASSIVE). That alone never restarts the log while writes keep
// coming (a commit lands while it copies, so the WAL is never wholly
// copied when the next writer looks), and the WAL grew to gigabytes under
// a generator. So past the limit it asks the committer to reset the WAL
// between two commits (resetWAL): a checkpointer of its own would have to
// win the write lock from a busy committer, and rarely did.
//
// The limit is on the frames the log holds, not on the file's size: a
// reset restarts the log at the file's start and keeps the file, so
// later commits overwrite blocks the file already has, and a commit's
// fsync then need not also commit the file's growth (a one-row commit
// 0.39 against 0.50 ms here, BenchmarkDurableCommitFloor).
func (s *Store) checkpointStep() {
	frames := s.checkpointWAL("PASSIVE")
	limit := s.opts.WALLimit
	if limit <= 0 {
		limit = DefaultWALLimit
	}
	if frames*(s.pageSize()+walFrameHeader) > limit {
		s.walReset.Store(true)
	}
}

// walFrameHeader is the bytes SQLite's WAL adds to each page it holds.
const walFrameHeader = 24

// pageSize is the database's page size, read once.
func (s *Store) pageSize() int64 {
	if n := s.pageBytes.Load(); n > 0 {
		return n
	}
	var n int64
	if err := s.ckpt.QueryRow("PRAGMA page_size").Scan(&n); err != nil || n <= 0 {
		return int64(DefaultPageSize)
	}
	s.pageBytes.Store(n)
	return n
}

// resetWAL runs on the committer, between commits, when checkpointStep
// asked: a RESTART checkpoint that copies what PASSIVE left (little) and
// restarts the log at the start of its file, waiting at most
// walResetWait for readers to let go of it. One that cannot is asked for
// again at the next step, so a long read costs the writer one short wait
// a second, not one per commit. (journal_size_limit trims a file grown
// past it when the log restarts.)
func (s *Store) resetWAL() {
	if !s.walReset.Swap(false) {
		return
	}
	s.resetWALOn(s.w, "RESTART")
}

// resetWALOn runs a checkpoint in mode (RESTART, or TRUNCATE on close to
// leave an empty file) on db, waiting at most walResetWait for readers.
func (s *Store) resetWALOn(db *sql.DB, mode string) {
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		return
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", walResetWait.Milliseconds())); err != nil {
		return
	}
	c.ExecContext(ctx, "PRAGMA wal_checkpoint("+mode+")") // busy: asked again at the next step
	c.ExecContext(ctx, "PRAGMA busy_timeout = 10000")
}

// checkpointWAL runs a checkpoint in mode and returns how many frames the
// log holds.
func (s *Store) checkpointWAL(mode string) (frames int64) {
	var busy, log, copied int64
	if err := s.ckpt.QueryRow("PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &log, &copied); err != nil {
		// Not fatal: the WAL keeps the data; the next attempt copies it.
		return 0
	}
	return log
}

func (s *Store) closePools() {
	s.r.Close()
	s.w.Close()
	for _, db := range []*sql.DB{s.ops, s.renew} {
		if db != nil {
			db.Close()
		}
	}
	if s.ckpt != nil {
		s.ckpt.Close()
	}
}

func (s *Store) init(ctx context.Context, created bool) error {
	if s.pg {
		var err error
		if created, err = s.pgInit(ctx); err != nil {
			return err
		}
		if err := s.measureClock(ctx); err != nil {
			return err
		}
		if err := s.loadOrigin(ctx, created); err != nil {
			return err
		}
		return s.loadSigner(created)
	}
	var version int
	if err := s.w.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case version > SchemaVersion:
		return errNewerSchema(version)
	case version < SchemaVersion && s.opts.ReadOnly:
		return fmt.Errorf("schema version %d is older than %d: open it once without read-only mode to migrate", version, SchemaVersion)
	case version < SchemaVersion:
		if err := s.migrate(ctx, version); err != nil {
			return err
		}
	}
	if err := s.loadOrigin(ctx, created); err != nil {
		return err
	}
	return s.loadSigner(created)
}

func (s *Store) migrate(ctx context.Context, from int) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for v := from; v < len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	// PRAGMA takes no bound parameters.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *Store) loadOrigin(ctx context.Context, created bool) error {
	err := s.r.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'origin'").Scan(&s.origin)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) || s.opts.ReadOnly {
		return fmt.Errorf("read origin: %w", err)
	}
	origin := s.opts.Origin
	if origin == "" {
		origin = "mcpdup.local/" + newID("", s.Now())
	}
	if err := checkOrigin(origin); err != nil {
		return err
	}
	// OR IGNORE: another replica may name a new database at the same
	// moment; the origin is whichever was written first.
	_, err = s.w.ExecContext(ctx, `INSERT OR IGNORE INTO meta(key, value) VALUES ('origin', ?), ('created_at', ?)`,
		origin, FormatTime(s.Now()))
	if err != nil {
		return fmt.Errorf("write origin: %w", err)
	}
	if err := s.w.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'origin'").Scan(&s.origin); err != nil {
		return fmt.Errorf("read origin: %w", err)
	}
	return nil
}

// checkOrigin applies the signed-note key name rules, since the origin is
// also the key name.
func checkOrigin(o string) error {
	if o == "" {
		return errors.New("origin is empty")
	}
	for _, r := range o {
		if r <= ' ' || r == '+' || r == 0x7f {
			return fmt.Errorf("origin %q: no spaces, control characters or '+'", o)
		}
	}
	return nil
}

func (s *Store) loadSigner(created bool) error {
	signer, vkey, err := LoadSigner(s.opts.KeyDir, s.origin)
	if errors.Is(err, ErrNoKey) && created {
		if _, err = CreateSigningKey(s.opts.KeyDir, s.origin); err != nil {
			return err
		}
		signer, vkey, err = LoadSigner(s.opts.KeyDir, s.origin)
	}
	if errors.Is(err, ErrNoKey) {
		// Records are still chained; they stay unsealed until a host with
		// the key seals them. Verification reports the unsealed tail.
		s.keyErr = err
		return nil
	}
	if err != nil {
		return err
	}
	s.signer, s.vkey = signer, vkey
	if !s.opts.ReadOnly {
		// Recorded for display only; verifiers never trust it.
		_, err := s.w.Exec(`INSERT OR IGNORE INTO meta(key, value) VALUES ('public_key', ?)`, vkey)
		return err
	}
	return nil
}

// Path returns the database file path, or its URL without the password.
func (s *Store) Path() string { return s.path }

// Origin returns the log origin, which is also the signing key's name.
func (s *Store) Origin() string { return s.origin }

// PublicKey returns the verifier key of this host's signing key for the
// log, or an error saying why there is none.
func (s *Store) PublicKey() (string, error) {
	if s.signer == nil {
		return "", s.keyErr
	}
	return s.vkey, nil
}

// CloseGrace is how long Close waits for the writes in flight before it
// abandons them (Abort).
var CloseGrace = 10 * time.Second

// Abort fails every write in flight, and every later one, at once: for a
// process that must stop while its database does not answer (a paused
// or unreachable server). What they would have written is not written.
func (s *Store) Abort() { s.abort() }

// waitAtMost waits for wg, or d; it says whether wg finished.
func waitAtMost(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Close seals the unsealed tail (a clean shutdown is a checkpoint) and
// closes the database. Writes still in flight after CloseGrace are
// abandoned (Abort), and Close says so. Closing twice is harmless.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.stopListening()
		if !s.opts.ReadOnly {
			close(s.stop)
			s.stopped.Wait()
			close(s.closing)
			if !waitAtMost(&s.committer, CloseGrace) {
				err = fmt.Errorf("close %s: the database did not answer for %v: the writes in flight were abandoned", s.path, CloseGrace)
				s.abort()
				s.committer.Wait()
			}
			if s.signer != nil && s.hard.Err() == nil {
				_, err = s.Seal(s.hard, SealShutdown)
			}
			// A short wait: a CLI writer (resolve, lock) must not wait on a
			// console's read to exit; a WAL left behind is the next
			// writer's to checkpoint.
			if !s.pg {
				s.walReset.Store(true)
				s.resetWALOn(s.ckpt, "TRUNCATE")
			}
		}
		s.closePools()
	})
	return err
}
