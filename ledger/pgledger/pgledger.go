// Package pgledger is the privacy ledger in a PostgreSQL database that the
// replicas of a service share (Ledger, an implementation of ledger.Ledger),
// with its schema, its migrations and its keys table. docs/serving.md,
// "The PostgreSQL ledger".
package pgledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/prometheus/client_golang/prometheus"
)

// Options bound a PostgreSQL ledger's use of its database. Start from
// DefaultOptions; an explicit 0 is never replaced, and Validate refuses it
// where it is meaningless. Errors name the option by its JSON key.
type Options struct {
	// MaxConns bounds the ledger's connections to the database (the pool):
	// the charges' committers, balance reads, key lookups and readiness.
	MaxConns int `json:"ledger_max_conns"`
	// Timeout bounds every query and transaction, waiting for a row lock or
	// a connection included: beyond it the statement is cancelled and the
	// request answered 503 with nothing released or charged. It is also the
	// database's statement_timeout and lock_timeout on the ledger's
	// connections, and twice it their idle_in_transaction_session_timeout,
	// so that a replica that dies inside a transaction cannot hold a key's
	// row lock.
	Timeout time.Duration `json:"ledger_timeout"`
	// MaxWaitingCharges bounds the charges waiting for a committer; a
	// charge beyond them is refused at once (ErrBusy: 503
	// ledger_busy, nothing charged).
	MaxWaitingCharges int `json:"ledger_max_waiting"`
	// Replica names this process in the charges it writes (charges.replica;
	// "": the host name and the process ID).
	Replica string `json:"replica"`
}

// DefaultOptions returns the defaults: 8 connections, 5 s per query, 256
// charges waiting.
func DefaultOptions() Options {
	return Options{MaxConns: 8, Timeout: 5 * time.Second, MaxWaitingCharges: 256}
}

// pgCommitters is how many transactions of charges a ledger runs at once
// (each takes up to ledger.MaxCommitBatch waiting charges).
const pgCommitters = 2

// Validate checks the options. Errors: *option.Error by JSON key.
func (o Options) Validate() error {
	switch {
	case o.MaxConns < pgCommitters+1 || o.MaxConns > 1000:
		return option.Errorf("ledger_max_conns", o.MaxConns, "want %d to 1000 (the %d committers of charges, and reads)", pgCommitters+1, pgCommitters)
	case o.Timeout < 10*time.Millisecond:
		return option.Errorf("ledger_timeout", o.Timeout, "must be at least 10ms")
	case o.MaxWaitingCharges < 1:
		return option.Errorf("ledger_max_waiting", o.MaxWaitingCharges, "must be >= 1")
	}
	return nil
}

// IsPostgres reports whether a ledger location names a PostgreSQL database
// rather than a file: a postgres:// or postgresql:// URL, or env:VAR. The
// latter takes the URL from the environment variable VAR, so that it never
// shows in a process list.
func IsPostgres(loc string) bool {
	return strings.HasPrefix(loc, "postgres://") || strings.HasPrefix(loc, "postgresql://") || strings.HasPrefix(loc, "env:")
}

// PostgresDSN resolves a PostgreSQL ledger location, as [IsPostgres]
// accepts it, to its connection URL. Errors: env:VAR with VAR unset or
// empty, or naming no postgres:// URL; a location that is not a PostgreSQL
// one.
func PostgresDSN(loc string) (string, error) {
	dsn := loc
	if v, ok := strings.CutPrefix(loc, "env:"); ok {
		if v == "" {
			return "", errors.New("env: names no variable (env:VAR: the URL is in the environment variable VAR)")
		}
		dsn = os.Getenv(v)
		if dsn == "" {
			return "", fmt.Errorf("env:%s: the environment variable %s is unset or empty", v, v)
		}
	}
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		if loc != dsn {
			return "", fmt.Errorf("%s: the variable holds no postgres:// or postgresql:// URL", loc)
		}
		return "", fmt.Errorf("%q is not a postgres:// or postgresql:// URL", loc)
	}
	return dsn, nil
}

// pgName is a DSN without its password: the ledger's Name.
func pgName(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	for k := range q {
		if k != "host" && k != "port" {
			q.Del(k)
		}
	}
	q.Del("password")
	u.RawQuery = q.Encode()
	return u.Redacted()
}

// Ledger is the privacy ledger in a PostgreSQL database shared by the
// replicas of a service, a [ledger.Ledger]; docs/serving.md, "The
// PostgreSQL ledger".
//
// A charge is one transaction, all of it before Charge returns: the
// accounts it touches are locked with SELECT ... FOR UPDATE in account
// order, their counts read, the budget checked in Go with the file ledger's
// balance, [ledger.Grid], and the counts and a charge row written and
// committed. A refused charge writes nothing. Charges waiting in one
// process are grouped into transactions of up to [ledger.MaxCommitBatch],
// pgCommitters at a time. Curves are rows: a replica reads the curve
// another replica, or a newer model, registered. Keys may live in the
// database too: see [Ledger.LookupKey], [Ledger.AddKey], [Ledger.RotateKey]
// and [Ledger.RevokeKey].
//
// It fails closed: while the database does not answer, every charge,
// balance and key lookup fails with an error matching
// [ledger.ErrUnavailable], and Err reports it for readiness. The failure is
// temporary: the server answers 503 and serves again once the database
// answers. Every query is bounded by Options.Timeout, the pool by MaxConns
// and the waiting charges by MaxWaitingCharges; Collectors exports them.
type Ledger struct {
	pool    *pgxpool.Pool
	name    string
	o       Options
	id      string
	created time.Time
	replica string

	mu     sync.RWMutex // guards orders, delta, curves
	orders []float64
	delta  float64
	curves map[string]*ledger.Curve
	memo   ledger.Memo // the balances computed lately (ledger.Grid.Memo)
	known  sync.Map    // account IDs known to have a row

	regMu sync.Mutex // serialises RegisterCurve

	batcher   *ledger.Batcher // the group commit: pgCommitters transactions at a time
	closeOnce sync.Once

	lastOK atomic.Int64 // unix nanoseconds of the last successful query

	errs *prometheus.CounterVec
}

