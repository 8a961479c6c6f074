package ledger

import (
	"encoding/json"
	"errors"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
	bolt "go.etcd.io/bbolt"
)

// exactGuarantee is the guarantee of one release that is exactly a
// Gaussian mechanism of sensitivity / sigma mu, as privacy.CertifyCurve
// gives for a fixed-noise clip set: accountant privacy.AccountantGaussian,
// GaussianMu mu, its exact epsilon, and the RDP curve order mu^2 / 2
// (servetest.ExactGaussianGuarantee, which this package's tests cannot
// import).
func exactGuarantee(mu float64) *privacy.Guarantee {
	g := gaussianGuarantee(mu * mu / 2)
	g.RDPEpsilon = g.Epsilon
	eps, err := privacy.GaussianMechanismEpsilon(mu, g.Delta)
	if err != nil {
		panic(err)
	}
	g.Epsilon, g.Accountant, g.GaussianMu = jsonfloat.Float(eps), privacy.AccountantGaussian, jsonfloat.Float(mu)
	return g
}

// gme is privacy.GaussianMechanismEpsilon at privacy.DefaultDelta.
func gme(t testing.TB, mu float64) float64 {
	t.Helper()
	eps, err := privacy.GaussianMechanismEpsilon(mu, privacy.DefaultDelta)
	if err != nil {
		t.Fatal(err)
	}
	return eps
}

// TestLedgerGaussianComposition: k releases of one Gaussian curve compose
// exactly, to privacy.GaussianMechanismEpsilon(mu_1 sqrt(k), delta) bit for
// bit (as privacy.Guarantee's mu of k releases), below the RDP sum's
// epsilon of the same releases (an account charged the same releases under
// the curve's RDP bounds alone, and the independent conversion
// epsOfReleases); the account says which accountant gave it.
func TestLedgerGaussianComposition(t *testing.T) {
	for _, tc := range []struct {
		mu float64
		k  int
		// gain is the least relative gain of the exact epsilon over the
		// RDP sum's (checked, so that the figures of the comments hold).
		gain float64
	}{
		// mu_1 = 1.666, k = 10 (mu 5.268): the exact epsilon is 35.616,
		// the RDP sum's 37.700 (at order 1.9): 5.5% less.
		{1.666, 10, 0.054},
		{0.1, 1, 0.09},       // one release: 0.3407 against 0.3753 (order 41)
		{0.5, 7, 0.07},       // mu 1.323: 6.072 against 6.543
		{0.05, 1000, 0.07},   // mu 1.581: 7.511 against 8.079
		{4, 3, 0.05},         // mu 6.928: 52.77 against 55.60
		{1e-3, 50000, 0.085}, // mu 0.2236: 0.8197 against 0.8970
	} {
		l := openLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
		exact, err := l.RegisterCurve(exactGuarantee(tc.mu), "exact")
		if err != nil {
			t.Fatal(err)
		}
		rdp, err := l.RegisterCurve(gaussianGuarantee(tc.mu*tc.mu/2), "rdp")
		if err != nil {
			t.Fatal(err)
		}
		if exact.Mu != tc.mu || rdp.Mu != 0 || exact.ID == rdp.ID || exact.ID == curveID(l.Orders(), exact.RD) {
			t.Fatalf("mu %v: curves %s (mu %v) and %s (mu %v): want the exact one's ID over its mu too", tc.mu, exact.ID, exact.Mu, rdp.ID, rdp.Mu)
		}
		for _, c := range []*Curve{exact, rdp} {
			if _, err := l.Charge(c.ID, c, tc.k, math.Inf(1)); err != nil {
				t.Fatal(err)
			}
		}
		want := gme(t, tc.mu*math.Sqrt(float64(tc.k)))
		bal, err := l.Balance(exact.ID, exact, math.Inf(1))
		if err != nil {
			t.Fatal(err)
		}
		if float64(bal.SpentEpsilon) != want || bal.Accountant != privacy.AccountantGaussian || bal.Releases != uint64(tc.k) {
			t.Fatalf("mu %v k %d: balance %+v, want spent exactly %v by %s", tc.mu, tc.k, bal, want, privacy.AccountantGaussian)
		}
		byRDP, err := l.Balance(rdp.ID, rdp, math.Inf(1))
		if err != nil {
			t.Fatal(err)
		}
		indep := epsOfReleases(float64(tc.k), tc.mu*tc.mu/2, privacy.DefaultDelta)
		if byRDP.Accountant != privacy.AccountantRDP || !near(float64(byRDP.SpentEpsilon), indep, 1e-9) {
			t.Fatalf("mu %v k %d: the RDP account %+v, want %v by %s", tc.mu, tc.k, byRDP, indep, privacy.AccountantRDP)
		}
		if gain := 1 - want/indep; !(gain >= tc.gain) {
			t.Errorf("mu %v k %d: exact %v, RDP %v: %.3f less, want at least %.3f", tc.mu, tc.k, want, indep, gain, tc.gain)
		}
		accts, err := l.Accounts()
		if err != nil || len(accts) != 2 {
			t.Fatal(accts, err)
		}
		for _, a := range accts {
			exactAcct := a.ID == exact.ID
			if exactAcct != (a.Accountant == privacy.AccountantGaussian) || exactAcct != math.IsNaN(float64(a.SpentOrder)) ||
				exactAcct && float64(a.SpentEpsilon) != want || !exactAcct && a.SpentEpsilon != byRDP.SpentEpsilon {
				t.Errorf("mu %v k %d: account %+v", tc.mu, tc.k, a)
			}
		}
		sp, err := l.comp().privacy().Epsilon([]privacy.Count{{Mechanism: privacy.Mechanism{RD: rdp.RD}, Releases: uint64(tc.k)}})
		if err != nil {
			t.Fatal(err)
		}
		order := sp.Order
		t.Logf("mu_1 %v, %d releases (mu %.4g): exact epsilon %.6g, RDP sum %.6g at order %v: %.1f%% less", tc.mu, tc.k,
			tc.mu*math.Sqrt(float64(tc.k)), want, float64(byRDP.SpentEpsilon), order, 100*(1-want/float64(byRDP.SpentEpsilon)))
	}
}

