package pgledger_test

import (
	"errors"
	"fmt"
	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/ledger/pgledger"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/internal/pgtest"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

// TestLedgersAgreeGaussian: the file and PostgreSQL ledgers give the same
// balances, accounts and curves, bit for bit, for charges under two
// Gaussian curves and an RDP one: an account of Gaussian curves only
// composes exactly (sqrt(sum n_i mu_i^2)), one with the RDP curve among
// them by the RDP sum, in both; refusals at the exact budget's edge agree.
func TestLedgersAgreeGaussian(t *testing.T) {
	file := servetest.OpenLedger(t)
	pg := servetest.OpenPGLedger(t, servetest.NewPGLedger(t), pgledger.DefaultOptions())
	const mu1, mu2 = 0.4, 1.1
	// A budget that holds alice's 3 + 2 releases of mu1 and 2 of mu2 exactly
	// (the RDP sum would hold fewer).
	exactMu := func(n1, n2 float64) float64 { return math.Sqrt(n1*mu1*mu1 + n2*mu2*mu2) }
	eps := func(mu float64) float64 {
		e, err := privacy.GaussianMechanismEpsilon(mu, privacy.DefaultDelta)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	budget := eps(exactMu(5, 2)) * (1 + 1e-9)
	if eps(exactMu(6, 2)) <= budget {
		t.Fatal("set-up: a sixth release of mu1 fits")
	}
	// curve 0, 1: Gaussian mu1, mu2; 2: RDP rho
	steps := []chargeStep{{"alice", 0, 3}, {"alice", 1, 2}, {"bob", 1, 1}, {"alice", 0, 2}, {"alice", 0, 1}, {"bob", 2, 2}, {"bob", 0, 1}, {"carol", 2, 3}, {"dave", 1, 9}}
	var results [2][]string
	var spent [2]map[string]float64
	for i, l := range []ledger.Ledger{file, pg} {
		var curves [3]*ledger.Curve
		for j, g := range []*privacy.Guarantee{servetest.ExactGaussianGuarantee(mu1), servetest.ExactGaussianGuarantee(mu2), servetest.GaussianGuarantee(rho)} {
			c, err := l.RegisterCurve(g, map[string]any{"model": j})
			if err != nil {
				t.Fatal(err)
			}
			curves[j] = c
		}
		if curves[0].Mu != mu1 || curves[1].Mu != mu2 || curves[2].Mu != 0 {
			t.Fatalf("%s: curves' mu %v %v %v", l.Name(), curves[0].Mu, curves[1].Mu, curves[2].Mu)
		}
		results[i] = chargeAll(t, l, curves[:], steps, budget)
		accts, err := l.Accounts()
		if err != nil {
			t.Fatal(err)
		}
		spent[i] = map[string]float64{}
		for _, a := range accts {
			a.Updated = time.Time{}
			results[i] = append(results[i], fmt.Sprintf("%+v", a))
			spent[i][a.ID+" "+a.Accountant] = float64(a.SpentEpsilon)
		}
		h, err := l.History(ledger.HistoryQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for j, c := range curves {
			ci := h.Curves[c.ID]
			ci.Registered = time.Time{}
			results[i] = append(results[i], fmt.Sprintf("%d %+v", j, ci))
		}
	}
	if !reflect.DeepEqual(results[0], results[1]) {
		t.Fatalf("the ledgers disagree:\nfile:     %q\npostgres: %q", results[0], results[1])
	}
	// The figures, independently: alice holds 5 of mu1 and 2 of mu2 (her
	// sixth of mu1 refused); bob's RDP curve makes his the RDP sum; dave's
	// 9 of mu2 do not fit.
	wantAlice := eps(exactMu(5, 2))
	if got := spent[0]["alice "+privacy.AccountantGaussian]; math.Abs(got-wantAlice) > 1e-12*wantAlice {
		t.Errorf("alice spent %v, want %v (exact): %v", got, wantAlice, spent[0])
	}
	if _, ok := spent[0]["bob "+privacy.AccountantRDP]; !ok {
		t.Errorf("bob's account is not composed by the RDP sum: %v", spent[0])
	}
	if !strings.Contains(results[0][4], "refused") || !strings.Contains(results[0][8], "refused") || strings.Contains(results[0][3], "refused") {
		t.Fatalf("set-up: want the fifth and ninth charges refused, the fourth made: %q", results[0][:9])
	}
	t.Logf("%d results agree; alice spent %v exactly", len(results[0]), wantAlice)
}

// TestPGLedgerGaussianCurveTampered: a Gaussian curve whose mu was changed in the
// database (or removed, or set on an RDP curve) is refused as corrupt, not
// charged under; the column holds NULL for an RDP curve.
func TestPGLedgerGaussianCurveTampered(t *testing.T) {
	for _, tc := range []struct {
		name, sql, err string
	}{
		{"mu 1% larger", `UPDATE nvdp.curves SET gaussian_mu = gaussian_mu * 1.01 WHERE accountant = 'analytic-gaussian'`, "does not match the RDP bound"},
		{"mu 1e-9 larger", `UPDATE nvdp.curves SET gaussian_mu = gaussian_mu * (1 + 1e-9) WHERE accountant = 'analytic-gaussian'`, "its orders and bounds hash to"},
		{"mu removed", `UPDATE nvdp.curves SET gaussian_mu = NULL WHERE accountant = 'analytic-gaussian'`, "gaussian mu 0: want a finite value > 0"},
		{"mu NaN", `UPDATE nvdp.curves SET gaussian_mu = 'NaN' WHERE accountant = 'analytic-gaussian'`, "gaussian mu NaN: want a finite value > 0"},
		{"mu on the RDP curve", `UPDATE nvdp.curves SET gaussian_mu = 0.1 WHERE accountant = 'rdp'`, "an RDP curve (rdp) with a gaussian mu 0.1"},
		{"the Gaussian curve made RDP", `UPDATE nvdp.curves SET accountant = 'rdp', format_version = 1, gaussian_mu = NULL WHERE accountant = 'analytic-gaussian'`, "its orders and bounds hash to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := servetest.NewPGLedger(t)
			l := servetest.OpenPGLedger(t, dsn, pgledger.DefaultOptions())
			g, err := l.RegisterCurve(servetest.ExactGaussianGuarantee(0.7), "gaussian")
			if err != nil {
				t.Fatal(err)
			}
			r, err := l.RegisterCurve(servetest.GaussianGuarantee(rho), "rdp")
			if err != nil {
				t.Fatal(err)
			}
			l.Charge("alice", g, 2, math.Inf(1))
			if n := count(t, dsn, `SELECT count(*) FROM nvdp.curves WHERE id = $1 AND gaussian_mu = 0.7 AND accountant = 'analytic-gaussian' AND format_version = 2`, g.ID); n != 1 {
				t.Fatal("the Gaussian curve's row lacks its mu, accountant or format")
			}
			if n := count(t, dsn, `SELECT count(*) FROM nvdp.curves WHERE id = $1 AND gaussian_mu IS NULL AND accountant = 'rdp' AND format_version = 1`, r.ID); n != 1 {
				t.Fatal("the RDP curve's row is not as before")
			}
			execSQL(t, dsn, tc.sql)
			if _, err := pgledger.Open(dsn, pgledger.DefaultOptions()); !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("open: %v, want corrupt: %q", err, tc.err)
			}
		})
	}
}

// TestPGLedgerMigration: a database of schema version 1 (before
// curves.gaussian_mu) holding an RDP curve and charges is refused by a
// server ("migrate it"), migrated by init (versions 2 and 3 applied: its
// accountant renamed rdp-sum -> rdp, nothing else changed), and then reads
// as before: the old account composes by the
// RDP sum with the same balance as a file ledger charged the same, the
// model registered again is a Gaussian curve of its own, composed exactly.
func TestPGLedgerMigration(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	if applied, err := pgledger.Migrate(dsn, 1); err != nil || !reflect.DeepEqual(applied, []int{1}) {
		t.Fatalf("version 1: %v %v", applied, err)
	}
	// What a server of version 1 wrote: an RDP curve, an account charged 6
	// releases under it, the charge row.
	const mu = 0.8
	file := servetest.OpenLedger(t)
	rc, err := file.RegisterCurve(servetest.GaussianGuarantee(mu*mu/2), "m")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := file.Charge("alice", rc, 6, 100)
	execSQL(t, dsn, `UPDATE nvdp.ledger SET orders = $1, delta = $2`, privacy.DefaultOrders, privacy.DefaultDelta)
	execSQL(t, dsn, `INSERT INTO nvdp.curves (id, accountant, format_version, orders, rd, delta, registered) VALUES ($1, 'rdp-sum', 1, $2, $3, $4, now())`,
		rc.ID, privacy.DefaultOrders, rc.RD, privacy.DefaultDelta)
	execSQL(t, dsn, `INSERT INTO nvdp.accounts (id, requests, updated) VALUES ('alice', 1, now())`)
	execSQL(t, dsn, `INSERT INTO nvdp.account_releases (account, curve, releases) VALUES ('alice', $1, 6)`, rc.ID)
	execSQL(t, dsn, `INSERT INTO nvdp.charges (at, account, releases, curve, replica) VALUES (now(), 'alice', 6, $1, 'v1')`, rc.ID)

	if _, err := pgledger.Open(dsn, pgledger.DefaultOptions()); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("schema version 1, this server needs %d: migrate it (nvdp serve ledger init)", pgledger.SchemaVersion)) {
		t.Fatalf("open of version 1: %v", err)
	}
	info, applied, err := pgledger.Create(dsn, 30*time.Second)
	if err != nil || !reflect.DeepEqual(applied, []int{2, 3}) || info.SchemaVersion != 3 || info.Charges != 1 || info.Releases != 6 {
		t.Fatalf("init of version 1: %+v %v %v", info, applied, err)
	}
	if n := count(t, dsn, `SELECT count(*) FROM nvdp.curves WHERE gaussian_mu IS NULL AND accountant = 'rdp'`); n != 1 {
		t.Fatalf("%d RDP curves without a mu, named rdp, after the migration, want the one", n)
	}
	l := servetest.OpenPGLedger(t, dsn, pgledger.DefaultOptions())
	bal, err := l.Balance("alice", rc, 100)
	if err != nil || bal != want || bal.Accountant != privacy.AccountantRDP {
		t.Fatalf("the old account after the migration: %+v %v, want %+v", bal, err, want)
	}
	g, err := l.RegisterCurve(servetest.ExactGaussianGuarantee(mu), "m")
	if err != nil || g.ID == rc.ID || g.Mu != mu {
		t.Fatalf("the model registered again: %+v %v", g, err)
	}
	bob, err := l.Charge("bob", g, 6, 100)
	wantBob, _ := privacy.GaussianMechanismEpsilon(mu*math.Sqrt(6), privacy.DefaultDelta)
	if err != nil || bob.Accountant != privacy.AccountantGaussian || float64(bob.SpentEpsilon) != wantBob || !(bob.SpentEpsilon < want.SpentEpsilon) {
		t.Fatalf("bob under the Gaussian curve: %+v %v, want %v exactly", bob, err, wantBob)
	}
	if alice, err := l.Charge("alice", g, 1, 100); err != nil || alice.Accountant != privacy.AccountantRDP {
		t.Fatalf("alice under both curves: %+v %v, want the RDP sum", alice, err)
	}
}
