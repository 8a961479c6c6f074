package attack

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"gonum.org/v1/gonum/mathext"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/noise"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// Pair is a candidate pair of inputs of a distinguishing test, given by the
// clipped posteriors their releases are drawn from. Q and QPrime have N
// components, component 0 being the prior's, in P dimensions each, as a
// posterior file holds them in float32. The attention mask is not used: every
// component is released.
//
// The release of a posterior by package nvib is X = (Z, pi). Z is [N, P] with
// independent entries Z_ij ~ N(mu_ij, exp(logvar_ij)). For an NVDP release,
// [nvib.Draw], the weights pi ~ Dir(alpha) are [N] and independent of Z. A
// gaussian release, with Gaussian true and [nvib.DrawGaussian], has the
// constant weights 1/N instead, so its density is that of Z alone.
type Pair struct {
	Q, QPrime privacy.PosteriorView
	Gaussian  bool
}

// pairFromPosteriors returns the pair of examples i and j of a posterior
// file. A file written by a gaussian model, with metadata model = gaussian,
// gives a gaussian pair.
//
// It returns an error, naming the example, for an index outside [0, M), for
// i = j, for a file whose release is not the one of [Pair], and for a pair
// that [Pair.Check] rejects. A file with metadata pads_released = false has
// another release: the reference release gives padding zero weight.
func pairFromPosteriors(p *privacy.Posteriors, i, j int) (Pair, error) {
	for _, k := range []int{i, j} {
		if k < 0 || k >= p.M {
			return Pair{}, fmt.Errorf("posterior %d: the file has %d (0..%d)", k, p.M, p.M-1)
		}
	}
	if i == j {
		return Pair{}, fmt.Errorf("posteriors %d and %d: a pair of two different posteriors is needed", i, j)
	}
	if v, ok := p.Metadata["pads_released"]; ok {
		if released, err := strconv.ParseBool(v); err != nil || !released {
			return Pair{}, fmt.Errorf("metadata pads_released = %q: the release gives padding components zero weight (reference mode), not the release whose density the attack knows", v)
		}
	}
	pair := Pair{Q: p.View(i), QPrime: p.View(j), Gaussian: p.Metadata[nvib.MetaModel] == nvib.ModelGaussian}
	if err := pair.Check(); err != nil {
		return Pair{}, fmt.Errorf("posteriors (%d, %d): %w", i, j, err)
	}
	return pair, nil
}

// Check reports why the density of the pair's releases is not the one that
// [LogRatio] computes. The reasons are:
//
//   - shapes that differ, or a non-finite value;
//   - a pseudo-count that is not > 0, since every component is released;
//   - a Dirichlet total A or a proportion alpha_i/A where nvib's sampler
//     guards, A >= [nvib.TotalCap] or alpha_i/A < [nvib.PropFloor], since it
//     then draws from another distribution;
//   - for a gaussian pair, pseudo-counts that differ between Q and QPrime: a
//     gaussian release has no Dirichlet weights, and its posteriors carry
//     equal ones.
func (p Pair) Check() error {
	q, qp := p.Q, p.QPrime
	if q.N < 1 || q.P < 1 || q.N != qp.N || q.P != qp.P {
		return fmt.Errorf("shapes [%d, %d] and [%d, %d]: want the same N >= 1 and P >= 1", q.N, q.P, qp.N, qp.P)
	}
	for _, v := range []struct {
		name string
		post privacy.PosteriorView
	}{{"q", q}, {"q'", qp}} {
		if len(v.post.Mu) != q.N*q.P || len(v.post.Logvar) != q.N*q.P || len(v.post.Alpha) != q.N {
			return fmt.Errorf("posterior %s: %d means, %d logvars, %d pseudo-counts for N = %d, P = %d", v.name, len(v.post.Mu), len(v.post.Logvar), len(v.post.Alpha), q.N, q.P)
		}
		for k := range v.post.Mu {
			if m, lv := float64(v.post.Mu[k]), float64(v.post.Logvar[k]); math.IsNaN(m) || math.IsInf(m, 0) || math.Abs(lv) > privacy.MaxAbsLogvar || math.IsNaN(lv) {
				return fmt.Errorf("posterior %s: component %d, dim %d: mu %v, logvar %v (want finite, |logvar| <= %v)", v.name, k/q.P, k%q.P, m, lv, privacy.MaxAbsLogvar)
			}
		}
		A := 0.0
		for i, a := range v.post.Alpha {
			if !(a > 0) || math.IsInf(float64(a), 0) {
				return fmt.Errorf("posterior %s: component %d: alpha %v, want a finite value > 0 (every component is released)", v.name, i, a)
			}
			A += float64(a)
		}
		if p.Gaussian {
			continue
		}
		if A >= nvib.TotalCap {
			return fmt.Errorf("posterior %s: total pseudo-count %g >= %g, where the sampler rescales it (the release is then not Dir(alpha))", v.name, A, nvib.TotalCap)
		}
		for i, a := range v.post.Alpha {
			if float64(a)/A < nvib.PropFloor {
				return fmt.Errorf("posterior %s: component %d: alpha/A = %g < %g, where the sampler floors it (the release is then not Dir(alpha))", v.name, i, float64(a)/A, nvib.PropFloor)
			}
		}
	}
	if p.Gaussian {
		for i := range q.Alpha {
			if q.Alpha[i] != qp.Alpha[i] {
				return fmt.Errorf("gaussian pair: component %d has alpha %v and %v: a gaussian release has no Dirichlet weights, its posteriors carry equal pseudo-counts", i, q.Alpha[i], qp.Alpha[i])
			}
		}
	}
	return nil
}