// Error is the failure of a query of a PostgreSQL ledger: the database did
// not answer in time, refused or failed the query.
//
// A temporary failure matches [ledger.ErrUnavailable], and the next request
// tries again, answered 503 ledger_unavailable. Temporary failures are the
// database down or unreachable, a timeout, a lock not granted in time, a
// transaction rolled back by a conflict, and resources exhausted. A
// permanent one, marked Permanent, does not match: its SQLSTATE is one that
// no retry changes, such as 42501 permission denied or 42P01 a table
// missing, and an operator must fix the database, answered 500
// ledger_error.
type Error struct {
	Name      string // the ledger (Name)
	Op        string // what was being done
	Err       error
	Permanent bool // the error is one no retry changes (permanentSQLState)
}

func (e *Error) Error() string {
	return fmt.Sprintf("ledger %s: %s: %v", e.Name, e.Op, e.Err)
}

// Is reports whether target is [ledger.ErrUnavailable] and the failure
// temporary, for errors.Is.
func (e *Error) Is(target error) bool { return target == ledger.ErrUnavailable && !e.Permanent }

func (e *Error) Unwrap() error { return e.Err }

// Temporary reports whether the failure may pass: a database that does not
// answer may answer again, a permission it refuses stays refused.
func (e *Error) Temporary() bool { return !e.Permanent }

// permanentSQLState reports whether err is an error of the database whose
// SQLSTATE class no retry changes: 22 (data exception), 23 (integrity
// constraint violation), 28 (invalid authorization), 2B/2D (dependent
// objects, transaction termination), 3D (no such database), 3F (no such
// schema), 42 (syntax error or access rule violation: 42501 permission
// denied, 42P01 no such table, 42703 no such column), XX (internal error,
// data corrupted). Every other error is temporary: connection failures
// (08), conflicts (40), resources (53), a lock not granted or a statement
// cancelled (55P03, 57014), the server shutting down (57P01), a timeout or
// a network error outside the database.
func permanentSQLState(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) < 2 {
		return false
	}
	switch pe.Code[:2] {
	case "22", "23", "28", "2B", "2D", "3D", "3F", "42", "XX":
		return true
	}
	return false
}

// fail wraps err of op, unless it is a ledger's own error.
func (l *Ledger) fail(op string, err error) error {
	var be *ledger.BudgetError
	var pe *Error
	if err == nil || errors.As(err, &be) || errors.Is(err, ledger.ErrUnavailable) || errors.As(err, &pe) {
		return err
	}
	l.errs.WithLabelValues(op).Inc()
	l.lastOK.Store(0) // Err asks the database again
	return &Error{Name: l.name, Op: op, Err: err, Permanent: permanentSQLState(err)}
}

// ok records a successful query (Err answers from it for a second).
func (l *Ledger) ok() { l.lastOK.Store(time.Now().UnixNano()) }

// poolConfig is the pool configuration of dsn under o: its limits, the
// server-side timeouts, and cancellation by a cancel request (so that the
// database stops a statement whose caller gave up, releasing its locks).
func poolConfig(dsn string, o Options, app string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", pgName(dsn), err)
	}
	cfg.MaxConns = int32(o.MaxConns)
	cfg.MinConns = 0
	cfg.HealthCheckPeriod = 10 * time.Second
	cc := cfg.ConnConfig
	if cc.ConnectTimeout == 0 || cc.ConnectTimeout > o.Timeout {
		cc.ConnectTimeout = o.Timeout
	}
	ms := func(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }
	cc.RuntimeParams["statement_timeout"] = ms(o.Timeout)
	cc.RuntimeParams["lock_timeout"] = ms(o.Timeout)
	cc.RuntimeParams["idle_in_transaction_session_timeout"] = ms(2 * o.Timeout)
	cc.RuntimeParams["application_name"] = app
	cc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, CancelRequestDelay: 0, DeadlineDelay: time.Second}
	}
	return cfg, nil
}

// Open opens the PostgreSQL ledger at dsn, a postgres:// URL, for charging;
// [PostgresDSN] resolves env:VAR. The database must hold the ledger's
// schema at the version this build serves, as [Create] makes and migrates
// it: a database without it is [ledger.ErrNoLedger], one at another
// version an error saying which. Every curve is read and checked.
//
// Errors: invalid options, an [*option.Error]; the database does not answer
// within o.Timeout; no ledger; another schema version; a curve that does
// not check.
func Open(dsn string, o Options) (*Ledger, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfg, err := poolConfig(dsn, o, "nvdp serve")
	if err != nil {
		return nil, err
	}
	l := &Ledger{name: pgName(dsn), o: o, curves: map[string]*ledger.Curve{}, replica: o.Replica}
	if l.replica == "" {
		host, _ := os.Hostname()
		l.replica = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	l.errs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nvdp_ledger_errors_total", Help: "Failed queries of the PostgreSQL ledger, by operation (nothing released for the requests they served).",
	}, []string{"op"})
	for _, op := range []string{"charge", "balance", "key lookup", "ping"} {
		l.errs.WithLabelValues(op)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	if l.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("ledger %s: %w", l.name, err)
	}
	if err := l.load(ctx); err != nil {
		l.pool.Close()
		return nil, err
	}
	l.ok()
	l.batcher = ledger.NewBatcher(pgCommitters, o.MaxWaitingCharges, false, func(batch []*ledger.ChargeRequest) {
		l.settle(batch, false)
	})
	return l, nil
}