// TestLedgerGaussianCurvesCompose: releases under two Gaussian curves of
// different mu compose to sqrt(n1 mu1^2 + n2 mu2^2), whatever the order of
// the charges (the same float64); a Gaussian curve beside an RDP curve
// gives exactly the RDP sum of before (bit for bit the balance of an
// account charged the same releases under RDP curves alone), with its
// order.
func TestLedgerGaussianCurvesCompose(t *testing.T) {
	const rho = 0.02
	for _, tc := range []struct {
		mu1, mu2 float64
		n1, n2   int
	}{{0.3, 1.1, 5, 2}, {1.666, 0.2, 1, 30}, {0.01, 0.02, 400, 100}} {
		l := openLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
		a, _ := l.RegisterCurve(exactGuarantee(tc.mu1), "a")
		b, _ := l.RegisterCurve(exactGuarantee(tc.mu2), "b")
		r, err := l.RegisterCurve(gaussianGuarantee(rho), "rdp")
		if err != nil {
			t.Fatal(err)
		}
		// The same releases under the Gaussian curves' RDP bounds alone.
		ar, _ := l.RegisterCurve(gaussianGuarantee(tc.mu1*tc.mu1/2), "a as rdp")
		var bals []Balance
		for _, acct := range []string{"ab", "ba"} {
			first, second := a, b
			n1, n2 := tc.n1, tc.n2
			if acct == "ba" {
				first, second, n1, n2 = b, a, tc.n2, tc.n1
			}
			l.Charge(acct, first, n1, math.Inf(1))
			bal, err := l.Charge(acct, second, n2, math.Inf(1))
			if err != nil {
				t.Fatal(err)
			}
			bals = append(bals, bal)
		}
		mu := math.Sqrt(float64(tc.n1)*tc.mu1*tc.mu1 + float64(tc.n2)*tc.mu2*tc.mu2)
		if want := gme(t, mu); bals[0].SpentEpsilon != bals[1].SpentEpsilon || !near(float64(bals[0].SpentEpsilon), want, 1e-12) ||
			bals[0].Accountant != privacy.AccountantGaussian || bals[0].Releases != uint64(tc.n1+tc.n2) {
			t.Fatalf("%+v: balances %+v and %+v, want spent %v (mu %v) by %s", tc, bals[0], bals[1], want, mu, privacy.AccountantGaussian)
		}
		// Mixed with an RDP curve: the RDP sum, as before this accountant.
		l.Charge("mixed", a, tc.n1, math.Inf(1))
		mixed, _ := l.Charge("mixed", r, tc.n2, math.Inf(1))
		l.Charge("rdp", ar, tc.n1, math.Inf(1))
		rdpOnly, _ := l.Charge("rdp", r, tc.n2, math.Inf(1))
		mixed.Account, rdpOnly.Account = "", ""
		indep := math.Inf(1)
		for _, o := range privacy.DefaultOrders {
			rd := float64(tc.n1)*o*tc.mu1*tc.mu1/2 + float64(tc.n2)*o*rho
			indep = math.Min(indep, rd+math.Log((o-1)/o)-(math.Log(privacy.DefaultDelta)+math.Log(o))/(o-1))
		}
		if mixed != rdpOnly || mixed.Accountant != privacy.AccountantRDP || !near(float64(mixed.SpentEpsilon), indep, 1e-9) {
			t.Fatalf("%+v: mixed %+v, want the RDP sum %+v (%v)", tc, mixed, rdpOnly, indep)
		}
		accts, _ := l.Accounts()
		for _, acc := range accts {
			if acc.ID == "mixed" && (acc.Accountant != privacy.AccountantRDP || math.IsNaN(float64(acc.SpentOrder)) || acc.SpentEpsilon != mixed.SpentEpsilon) {
				t.Errorf("mixed account %+v", acc)
			}
		}
		if exact := gme(t, math.Sqrt(float64(tc.n1)*tc.mu1*tc.mu1+float64(tc.n2)*2*rho)); !(exact < float64(mixed.SpentEpsilon)) {
			t.Errorf("set-up: the mix's RDP sum %v is not above the exact epsilon of its Gaussian equivalent %v", mixed.SpentEpsilon, exact)
		}
	}
}