// LogRatio is the exact log-likelihood ratio of a release X = (Z, pi) between
// the releases of a pair's posteriors q and q'. It is the score of the most
// powerful test, by Neyman-Pearson:
//
//	L(X) = ln p_q(X) - ln p_q'(X)
//	     = sum_ij [ (Z_ij - mu'_ij)^2 / (2 v'_ij) - (Z_ij - mu_ij)^2 / (2 v_ij) + (ln v'_ij - ln v_ij) / 2 ]
//	       + ln B(alpha') - ln B(alpha) + sum_i (alpha_i - alpha'_i) ln pi_i,
//
// where v = exp(logvar) and ln B(a) = sum_i lnGamma(a_i) - lnGamma(sum_i a_i)
// is the Dirichlet's normaliser. The Dirichlet line is absent for a gaussian
// release. It is computed in float64, term by term as differences. Its mean
// under q is KL(q || q'); see [Pair.KL].
type LogRatio struct {
	mu, muP []float64 // [N*P]
	a, aP   []float64 // 1 / (2 v), 1 / (2 v') [N*P]
	dAlpha  []float64 // alpha - alpha' [N]; nil: no Dirichlet weights
	c       float64   // the terms that do not depend on X
}

// NewLogRatio precomputes the log-likelihood ratio of p. Errors: Pair.Check.
func NewLogRatio(p Pair) (*LogRatio, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	n := len(p.Q.Mu)
	l := &LogRatio{mu: make([]float64, n), muP: make([]float64, n), a: make([]float64, n), aP: make([]float64, n)}
	for k := range n {
		lv, lvP := float64(p.Q.Logvar[k]), float64(p.QPrime.Logvar[k])
		l.mu[k], l.muP[k] = float64(p.Q.Mu[k]), float64(p.QPrime.Mu[k])
		l.a[k], l.aP[k] = 0.5*math.Exp(-lv), 0.5*math.Exp(-lvP)
		l.c += (lvP - lv) / 2
	}
	if !p.Gaussian {
		l.dAlpha = make([]float64, p.Q.N)
		for i := range l.dAlpha {
			l.dAlpha[i] = float64(p.Q.Alpha[i]) - float64(p.QPrime.Alpha[i])
		}
		l.c += logBeta(p.QPrime.Alpha) - logBeta(p.Q.Alpha)
	}
	return l, nil
}

// At returns L(X) of the release with Z and ln pi. Z is [N*P], row-major. ln
// pi is [N], ignored for a gaussian release; it is
// [nvib.DirichletSample].LogPi, the float64 logarithm of the weights before
// they are rounded to float32.
func (l *LogRatio) At(z []float32, logPi []float64) float64 {
	s := l.c
	for k, zk := range z {
		x := float64(zk)
		d, dP := x-l.mu[k], x-l.muP[k]
		s += dP*dP*l.aP[k] - d*d*l.a[k]
	}
	for i, da := range l.dAlpha {
		s += da * logPi[i]
	}
	return s
}

// logBeta is ln B(alpha) = sum_i lnGamma(alpha_i) - lnGamma(sum_i alpha_i).
func logBeta(alpha []float32) float64 {
	var s, A float64
	for _, a := range alpha {
		lg, _ := math.Lgamma(float64(a))
		s += lg
		A += float64(a)
	}
	lg, _ := math.Lgamma(A)
	return s - lg
}

// KL returns the Kullback-Leibler divergence KL(q || q') of the pair's
// releases in nats, the mean of [LogRatio] under q. Per entry of Z it is
//
//	(ln(v'/v) + (v + (mu - mu')^2)/v' - 1)/2,
//
// and an NVDP release adds the Dirichlet term
//
//	ln B(alpha') - ln B(alpha) + sum_i (alpha_i - alpha'_i) (psi(alpha_i) - psi(A)),
//
// with A = sum_i alpha_i. It is clamped at 0, against the rounding of equal
// posteriors. The pair must pass [Pair.Check].
func (p Pair) KL() float64 {
	var s float64
	for k := range p.Q.Mu {
		lv, lvP := float64(p.Q.Logvar[k]), float64(p.QPrime.Logvar[k])
		d := float64(p.Q.Mu[k]) - float64(p.QPrime.Mu[k])
		s += 0.5 * (lvP - lv + (math.Exp(lv)+d*d)*math.Exp(-lvP) - 1)
	}
	if p.Gaussian {
		return math.Max(0, s)
	}
	A := 0.0
	for _, a := range p.Q.Alpha {
		A += float64(a)
	}
	s += logBeta(p.QPrime.Alpha) - logBeta(p.Q.Alpha)
	for i, a := range p.Q.Alpha {
		s += (float64(a) - float64(p.QPrime.Alpha[i])) * (mathext.Digamma(float64(a)) - mathext.Digamma(A))
	}
	return math.Max(0, s)
}