// schemaVersion reads the ledger's schema version (0: none, no error).
func schemaVersion(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var reg *string
	if err := q.QueryRow(ctx, `SELECT to_regclass('nvdp.schema_version')::text`).Scan(&reg); err != nil {
		return 0, err
	}
	if reg == nil {
		return 0, nil
	}
	var v *int
	if err := q.QueryRow(ctx, `SELECT max(version) FROM nvdp.schema_version`).Scan(&v); err != nil {
		return 0, err
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

// load checks the schema and reads the ledger's identity, grid and curves.
func (l *Ledger) load(ctx context.Context) error {
	v, err := schemaVersion(ctx, l.pool)
	switch {
	case err != nil:
		return fmt.Errorf("ledger %s: %w", l.name, err)
	case v == 0:
		return fmt.Errorf("ledger %s: the database holds no nvdp ledger (no table %s.schema_version): a ledger is created explicitly, never on the fly, so that an empty or wrong database cannot reset every budget (%w)", l.name, pgSchema, ledger.ErrNoLedger)
	case v < pgSchemaVersion:
		return fmt.Errorf("ledger %s: schema version %d, this server needs %d: migrate it (nvdp serve ledger init) before serving", l.name, v, pgSchemaVersion)
	case v > pgSchemaVersion:
		return fmt.Errorf("ledger %s: schema version %d is newer than this server's %d: serve it with a newer nvdp", l.name, v, pgSchemaVersion)
	}
	var format string
	var delta *float64
	err = l.pool.QueryRow(ctx, `SELECT ledger_id, format, created, orders, delta FROM nvdp.ledger`).Scan(&l.id, &format, &l.created, &l.orders, &delta)
	if delta != nil {
		l.delta = *delta
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return &ledger.CorruptError{Path: l.name, Detail: "table nvdp.ledger is empty"}
	case err != nil:
		return fmt.Errorf("ledger %s: %w", l.name, err)
	case format != Format:
		return fmt.Errorf("ledger %s: format %q, want %q", l.name, format, Format)
	}
	if err := checkTables(ctx, l.pool); err != nil {
		return fmt.Errorf("ledger %s: %w: it does not hold the schema of version %d (nvdp serve ledger check; restore the database from its backup)", l.name, err, v)
	}
	rows, err := l.pool.Query(ctx, `SELECT `+pgCurveColumns+` FROM nvdp.curves`)
	if err != nil {
		return fmt.Errorf("ledger %s: %w", l.name, err)
	}
	defer rows.Close()
	comp := l.comp()
	for rows.Next() {
		c, err := scanCurve(rows, comp)
		if err != nil {
			return &ledger.CorruptError{Path: l.name, Detail: err.Error()}
		}
		l.curves[c.ID] = c
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger %s: %w", l.name, err)
	}
	return nil
}

// pgTables are the tables of the schema and the columns the ledger uses.
var pgTables = []struct{ name, columns string }{
	{"nvdp.ledger", "ledger_id, format, created, orders, delta"},
	{"nvdp.curves", pgCurveColumns + ", registered"},
	{"nvdp.models", "id, description, curve, registered"},
	{"nvdp.accounts", "id, requests, updated"},
	{"nvdp.account_releases", "account, curve, releases"},
	{"nvdp.charges", "id, at, account, releases, curve, model, replica"},
	{"nvdp.keys", "id, hash, budget_epsilon, labels, created, rotated, revoked"},
}

// checkTables checks that every table of the schema exists with the
// columns the ledger uses (and that the user may read them), so that a
// schema missing one is refused at open instead of failing every request.
// Errors: the first table that cannot be read, named.
func checkTables(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) error {
	for _, t := range pgTables {
		var reg *string
		if err := q.QueryRow(ctx, `SELECT to_regclass($1)::text`, t.name).Scan(&reg); err != nil {
			return err
		}
		if reg == nil {
			return fmt.Errorf("table %s is missing", t.name)
		}
		var one int
		err := q.QueryRow(ctx, `SELECT 1 FROM (SELECT `+t.columns+` FROM `+t.name+` LIMIT 0) AS t`).Scan(&one)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("table %s (columns %s): %w", t.name, t.columns, err)
		}
	}
	return nil
}

// pgCurveColumns are the columns of nvdp.curves that scanCurve reads.
const pgCurveColumns = `id, accountant, format_version, orders, rd, delta, gaussian_mu`

// scanCurve reads a row of nvdp.curves (pgCurveColumns; gaussian_mu NULL
// for an RDP curve) and checks it against comp's grid.
func scanCurve(row pgx.Row, comp ledger.Grid) (*ledger.Curve, error) {
	var (
		c          ledger.Curve
		accountant string
		format     int
		orders     []float64
		mu         *float64
	)
	if err := row.Scan(&c.ID, &accountant, &format, &orders, &c.RD, &c.Delta, &mu); err != nil {
		return nil, err
	}
	if mu != nil {
		c.Mu = *mu
	}
	if err := comp.CheckCurve(c.ID, accountant, format, orders, c.RD, c.Delta, c.Mu); err != nil {
		return nil, err
	}
	return &c, nil
}

// comp is the ledger's ledger.Grid.
func (l *Ledger) comp() ledger.Grid {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return ledger.Grid{Orders: l.orders, Delta: l.delta, Memo: &l.memo}
}

// curveOf returns the curve id: from the cache, else read from the
// database (a curve another replica registered) and checked.
func (l *Ledger) curveOf(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id string) (*ledger.Curve, error) {
	l.mu.RLock()
	c, ok := l.curves[id]
	l.mu.RUnlock()
	if ok {
		return c, nil
	}
	if err := l.grid(ctx, q); err != nil {
		return nil, err
	}
	c, err := scanCurve(q.QueryRow(ctx, `SELECT `+pgCurveColumns+` FROM nvdp.curves WHERE id = $1`, id), l.comp())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &ledger.CorruptError{Path: l.name, Detail: fmt.Sprintf("an account was charged under curve %s, which the ledger does not hold", id)}
	}
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.curves[c.ID] = c
	l.mu.Unlock()
	return c, nil
}

// grid reads the ledger's orders and delta when this process does not
// know them yet (another replica registered the first curve).
func (l *Ledger) grid(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) error {
	if l.comp().Orders != nil {
		return nil
	}
	var orders []float64
	var delta *float64
	if err := q.QueryRow(ctx, `SELECT orders, delta FROM nvdp.ledger`).Scan(&orders, &delta); err != nil {
		return err
	}
	if orders != nil && delta != nil {
		l.mu.Lock()
		if l.orders == nil {
			l.orders, l.delta = orders, *delta
		}
		l.mu.Unlock()
	}
	return nil
}

// resolve reads every curve of counts (curveOf) and returns the lookup of
// the ledger.Grid.
func (l *Ledger) resolve(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, counts map[string]uint64) (func(string) (*ledger.Curve, error), error) {
	for id := range counts {
		if _, err := l.curveOf(ctx, q, id); err != nil {
			return nil, err
		}
	}
	return func(id string) (*ledger.Curve, error) { return l.curveOf(ctx, q, id) }, nil
}

// Name is the database's URL without its password, for [ledger.Ledger].
func (l *Ledger) Name() string { return l.name }

// Format is [Format], for [ledger.Ledger].
func (l *Ledger) Format() string { return Format }