// TestLedgerGaussianRemainingReleases: remaining_releases under the exact rule is
// the m with eps(m) <= B < eps(m+1), eps(m) the exact epsilon of the
// account after m more releases, and equals the closed form floor((mu_B^2 -
// S) / mu_1^2) (mu_B = privacy.GaussianMechanismMu(B, delta), S the
// account's sum of n_i mu_i^2); the ledger charges exactly m of them. An
// RDP curve, already charged or requested, brings the RDP rule back.
func TestLedgerGaussianRemainingReleases(t *testing.T) {
	delta := privacy.DefaultDelta
	for _, tc := range []struct {
		mu1    float64
		spent  int     // releases charged before
		other  float64 // mu of a second Gaussian curve charged once before (0: none)
		budget float64
	}{
		{1.666, 0, 0, 30}, {1.666, 4, 0, 30}, {0.1, 0, 0, 1}, {0.1, 17, 0.7, 8}, {0.02, 1000, 0, 4}, {0.5, 3, 2, 64},
		{1, 2, 0, 3.5}, // spent beyond the budget already: none remain
		{0.3, 0, 0, 0}, // budget 0: none
	} {
		l := openLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
		c, _ := l.RegisterCurve(exactGuarantee(tc.mu1), "c")
		S := float64(tc.spent) * tc.mu1 * tc.mu1
		if tc.spent > 0 {
			l.Charge("x", c, tc.spent, math.Inf(1))
		}
		if tc.other > 0 {
			o, _ := l.RegisterCurve(exactGuarantee(tc.other), "other")
			l.Charge("x", o, 1, math.Inf(1))
			S += tc.other * tc.other
		}
		bal, err := l.Balance("x", c, tc.budget)
		if err != nil {
			t.Fatal(err)
		}
		muB, err := privacy.GaussianMechanismMu(tc.budget, delta)
		if err != nil {
			t.Fatal(err)
		}
		closed := math.Max(0, math.Floor((muB*muB-S)/(tc.mu1*tc.mu1)))
		m := float64(bal.RemainingReleases)
		eps := func(m float64) float64 { return gme(t, math.Sqrt(S+m*tc.mu1*tc.mu1)) }
		if bal.Accountant != privacy.AccountantGaussian || m != closed || !(eps(m) <= tc.budget || m == 0) || !(tc.budget < eps(m+1)) {
			t.Fatalf("%+v: balance %+v, closed form %v: eps(%v) = %v, eps(m+1) = %v", tc, bal, closed, m, eps(m), eps(m+1))
		}
		// What the RDP sum would have allowed: the curves' sum is order
		// (S + m mu_1^2) / 2 at each order, so no more.
		rdp := func(m float64) float64 { return epsOfReleases(1, (S+m*tc.mu1*tc.mu1)/2, delta) }
		rdpM := 0.0
		for rdp(rdpM+1) <= tc.budget {
			rdpM++
		}
		if rdp(0) > tc.budget {
			rdpM = 0
		}
		if !(rdpM <= m) {
			t.Errorf("%+v: exact %v releases, RDP %v", tc, m, rdpM)
		}
		t.Logf("mu_1 %v, spent %d (+ mu %v), budget %v: %v releases remain (the RDP sum: %v)", tc.mu1, tc.spent, tc.other, tc.budget, m, rdpM)
		if m > 0 {
			after, err := l.Charge("x", c, int(m), tc.budget)
			if err != nil || after.RemainingReleases != 0 || float64(after.SpentEpsilon) > tc.budget {
				t.Fatalf("%+v: charging the %v remaining: %+v %v", tc, m, after, err)
			}
		}
		var be *BudgetError
		if _, err := l.Charge("x", c, 1, tc.budget); !errors.As(err, &be) {
			t.Fatalf("%+v: one more than remained: %v", tc, err)
		}
	}

	// The rule of the account after the releases: an RDP curve among them
	// (charged, or the request's) gives the RDP sum's count.
	const mu, rho, budget = 0.5, 0.125, 10.0 // rho = mu^2 / 2: the same RDP bounds
	l := openLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
	g, _ := l.RegisterCurve(exactGuarantee(mu), "gaussian")
	r, _ := l.RegisterCurve(gaussianGuarantee(rho), "rdp")
	l.Charge("g", g, 3, math.Inf(1))
	l.Charge("r", r, 3, math.Inf(1))
	rdpCount := 0.0
	for epsOfReleases(3+rdpCount+1, rho, privacy.DefaultDelta) <= budget {
		rdpCount++
	}
	for _, tc := range []struct {
		account string
		curve   *Curve
		want    float64
		acct    string
	}{
		{"g", r, rdpCount, privacy.AccountantGaussian}, // exact now, the RDP sum after
		{"r", g, rdpCount, privacy.AccountantRDP},
		{"r", r, rdpCount, privacy.AccountantRDP},
		{"new", r, rdpCount + 3, privacy.AccountantRDP},
	} {
		bal, err := l.Balance(tc.account, tc.curve, budget)
		if err != nil || float64(bal.RemainingReleases) != tc.want || bal.Accountant != tc.acct {
			t.Errorf("%s for %s: %+v %v, want %v remaining by %s", tc.account, tc.curve.Model, bal, err, tc.want, tc.acct)
		}
	}
	if bal, _ := l.Balance("new", g, budget); bal.Accountant != privacy.AccountantGaussian || !(float64(bal.RemainingReleases) > rdpCount+3) {
		t.Errorf("a new account for the Gaussian curve: %+v (RDP: %v)", bal, rdpCount+3)
	}
}