// Swap is the pair with the roles of q and q' exchanged.
func (p Pair) Swap() Pair { return Pair{Q: p.QPrime, QPrime: p.Q, Gaussian: p.Gaussian} }

// GaussianMu returns mu = ||(mu_q - mu_q') / sigma||_2 over all N*P entries
// for a pair whose releases differ only in their means, with every logvar and
// pseudo-count equal in q and q'. Such a pair is exactly the Gaussian
// mechanism with sensitivity / sigma = mu: its log-likelihood ratio is
// N(mu^2/2, mu^2) under q, and its exact epsilon is
// [privacy.GaussianMechanismEpsilon](mu, delta). ok is false for any other
// pair.
func (p Pair) GaussianMu() (mu float64, ok bool) {
	for i := range p.Q.Alpha {
		if p.Q.Alpha[i] != p.QPrime.Alpha[i] {
			return 0, false
		}
	}
	var s float64
	for k := range p.Q.Mu {
		if p.Q.Logvar[k] != p.QPrime.Logvar[k] {
			return 0, false
		}
		d := float64(p.Q.Mu[k]) - float64(p.QPrime.Mu[k])
		s += d * d * math.Exp(-float64(p.Q.Logvar[k]))
	}
	return math.Sqrt(s), true
}

// sampler draws releases of one posterior of a pair as the release would:
// exactly (package noise, on the pair's lattice: exactLattice) when the
// pair has one fixed noise, else with nvib's floating-point sampler
// (nvib.Draw, or nvib.DrawGaussian for a gaussian pair). Safe for
// concurrent use (each call brings its rng).
type sampler struct {
	post     *nvib.Posterior
	gaussian bool
	exact    *pairLattice
}

// pairLattice is the exact release of a pair: its lattice and the lattice
// index of each dimension's ball centre (the prior component's mean).
type pairLattice struct {
	lat     noise.Lattice
	centres []int64
}

// exactLattice returns the lattice of a pair whose posteriors have one
// stored log-variance everywhere and the same pseudo-counts (a fixed-noise
// release, privacy.ClipSet.ReleaseLattice): noise.NewLattice of its sigma
// for the largest |mean| of either, the centre at component 0's mean (the
// prior's, the same in both). ok is false for any other pair, which is
// then drawn by the floating-point sampler.
func exactLattice(p Pair) (pl *pairLattice, ok bool) {
	q, r := p.Q, p.QPrime
	if len(q.Logvar) == 0 || q.N != r.N || q.P != r.P {
		return nil, false
	}
	lv := q.Logvar[0]
	bound := 0.0
	for k := range q.Logvar {
		if q.Logvar[k] != lv || r.Logvar[k] != lv {
			return nil, false
		}
		bound = math.Max(bound, math.Max(math.Abs(float64(q.Mu[k])), math.Abs(float64(r.Mu[k]))))
	}
	for i := range q.Alpha {
		if q.Alpha[i] != r.Alpha[i] {
			return nil, false
		}
	}
	lat, err := noise.NewLattice(noise.NoiseSigma(lv), bound)
	if err != nil {
		return nil, false
	}
	pl = &pairLattice{lat: lat, centres: make([]int64, q.P)}
	for j := range q.P {
		if q.Mu[j] != r.Mu[j] {
			return nil, false
		}
		if pl.centres[j], err = lat.CentreIndex(q.Mu[j]); err != nil {
			return nil, false
		}
	}
	return pl, true
}

func newSampler(v privacy.PosteriorView, gaussian bool, exact *pairLattice) sampler {
	return sampler{gaussian: gaussian, exact: exact, post: &nvib.Posterior{B: 1, N: v.N, P: v.P, PadsReleased: true,
		Mu: nn.FromData(v.Mu, 1, v.N, v.P), Logvar: nn.FromData(v.Logvar, 1, v.N, v.P), Alpha: nn.FromData(v.Alpha, 1, v.N)}}
}

// draw returns one release: Z [N*P] and ln pi [N].
func (s sampler) draw(rng *rand.Rand) (z []float32, logPi []float64) {
	if e := s.exact; e != nil {
		n := make([]int64, len(s.post.Mu.Data))
		noise.NewNoise(e.lat, rng).Fill(n)
		z = make([]float32, len(n))
		if err := e.lat.Release(z, s.post.Mu.Data, n, e.centres); err != nil {
			panic(err) // exactLattice sized the lattice for these means
		}
		if s.gaussian {
			_, logPi = nvib.UniformWeights(s.post.N)
		} else {
			_, logPi = nvib.DrawWeights(s.post.Alpha.Data, rng)
		}
		return z, logPi
	}
	var d *nvib.Sample
	if s.gaussian {
		d = nvib.DrawGaussian(s.post, rng)
	} else {
		d = nvib.Draw(s.post, rng)
	}
	return d.Z.Data, d.Dir.LogPi
}