// RegisterCurve records g, the certified guarantee of one release of a
// model, and returns the curve charges are made under, for
// [ledger.Ledger]. The model's description model is stored in nvdp.models
// under its [ledger.ModelID]. The first curve of the ledger, whichever
// replica registers it, fixes the orders and delta, with the ledger's row
// locked meanwhile. A Gaussian curve is stored with its mu, as
// [ledger.NewCurve] makes it. Registering a curve again is a no-op.
func (l *Ledger) RegisterCurve(g *privacy.Guarantee, model any) (*ledger.Curve, error) {
	if err := ledger.CheckGuarantee(g); err != nil {
		return nil, err
	}
	c, orders, acct, format, err := ledger.NewCurve(g)
	if err != nil {
		return nil, err
	}
	m, err := json.Marshal(model)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: model description: %w", l.name, err)
	}
	c.Model = ledger.ModelID(m)
	var mu *float64
	if c.Mu > 0 {
		mu = &c.Mu
	}
	l.regMu.Lock()
	defer l.regMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		var lorders []float64
		var ldelta *float64
		if err := tx.QueryRow(ctx, `SELECT orders, delta FROM nvdp.ledger FOR UPDATE`).Scan(&lorders, &ldelta); err != nil {
			return err
		}
		first := lorders == nil
		if !first {
			if err := ledger.CheckGrid(orders, g.Delta, false, lorders, *ldelta); err != nil {
				return &gridError{err}
			}
		} else if _, err := tx.Exec(ctx, `UPDATE nvdp.ledger SET orders = $1, delta = $2`, orders, g.Delta); err != nil {
			return err
		}
		now := time.Now().UTC()
		if _, err := tx.Exec(ctx, `INSERT INTO nvdp.curves (id, accountant, format_version, orders, rd, delta, registered, gaussian_mu)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING`, c.ID, acct, format, orders, c.RD, g.Delta, now, mu); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO nvdp.models (id, description, curve, registered) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING`,
			c.Model, string(m), c.ID, now)
		return err
	})
	var ge *gridError
	switch {
	case errors.As(err, &ge):
		return nil, fmt.Errorf("ledger %s: %w", l.name, ge.error)
	case err != nil:
		return nil, l.fail("register curve", err)
	}
	l.ok()
	l.mu.Lock()
	if l.orders == nil {
		l.orders, l.delta = orders, g.Delta
	}
	l.curves[c.ID] = c
	l.mu.Unlock()
	return c, nil
}

// gridError is a curve refused for its orders or delta (checkGrid).
type gridError struct{ error }

// pgAccount is an account's row and counts as a transaction read them.
type pgAccount struct {
	requests uint64
	counts   map[string]uint64
	changed  map[string]bool // curves whose count this transaction changed
	charged  bool
}

// SetCommitWindow sets how long each committer waits for more charges under
// load before its transaction, >= 0 ([ledger.Batcher.SetWindow];
// ledger.DefaultCommitWindow until set).
func (l *Ledger) SetCommitWindow(d time.Duration) { l.batcher.SetWindow(d) }

// Charge adds releases of curve to account if its composed curve stays
// within budget, and returns the balance after it once the transaction
// that holds it is committed, for [ledger.Ledger]. releases is at least 1.
//
// Errors: a [*ledger.BudgetError], with nothing charged;
// [ledger.ErrBusy] when MaxWaitingCharges are waiting already;
// [ledger.ErrClosed]; an [*Error] when the database failed or did not
// answer within Timeout. Then the charge is not made, or its commit's
// outcome is unknown: either way nothing may be released, and the ledger
// holds at least what was released.
func (l *Ledger) Charge(account string, curve *ledger.Curve, releases int, budget float64) (ledger.Balance, error) {
	bal, err := l.batcher.Submit(account, curve, releases, budget)
	if errors.Is(err, ledger.ErrBusy) {
		return bal, fmt.Errorf("ledger %s: %w", l.name, err)
	}
	return bal, err
}

// settle commits batch (commitBatch) and answers its charges. With wait
// false the batch takes only the account rows no other transaction holds
// (SKIP LOCKED); the charges of the others are settled apart, each
// account's in a transaction of its own that waits for its row (up to
// Timeout), so that one account locked elsewhere (a replica's charge, an
// operator's psql) delays its own charges only, never the batch's.
func (l *Ledger) settle(batch []*ledger.ChargeRequest, wait bool) {
	skipped, err := l.commitBatch(batch, wait)
	for _, r := range batch {
		if skipped[r.Account] {
			continue
		}
		if err != nil {
			r.Balance, r.Err = ledger.Balance{}, err
		}
		r.Done()
	}
	groups := map[string][]*ledger.ChargeRequest{}
	for _, r := range batch {
		if skipped[r.Account] {
			groups[r.Account] = append(groups[r.Account], r)
		}
	}
	for _, g := range groups {
		l.batcher.Go(func() { l.settle(g, true) }) // Close waits for these charges too
	}
}

// commitBatch settles batch in one transaction: the account rows ensured,
// then lock (lockAccounts), check (checkCharges: every charge in order
// against the counts as the previous ones left them) and write
// (writeCharges), committed. With wait false the accounts whose rows
// another transaction holds are not locked: their charges are left out,
// unanswered, and returned in skipped (by account).
func (l *Ledger) commitBatch(batch []*ledger.ChargeRequest, wait bool) (skipped map[string]bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	var ids []string
	for _, r := range batch {
		if !slices.Contains(ids, r.Account) {
			ids = append(ids, r.Account)
		}
	}
	slices.Sort(ids)
	if err := l.ensureAccounts(ctx, ids); err != nil {
		return nil, l.fail("charge", err)
	}
	now := time.Now().UTC()
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		accts, err := l.lockAccounts(ctx, tx, ids, wait)
		if err != nil {
			return err
		}
		skipped = map[string]bool{}
		for _, id := range ids {
			if accts[id] == nil {
				if wait {
					return fmt.Errorf("account %q has no row after it was inserted", id)
				}
				skipped[id] = true
			}
		}
		charged, err := l.checkCharges(ctx, tx, batch, accts)
		if err != nil || len(charged) == 0 {
			return err
		}
		return l.writeCharges(ctx, tx, ids, accts, charged, now)
	})
	if err != nil {
		return nil, l.fail("charge", err)
	}
	l.ok()
	return skipped, nil
}

// ensureAccounts inserts the rows of the accounts of ids this process does
// not know to have one, in a transaction of its own: a row inserted in the
// charge's would be locked until it commits, out of the order the charge's
// locks follow.
func (l *Ledger) ensureAccounts(ctx context.Context, ids []string) error {
	var missing []string
	for _, id := range ids {
		if _, ok := l.known.Load(id); !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := l.pool.Exec(ctx, `INSERT INTO nvdp.accounts (id, requests, updated)
		SELECT x, 0, now() FROM unnest($1::text[]) AS x ORDER BY x ON CONFLICT (id) DO NOTHING`, missing); err != nil {
		return err
	}
	for _, id := range missing {
		l.known.Store(id, true)
	}
	return nil
}

// lockAccounts locks the rows of the accounts ids (sorted) in account
// order, waiting for each up to the lock timeout, or with wait false
// skipping those another transaction holds, and reads the counts of those
// locked. The counts are read by a statement of their own: under READ
// COMMITTED it sees every charge committed before the locks were granted
// (a join locked in the same statement would read the counts of before a
// wait for the lock).
func (l *Ledger) lockAccounts(ctx context.Context, tx pgx.Tx, ids []string, wait bool) (map[string]*pgAccount, error) {
	lock := `SELECT id, requests FROM nvdp.accounts WHERE id = ANY($1) ORDER BY id FOR UPDATE`
	if !wait {
		lock += ` SKIP LOCKED`
	}
	accts := map[string]*pgAccount{}
	var (
		id       string
		requests int64
		curve    string
		n        int64
	)
	rows, _ := tx.Query(ctx, lock, ids)
	if _, err := pgx.ForEachRow(rows, []any{&id, &requests}, func() error {
		accts[id] = &pgAccount{requests: uint64(requests), counts: map[string]uint64{}, changed: map[string]bool{}}
		return nil
	}); err != nil {
		return nil, err
	}
	if len(accts) == 0 {
		return accts, nil
	}
	rows, _ = tx.Query(ctx, `SELECT account, curve, releases FROM nvdp.account_releases WHERE account = ANY($1)`, ids)
	if _, err := pgx.ForEachRow(rows, []any{&id, &curve, &n}, func() error {
		if a := accts[id]; a != nil && n > 0 {
			a.counts[curve] = uint64(n)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return accts, nil
}

// checkCharges checks each charge of batch whose account is locked (in
// accts), in order, against its account's counts as the previous charges
// left them: a refused one is answered with its *ledger.BudgetError, an accepted
// one is added to the counts and answered with its balance after it. It
// returns the charges accepted.
func (l *Ledger) checkCharges(ctx context.Context, tx pgx.Tx, batch []*ledger.ChargeRequest, accts map[string]*pgAccount) ([]*ledger.ChargeRequest, error) {
	if err := l.grid(ctx, tx); err != nil {
		return nil, err
	}
	comp := l.comp()
	var charged []*ledger.ChargeRequest
	for _, r := range batch {
		a := accts[r.Account]
		if a == nil {
			continue
		}
		lookup, err := l.resolve(ctx, tx, a.counts)
		if err != nil {
			return nil, err
		}
		if _, err := l.curveOf(ctx, tx, r.Curve.ID); err != nil { // the curve is a row (the foreign keys)
			return nil, err
		}
		bal, err := comp.Charge(r.Account, a.counts, lookup, r.Curve, r.Releases, r.Budget)
		r.Balance, r.Err = bal, err
		var be *ledger.BudgetError
		switch {
		case errors.As(err, &be):
			continue
		case err != nil:
			return nil, err
		}
		a.changed[r.Curve.ID], a.charged = true, true
		a.requests++
		charged = append(charged, r)
	}
	return charged, nil
}

// writeCharges writes the counts and requests of the accounts charged and
// one row of nvdp.charges per charge, in one round trip.
func (l *Ledger) writeCharges(ctx context.Context, tx pgx.Tx, ids []string, accts map[string]*pgAccount, charged []*ledger.ChargeRequest, now time.Time) error {
	var chAccount, chCurve []string
	var chModel []*string
	var chReleases []int32
	for _, r := range charged {
		chAccount, chCurve, chReleases = append(chAccount, r.Account), append(chCurve, r.Curve.ID), append(chReleases, int32(r.Releases))
		var model *string
		if r.Curve.Model != "" {
			model = &r.Curve.Model
		}
		chModel = append(chModel, model)
	}
	var rAccount, rCurve, uAccount []string
	var rReleases, uRequests []int64
	for _, id := range ids {
		a := accts[id]
		if a == nil || !a.charged {
			continue
		}
		uAccount, uRequests = append(uAccount, id), append(uRequests, int64(a.requests))
		for c := range a.changed {
			rAccount, rCurve, rReleases = append(rAccount, id), append(rCurve, c), append(rReleases, int64(a.counts[c]))
		}
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO nvdp.account_releases (account, curve, releases)
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
		ON CONFLICT (account, curve) DO UPDATE SET releases = EXCLUDED.releases`, rAccount, rCurve, rReleases)
	b.Queue(`UPDATE nvdp.accounts AS a SET requests = v.requests, updated = $3
		FROM unnest($1::text[], $2::bigint[]) AS v(id, requests) WHERE a.id = v.id`, uAccount, uRequests, now)
	b.Queue(`INSERT INTO nvdp.charges (at, account, releases, curve, model, replica)
		SELECT $1, * , $6 FROM unnest($2::text[], $3::integer[], $4::text[], $5::text[])`, now, chAccount, chReleases, chCurve, chModel, l.replica)
	return tx.SendBatch(ctx, b).Close()
}

