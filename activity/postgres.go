package activity

// PostgreSQL, the store several gateways share. The store's SQL is written
// once, in the dialect SQLite and PostgreSQL have in common; a PostgreSQL
// connection rewrites the little that differs as each statement is sent
// (pgRewrite), and the schema is the same migrations with SQLite's types
// and triggers translated (pgMigration). Writers on every replica are
// serialised by one transaction-scoped advisory lock, which is what BEGIN
// IMMEDIATE does on SQLite: one chain, appended in one order, so matching
// and the log need nothing else to agree across replicas.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// IsPostgres reports whether db names a PostgreSQL database (a
// postgres:// or postgresql:// URL) rather than a SQLite file.
func IsPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// writeLock is the advisory lock every write transaction takes first: all
// replicas' writes to one database happen one at a time ("mcpdup" in
// ASCII).
const writeLock = 0x6d6370647570

// lockWrites takes the write lock for the rest of tx (PostgreSQL only; a
// SQLite write transaction holds the database's lock from BEGIN).
func (s *Store) lockWrites(ctx context.Context, tx *sql.Tx) error {
	if !s.pg {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(writeLock)); err != nil {
		return fmt.Errorf("take write lock: %w", err)
	}
	return nil
}

// readTx is the options of a read transaction that sees one state of the
// store throughout: SQLite's read transactions always do; PostgreSQL's
// default (read committed) takes a new snapshot per statement.
func (s *Store) readTx() *sql.TxOptions {
	if s.pg {
		return &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead}
	}
	return &sql.TxOptions{ReadOnly: true}
}

// RedactURL is a database URL fit to show: without its password, in the
// user part or among the parameters (password, sslpassword).
func RedactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	q, changed := u.Query(), false
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q.Set(k, "xxxxx")
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// errNewerSchema refuses a database a newer mcpdup wrote.
func errNewerSchema(v int) error {
	return fmt.Errorf("schema version %d is newer than this mcpdup understands (%d): upgrade mcpdup", v, SchemaVersion)
}

// openPostgresPools opens the writer (one connection, as on SQLite: the
// committer's) and the reader pool.
func (s *Store) openPostgresPools() error {
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		// pgx's message quotes the URL, password included.
		return fmt.Errorf("open %s: not a valid PostgreSQL URL", s.path)
	}
	w := sql.OpenDB(pgConnector{stdlib.GetConnector(*cfg)})
	w.SetMaxOpenConns(1)
	rcfg := cfg.Copy()
	rcfg.RuntimeParams["default_transaction_read_only"] = "on"
	r := sql.OpenDB(pgConnector{stdlib.GetConnector(*rcfg)})
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	if err := w.Ping(); err != nil {
		w.Close()
		r.Close()
		return fmt.Errorf("open %s: %w", s.path, err)
	}
	ops := sql.OpenDB(pgConnector{stdlib.GetConnector(*cfg)})
	ops.SetMaxOpenConns(2)
	renew := sql.OpenDB(pgConnector{stdlib.GetConnector(*cfg)})
	renew.SetMaxOpenConns(1)
	s.w, s.r, s.ops, s.renew = w, r, ops, renew
	return nil
}

// schemaTable records the schema version on PostgreSQL, where there is no
// PRAGMA user_version.
const schemaTable = `CREATE TABLE IF NOT EXISTS mcpdup_schema(version BIGINT NOT NULL)`

// pgSchemaVersion reads the schema version; 0 for an empty database.
func pgSchemaVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	// Asked first: a query of a missing table would end the transaction.
	var exists bool
	if err := q.QueryRowContext(ctx, `SELECT to_regclass('mcpdup_schema') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return 0, err
	}
	var v int
	err := q.QueryRowContext(ctx, `SELECT version FROM mcpdup_schema`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// pgMigrate applies the migrations from version from, under the write
// lock: replicas starting together migrate once.
func (s *Store) pgMigrate(ctx context.Context) (created bool, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if err := s.lockWrites(ctx, tx); err != nil {
		return false, err
	}
	from, err := pgSchemaVersion(ctx, tx)
	if err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case from > SchemaVersion:
		return false, errNewerSchema(from)
	case from == SchemaVersion:
		return false, nil
	}
	if from == 0 {
		if _, err := tx.ExecContext(ctx, pgAppendOnly); err != nil {
			return false, fmt.Errorf("create schema: %w", err)
		}
	}
	for v := from; v < len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, pgMigration(migrations[v])); err != nil {
			return false, fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, schemaTable); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM mcpdup_schema`); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO mcpdup_schema(version) VALUES ($1)`, len(migrations)); err != nil {
		return false, err
	}
	return from == 0, tx.Commit()
}

// pgAppendOnly is the trigger function behind SQLite's RAISE(ABORT)
// triggers: defence in depth, as there.
const pgAppendOnly = `
CREATE FUNCTION mcpdup_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;`

var (
	pgStrict  = regexp.MustCompile(`\)\s*STRICT;`)
	pgTrigger = regexp.MustCompile(`CREATE TRIGGER (\w+) BEFORE (UPDATE|DELETE) ON (\w+) BEGIN SELECT RAISE\(ABORT, '[^']*'\); END;`)
	pgInteger = regexp.MustCompile(`\bINTEGER\b`)
	pgBlob    = regexp.MustCompile(`\bBLOB\b`)
	pgText    = regexp.MustCompile(`\bTEXT\b`)
)

