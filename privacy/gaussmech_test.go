package privacy

import (
	"math"
	"testing"
)

// TestGaussianMechanismDelta: the exact curve equals the hockey-stick
// divergence of N(mu, 1) against N(0, 1), integral of (p - e^eps q)_+,
// computed by numerical integration; the curve stays finite and monotone
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

// TestLogPhi: logPhi, whose asymptotic series takes over below -30, equals
// ln Phi(x) computed directly wherever Phi(x) is a normal float64 (down to
// -37), on both sides of the switch; below, where Phi underflows, it stays
// finite and decreasing.
func TestLogPhi(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to float64
	}{{"direct", -29.75, 3}, {"series", -37, -30}} {
		for x := tc.from; x <= tc.to; x += 0.25 {
			if got, want := logPhi(x), math.Log(phi(x)); math.Abs(got-want) > 1e-12*math.Max(math.Abs(want), 1e-300) {
				t.Errorf("%s: logPhi(%v) = %.15g, ln Phi = %.15g", tc.name, x, got, want)
			}
		}
	}
	prev := logPhi(-37)
	for x := -38.0; x >= -1000; x -= 1 {
		v := logPhi(x)
		if math.IsInf(v, 0) || math.IsNaN(v) || !(v < prev) {
			t.Fatalf("logPhi(%v) = %v after %v", x, v, prev)
		}
		prev = v
	}
}