// TestLedgerCurveOfBefore: a file written before Gaussian curves (a curve
// record without accountant and format, or with rdp-sum 1, and no
// gaussian_mu; an account record without its sum) reads and composes by
// the RDP sum as before, bit for bit the balance of a ledger of now charged
// the same; the same model registered now is a Gaussian curve of its own,
// and an account charged under both composes by the RDP sum.
func TestLedgerCurveOfBefore(t *testing.T) {
	const mu, n = 0.8, 6
	for _, old := range []string{`"accountant":"rdp-sum","format":1,`, ``} {
		ref := openLedger(t, filepath.Join(t.TempDir(), "ref.db"))
		rc, _ := ref.RegisterCurve(gaussianGuarantee(mu*mu/2), "m")
		want, _ := ref.Charge("alice", rc, n, math.Inf(1))
		path := filepath.Join(t.TempDir(), "old.db")
		if _, err := CreateFile(path); err != nil {
			t.Fatal(err)
		}
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			o, _ := json.Marshal(privacy.DefaultOrders)
			meta := tx.Bucket(bucketMeta)
			if err := errors.Join(meta.Put(metaOrders, o), meta.Put(metaDelta, []byte("1e-05"))); err != nil {
				return err
			}
			rd, _ := json.Marshal(rc.RD)
			rec := `{"orders":` + string(o) + `,"rd":` + string(rd) + `,"delta":1e-05,` + old + `"registered":"2025-01-01T00:00:00Z"}`
			if err := tx.Bucket(bucketCurves).Put([]byte(rc.ID), []byte(rec)); err != nil {
				return err
			}
			return tx.Bucket(bucketAccounts).Put([]byte("alice"), []byte(`{"releases":{"`+rc.ID+`":6},"requests":1,"updated":"2025-01-01T00:00:00Z"}`))
		})
		if err := errors.Join(err, db.Close()); err != nil {
			t.Fatal(err)
		}
		l := openLedger(t, path)
		bal, err := l.Balance("alice", rc, math.Inf(1))
		if err != nil {
			t.Fatal(err)
		}
		if bal != want || bal.Accountant != privacy.AccountantRDP {
			t.Fatalf("old curve %q: %+v, want %+v", old, bal, want)
		}
		g, err := l.RegisterCurve(exactGuarantee(mu), "m")
		if err != nil || g.ID == rc.ID || g.Mu != mu {
			t.Fatalf("the model registered now: %+v %v", g, err)
		}
		if fresh, _ := l.Charge("bob", g, n, math.Inf(1)); fresh.Accountant != privacy.AccountantGaussian || float64(fresh.SpentEpsilon) != gme(t, mu*math.Sqrt(n)) {
			t.Errorf("a new account under the Gaussian curve: %+v", fresh)
		}
		both, _ := l.Charge("alice", g, 1, math.Inf(1))
		if indep := epsOfReleases(n+1, mu*mu/2, privacy.DefaultDelta); both.Accountant != privacy.AccountantRDP || !near(float64(both.SpentEpsilon), indep, 1e-12) {
			t.Errorf("old and new curves on one account: %+v, want the RDP sum %v", both, indep)
		}
	}
}

