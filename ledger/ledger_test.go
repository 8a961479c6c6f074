package ledger

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

// gaussianGuarantee is the guarantee of one release with rd(order) = order
// rho over privacy.DefaultOrders (servetest.GaussianGuarantee, which this
// package's tests cannot import).
func gaussianGuarantee(rho float64) *privacy.Guarantee {
	g := &privacy.Guarantee{Releases: 1, Delta: privacy.DefaultDelta}
	for _, o := range privacy.DefaultOrders {
		g.Curve = append(g.Curve, privacy.OrderRD{Order: o, RD: jsonfloat.Float(o * rho)})
	}
	eps, order, _ := privacy.BestEpsilon(g.Curve, g.Delta)
	g.Epsilon, g.BestOrder = jsonfloat.Float(eps), jsonfloat.Float(order)
	return g
}

// epsOfReleases is an independent conversion of m releases of the curve
// rd(order) = order rho: m order rho + ln((order-1)/order) - (ln delta + ln
// order)/(order-1), minimised over privacy.DefaultOrders, clamped at 0 (the
// formula of docs/privacy.md, written out here again; it stays above the
// Bretagnolle-Huber zero for the rho of these tests).
func epsOfReleases(m, rho, delta float64) float64 {
	best := math.Inf(1)
	for _, o := range privacy.DefaultOrders {
		e := m*o*rho + math.Log((o-1)/o) - (math.Log(delta)+math.Log(o))/(o-1)
		best = math.Min(best, e)
	}
	return math.Max(0, best)
}

