package privacy

import (
	"math"
	"testing"

	"github.com/nvdp-project/nvdp/jsonfloat"
)

// hockeyStick is delta(eps) of the Gaussian mechanism N(mu, 1) against
// N(0, 1), computed independently of the closed form: the integral of
// p(x) (1 - e^{eps - L(x)})_+, L(x) = mu x - mu^2/2 the privacy loss, by
// Simpson's rule above x* = eps/mu + mu/2 where the integrand is positive
// (in log space: p(x) -expm1(eps - L(x)), no e^eps overflow for eps in the
// thousands).
func hockeyStick(mu, eps float64) float64 {
	f := func(x float64) float64 {
		p := math.Exp(-(x-mu)*(x-mu)/2) / math.Sqrt(2*math.Pi)
		return p * -math.Expm1(eps-mu*x+mu*mu/2)
	}
	a := eps/mu + mu/2
	b, n := a+40, 400000
	h := (b - a) / float64(n)
	s := f(a) + f(b)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		s += w * f(a+float64(i)*h)
	}
	return math.Max(0, s*h/3)
}

// TestGaussianAccountantGrid: on a grid of mu (weakly private to strongly)
// and delta, the exact epsilon's delta by numerical integration of the
// privacy loss is the delta asked for, GaussianMechanismMu inverts
// GaussianMechanismEpsilon, and the exact epsilon is at most the RDP
// conversion of the mechanism's RDP curve lambda mu^2 / 2 on DefaultOrders
// (the RDP accountant can only be looser).
func TestGaussianAccountantGrid(t *testing.T) {
	for _, mu := range []float64{0.05, 0.3, 1, 3, 10, 30, 60} {
		for _, delta := range []float64{1e-3, 1e-5, 1e-9} {
			eps, err := GaussianMechanismEpsilon(mu, delta)
			if err != nil {
				t.Fatal(err)
			}
			if eps > 0 {
				if got := hockeyStick(mu, eps); math.Abs(got-delta) > 1e-6*delta {
					t.Errorf("mu %v: epsilon %v has delta %.10g by integration, want %g", mu, eps, got, delta)
				}
			}
			back, err := GaussianMechanismMu(eps, delta)
			if err != nil || back > mu*(1+1e-12) || back < mu*(1-1e-9) {
				t.Errorf("mu %v delta %v: GaussianMechanismMu(%v) = %v, %v", mu, delta, eps, back, err)
			}
			var curve []OrderRD
			for _, o := range DefaultOrders {
				curve = append(curve, OrderRD{Order: o, RD: jsonfloatOf(o * mu * mu / 2)})
			}
			rdp, _, _ := BestEpsilon(curve, delta)
			if eps > rdp*(1+1e-12) {
				t.Errorf("mu %v delta %v: exact %v above the RDP conversion %v", mu, delta, eps, rdp)
			}
		}
	}
	for _, bad := range [][2]float64{{-1, 1e-5}, {math.NaN(), 1e-5}, {math.Inf(1), 1e-5}, {1, 0}, {1, 1}} {
		if _, err := GaussianMechanismMu(bad[0], bad[1]); err == nil {
			t.Errorf("GaussianMechanismMu%v accepted", bad)
		}
	}
}