// TestLedgerGaussianCurveTampered: a Gaussian curve's record whose mu, bounds,
// accountant or format were changed is refused as corrupt when the file is
// opened, never charged under.
func TestLedgerGaussianCurveTampered(t *testing.T) {
	const mu = 0.9
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
		err  string
	}{
		{"mu 1% larger", func(m map[string]any) { m["gaussian_mu"] = mu * 1.01 }, "does not match the RDP bound"},
		{"mu 1e-9 larger", func(m map[string]any) { m["gaussian_mu"] = mu * (1 + 1e-9) }, "its orders and bounds hash to"},
		{"mu removed", func(m map[string]any) { delete(m, "gaussian_mu") }, "gaussian mu 0: want a finite value > 0"},
		{"mu negative", func(m map[string]any) { m["gaussian_mu"] = -mu }, "want a finite value > 0"},
		{"accountant rdp, mu kept", func(m map[string]any) { m["accountant"], m["format"] = privacy.AccountantRDP, 1 }, "an RDP curve (rdp) with a gaussian mu"},
		{"legacy accountant rdp-sum, mu kept", func(m map[string]any) { m["accountant"], m["format"] = "rdp-sum", 1 }, "an RDP curve (rdp) with a gaussian mu"},
		{"accountant rdp, mu removed", func(m map[string]any) {
			m["accountant"], m["format"] = privacy.AccountantRDP, 1
			delete(m, "gaussian_mu")
		}, "its orders and bounds hash to"},
		{"format 1", func(m map[string]any) { m["format"] = 1 }, "written by a newer nvdp"},
		{"a bound halved", func(m map[string]any) { rd := m["rd"].([]any); rd[5] = rd[5].(float64) / 2 }, "does not match the RDP bound"},
		{"mu and bounds scaled together", func(m map[string]any) {
			m["gaussian_mu"] = 2 * mu
			for i, v := range m["rd"].([]any) {
				m["rd"].([]any)[i] = 4 * v.(float64)
			}
		}, "its orders and bounds hash to"},
	} {
		path := filepath.Join(t.TempDir(), "ledger.db")
		l := openLedger(t, path)
		c, err := l.RegisterCurve(exactGuarantee(mu), "m")
		if err != nil {
			t.Fatal(err)
		}
		l.Charge("alice", c, 2, math.Inf(1))
		l.Close()
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketCurves)
			var m map[string]any
			if err := json.Unmarshal(b.Get([]byte(c.ID)), &m); err != nil {
				return err
			}
			if m["accountant"] != privacy.AccountantGaussian || m["format"] != float64(2) || m["gaussian_mu"] != mu {
				t.Fatalf("the curve's record: %v", m)
			}
			tc.edit(m)
			v, _ := json.Marshal(m)
			return b.Put([]byte(c.ID), v)
		})
		if err := errors.Join(err, db.Close()); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenFile(path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want corrupt: %q", tc.name, err, tc.err)
		}
	}
}

