package pgledger_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/ledger/pgledger"

	"github.com/jackc/pgx/v5"
	"github.com/nvdp-project/nvdp/internal/pgtest"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// exactBudget is a budget that holds exactly k releases of the fake's
// curve (rho), no more.
func exactBudget(t testing.TB, k int) float64 {
	b := epsOfReleases(float64(k)) * (1 + 1e-12)
	if epsOfReleases(float64(k+1)) <= b {
		t.Fatalf("set-up: %d releases fit a budget of %d", k+1, k)
	}
	return b
}

// TestLedgersAgree: the file and PostgreSQL ledgers give the same balances
// bit for bit for the same charges (one budget arithmetic): two curves,
// refusals at the budget's edge, several accounts; and the same accounts.
func TestLedgersAgree(t *testing.T) {
	file := servetest.OpenLedger(t)
	pg := servetest.OpenPGLedger(t, servetest.NewPGLedger(t), pgledger.DefaultOptions())
	budget := exactBudget(t, 9)
	// curve 0 or 1: rho or 3 rho
	steps := []chargeStep{{"alice", 0, 3}, {"bob", 1, 1}, {"alice", 1, 2}, {"alice", 0, 4}, {"alice", 0, 1}, {"bob", 0, 5}, {"carol", 1, 4}, {"bob", 1, 3}}
	var results [2][]string
	for i, l := range []ledger.Ledger{file, pg} {
		var curves [2]*ledger.Curve
		for j, r := range []float64{rho, 3 * rho} {
			c, err := l.RegisterCurve(servetest.GaussianGuarantee(r), map[string]any{"model": j})
			if err != nil {
				t.Fatal(err)
			}
			curves[j] = c
		}
		results[i] = chargeAll(t, l, curves[:], steps, budget)
		accts, err := l.Accounts()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range accts {
			a.Updated = time.Time{}
			results[i] = append(results[i], fmt.Sprintf("%+v", a))
		}
	}
	if !reflect.DeepEqual(results[0], results[1]) {
		t.Fatalf("the ledgers disagree:\nfile:     %q\npostgres: %q", results[0], results[1])
	}
	if !strings.Contains(results[0][4], "refused") || strings.Contains(results[0][0], "refused") {
		t.Fatalf("set-up: want the fifth charge refused, the first made: %q", results[0])
	}
	t.Logf("%d results agree", len(results[0]))
}

// chargeStep is one charge of the ledger-agreement tests: k releases of
// curve (an index of the test's curves) to account.
type chargeStep struct {
	account string
	curve   int
	k       int
}

// chargeAll charges steps on l in order against budget and returns each
// balance, or the balance of a refusal, as text.
func chargeAll(t *testing.T, l ledger.Ledger, curves []*ledger.Curve, steps []chargeStep, budget float64) []string {
	t.Helper()
	var out []string
	for _, s := range steps {
		bal, err := l.Charge(s.account, curves[s.curve], s.k, budget)
		var be *ledger.BudgetError
		if errors.As(err, &be) {
			out = append(out, fmt.Sprintf("refused %+v", be.Balance))
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", l.Name(), err)
		}
		out = append(out, fmt.Sprintf("%+v", bal))
	}
	return out
}