// pgMigration translates one SQLite migration: 64-bit integers, bytea,
// text compared byte by byte as SQLite does (COLLATE "C"), no STRICT, and
// the append-only triggers through mcpdup_append_only.
func pgMigration(m string) string {
	m = pgStrict.ReplaceAllString(m, ");")
	m = pgTrigger.ReplaceAllString(m, "CREATE TRIGGER $1 BEFORE $2 ON $3 FOR EACH ROW EXECUTE FUNCTION mcpdup_append_only();")
	m = pgInteger.ReplaceAllString(m, "BIGINT")
	m = pgBlob.ReplaceAllString(m, "BYTEA")
	return pgText.ReplaceAllString(m, `TEXT COLLATE "C"`)
}

// pgConnector hands out connections that rewrite statements on their way.
type pgConnector struct{ driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(*stdlib.Conn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("unexpected pgx connection type %T", conn)
	}
	return pgConn{sc}, nil
}

// pgConn is a pgx connection whose statements are rewritten by pgRewrite;
// everything else is pgx's.
type pgConn struct{ *stdlib.Conn }

func (c pgConn) Prepare(q string) (driver.Stmt, error) { return c.Conn.Prepare(pgRewrite(q)) }

func (c pgConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, pgRewrite(q))
}

func (c pgConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, pgRewrite(q), args)
}

func (c pgConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, pgRewrite(q), args)
}

var rewritten sync.Map // statement → its PostgreSQL text

// pgRewrite turns a statement of the shared dialect into PostgreSQL's:
// ? placeholders become $1, $2…; "x IS ?" (SQLite's null-safe equality)
// becomes IS NOT DISTINCT FROM; INSERT OR IGNORE becomes ON CONFLICT DO
// NOTHING. Quoted text and statements already numbered are left alone.
func pgRewrite(q string) string {
	if r, ok := rewritten.Load(q); ok {
		return r.(string)
	}
	var b strings.Builder
	n := 0
	quoted := false
	for i := 0; i < len(q); i++ {
		ch := q[i]
		switch {
		case ch == '\'':
			quoted = !quoted
			b.WriteByte(ch)
		case ch == '?' && !quoted:
			if strings.HasSuffix(b.String(), " IS ") {
				out := strings.TrimSuffix(b.String(), "IS ")
				b.Reset()
				b.WriteString(out + "IS NOT DISTINCT FROM ")
			}
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(ch)
		}
	}
	out := b.String()
	if rest, ok := strings.CutPrefix(out, "INSERT OR IGNORE INTO "); ok {
		out = "INSERT INTO " + rest + " ON CONFLICT DO NOTHING"
	}
	rewritten.Store(q, out)
	return out
}

// pgRowBlame names the row a failed insert stumbled on from PostgreSQL's
// detail ("Key (id)=(x) already exists."), where SQLite's store tries the
// rows one by one: after an error a PostgreSQL transaction accepts no
// further statement. ok is false when the detail names no single row.
func pgRowBlame(err error, table *insertSQL, args []any, n int) (*RowError, bool) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return nil, false
	}
	detail := pe.Detail
	_, val, ok := strings.Cut(detail, ")=(")
	if !ok {
		return nil, false
	}
	val, _, ok = strings.Cut(val, ") ")
	if !ok {
		return nil, false
	}
	err = fmt.Errorf("%w: %s", err, detail)
	for i := range n {
		row := args[i*table.cols : (i+1)*table.cols]
		if fmt.Sprint(row[table.idCol]) == val {
			re := &RowError{Row: fmt.Sprintf("%s %v", table.kind, row[table.idCol]), Err: err}
			if table.lineCol >= 0 {
				re.Line, _ = row[table.lineCol].(int64)
			}
			return re, true
		}
	}
	return &RowError{Row: table.kind, Err: err}, true
}

// pgInit checks or creates the schema; created says this open made it.
func (s *Store) pgInit(ctx context.Context) (created bool, err error) {
	if !s.opts.ReadOnly {
		return s.pgMigrate(ctx)
	}
	v, err := pgSchemaVersion(ctx, s.r)
	switch {
	case err != nil:
		return false, fmt.Errorf("read schema version: %w", err)
	case v == 0:
		return false, ErrNotExist
	case v > SchemaVersion:
		return false, errNewerSchema(v)
	case v < SchemaVersion:
		return false, fmt.Errorf("schema version %d is older than %d: open it once without read-only mode to migrate", v, SchemaVersion)
	}
	return false, nil
}

// pageSizeSQL is the expression Stats reads the page size with.
func (s *Store) pageSizeSQL() string {
	if s.pg {
		return `(SELECT current_setting('block_size')::bigint)`
	}
	return `(SELECT page_size FROM pragma_page_size())`
}

// IsPostgres reports whether the store is on PostgreSQL.
func (s *Store) IsPostgres() bool { return s.pg }