// counts reads an account's releases by curve (none: a new account).
func (l *Ledger) counts(ctx context.Context, account string) (map[string]uint64, error) {
	rows, err := l.pool.Query(ctx, `SELECT curve, releases FROM nvdp.account_releases WHERE account = $1`, account)
	if err != nil {
		return nil, err
	}
	counts := map[string]uint64{}
	var curve string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&curve, &n}, func() error {
		if n > 0 {
			counts[curve] = uint64(n)
		}
		return nil
	})
	return counts, err
}

// Balance returns account's committed balance against budget for releases
// of curve, for [ledger.Ledger]. Errors: [*Error].
func (l *Ledger) Balance(account string, curve *ledger.Curve, budget float64) (ledger.Balance, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	counts, err := l.counts(ctx, account)
	if err != nil {
		return ledger.Balance{}, l.fail("balance", err)
	}
	lookup, err := l.resolve(ctx, l.pool, counts)
	if err == nil {
		err = l.grid(ctx, l.pool)
	}
	if err != nil {
		return ledger.Balance{}, l.fail("balance", err)
	}
	bal, err := l.comp().Balance(account, counts, lookup, curve, budget)
	if err != nil {
		return ledger.Balance{}, l.fail("balance", err)
	}
	l.ok()
	return bal, nil
}