// TestPGLedgerSchema: a server refuses a database without the ledger's
// schema (ErrNoLedger, nothing created) and one of a newer version; init
// creates the schema with its version table (versions 1 to 3) once, and
// again changes nothing; init refuses a schema "nvdp" that is not a ledger.
func TestPGLedgerSchema(t *testing.T) {
	c := pgtest.Shared(t)
	dsn := c.NewDatabase(t)
	if _, err := pgledger.Open(dsn, pgledger.DefaultOptions()); !errors.Is(err, ledger.ErrNoLedger) ||
		!strings.Contains(err.Error(), "holds no nvdp ledger (no table nvdp.schema_version): a ledger is created explicitly") {
		t.Fatalf("open of an empty database: %v", err)
	}
	if n := count(t, dsn, `SELECT count(*) FROM pg_namespace WHERE nspname = 'nvdp'`); n != 0 {
		t.Fatal("opening an empty database created the schema")
	}
	info, applied, err := pgledger.Create(dsn, 10*time.Second)
	if err != nil || !reflect.DeepEqual(applied, []int{1, 2, 3}) || len(info.LedgerID) != 32 || info.SchemaVersion != 3 || info.Format != pgledger.Format || info.Accounts != 0 {
		t.Fatalf("init: %+v %v %v", info, applied, err)
	}
	if strings.Contains(info.Path, "password") {
		t.Errorf("the ledger's name shows a password: %s", info.Path)
	}
	again, applied, err := pgledger.Create(dsn, 10*time.Second)
	if err != nil || len(applied) != 0 || again.LedgerID != info.LedgerID {
		t.Fatalf("second init: %+v %v %v", again, applied, err)
	}
	if n := count(t, dsn, `SELECT count(*) FROM nvdp.schema_version`); n != 3 {
		t.Fatalf("%d schema versions recorded, want 3", n)
	}
	execSQL(t, dsn, `INSERT INTO nvdp.schema_version VALUES (4, 'from the future', now())`)
	if _, err := pgledger.Open(dsn, pgledger.DefaultOptions()); err == nil || !strings.Contains(err.Error(), "schema version 4 is newer than this server's 3") {
		t.Fatalf("open of a newer schema: %v", err)
	}
	if _, _, err := pgledger.Create(dsn, 10*time.Second); err == nil || !strings.Contains(err.Error(), "newer than this build's") {
		t.Fatalf("init of a newer schema: %v", err)
	}
	other := c.NewDatabase(t)
	execSQL(t, other, `CREATE SCHEMA nvdp; CREATE TABLE nvdp.things (x int)`)
	if _, _, err := pgledger.Create(other, 10*time.Second); err == nil || !strings.Contains(err.Error(), "not an nvdp ledger, left alone") {
		t.Fatalf("init over a foreign schema: %v", err)
	}
	if _, err := pgledger.Open(other, pgledger.DefaultOptions()); !errors.Is(err, ledger.ErrNoLedger) {
		t.Fatalf("open of a foreign schema: %v", err)
	}
	for _, tc := range []struct {
		o   func(*pgledger.Options)
		err string
	}{
		{func(o *pgledger.Options) { o.MaxConns = 2 }, "ledger_max_conns 2: want 3 to 1000 (the 2 committers of charges, and reads)"},
		{func(o *pgledger.Options) { o.Timeout = 0 }, "ledger_timeout 0s: must be at least 10ms"},
		{func(o *pgledger.Options) { o.MaxWaitingCharges = 0 }, "ledger_max_waiting 0: must be >= 1"},
	} {
		o := pgledger.DefaultOptions()
		tc.o(&o)
		if _, err := pgledger.Open(dsn, o); err == nil || err.Error() != tc.err {
			t.Errorf("options: %v, want %q", err, tc.err)
		}
	}
}

// execSQL runs sql on the database at dsn.
func execSQL(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	servetest.ExecSQL(t, dsn, sql, args...)
}

// count runs a query of one integer on the database at dsn.
func count(t testing.TB, dsn, sql string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// lockAccount holds the row lock of account id in a transaction of its own
// connection to dsn, as another client's charge does, until the returned
// unlock (idempotent) rolls it back and closes the connection.
func lockAccount(t testing.TB, dsn, id string) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, `SELECT 1 FROM nvdp.accounts WHERE id = $1 FOR UPDATE`, id)
	}
	if err != nil {
		conn.Close(ctx)
		t.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			tx.Rollback(ctx)
			conn.Close(ctx)
		})
	}
}

