package privacy

import (
	"math"
	"strings"
	"testing"
)

// curveOf is the RDP curve order rho over DefaultOrders.
func curveOf(rho float64) []float64 {
	rd := make([]float64, len(DefaultOrders))
	for i, o := range DefaultOrders {
		rd[i] = o * rho
	}
	return rd
}

// TestCompositionEpsilon: Gaussian mechanisms compose exactly, k releases
// of one to GaussianMechanismEpsilon(mu sqrt(k)) bit for bit, several to
// sqrt(sum n_i mu_i^2); an RDP mechanism among them moves the composition
// to the RDP sum, which is BestEpsilon of the summed curve; no releases
// at all is epsilon 0 by the RDP accountant; bad input is an error.
func TestCompositionEpsilon(t *testing.T) {
	c := Composition{Orders: DefaultOrders, Delta: DefaultDelta}
	g := func(mu float64) Mechanism { return Mechanism{RD: curveOf(mu * mu / 2), Mu: mu} }
	r := func(rho float64) Mechanism { return Mechanism{RD: curveOf(rho)} }
	gme := func(mu float64) float64 {
		e, err := GaussianMechanismEpsilon(mu, DefaultDelta)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	rdp := func(rho float64) (float64, float64) {
		var curve []OrderRD
		for _, o := range DefaultOrders {
			curve = append(curve, OrderRD{Order: o, RD: jsonfloatOf(o * rho)})
		}
		e, order, err := BestEpsilon(curve, DefaultDelta)
		if err != nil {
			t.Fatal(err)
		}
		return e, order
	}
	eR, oR := rdp(7 * 0.01)
	for _, tc := range []struct {
		name     string
		counts   []Count
		eps      float64
		rdpOrder bool
		acct     string
	}{
		{"nothing", nil, 0, true, AccountantRDP},
		{"zero releases", []Count{{g(0.5), 0}}, 0, true, AccountantRDP},
		{"one gaussian, 9 releases", []Count{{g(0.5), 9}}, gme(0.5 * 3), false, AccountantGaussian},
		{"two gaussians", []Count{{g(0.3), 4}, {g(0.4), 1}}, gme(math.Sqrt(0.6*0.6 + 0.4*0.4)), false, AccountantGaussian},
		{"rdp", []Count{{r(0.01), 7}}, eR, true, AccountantRDP},
		{"gaussian unused beside rdp", []Count{{g(0.3), 0}, {r(0.01), 7}}, eR, true, AccountantRDP},
	} {
		sp, err := c.Epsilon(tc.counts)
		if err != nil || sp.Accountant != tc.acct || math.Abs(sp.Epsilon-tc.eps) > 1e-12*math.Max(1, tc.eps) {
			t.Errorf("%s: %+v %v, want %v by %s", tc.name, sp, err, tc.eps, tc.acct)
		}
		if tc.name == "rdp" && sp.Order != oR || !tc.rdpOrder && !math.IsNaN(sp.Order) {
			t.Errorf("%s: order %v", tc.name, sp.Order)
		}
	}
	mixed, _ := c.Epsilon([]Count{{g(0.3), 2}, {r(0.01), 3}})
	byRDP, _ := c.Epsilon([]Count{{Mechanism{RD: curveOf(0.09 / 2)}, 2}, {r(0.01), 3}})
	if mixed != byRDP || mixed.Accountant != AccountantRDP {
		t.Errorf("gaussian beside rdp: %+v, want the RDP sum %+v", mixed, byRDP)
	}
	for _, tc := range []struct {
		c      Composition
		counts []Count
		err    string
	}{
		{Composition{Orders: DefaultOrders, Delta: 0}, nil, "delta 0: must be in (0, 1)"},
		{Composition{Delta: DefaultDelta}, nil, "no Renyi order"},
		{Composition{Orders: []float64{1, 2}, Delta: DefaultDelta}, nil, "Renyi order 1: want > 1"},
		{c, []Count{{Mechanism{RD: []float64{1}}, 1}}, "mechanism 0 has 1 RDP bounds for"},
	} {
		if _, err := tc.c.Epsilon(tc.counts); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: want %q", err, tc.err)
		}
	}
}

// TestCompositionRemainingReleases: the releases of a mechanism that fit a
// budget are the largest m whose composition stays within it (one more
// does not), for a first release and a mechanism already used; +Inf for a
// zero curve or an infinite budget; 0 over budget.
func TestCompositionRemainingReleases(t *testing.T) {
	c := Composition{Orders: DefaultOrders, Delta: DefaultDelta}
	g := Mechanism{RD: curveOf(0.02 * 0.02 / 2), Mu: 0.02}
	r := Mechanism{RD: curveOf(0.01)}
	for _, tc := range []struct {
		name   string
		counts []Count
		next   int
		budget float64
	}{
		{"first gaussian", []Count{{g, 0}}, 0, 4},
		{"gaussian after 1000", []Count{{g, 1000}}, 0, 4},
		{"rdp after gaussian", []Count{{g, 10}, {r, 0}}, 1, 8},
		{"rdp", []Count{{r, 3}}, 0, 8},
	} {
		m, err := c.RemainingReleases(tc.counts, tc.next, tc.budget)
		if err != nil || m <= 0 || math.IsInf(m, 0) {
			t.Fatalf("%s: %v %v", tc.name, m, err)
		}
		with := func(k float64) float64 {
			counts := append([]Count(nil), tc.counts...)
			counts[tc.next].Releases += uint64(k)
			sp, _ := c.Epsilon(counts)
			return sp.Epsilon
		}
		if !(with(m) <= tc.budget) || with(m+1) <= tc.budget {
			t.Errorf("%s: %v releases fit (epsilon %v), one more gives %v, budget %v", tc.name, m, with(m), with(m+1), tc.budget)
		}
	}
	zero := Mechanism{RD: make([]float64, len(DefaultOrders))}
	for _, tc := range []struct {
		counts []Count
		budget float64
		want   float64
	}{
		{[]Count{{zero, 5}}, 1, math.Inf(1)},
		{[]Count{{r, 5}}, math.Inf(1), math.Inf(1)},
		{[]Count{{r, 100000}}, 1, 0},
	} {
		if m, err := c.RemainingReleases(tc.counts, 0, tc.budget); err != nil || m != tc.want {
			t.Errorf("%+v: %v %v, want %v", tc.counts[0].Releases, m, err, tc.want)
		}
	}
	if _, err := c.RemainingReleases([]Count{{r, 1}}, 1, 1); err == nil || !strings.Contains(err.Error(), "mechanism 1 of 1") {
		t.Errorf("next out of range: %v", err)
	}
}