// Err reports readiness, for [ledger.Ledger]: nil while the database
// answers, that is, a query succeeded within the last second or a ping now
// does within Timeout; else an [*Error].
func (l *Ledger) Err() error {
	if time.Since(time.Unix(0, l.lastOK.Load())) < time.Second {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	if err := l.pool.Ping(ctx); err != nil {
		return l.fail("ping", err)
	}
	l.ok()
	return nil
}

// Accounts returns every account, by ID, for [ledger.Ledger].
func (l *Ledger) Accounts() ([]ledger.Account, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	if err := l.grid(ctx, l.pool); err != nil {
		return nil, l.fail("accounts", err)
	}
	// An account's row is made, empty, when a charge to it is first tried
	// (it anchors the charge's row lock); until a charge is made it is not
	// an account.
	rows, err := l.pool.Query(ctx, `SELECT a.id, a.requests, a.updated, r.Curve, r.Releases
		FROM nvdp.accounts a LEFT JOIN nvdp.account_releases r ON r.Account = a.id WHERE a.requests > 0 ORDER BY a.id, r.Curve`)
	if err != nil {
		return nil, l.fail("accounts", err)
	}
	type acct struct {
		requests uint64
		updated  time.Time
		counts   map[string]uint64
	}
	var order []string
	byID := map[string]*acct{}
	var (
		id       string
		requests int64
		updated  time.Time
		curve    *string
		n        *int64
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &requests, &updated, &curve, &n}, func() error {
		a := byID[id]
		if a == nil {
			a = &acct{requests: uint64(requests), updated: updated, counts: map[string]uint64{}}
			byID[id] = a
			order = append(order, id)
		}
		if curve != nil && *n > 0 {
			a.counts[*curve] = uint64(*n)
		}
		return nil
	})
	if err != nil {
		return nil, l.fail("accounts", err)
	}
	out := []ledger.Account{}
	comp := l.comp()
	for _, id := range order {
		a := byID[id]
		lookup, err := l.resolve(ctx, l.pool, a.counts)
		if err != nil {
			return nil, l.fail("accounts", err)
		}
		acc, err := comp.Account(id, a.counts, a.requests, a.updated.UTC(), lookup)
		if err != nil {
			return nil, l.fail("accounts", err)
		}
		out = append(out, acc)
	}
	return out, nil
}