// TestLedgerRegisterInconsistentGaussian: a guarantee whose Gaussian mu
// disagrees with its curve is refused; one without a mu (or mu 0: N = 1)
// is an RDP curve; a Gaussian curve's history shows its mu and exact
// epsilon per release.
func TestLedgerRegisterInconsistentGaussian(t *testing.T) {
	l := openLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
	g := exactGuarantee(0.5)
	g.GaussianMu = 0.6
	if _, err := l.RegisterCurve(g, "m"); err == nil || !strings.Contains(err.Error(), "model guarantee: gaussian mu 0.6 does not match the RDP bound") {
		t.Fatalf("inconsistent guarantee: %v", err)
	}
	g.GaussianMu = 0
	if c, err := l.RegisterCurve(g, "m"); err != nil || c.Mu != 0 || c.ID != curveID(l.Orders(), c.RD) {
		t.Fatalf("mu 0: %+v %v", c, err)
	}
	c, err := l.RegisterCurve(exactGuarantee(0.5), "m")
	if err != nil {
		t.Fatal(err)
	}
	l.Charge("a", c, 1, math.Inf(1))
	h, err := l.History(HistoryQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	ci := h.Curves[c.ID]
	if ci.Accountant != privacy.AccountantGaussian || ci.Format != 2 || ci.GaussianMu != 0.5 || float64(ci.Epsilon) != gme(t, 0.5) || !math.IsNaN(float64(ci.Order)) {
		t.Errorf("history's curve %+v", ci)
	}
}

// TestLedgerLegacyAccountantNames: a file whose curve records carry the
// accountant names of before (rdp-sum, gaussian-mu) reads as one of
// privacy's names, with the same accounts, bit for bit, read-only (the
// file untouched) and for charging, which rewrites the records with the
// new names, every other field kept.
func TestLedgerLegacyAccountantNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	l := openLedger(t, path)
	g, err := l.RegisterCurve(exactGuarantee(0.3), "gaussian")
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.RegisterCurve(gaussianGuarantee(0.01), "rdp")
	if err != nil {
		t.Fatal(err)
	}
	l.Charge("alice", g, 3, math.Inf(1))
	l.Charge("bob", g, 2, math.Inf(1))
	l.Charge("bob", r, 5, math.Inf(1))
	want, err := l.Accounts()
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	records := func() map[string]map[string]any {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		out := map[string]map[string]any{}
		db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketCurves).ForEach(func(k, v []byte) error {
				var m map[string]any
				json.Unmarshal(v, &m)
				out[string(k)] = m
				return nil
			})
		})
		return out
	}
	before := records()
	if before[g.ID]["accountant"] != privacy.AccountantGaussian || before[r.ID]["accountant"] != privacy.AccountantRDP {
		t.Fatalf("new records: %v", before)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCurves)
		for id, name := range map[string]string{g.ID: "gaussian-mu", r.ID: "rdp-sum"} {
			m := maps.Clone(before[id])
			m["accountant"] = name
			v, _ := json.Marshal(m)
			if err := b.Put([]byte(id), v); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	sum := fileSum(t, path)
	ro, err := OpenFileReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ro.Accounts()
	h, herr := ro.History(HistoryQuery{Limit: 10})
	ro.Close()
	same := func(a, b []Account) bool { // as JSON: NaN orders equal, times without their monotonic reading
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		return string(ja) == string(jb)
	}
	if err != nil || herr != nil || !same(got, want) {
		t.Fatalf("read-only with the old names: %+v %v %v, want %+v", got, err, herr, want)
	}
	if h.Curves[g.ID].Accountant != privacy.AccountantGaussian || h.Curves[r.ID].Accountant != privacy.AccountantRDP {
		t.Errorf("history's curves %+v", h.Curves)
	}
	if fileSum(t, path) != sum {
		t.Error("the read-only open wrote the file")
	}
	rw := openLedger(t, path)
	got, err = rw.Accounts()
	rw.Close()
	if err != nil || !same(got, want) {
		t.Fatalf("opened for charging with the old names: %+v %v", got, err)
	}
	if after := records(); !reflect.DeepEqual(after, before) {
		t.Errorf("records after the migration %v, want %v", after, before)
	}
}