// TestPGReplicasCannotOverspend: three ledgers (three replicas' pools) on
// one database charge one key concurrently, 90 charges of 1 release racing
// for a budget of exactly 40: exactly 40 are charged and 50 refused,
// whatever the interleaving; the database's counts, requests and charge
// rows say the same.
func TestPGReplicasCannotOverspend(t *testing.T) {
	const k, tries = 40, 90
	dsn := servetest.NewPGLedger(t)
	budget := exactBudget(t, k)
	var replicas []*pgledger.Ledger
	var curves []*ledger.Curve
	for i := range 3 {
		o := pgledger.DefaultOptions()
		o.Replica = fmt.Sprintf("r%d", i)
		l := servetest.OpenPGLedger(t, dsn, o)
		c, err := l.RegisterCurve(servetest.GaussianGuarantee(rho), map[string]string{"model": "fake"})
		if err != nil {
			t.Fatal(err)
		}
		replicas, curves = append(replicas, l), append(curves, c)
	}
	var mu sync.Mutex
	var ok, refused int
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range tries {
		wg.Go(func() {
			<-start
			_, err := replicas[i%3].Charge("alice", curves[i%3], 1, budget)
			var be *ledger.BudgetError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.As(err, &be):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if ok != k || refused != tries-k {
		t.Fatalf("%d charged, %d refused; want %d and %d", ok, refused, k, tries-k)
	}
	bal, err := replicas[0].Balance("alice", curves[0], budget)
	if err != nil || bal.Releases != k || bal.RemainingReleases != 0 {
		t.Fatalf("balance %+v, %v", bal, err)
	}
	if n := count(t, dsn, `SELECT sum(releases) FROM nvdp.charges WHERE account = 'alice'`); n != k {
		t.Errorf("charge rows hold %d releases, want %d", n, k)
	}
	if n := count(t, dsn, `SELECT requests FROM nvdp.accounts WHERE id = 'alice'`); n != k {
		t.Errorf("requests %d, want %d", n, k)
	}
	if n := count(t, dsn, `SELECT count(DISTINCT replica) FROM nvdp.charges`); n < 2 {
		t.Errorf("charges from %d replicas, want 2 or 3", n)
	}
}

// TestPGCurvesFromAnotherReplica: a replica reads the curve another
// replica (a newer model) registered and charged under: its balance
// composes both curves, and so do the accounts of a third process that
// opened the ledger before either curve existed.
func TestPGCurvesFromAnotherReplica(t *testing.T) {
	dsn := servetest.NewPGLedger(t)
	reader := servetest.OpenPGLedger(t, dsn, pgledger.DefaultOptions()) // opened before any curve
	a := servetest.OpenPGLedger(t, dsn, pgledger.DefaultOptions())
	b := servetest.OpenPGLedger(t, dsn, pgledger.DefaultOptions())
	ca, err := a.RegisterCurve(servetest.GaussianGuarantee(rho), "old model")
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.RegisterCurve(servetest.GaussianGuarantee(2*rho), "new model")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Charge("alice", ca, 3, math.Inf(1)); err != nil {
		t.Fatal(err)
	}
	bal, err := b.Charge("alice", cb, 2, math.Inf(1))
	if err != nil {
		t.Fatal(err)
	}
	// 3 x rho + 2 x 2 rho = 7 rho at each order.
	if want := epsOfReleases(7); math.Abs(float64(bal.SpentEpsilon)-want) > 1e-12*want || bal.Releases != 5 {
		t.Fatalf("replica b's balance %+v, want spent %v over 5 releases", bal, want)
	}
	accts, err := reader.Accounts()
	if err != nil || len(accts) != 1 || accts[0].Releases != 5 || accts[0].ReleasesByCurve[ca.ID] != 3 ||
		math.Abs(float64(accts[0].SpentEpsilon)-epsOfReleases(7)) > 1e-12*epsOfReleases(7) {
		t.Fatalf("the third process's accounts: %+v, %v", accts, err)
	}
	// A curve whose bounds were changed in the database is refused, not charged under.
	execSQL(t, dsn, `UPDATE nvdp.curves SET rd[1] = rd[1] / 2 WHERE id = $1`, ca.ID)
	if _, err := pgledger.Open(dsn, pgledger.DefaultOptions()); !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), "its orders and bounds hash to") {
		t.Fatalf("open with a changed curve: %v", err)
	}
}

// TestPGHistory: every charge is a row with its time, key, releases, model
// and curve, and the replica; History pages through it newest first, for
// one account or all, with the curves' guarantee and the models'
// descriptions; refusals leave no row.
func TestPGHistory(t *testing.T) {
	for _, kind := range []string{"file", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var l ledger.Ledger = servetest.OpenLedger(t)
			if kind == "postgres" {
				o := pgledger.DefaultOptions()
				o.Replica = "replica-1"
				l = servetest.OpenPGLedger(t, servetest.NewPGLedger(t), o)
			}
			c, err := l.RegisterCurve(servetest.GaussianGuarantee(rho), map[string]string{"model": "m1"})
			if err != nil {
				t.Fatal(err)
			}
			before := time.Now().Add(-time.Second)
			budget := exactBudget(t, 6)
			for i, a := range []string{"alice", "bob", "alice", "alice", "bob"} {
				if _, err := l.Charge(a, c, i+1, math.Inf(1)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.Charge("alice", c, 1, budget); err == nil {
				t.Fatal("set-up: a charge past the budget was made")
			}
			h, err := l.History(ledger.HistoryQuery{Account: "alice", Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Charges) != 2 || h.Charges[0].Releases != 4 || h.Charges[1].Releases != 3 || h.Before != h.Charges[1].ID {
				t.Fatalf("alice's newest 2: %+v (before %d)", h.Charges, h.Before)
			}
			ch := h.Charges[0]
			if ch.Account != "alice" || ch.Curve != c.ID || ch.Model != c.Model || ch.Time.Before(before) || ch.Time.After(time.Now().Add(time.Second)) {
				t.Errorf("charge %+v", ch)
			}
			if kind == "postgres" && ch.Replica != "replica-1" {
				t.Errorf("replica %q", ch.Replica)
			}
			ci := h.Curves[c.ID]
			if ci.Accountant != privacy.AccountantRDP || ci.Format != 1 || ci.GaussianMu != 0 || math.Abs(float64(ci.Epsilon)-epsOfReleases(1)) > 1e-12 {
				t.Errorf("curve %+v", ci)
			}
			if string(h.Models[c.Model]) != `{"model":"m1"}` && string(h.Models[c.Model]) != `{"model": "m1"}` {
				t.Errorf("model %s", h.Models[c.Model])
			}
			rest, err := l.History(ledger.HistoryQuery{Account: "alice", Before: h.Before, Limit: 10})
			if err != nil || len(rest.Charges) != 1 || rest.Charges[0].Releases != 1 || rest.Before != 0 {
				t.Fatalf("the next page: %+v %v", rest, err)
			}
			all, err := l.History(ledger.HistoryQuery{Limit: 100})
			if err != nil || len(all.Charges) != 5 || all.Charges[0].Account != "bob" || all.Charges[0].Releases != 5 {
				t.Fatalf("all: %+v %v", all.Charges, err)
			}
			if _, err := l.History(ledger.HistoryQuery{Limit: 0}); err == nil || err.Error() != "limit 0: want 1 to 10000 charges" {
				t.Errorf("limit 0: %v", err)
			}
		})
	}
}

// TestPGLedgerBusyAndTimeout: while another transaction holds the key's row
// lock, a charge fails after the ledger's timeout with the unavailable
// error and charges nothing; the charges beyond MaxWaitingCharges are
// refused at once with ErrBusy; once the lock goes, charges work.
func TestPGLedgerBusyAndTimeout(t *testing.T) {
	dsn := servetest.NewPGLedger(t)
	o := pgledger.DefaultOptions()
	o.Timeout, o.MaxWaitingCharges = 300*time.Millisecond, 1
	l := servetest.OpenPGLedger(t, dsn, o)
	c, err := l.RegisterCurve(servetest.GaussianGuarantee(rho), "m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge("alice", c, 1, math.Inf(1)); err != nil {
		t.Fatal(err)
	}
	unlock := lockAccount(t, dsn, "alice")
	defer unlock()
	start := time.Now()
	results := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := l.Charge("alice", c, 1, math.Inf(1))
			results <- err
		}()
	}
	var busy, unavailable int
	for range 8 {
		err := <-results
		switch {
		case errors.Is(err, ledger.ErrBusy):
			busy++
		case errors.Is(err, ledger.ErrUnavailable):
			unavailable++
			var pe *pgledger.Error
			if !errors.As(err, &pe) || !pe.Temporary() {
				t.Errorf("%v: not a temporary Error", err)
			}
		default:
			t.Errorf("charge under the lock: %v", err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the charges took %v under a timeout of %v", d, o.Timeout)
	}
	if busy == 0 || unavailable == 0 || busy+unavailable != 8 {
		t.Errorf("%d busy, %d timed out", busy, unavailable)
	}
	unlock()
	if bal, err := l.Charge("alice", c, 1, math.Inf(1)); err != nil || bal.Releases != 2 {
		t.Fatalf("after the lock: %+v %v (want 2 releases: nothing charged under the lock)", bal, err)
	}
}

// TestPostgresDSN: the ledger locations that name PostgreSQL, and env:VAR.
func TestPostgresDSN(t *testing.T) {
	t.Setenv("NVDP_TEST_DSN", "postgres://u:secret@db:5432/nvdp")
	t.Setenv("NVDP_TEST_EMPTY", "")
	t.Setenv("NVDP_TEST_FILE", "/var/lib/ledger.db")
	for _, tc := range []struct {
		loc, dsn, err string
		pg            bool
	}{
		{"postgres://h/db", "postgres://h/db", "", true},
		{"postgresql://h/db", "postgresql://h/db", "", true},
		{"env:NVDP_TEST_DSN", "postgres://u:secret@db:5432/nvdp", "", true},
		{"env:NVDP_TEST_EMPTY", "", "env:NVDP_TEST_EMPTY: the environment variable NVDP_TEST_EMPTY is unset or empty", true},
		{"env:NVDP_TEST_UNSET", "", "unset or empty", true},
		{"env:NVDP_TEST_FILE", "", "env:NVDP_TEST_FILE: the variable holds no postgres:// or postgresql:// URL", true},
		{"env:", "", "env: names no variable", true},
		{filepath.Join("dir", "ledger.db"), "", "is not a postgres:// or postgresql:// URL", false},
	} {
		if pgledger.IsPostgres(tc.loc) != tc.pg {
			t.Errorf("IsPostgres(%q) = %v", tc.loc, !tc.pg)
		}
		dsn, err := pgledger.PostgresDSN(tc.loc)
		if dsn != tc.dsn || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("PostgresDSN(%q) = %q, %v; want %q, %q", tc.loc, dsn, err, tc.dsn, tc.err)
		}
	}
}

// BenchmarkCharge is the cost of a charge in each ledger, committed
// durably (the file: bbolt's fsync; PostgreSQL: a cluster with fsync and
// synchronous_commit on, over its unix socket): one charge at a time
// (goroutines=1), and 8 or 32 goroutines charging at once (their charges
// grouped into transactions), each of one release to its own account; ns/op
// is the wall time per charge, so 1e9/(ns/op) charges per second.
// docs/performance.md, "The ledgers".
func BenchmarkCharge(b *testing.B) {
	dsn := servetest.InitPGLedger(b, pgtest.New(b, pgtest.Options{Durable: true}))
	for _, kind := range []string{"file", "postgres"} {
		for _, par := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", kind, par), func(b *testing.B) {
				var l ledger.Ledger = servetest.OpenLedger(b)
				if kind == "postgres" {
					l = servetest.OpenPGLedger(b, dsn, pgledger.DefaultOptions())
				}
				c, err := l.RegisterCurve(servetest.GaussianGuarantee(rho), "bench")
				if err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				if par == 1 {
					for range b.N {
						if _, err := l.Charge(kind, c, 1, math.Inf(1)); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				var next atomicInt
				b.SetParallelism(max(1, par/runtime.GOMAXPROCS(0))) // par goroutines in all
				b.RunParallel(func(pb *testing.PB) {
					account := fmt.Sprintf("%s-%d-%d", kind, par, next.add())
					for pb.Next() {
						if _, err := l.Charge(account, c, 1, math.Inf(1)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// atomicInt numbers the benchmark's goroutines.
type atomicInt struct {
	mu sync.Mutex
	n  int
}

func (a *atomicInt) add() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	return a.n
}

// TestPGLockedAccountDoesNotStall: while one account's row is locked
// elsewhere (an operator's psql), its charges wait for it, but another
// account's charge on the same ledger commits at once, well within the
// timeout; once the lock goes, the waiting charges commit too.
func TestPGLockedAccountDoesNotStall(t *testing.T) {
	dsn := servetest.NewPGLedger(t)
	o := pgledger.DefaultOptions()
	o.Timeout = 3 * time.Second
	l := servetest.OpenPGLedger(t, dsn, o)
	c, err := l.RegisterCurve(servetest.GaussianGuarantee(rho), "m")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"alice", "bob"} {
		if _, err := l.Charge(a, c, 1, math.Inf(1)); err != nil {
			t.Fatal(err)
		}
	}
	unlock := lockAccount(t, dsn, "alice")
	defer unlock()
	const waiting = 6 // more than the committers
	results := make(chan error, waiting)
	for range waiting {
		go func() {
			_, err := l.Charge("alice", c, 1, math.Inf(1))
			results <- err
		}()
	}
	time.Sleep(200 * time.Millisecond) // the charges of alice are taken by the committers
	start := time.Now()
	bal, err := l.Charge("bob", c, 1, math.Inf(1))
	if d := time.Since(start); err != nil || bal.Releases != 2 || d > o.Timeout/3 {
		t.Errorf("bob's charge while alice's row is locked: %+v, %v after %v (timeout %v)", bal, err, d, o.Timeout)
	}
	unlock()
	for range waiting {
		if err := <-results; err != nil {
			t.Errorf("alice's charge after the lock: %v", err)
		}
	}
	if n := count(t, dsn, `SELECT releases FROM nvdp.account_releases WHERE account = 'alice'`); n != 1+waiting {
		t.Errorf("alice: %d releases, want %d", n, 1+waiting)
	}
}

// TestPGPermanentErrors: a database user without the right to write the
// charges gets a permanent error (SQLSTATE 42501), not the temporary
// unavailable one (serve's TestPGPermanentErrorsServed: 500 ledger_error).
func TestPGPermanentErrors(t *testing.T) {
	dsn := servetest.NewPGLedger(t)
	l := servetest.OpenPGLedger(t, servetest.NoInsertDSN(t, dsn), pgledger.DefaultOptions())
	c, err := l.RegisterCurve(servetest.GaussianGuarantee(rho), "m")
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Charge("alice", c, 1, math.Inf(1))
	var pe *pgledger.Error
	if !errors.As(err, &pe) || !pe.Permanent || pe.Temporary() || errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), "42501") {
		t.Fatalf("charge without the right to insert: %v", err)
	}
}

// TestPGSchemaChecked: a ledger whose schema lacks a table (nvdp.charges
// dropped) is refused at open, naming the table, instead of failing every
// request.
func TestPGSchemaChecked(t *testing.T) {
	dsn := servetest.NewPGLedger(t)
	execSQL(t, dsn, `DROP TABLE nvdp.charges`)
	if _, err := pgledger.Open(dsn, pgledger.DefaultOptions()); err == nil || !strings.Contains(err.Error(), "table nvdp.charges is missing") {
		t.Fatalf("open without nvdp.charges: %v", err)
	}
	dsn = servetest.NewPGLedger(t)
	execSQL(t, dsn, `ALTER TABLE nvdp.accounts DROP COLUMN updated`)
	if _, err := pgledger.Open(dsn, pgledger.DefaultOptions()); err == nil || !strings.Contains(err.Error(), "table nvdp.accounts (columns id, requests, updated)") {
		t.Fatalf("open without nvdp.accounts.updated: %v", err)
	}
}
