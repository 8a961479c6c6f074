package privacy

import (
	"fmt"
	"math"
)

// GaussianMechanismDelta returns the exact privacy curve of the Gaussian
// mechanism whose L2 sensitivity divided by its noise sigma is mu: the
// smallest delta for which it is (eps, delta)-DP,
//
//	delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu).
//
// This is Balle and Wang 2018, Thm 8, and the mu-GDP curve of Dong, Roth and
// Su 2022. The second term is evaluated in log space, so that it neither
// overflows nor loses the difference for a large mu, a weakly private release
// with eps in the thousands. It returns 0 for mu = 0.
//
// mu and eps must be >= 0; otherwise it panics, as a programmer error.
func GaussianMechanismDelta(mu, eps float64) float64 {
	if !(mu >= 0) || !(eps >= 0) {
		panic(fmt.Sprintf("privacy: GaussianMechanismDelta(%v, %v): want mu >= 0, eps >= 0", mu, eps))
	}
	if mu == 0 {
		return 0
	}
	a := mu/2 - eps/mu
	d := phi(a) - math.Exp(eps+logPhi(a-mu))
	return math.Max(0, d)
}

// GaussianMechanismEpsilon returns the exact epsilon of the Gaussian mechanism
// with sensitivity / sigma = mu at delta: the smallest eps >= 0 with
// [GaussianMechanismDelta](mu, eps) <= delta, found by bisection to float64
// resolution.
//
// It returns an error when mu is negative, NaN or infinite, or delta is not in
// (0, 1).
func GaussianMechanismEpsilon(mu, delta float64) (float64, error) {
	if !(mu >= 0) || math.IsInf(mu, 0) {
		return 0, fmt.Errorf("gaussian mechanism: sensitivity/sigma = %v: want a finite value >= 0", mu)
	}
	if err := CheckDelta(delta); err != nil {
		return 0, err
	}
	if GaussianMechanismDelta(mu, 0) <= delta {
		return 0, nil
	}
	lo, hi := 0.0, 1.0
	for GaussianMechanismDelta(mu, hi) > delta {
		lo, hi = hi, 2*hi
	}
	for range 200 {
		mid := (lo + hi) / 2
		if mid == lo || mid == hi {
			break
		}
		if GaussianMechanismDelta(mu, mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// phi is the standard normal CDF.
func phi(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// logPhi is ln Phi(x), accurate where Phi(x) underflows: below -30 the
// asymptotic series ln Phi(x) = -x^2/2 - ln(-x) - ln(2 pi)/2 +
// ln(1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8) (Abramowitz & Stegun 26.2.12;
// relative error below 1e-12 there).
func logPhi(x float64) float64 {
	if x > -30 {
		return math.Log(phi(x))
	}
	x2 := 1 / (x * x)
	return -x*x/2 - math.Log(-x) - 0.5*math.Log(2*math.Pi) + math.Log1p(x2*(-1+x2*(3+x2*(-15+x2*105))))
}