// TestGaussianMu: a fixed-noise clip set (floor = cap, C_amin = C_amax) is
// exactly a Gaussian mechanism of mu = 2 C sqrt(N-1) / sigma_min with the
// stored radius and the smallest stored sigma; any range of sigma or of
// the pseudo-counts, an unbounded radius, is not.
func TestGaussianMu(t *testing.T) {
	fixed := mainJobSet()
	fixed.LogvarMargin, fixed.AlphaMin, fixed.CMu = marginMax(1.1), 1, 0.19
	perDim := fixed
	perDim.LogvarFloor, perDim.LogvarCap = []float64{math.Log(4), math.Log(0.25)}, []float64{math.Log(4), math.Log(0.25)}
	perDim.Dims = 2
	perDim.PriorMu, perDim.PriorVar = []float64{0, 0}, []float64{4, 0.25}
	for _, tc := range []struct {
		name string
		set  func() ClipSet
		mu   float64
		ok   bool
	}{
		{"fixed noise", func() ClipSet { return fixed }, 2 * StoredRadius(0.19) * math.Sqrt(128), true},
		{"per-dim sigma: the smallest", func() ClipSet { return perDim }, 2 * StoredRadius(0.19) * math.Sqrt(128) / math.Sqrt(math.Exp(f32(math.Log(0.25)))), true},
		{"one component", func() ClipSet { s := fixed; s.Components = 1; return s }, 0, true},
		{"sigma range", func() ClipSet { s := fixed; s.LogvarMargin = 0.05; return s }, 0, false},
		{"alpha range", func() ClipSet { s := fixed; s.AlphaMin = 0.95; return s }, 0, false},
		{"unbounded radius", func() ClipSet { s := fixed; s.CMu = math.Inf(1); return s }, 0, false},
	} {
		mu, ok := tc.set().GaussianMu()
		if ok != tc.ok || relErr(mu, tc.mu) > 1e-12 && tc.mu != 0 || (tc.mu == 0 && mu != 0) {
			t.Errorf("%s: mu %v, %v; want %v, %v", tc.name, mu, ok, tc.mu, tc.ok)
		}
	}
	// Where it applies, the certified curve's mean part is the mechanism's RDP lambda mu^2 / 2.
	mu, _ := perDim.GaussianMu()
	for _, o := range []float64{1.5, 8, 64} {
		c, err := Certify(perDim, o, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := o * mu * mu / 2; relErr(float64(c.RD), want) > 1e-12 || c.Parts.Variance != 0 || c.Parts.Dirichlet != 0 {
			t.Errorf("order %v: certificate %v (parts %+v), want %v", o, c.RD, c.Parts, want)
		}
	}
}

// TestCalibrateExact: an epsilon target of a fixed-noise design is met by
// the exact accountant (a larger C_mu than the RDP conversion allows, by
// the 7.1% at epsilon 4 down to 2.2% at 256, delta 1e-5), for one
// release and for k releases (mu sqrt(k)).
func TestCalibrateExact(t *testing.T) {
	base := mainJobSet()
	base.CMu, base.AlphaMin = 1, base.AlphaMax
	for _, tc := range []struct {
		eps, gain float64
		k         int
	}{{4, 0.071, 1}, {8, 0.062, 1}, {16, 0.053, 1}, {32, 0.043, 1}, {64, 0.034, 1}, {128, 0.026, 1}, {256, 0.022, 1}, {16, 0, 5}} {
		k := tc.k
		cal, err := Calibrate(base, EpsilonTarget(tc.eps, 1e-5, k), Split{}, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		g := cal.Guarantee
		if g.Accountant != AccountantGaussian || relErr(float64(g.Epsilon), tc.eps) > 1e-6 || float64(g.Epsilon) > tc.eps {
			t.Errorf("eps %v k %d: certified %v by %q", tc.eps, k, g.Epsilon, g.Accountant)
		}
		mu, _ := GaussianMechanismMu(tc.eps, 1e-5)
		wantC := mu / math.Sqrt(float64(k)) / (2 * math.Sqrt(128))
		if relErr(cal.Set.CMu, wantC) > 1e-6 {
			t.Errorf("eps %v k %d: C_mu %v, want %v", tc.eps, k, cal.Set.CMu, wantC)
		}
		if tc.gain > 0 {
			// the RDP-calibrated C_mu: the largest whose RDP conversion meets eps
			rdpMu := rdpMuFor(tc.eps, 1e-5)
			if gain := mu/rdpMu - 1; math.Abs(gain-tc.gain) > 0.0015 {
				t.Errorf("eps %v: exact accounting allows C_mu larger by %.4f, want about %.3f", tc.eps, gain, tc.gain)
			}
		}
	}
}

// rdpMuFor is the largest mu whose RDP curve lambda mu^2/2 converts to at
// most eps at delta on DefaultOrders.
func rdpMuFor(eps, delta float64) float64 {
	lo, hi := 0.0, 1000.0
	for range 200 {
		mid := (lo + hi) / 2
		var curve []OrderRD
		for _, o := range DefaultOrders {
			curve = append(curve, OrderRD{Order: o, RD: jsonfloatOf(o * mid * mid / 2)})
		}
		if e, _, _ := BestEpsilon(curve, delta); e <= eps {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

func jsonfloatOf(v float64) jsonfloat.Float { return jsonfloat.Float(v) }
