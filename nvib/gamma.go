package nvib

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mathext"
)

// SampleLogGamma draws ln g for g ~ Gamma(shape a, rate 1) by Marsaglia–Tsang
// (2000); for a < 1 it samples Gamma(a+1) and multiplies by U^{1/a}, done in
// log space (ln g = ln g_{a+1} + ln(U)/a) so that tiny shapes (the reference's
// 1e-23 floor) give finite ln g instead of an underflowed 0. a must be > 0 and
// finite (programmer error otherwise).
func SampleLogGamma(rng *rand.Rand, a float64) float64 {
	if !(a > 0) || math.IsInf(a, 1) {
		panic("nvib.SampleLogGamma: shape must be finite and > 0")
	}
	if a < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return SampleLogGamma(rng, a+1) + math.Log(u)/a
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		x2 := x * x
		if u < 1-0.0331*x2*x2 {
			return math.Log(d) + math.Log(v)
		}
		if u > 0 && math.Log(u) < 0.5*x2+d*(1-v+math.Log(v)) {
			return math.Log(d) + math.Log(v)
		}
	}
}

// GammaLogGrad returns d ln g / d a for a Gamma(a, 1) sample g = exp(logG)
// held fixed in quantile (implicit reparameterisation, Figurnov et al. 2018):
//
//	dg/da = -(dF/da)(g; a) / f(g; a),  F = regularised lower incomplete gamma P(a, g), f its density.
//
// For g < 1 the ratio is evaluated analytically in log space from the series
// P(a,x) = x^a/Gamma(a) S, S = sum_n (-x)^n/(n!(a+n)):
//
//	d ln x/da = -e^x ( S (ln x - psi(a)) + dS/da ),  dS/da = -sum_n (-x)^n/(n!(a+n)^2),
//
// which stays finite for x down to e^-700 and beyond. For g >= 1, dF/da is a
// central difference of P (or of -Q in the upper tail, where P ~ 1) from
// gonum mathext in float64 with step 1e-4 a (relative error ~1e-8), divided
// by the density computed in log space.
func GammaLogGrad(a, logG float64) float64 {
	x := math.Exp(logG)
	if x < 1 {
		var s, ds float64
		term := 1.0 // (-x)^n / n!
		for n := 0; n < 200; n++ {
			an := a + float64(n)
			s += term / an
			ds -= term / (an * an)
			if n > 2 && math.Abs(term) < 1e-17*math.Abs(s) {
				break
			}
			term *= -x / float64(n+1)
		}
		return -math.Exp(x) * (s*(logG-mathext.Digamma(a)) + ds)
	}
	h := 1e-4 * a
	var dF float64
	if x < a {
		dF = (mathext.GammaIncReg(a+h, x) - mathext.GammaIncReg(a-h, x)) / (2 * h)
	} else {
		dF = -(mathext.GammaIncRegComp(a+h, x) - mathext.GammaIncRegComp(a-h, x)) / (2 * h)
	}
	lg, _ := math.Lgamma(a)
	logf := (a-1)*logG - x - lg
	// d ln x / da = (dx/da)/x = -dF / (f x) = -dF exp(-(logf + logG))
	return -dF * math.Exp(-(logf + logG))
}

// Trigamma returns psi'(x) = d^2 ln Gamma(x)/dx^2 for x > 0 (recurrence
// psi'(x) = psi'(x+1) + 1/x^2 up to x >= 6, then the asymptotic series
// 1/x + 1/(2x^2) + 1/(6x^3) - 1/(30x^5) + 1/(42x^7) - 1/(30x^9); abs. error < 1e-12).
func Trigamma(x float64) float64 {
	if !(x > 0) {
		return math.NaN()
	}
	var acc float64
	for x < 6 {
		acc += 1 / (x * x)
		x++
	}
	x2 := 1 / (x * x)
	return acc + 1/x + x2/2 + (1/x)*x2*(1.0/6-x2*(1.0/30-x2*(1.0/42-x2/30)))
}