// History returns the charges q selects, newest first, with the curves and
// models they name, for [ledger.Ledger]. Errors: q invalid, an
// [*option.Error]; [*Error].
func (l *Ledger) History(q ledger.HistoryQuery) (ledger.History, error) {
	if err := q.Check(); err != nil {
		return ledger.History{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	before := int64(math.MaxInt64)
	if q.Before > 0 {
		before = int64(min(q.Before, math.MaxInt64))
	}
	rows, err := l.pool.Query(ctx, `SELECT id, at, account, releases, curve, coalesce(model, ''), replica FROM nvdp.charges
		WHERE ($1 = '' OR account = $1) AND id < $2 ORDER BY id DESC LIMIT $3`, q.Account, before, q.Limit+1)
	if err != nil {
		return ledger.History{}, l.fail("history", err)
	}
	h := ledger.History{Charges: []ledger.ChargeRecord{}, Curves: map[string]ledger.CurveInfo{}, Models: map[string]json.RawMessage{}}
	var c ledger.ChargeRecord
	var cid int64
	_, err = pgx.ForEachRow(rows, []any{&cid, &c.Time, &c.Account, &c.Releases, &c.Curve, &c.Model, &c.Replica}, func() error {
		c.ID, c.Time = uint64(cid), c.Time.UTC()
		h.Charges = append(h.Charges, c)
		return nil
	})
	if err != nil {
		return ledger.History{}, l.fail("history", err)
	}
	if len(h.Charges) > q.Limit {
		h.Charges = h.Charges[:q.Limit]
		h.Before = h.Charges[q.Limit-1].ID
	}
	if err := l.grid(ctx, l.pool); err != nil {
		return ledger.History{}, l.fail("history", err)
	}
	comp := l.comp()
	for _, c := range h.Charges {
		if _, ok := h.Curves[c.Curve]; !ok {
			var (
				acc        string
				format     int
				registered time.Time
			)
			if err := l.pool.QueryRow(ctx, `SELECT accountant, format_version, registered FROM nvdp.curves WHERE id = $1`, c.Curve).Scan(&acc, &format, &registered); err != nil {
				return ledger.History{}, l.fail("history", err)
			}
			cv, err := l.curveOf(ctx, l.pool, c.Curve)
			if err != nil {
				return ledger.History{}, l.fail("history", err)
			}
			h.Curves[c.Curve] = comp.CurveInfo(cv, acc, format, registered.UTC())
		}
		if _, ok := h.Models[c.Model]; !ok && c.Model != "" {
			var d []byte
			if err := l.pool.QueryRow(ctx, `SELECT description FROM nvdp.models WHERE id = $1`, c.Model).Scan(&d); err != nil {
				return ledger.History{}, l.fail("history", err)
			}
			h.Models[c.Model] = d
		}
	}
	return h, nil
}

// Info describes the ledger: its identity, schema version and size. Txid is
// 0, Bytes counts the database's tables and Charges the charge rows.
func (l *Ledger) Info() (ledger.Info, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	info := ledger.Info{Path: l.name, LedgerID: l.id, Format: Format, SchemaVersion: pgSchemaVersion}
	created := l.created.UTC()
	info.Created = &created
	var releases *int64
	err := l.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM nvdp.accounts WHERE requests > 0), (SELECT count(*) FROM nvdp.curves),
		(SELECT sum(releases) FROM nvdp.account_releases), (SELECT count(*) FROM nvdp.charges),
		(SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'nvdp' AND c.relkind = 'r')::bigint`).
		Scan(&info.Accounts, &info.Curves, &releases, &info.Charges, &info.Bytes)
	if err != nil {
		return ledger.Info{}, l.fail("info", err)
	}
	if releases != nil {
		info.Releases = uint64(*releases)
	}
	return info, nil
}

// Collectors are the ledger's Prometheus metrics, which a Server registers:
// the pool's connections by state and its waits, the charges waiting and
// their bound, the failed queries by operation, the charges per
// transaction.
func (l *Ledger) Collectors() []prometheus.Collector {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	conns := func(state string, f func(*pgxpool.Stat) int32) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nvdp_ledger_pool_connections", Help: "Connections of the PostgreSQL ledger's pool, by state (acquired, idle, total) and its bound (max).",
			ConstLabels: prometheus.Labels{"state": state}}, func() float64 { return float64(f(l.pool.Stat())) })
	}
	return []prometheus.Collector{
		conns("acquired", (*pgxpool.Stat).AcquiredConns), conns("idle", (*pgxpool.Stat).IdleConns),
		conns("total", (*pgxpool.Stat).TotalConns), conns("max", (*pgxpool.Stat).MaxConns),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nvdp_ledger_pool_acquire_wait_seconds_total", Help: "Time spent waiting for a connection of the PostgreSQL ledger's pool."},
			func() float64 { return l.pool.Stat().AcquireDuration().Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nvdp_ledger_pool_empty_acquires_total", Help: "Acquisitions of a connection that had to wait because the pool had none idle."},
			func() float64 { return float64(l.pool.Stat().EmptyAcquireCount()) }),
		gauge("nvdp_ledger_charges_waiting", "Charges waiting for a transaction of the PostgreSQL ledger.", func() float64 { return float64(l.batcher.Waiting()) }),
		gauge("nvdp_ledger_charges_waiting_max", "The bound on the charges waiting (beyond it: 503 ledger_busy).", func() float64 { return float64(l.o.MaxWaitingCharges) }),
		l.errs, l.batcher.CommitSizes(),
	}
}

// Close stops taking charges, settles those submitted and closes the pool.
func (l *Ledger) Close() error {
	l.closeOnce.Do(func() {
		l.batcher.Close()
		l.pool.Close()
	})
	return nil
}

// Create creates the ledger's schema in the database at dsn, or migrates it
// to the version this build serves: the one way a PostgreSQL ledger comes
// to be, as `nvdp serve ledger init` does. Inits of one database are
// serialised by an advisory lock, and each runs in one transaction: a
// database holds a whole schema version or none. It returns the ledger's
// description and the versions it applied, none when the ledger was
// current. Errors: the database does not answer within timeout; a schema
// "nvdp" that is not an nvdp ledger; a schema newer than this build's.
func Create(dsn string, timeout time.Duration) (ledger.Info, []int, error) {
	o := DefaultOptions()
	o.Timeout = timeout
	applied, err := migratePG(dsn, o, pgSchemaVersion)
	if err != nil {
		return ledger.Info{}, nil, err
	}
	l, err := Open(dsn, o)
	if err != nil {
		return ledger.Info{}, applied, err
	}
	defer l.Close()
	info, err := l.Info()
	return info, applied, err
}

// migratePG creates the ledger's schema in the database at dsn, or migrates
// it, up to version upTo (pgSchemaVersion but in tests, which make a
// database of an older version): Create without the open. It
// returns the versions it applied.
func migratePG(dsn string, o Options, upTo int) ([]int, error) {
	name := pgName(dsn)
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfg, err := poolConfig(dsn, o, "nvdp serve ledger init")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	var applied []int
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pgInitLock)); err != nil {
			return err
		}
		v, err := schemaVersion(ctx, tx)
		if err != nil {
			return err
		}
		if v == 0 {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, pgSchema).Scan(&exists); err != nil {
				return err
			}
			if exists {
				return fmt.Errorf("the database has a schema %q without %s.schema_version: not an nvdp ledger, left alone", pgSchema, pgSchema)
			}
			if _, err := tx.Exec(ctx, pgVersionTable); err != nil {
				return err
			}
		}
		if v > pgSchemaVersion {
			return fmt.Errorf("schema version %d is newer than this build's %d: nothing changed", v, pgSchemaVersion)
		}
		now := time.Now().UTC()
		for _, m := range pgMigrations {
			if m.Version <= v || m.Version > upTo {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration to version %d: %w", m.Version, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO nvdp.schema_version (version, description, applied) VALUES ($1, $2, $3)`, m.Version, m.Description, now); err != nil {
				return err
			}
			if m.Version == 1 {
				if _, err := tx.Exec(ctx, `INSERT INTO nvdp.ledger (ledger_id, format, created) VALUES ($1, $2, $3)`, ledger.NewLedgerID(), Format, now); err != nil {
					return err
				}
			}
			applied = append(applied, m.Version)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create ledger %s: %w", name, err)
	}
	return applied, nil
}

// LookupKey returns the key of the database whose hash is the SHA-256 of
// secret and that is not revoked, or nil, nil when there is none, for
// serve's KeySource. Its Budget is the key's budget_epsilon. Errors:
// [*Error].
func (l *Ledger) LookupKey(secret string) (*ledger.Key, error) {
	if secret == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	h := ledger.HashKey(secret)
	k := &ledger.Key{Hash: h}
	err := l.pool.QueryRow(ctx, `SELECT id, budget_epsilon FROM nvdp.keys WHERE hash = $1 AND revoked IS NULL`, h[:]).Scan(&k.ID, &k.Budget)
	if errors.Is(err, pgx.ErrNoRows) {
		l.ok()
		return nil, nil
	}
	if err != nil {
		return nil, l.fail("key lookup", err)
	}
	l.ok()
	return k, nil
}

// KeyInfo describes a key of a PostgreSQL ledger, never its hash.
type KeyInfo struct {
	ID      string            `json:"id"`
	Budget  jsonfloat.Float   `json:"budget_epsilon"`
	Labels  map[string]string `json:"labels"`
	Created time.Time         `json:"created"`
	Rotated *time.Time        `json:"rotated,omitempty"`
	Revoked *time.Time        `json:"revoked,omitempty"`
}

