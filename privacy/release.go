package privacy

import (
	"errors"
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/noise"
)

// MeanRounding says how the exact release rounds a clipped mean to the
// lattice; see [noise.Lattice.MeanIndex].
const MeanRounding = "each coordinate toward the ball's centre (the rounded mean stays in the clip ball)"

// ReleaseMechanism says how the releases of a clip set are drawn, and so
// which mechanism the certificate covers; see docs/privacy.md,
// "Floating-point safety".
//
// An exact release is the fixed-noise release drawn by package noise. Every
// value is G (m + n) with G = 2^LatticeExp, where m is the clipped mean
// rounded toward the ball's centre, which adds no sensitivity, so
// AddedSensitivity is 0; and n is the exact normal of package noise, of standard
// deviation NoiseSigma, at least the certified sigma, rounded correctly to
// the lattice. It is post-processing of the continuous Gaussian mechanism
// the certificate is proved for.
//
// A release that is not exact, with Reason saying why, has a noise scale or
// pseudo-counts that depend on the input, which the floating-point sampler
// leaks; nothing certifies such a release's bits.
type ReleaseMechanism struct {
	Exact   bool   `json:"exact"`
	Sampler string `json:"sampler"`
	// LatticeExp and Lattice: every released value is an integer multiple of
	// Lattice = 2^LatticeExp (exact only).
	LatticeExp int     `json:"lattice_exp,omitempty"`
	Lattice    float64 `json:"lattice,omitempty"`
	// NoiseSigma is the standard deviation of the noise drawn (a float32 at
	// or above CertifiedSigma, the sigma the certificate is computed with).
	NoiseSigma     float64 `json:"noise_sigma,omitempty"`
	CertifiedSigma float64 `json:"certified_sigma,omitempty"`
	// AddedSensitivity is the L2 distance a row's mean may move beyond the
	// clip ball by the rounding: 0 (MeanRounding).
	AddedSensitivity float64 `json:"added_sensitivity"`
	MeanRounding     string  `json:"mean_rounding,omitempty"`
	// DirichletWeights says why pi may keep its floating-point sampler.
	DirichletWeights string `json:"dirichlet_weights,omitempty"`
	Reason           string `json:"reason,omitempty"`
}

// DirichletFixed says why the Dirichlet weights of an exact release keep
// their floating-point sampler.
const DirichletFixed = "pseudo-counts fixed (C_amin = C_amax, the prior's a constant): pi has the same distribution for every input and is drawn ahead of the request (a gaussian model releases the constant 1/N)"

// FloatSampler names the floating-point sampler of a release that is not
// exact: nvib.Draw, which draws float64 mu + sigma * math/rand/v2's ziggurat
// NormFloat64.
const FloatSampler = "float64-ziggurat (floating point: not covered by the certificate)"

// ErrNotFixedNoise is wrapped by ReleaseLattice's error when the clip set's
// noise scale or pseudo-counts depend on the input.
var ErrNotFixedNoise = errors.New("the release's noise is not fixed")

// ReleaseLattice returns the exact release of the clip set: the lattice, the
// one stored float32 log-variance lv of every component, and the lattice index
// of each dimension's ball centre, the prior mean, of length 1 or Dims. The
// lattice is [noise.NewLattice] of the noise sigma and the mean bound
// |centre| + StoredRadius(C_mu).
//
// It exists for the fixed-noise designs only: those of [ClipSet.GaussianMu]'s
// condition, with the prior component's log-variance equal to the tokens', so
// that one sigma serves the whole release.
//
// It returns an error for an invalid set; [ErrNotFixedNoise], wrapped with the
// reason; a centre off the lattice; or a lattice too coarse for
// [noise.NewLattice].
func (s ClipSet) ReleaseLattice() (lat noise.Lattice, lv float32, centres []int64, err error) {
	if err := s.Validate(); err != nil {
		return lat, 0, nil, err
	}
	if _, ok := s.GaussianMu(); !ok {
		return lat, 0, nil, fmt.Errorf("%w: %s", ErrNotFixedNoise, s.notFixedReason())
	}
	fl, _ := s.logvarBox(0)
	for j := 0; j < s.distinctBoxDims(); j++ {
		if f, _ := s.logvarBox(j); f != fl {
			return lat, 0, nil, fmt.Errorf("%w: the log-variance differs between dimensions (%v, %v): the exact release draws one sigma", ErrNotFixedNoise, fl, f)
		}
	}
	for j := range s.PriorVar {
		if p := f32(math.Log(s.PriorVar[j])); p != fl {
			return lat, 0, nil, fmt.Errorf("%w: the prior component's log-variance %v differs from the tokens' %v: the exact release draws one sigma", ErrNotFixedNoise, p, fl)
		}
	}
	lv = float32(fl)
	bound := 0.0
	for _, c := range s.PriorMu {
		bound = math.Max(bound, math.Abs(float64(float32(c))))
	}
	if lat, err = noise.NewLattice(noise.NoiseSigma(lv), bound+StoredRadius(s.CMu)); err != nil {
		return lat, 0, nil, err
	}
	centres = make([]int64, len(s.PriorMu))
	for j, c := range s.PriorMu {
		if centres[j], err = lat.CentreIndex(float32(c)); err != nil {
			return lat, 0, nil, err
		}
	}
	return lat, lv, centres, nil
}

// notFixedReason says which constant lets the noise depend on the input.
func (s ClipSet) notFixedReason() string {
	if f32(s.AlphaMin) != f32(s.AlphaMax) || math.IsInf(s.AlphaMax, 1) {
		return fmt.Sprintf("the pseudo-counts range over [C_amin, C_amax] = [%v, %v], so the Dirichlet weights (and the Gamma sampler's time) depend on the input", s.AlphaMin, s.AlphaMax)
	}
	if math.IsInf(StoredRadius(s.CMu), 1) {
		return "the means are unbounded (C_mu infinite)"
	}
	fl, cp := s.logvarBox(0)
	return fmt.Sprintf("the log-variance ranges over [%v, %v], so the noise scale depends on the input and the floating-point noise reveals it", fl, cp)
}

// ReleaseMechanism describes the release of the clip set, see
// [ClipSet.ReleaseLattice]: exact, with its lattice and noise, or not exact,
// with the reason.
func (s ClipSet) ReleaseMechanism() ReleaseMechanism {
	lat, lv, _, err := s.ReleaseLattice()
	if err != nil {
		return ReleaseMechanism{Sampler: FloatSampler, Reason: err.Error()}
	}
	return ReleaseMechanism{Exact: true, Sampler: noise.SamplerName, LatticeExp: lat.Exp, Lattice: lat.G(),
		NoiseSigma: lat.Sigma, CertifiedSigma: math.Sqrt(math.Exp(float64(lv))), MeanRounding: MeanRounding,
		DirichletWeights: DirichletFixed}
}

// String says what the mechanism is, for people: exact on its lattice, or
// not exact and why.
func (m ReleaseMechanism) String() string {
	if !m.Exact {
		return "NOT exact (" + m.Sampler + "): " + m.Reason
	}
	return fmt.Sprintf("exact: every value on the lattice 2^%d (%.3g), exact normal of sigma' %.9g >= certified sigma %.9g, means rounded toward the ball's centre (added sensitivity %g)",
		m.LatticeExp, m.Lattice, m.NoiseSigma, m.CertifiedSigma, m.AddedSensitivity)
}
