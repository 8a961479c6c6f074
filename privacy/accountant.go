package privacy

import (
	"fmt"
	"math"
)

// The accountants of a certified epsilon (Guarantee.Accountant): which
// computation turned the clip set's certificate into (epsilon, delta).
const (
	// AccountantRDP converts the certified RDP curve with the conversion of Balle
	// et al. 2020, Thm 21, and Canonne, Kamath and Steinke 2020, Prop. 12,
	// minimised over the order grid; see [EpsilonAt] and [BestEpsilon]. It is
	// valid for every clip set but not tight.
	AccountantRDP = "rdp"
	// AccountantGaussian is exact. The release of a fixed-noise clip set is a
	// Gaussian mechanism, see [ClipSet.GaussianMu]. Its (epsilon, delta) curve
	// is known in closed form, [GaussianMechanismDelta] after Balle and Wang
	// 2018, Thm 8, and k releases compose exactly into one with mu sqrt(k).
	AccountantGaussian = "analytic-gaussian"
)

// DefaultTargetEpsilon is the certified epsilon per release, at
// [DefaultDelta], that nvdp proposes for a private model when the user names
// none. It is the upper end of the epsilons the DP literature calls
// meaningful for one record's release; docs/privacy.md, "A guarantee by
// default", says why, and what it costs in utility.
const DefaultTargetEpsilon = 8.0

// DefaultMaxEpsilon is the largest certified epsilon per release, at the
// model's delta, that the release commands nvdp embed and nvdp serve accept
// without the operator raising the threshold. A model certifying more is
// refused, so that no one serves a vacuous guarantee by accident.
const DefaultMaxEpsilon = DefaultTargetEpsilon

// GuaranteeFormat is the format of a [Guarantee] written by this program, in
// Guarantee.Format. Format 2 adds the accountant and, for Gaussian releases,
// mu. A guarantee without a format, as in files written before it, is format
// 1, with the RDP accountant.
const GuaranteeFormat = 2

// GaussianMu reports whether a release of the clip set is exactly a Gaussian
// mechanism, and returns its mu = L2 sensitivity / noise sigma for one
// release. ok is false for every other clip set, to which the RDP accountant
// applies.
//
// A release is one when the noise is fixed: every dimension's stored logvar
// range is a single value, floor = cap after float32 rounding, and the token
// components' pseudo-counts are a single value, C_amin = C_amax after float32
// rounding. Then the Dirichlet weights pi have the same distribution for
// every input, and the variance and Dirichlet terms of Eq. rdp vanish. The
// release is the (N-1) x P matrix of means plus independent Gaussian noise,
// each row within the ball of radius C_mu, the stored radius, around the
// prior mean. So two inputs' mean matrices differ by at most 2 C_mu sqrt(N-1)
// in Frobenius norm, and the worst case puts the whole difference on the
// dimension of least noise:
//
//	mu = 2 StoredRadius(C_mu) sqrt(N-1) / sigma_min,  sigma_min^2 = min_j exp(stored logvar_j).
//
// Its RDP curve is lambda mu^2 / 2, the certified curve's mean part; see
// [Certify]. N = 1 releases nothing that depends on the input, and mu = 0.
func (s ClipSet) GaussianMu() (mu float64, ok bool) {
	if err := s.Validate(); err != nil {
		return 0, false
	}
	if s.Components == 1 {
		return 0, true
	}
	if f32(s.AlphaMin) != f32(s.AlphaMax) || math.IsInf(s.AlphaMax, 1) {
		return 0, false
	}
	C := StoredRadius(s.CMu)
	if math.IsInf(C, 1) {
		return 0, false
	}
	minVar := math.Inf(1)
	for j := 0; j < s.distinctBoxDims(); j++ {
		fl, cp := s.logvarBox(j)
		if fl != cp || math.IsInf(fl, 0) {
			return 0, false
		}
		minVar = math.Min(minVar, math.Exp(fl))
	}
	return 2 * C * math.Sqrt(float64(s.Components-1)) / math.Sqrt(minVar), true
}

// GaussianMechanismMu returns the largest mu, sensitivity / sigma, of a
// Gaussian mechanism that is (eps, delta)-DP. It inverts
// [GaussianMechanismDelta], which increases with mu, by bisection to float64
// resolution, and is never above the exact value.
//
// It returns an error when eps is negative or not finite, or delta is not in
// (0, 1).
func GaussianMechanismMu(eps, delta float64) (float64, error) {
	if !(eps >= 0) || math.IsInf(eps, 0) {
		return 0, fmt.Errorf("gaussian mechanism: epsilon %v: want a finite value >= 0", eps)
	}
	if err := CheckDelta(delta); err != nil {
		return 0, err
	}
	lo, hi := 0.0, 1.0
	for GaussianMechanismDelta(hi, eps) <= delta {
		lo, hi = hi, 2*hi
	}
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid == lo || mid == hi {
			break
		}
		if GaussianMechanismDelta(mid, eps) <= delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// certifiedEpsilon is the certified epsilon at delta of releases releases
// of set whose RDP curve (all releases) is curve, and the accountant that
// gives it: exact for a Gaussian set (mu is then the mu of all releases),
// else the RDP conversion (order is the order that gives it; NaN for the
// Gaussian accountant). The one place a certified epsilon is computed.
func certifiedEpsilon(set ClipSet, curve []OrderRD, releases int, delta float64) (eps, order float64, accountant string, mu float64, err error) {
	if m, ok := set.GaussianMu(); ok {
		mu = m * math.Sqrt(float64(releases))
		eps, err = GaussianMechanismEpsilon(mu, delta)
		return eps, math.NaN(), AccountantGaussian, mu, err
	}
	eps, order, err = BestEpsilon(curve, delta)
	return eps, order, AccountantRDP, 0, err
}

// AboveMaxError is the error of a model whose certified epsilon per release
// is above the largest an operator accepts; see [CheckMaxEpsilon].
type AboveMaxError struct {
	Epsilon, Delta, Max float64
	How                 string // Guarantee.How
}

func (e *AboveMaxError) Error() string {
	return fmt.Sprintf("the model certifies epsilon %.4g per release at delta %g (%s), above the largest accepted, %g: release it only with the threshold raised knowingly, or train it to a smaller target",
		e.Epsilon, e.Delta, e.How, e.Max)
}

// CheckMaxEpsilon returns an [*AboveMaxError] when g, the guarantee of one
// release, certifies more than max, comparing the epsilon at g's delta; a max
// of +Inf accepts everything. The release commands call it before releasing
// anything.
func CheckMaxEpsilon(g *Guarantee, max float64) error {
	if eps := float64(g.Epsilon); eps > max || math.IsNaN(eps) {
		return &AboveMaxError{Epsilon: eps, Delta: g.Delta, Max: max, How: g.How()}
	}
	return nil
}
