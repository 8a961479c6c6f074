package audit

import "math"

// The all-pairs engine's Dirichlet component terms lnGamma(g)/(lam - 1)
// are summed over the components of a pair: for g in [gammaProdLo,
// gammaProdHi], where Gamma(g) is in [0.88, 2^84], the engine multiplies
// Gamma(g) into a logAccum and takes one logarithm per pair, order and
// direction, instead of math.Lgamma's logarithm per call (math.Lgamma takes
// one for g < 2, the pseudo-counts' usual range).
const (
	gammaProdLo = 0x1p-20
	gammaProdHi = 25
)

// lnGammaTerm is the part of lnGamma(g)*inv (g > 0) that is not carried by
// the product acc: 0, having multiplied Gamma(g) into acc, for g in
// [gammaProdLo, gammaProdHi]; lnGamma(g)*inv otherwise.
func lnGammaTerm(g float64, acc *logAccum, inv float64) float64 {
	if g >= gammaProdLo && g <= gammaProdHi {
		acc.mulf(math.Gamma(g))
		return 0
	}
	return lgamma(g) * inv
}

// lgamma is ln|Gamma(x)| (the callers only pass x > 0): the log-gamma of
// the Dirichlet terms of Eq. rdp, as privacy.PairBoundWith evaluates them.
func lgamma(x float64) float64 {
	v, _ := math.Lgamma(x)
	return v
}