// Errors of the keys of a database (match with errors.Is).
var (
	// ErrNoKey: no key of that ID.
	ErrNoKey = errors.New("no such key")
	// ErrKeyRevoked: the key of that ID is revoked. Its ID is never reused,
	// since the account keeps what it spent, so it can be neither rotated,
	// changed nor added again.
	ErrKeyRevoked = errors.New("key revoked: its ID is never reused (the account keeps what it spent); add a key with another ID")
)

// CheckLabels checks a key's labels: keys not empty, keys and values valid
// UTF-8. PostgreSQL's jsonb would store U+FFFD instead of an invalid byte,
// a label the operator did not write. Errors name the label.
func CheckLabels(labels map[string]string) error {
	for k, v := range labels {
		switch {
		case k == "":
			return fmt.Errorf("label %q: an empty name", k+"="+v)
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return fmt.Errorf("label %q: invalid UTF-8", k+"="+v)
		}
	}
	return nil
}

// keyGone is the error of an update of key id that changed no row:
// ErrKeyRevoked when the key exists revoked, else ErrNoKey.
func (l *Ledger) keyGone(ctx context.Context, id string) error {
	var revoked bool
	err := l.pool.QueryRow(ctx, `SELECT revoked IS NOT NULL FROM nvdp.keys WHERE id = $1`, id).Scan(&revoked)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("key %q: %w", id, ErrNoKey)
	case err != nil:
		return l.fail("key", err)
	case revoked:
		return fmt.Errorf("key %q: %w", id, ErrKeyRevoked)
	}
	return fmt.Errorf("key %q: %w", id, ErrNoKey) // revoked nor missing: not reached
}

// AddKey stores a new key of the database: its ID, the account it charges,
// checked by [ledger.CheckKeyID]; the SHA-256 of key; its budget in epsilon
// at the model's delta, >= 0, +Inf for no limit; and labels. The replicas
// authenticate it from their next request.
//
// Errors: an invalid ID or budget; an ID that exists, or [ErrKeyRevoked]
// for a revoked one, since an account's ID is never reused; labels that are
// not valid UTF-8, as [CheckLabels] finds; the hash of a key that exists;
// [*Error].
func (l *Ledger) AddKey(id, key string, budget float64, labels map[string]string) error {
	if err := ledger.CheckKeyID(id); err != nil {
		return err
	}
	if option.IsAuto(budget) {
		return errors.New("a key of the database needs its own budget")
	}
	if !(budget >= 0) {
		return fmt.Errorf("budget %v: must be >= 0", budget)
	}
	if err := CheckLabels(labels); err != nil {
		return err
	}
	if labels == nil {
		labels = map[string]string{}
	}
	lb, err := json.Marshal(labels)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	h := ledger.HashKey(key)
	_, err = l.pool.Exec(ctx, `INSERT INTO nvdp.keys (id, hash, budget_epsilon, labels, created) VALUES ($1, $2, $3, $4, $5)`,
		id, h[:], budget, string(lb), time.Now().UTC())
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		if pe.ConstraintName == "keys_pkey" {
			if err := l.keyGone(ctx, id); errors.Is(err, ErrKeyRevoked) {
				return err
			}
			return fmt.Errorf("key %q exists: rotate it, or give another ID", id)
		}
		return fmt.Errorf("key %q: the key's hash is another key's", id)
	}
	return l.fail("add key", err)
}

// RotateKey replaces the secret of key id with key: the old secret is
// refused from the replicas' next request, the account and budget stay. A
// revoked key cannot be rotated. Errors: [ErrNoKey], [ErrKeyRevoked], the
// hash of a key that exists, [*Error].
func (l *Ledger) RotateKey(id, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	h := ledger.HashKey(key)
	tag, err := l.pool.Exec(ctx, `UPDATE nvdp.keys SET hash = $2, rotated = $3 WHERE id = $1 AND revoked IS NULL`, id, h[:], time.Now().UTC())
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("key %q: the new key's hash is another key's", id)
	}
	if err != nil {
		return l.fail("rotate key", err)
	}
	if tag.RowsAffected() == 0 {
		return l.keyGone(ctx, id)
	}
	return nil
}

// RevokeKey revokes key id: refused from the replicas' next request; its
// account, and what it spent, stay. Errors: ErrNoKey, *Error.
func (l *Ledger) RevokeKey(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	tag, err := l.pool.Exec(ctx, `UPDATE nvdp.keys SET revoked = $2 WHERE id = $1 AND revoked IS NULL`, id, time.Now().UTC())
	if err != nil {
		return l.fail("revoke key", err)
	}
	if tag.RowsAffected() == 0 {
		return l.keyGone(ctx, id)
	}
	return nil
}

// SetKeyBudget changes the budget of key id, which must not be revoked.
// Errors: a budget below 0 or NaN, [ErrNoKey], [*Error].
func (l *Ledger) SetKeyBudget(id string, budget float64) error {
	if !(budget >= 0) {
		return fmt.Errorf("budget %v: must be >= 0", budget)
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	tag, err := l.pool.Exec(ctx, `UPDATE nvdp.keys SET budget_epsilon = $2 WHERE id = $1 AND revoked IS NULL`, id, budget)
	if err != nil {
		return l.fail("set key budget", err)
	}
	if tag.RowsAffected() == 0 {
		return l.keyGone(ctx, id)
	}
	return nil
}

// Keys lists the database's keys by ID, revoked ones included.
func (l *Ledger) Keys() ([]KeyInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	rows, err := l.pool.Query(ctx, `SELECT id, budget_epsilon, labels, created, rotated, revoked FROM nvdp.keys ORDER BY id`)
	if err != nil {
		return nil, l.fail("keys", err)
	}
	out := []KeyInfo{}
	var (
		id               string
		budget           float64
		labels           []byte
		created          time.Time
		rotated, revoked *time.Time
	)
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	_, err = pgx.ForEachRow(rows, []any{&id, &budget, &labels, &created, &rotated, &revoked}, func() error {
		k := KeyInfo{ID: id, Budget: jsonfloat.Float(budget), Created: created.UTC(), Rotated: utc(rotated), Revoked: utc(revoked)}
		if err := json.Unmarshal(labels, &k.Labels); err != nil {
			return err
		}
		out = append(out, k)
		return nil
	})
	if err != nil {
		return nil, l.fail("keys", err)
	}
	return out, nil
}