// openLedger opens the ledger at path, creating it first when there is no
// file there, closed when the test ends.
func openLedger(t *testing.T, path string) *File {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if _, err := CreateFile(path); err != nil {
			t.Fatal(err)
		}
	}
	l, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestLedgerCharge: charges compose additively at each order (the balance's
// spent epsilon is the independent conversion of the count of releases);
// remaining_releases is exact at the budget's edge; a refused charge
// changes nothing; the state survives reopening.
func TestLedgerCharge(t *testing.T) {
	const rho, m = 0.02, 7
	budget := epsOfReleases(m, rho, privacy.DefaultDelta) * (1 + 1e-12)
	if epsOfReleases(m+1, rho, privacy.DefaultDelta) <= budget {
		t.Fatal("test set-up: m+1 releases fit")
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	l := openLedger(t, path)
	c, err := l.RegisterCurve(gaussianGuarantee(rho), map[string]string{"model": "test"})
	if err != nil {
		t.Fatal(err)
	}
	bal, err := l.Balance("alice", c, budget)
	if err != nil || bal.Releases != 0 || bal.SpentEpsilon != 0 || bal.RemainingReleases != m {
		t.Fatalf("fresh balance %+v, %v: want 0 spent, %d remaining", bal, err, m)
	}
	for _, k := range []int{3, 1, 2} {
		before := bal.Releases
		if bal, err = l.Charge("alice", c, k, budget); err != nil {
			t.Fatal(err)
		}
		n := float64(before) + float64(k)
		if bal.Releases != uint64(n) || !near(float64(bal.SpentEpsilon), epsOfReleases(n, rho, privacy.DefaultDelta), 1e-12) ||
			bal.RemainingReleases != jsonfloat.Float(m-n) || !near(float64(bal.RemainingEpsilon), budget-float64(bal.SpentEpsilon), 1e-12) {
			t.Fatalf("after %v releases: %+v (want spent %v)", n, bal, epsOfReleases(n, rho, privacy.DefaultDelta))
		}
	}
	_, err = l.Charge("alice", c, 2, budget)
	var be *BudgetError
	if !errors.As(err, &be) || be.Requested != 2 || be.Releases != 6 || be.RemainingReleases != 1 {
		t.Fatalf("over-budget charge: %v (%+v)", err, be)
	}
	if !strings.Contains(err.Error(), `account "alice": 2 releases would exceed`) {
		t.Errorf("error %q", err)
	}
	if _, err := l.Charge("bob", c, 1, 0); !errors.As(err, &be) || be.RemainingReleases != 0 {
		t.Fatalf("budget 0: %v", err)
	}
	if bal, _ := l.Charge("carol", c, 5, math.Inf(1)); !math.IsInf(float64(bal.RemainingReleases), 1) {
		t.Fatalf("budget +Inf: remaining %v", bal.RemainingReleases)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge("alice", c, 1, budget); !errors.Is(err, ErrClosed) {
		t.Fatalf("charge after Close: %v", err)
	}

	l2 := openLedger(t, path)
	accts, err := l2.Accounts()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, a := range accts {
		got[a.ID] = a.Releases
	}
	if len(accts) != 2 || got["alice"] != 6 || got["carol"] != 5 {
		t.Fatalf("reopened: %+v, want alice 6 and carol 5 (bob refused, never charged)", accts)
	}
	if a := accts[0]; !near(float64(a.SpentEpsilon), epsOfReleases(6, rho, privacy.DefaultDelta), 1e-12) || a.Requests != 3 {
		t.Fatalf("alice reopened: %+v", a)
	}
	c2, err := l2.RegisterCurve(gaussianGuarantee(rho), nil)
	if err != nil || c2.ID != c.ID {
		t.Fatalf("same curve again: %v, %v", c2, err)
	}
	if bal, _ := l2.Balance("alice", c2, budget); bal.RemainingReleases != 1 {
		t.Fatalf("reopened balance %+v", bal)
	}
}

// TestLedgerTwoCurves: releases under two models' curves compose: the spent
// curve is the sum of count x curve at each order.
func TestLedgerTwoCurves(t *testing.T) {
	l := openLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
	a, _ := l.RegisterCurve(gaussianGuarantee(0.01), nil)
	b, err := l.RegisterCurve(gaussianGuarantee(0.03), nil)
	if err != nil || a.ID == b.ID {
		t.Fatalf("second curve: %v %v", b, err)
	}
	l.Charge("x", a, 3, math.Inf(1))
	bal, _ := l.Charge("x", b, 2, math.Inf(1))
	// 3 x 0.01 + 2 x 0.03 = 9 x 0.01 per order.
	if want := epsOfReleases(9, 0.01, privacy.DefaultDelta); !near(float64(bal.SpentEpsilon), want, 1e-12) {
		t.Fatalf("spent %v, want %v", bal.SpentEpsilon, want)
	}
}

// TestLedgerConcurrentCharges: charges racing for the last of a budget are
// settled in order: exactly the releases that fit are charged, the others
// refused, whatever the interleaving (the group commit checks each).
func TestLedgerConcurrentCharges(t *testing.T) {
	const rho, fit = 0.01, 40
	budget := epsOfReleases(fit, rho, privacy.DefaultDelta) * (1 + 1e-12)
	l := openLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
	c, _ := l.RegisterCurve(gaussianGuarantee(rho), nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var nOK, nRefused int
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Charge("alice", c, 1, budget)
			mu.Lock()
			defer mu.Unlock()
			var be *BudgetError
			switch {
			case err == nil:
				nOK++
			case errors.As(err, &be):
				nRefused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if nOK != fit || nRefused != 64-fit {
		t.Fatalf("%d charged, %d refused; want %d and %d", nOK, nRefused, fit, 64-fit)
	}
	if bal, _ := l.Balance("alice", c, budget); bal.Releases != fit {
		t.Fatalf("ledger holds %d releases, want %d", bal.Releases, fit)
	}
}

// TestOpenLedgerErrors: a file in use, a file that is not a bbolt
// database, a bbolt ledger of another order grid or delta: each a clear
// error naming the file.
func TestOpenLedgerErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	l := openLedger(t, path)
	if _, err := OpenFile(path); err == nil || !strings.Contains(err.Error(), path+": open in another process") {
		t.Errorf("second open: %v", err)
	}
	if _, err := l.RegisterCurve(gaussianGuarantee(0.01), nil); err != nil {
		t.Fatal(err)
	}
	g := gaussianGuarantee(0.01)
	g.Curve = g.Curve[:10]
	if _, err := l.RegisterCurve(g, nil); err == nil || !strings.Contains(err.Error(), "one order grid") {
		t.Errorf("other grid: %v", err)
	}
	g = gaussianGuarantee(0.01)
	g.Delta = 1e-6
	if _, err := l.RegisterCurve(g, nil); err == nil || !strings.Contains(err.Error(), "delta 1e-06 differs from the ledger's 1e-05") {
		t.Errorf("other delta: %v", err)
	}
	g = gaussianGuarantee(0.01)
	g.Releases = 3
	if _, err := l.RegisterCurve(g, nil); err == nil || !strings.Contains(err.Error(), "covers 3 releases") {
		t.Errorf("guarantee of 3 releases: %v", err)
	}
	junk := filepath.Join(dir, "junk.db")
	os.WriteFile(junk, []byte(strings.Repeat("not a database ", 1000)), 0o600)
	if _, err := OpenFile(junk); err == nil || !strings.Contains(err.Error(), junk) {
		t.Errorf("junk file: %v", err)
	}
}

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }
