package privacy

import (
	"math"
	"testing"
)

// TestGaussianMechanismDelta: the exact curve equals the hockey-stick
// divergence of N(mu, 1) against N(0, 1), integral of (p - e^eps q)_+,
// computed by numerical integration; the log-space tail logPhi agrees with
// ln Phi where both are representable; the curve stays finite and monotone
// for a weakly private mu (eps in the thousands, e^eps beyond float64).
func TestGaussianMechanismDelta(t *testing.T) {
	for _, tc := range []struct{ mu, eps float64 }{{0.5, 0.1}, {1, 0.5}, {1, 2}, {3, 1}, {3, 5}, {6, 10}} {
		// (p - e^eps q)_+ with p = N(mu,1), q = N(0,1): positive above x* = eps/mu + mu/2,
		// where it is smooth; Simpson's rule on [x*, x*+14]
		f := func(x float64) float64 {
			p := math.Exp(-(x-tc.mu)*(x-tc.mu)/2) / math.Sqrt(2*math.Pi)
			q := math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
			return math.Max(0, p-math.Exp(tc.eps)*q)
		}
		a := tc.eps/tc.mu + tc.mu/2
		b, n := a+14, 200000
		h := (b - a) / float64(n)
		s := f(a) + f(b)
		for i := 1; i < n; i++ {
			w := 2.0
			if i%2 == 1 {
				w = 4
			}
			s += w * f(a+float64(i)*h)
		}
		want := s * h / 3
		if got := GaussianMechanismDelta(tc.mu, tc.eps); math.Abs(got-want) > 1e-9*math.Max(want, 1e-6) {
			t.Errorf("delta(mu %v, eps %v) = %.12g, integral %.12g", tc.mu, tc.eps, got, want)
		}
	}
	for x := -37.0; x <= -30; x += 0.25 {
		x2 := 1 / (x * x)
		series := -x*x/2 - math.Log(-x) - 0.5*math.Log(2*math.Pi) + math.Log1p(x2*(-1+x2*(3+x2*(-15+x2*105))))
		if direct := math.Log(phi(x)); math.Abs(series-direct) > 1e-12*math.Abs(direct) {
			t.Errorf("ln Phi(%v): series %v, direct %v", x, series, direct)
		}
	}
	prev := math.Inf(1)
	for eps := 4000.0; eps < 6000; eps += 50 {
		d := GaussianMechanismDelta(100, eps)
		if math.IsNaN(d) || d > prev || d < 0 || d > 1 {
			t.Fatalf("mu 100: delta(%v) = %v after %v", eps, d, prev)
		}
		prev = d
	}
	if e, err := GaussianMechanismEpsilon(0, 1e-5); e != 0 || err != nil {
		t.Errorf("mu 0: %v, %v; want 0", e, err)
	}
	for _, bad := range [][2]float64{{-1, 1e-5}, {math.NaN(), 1e-5}, {math.Inf(1), 1e-5}, {1, 0}, {1, 1}} {
		if _, err := GaussianMechanismEpsilon(bad[0], bad[1]); err == nil {
			t.Errorf("GaussianMechanismEpsilon%v accepted", bad)
		}
	}
}
