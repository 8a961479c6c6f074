package attack

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// randomPair is a pair of random posteriors of N components in P dims
// sharing component 0 (the prior's): mu in [-s, s], logvar in [-1, 0.5],
// alpha in [0.3, 3]; a gaussian pair has logvar 0 and alpha 1 everywhere.
func randomPair(rng *rand.Rand, n, p int, s float64, gaussian bool) Pair {
	post := privacy.NewPosteriors(2, n, p)
	for k := range post.Mu {
		post.Mu[k] = float32(s * (2*rng.Float64() - 1))
		if !gaussian {
			post.Logvar[k] = float32(-1 + 1.5*rng.Float64())
		}
	}
	for k := range post.Alpha {
		post.Alpha[k] = 1
		if !gaussian {
			post.Alpha[k] = float32(0.3 + 2.7*rng.Float64())
		}
	}
	copy(post.Mu[n*p:(n+1)*p], post.Mu[:p]) // the prior component is the same in both
	copy(post.Logvar[n*p:(n+1)*p], post.Logvar[:p])
	post.Alpha[n] = post.Alpha[0]
	return Pair{Q: post.View(0), QPrime: post.View(1), Gaussian: gaussian}
}

// nearPair is a random q (randomPair's) and q' = q with every mean moved
// by up to d, every logvar by up to d/2 and every pseudo-count scaled by up
// to e^{d/2} (a gaussian pair: the means only), the prior component kept.
func nearPair(rng *rand.Rand, n, p int, d float64, gaussian bool) Pair {
	pair := randomPair(rng, n, p, 1, gaussian)
	qp := &pair.QPrime
	qp.Mu, qp.Logvar, qp.Alpha = append([]float32(nil), pair.Q.Mu...), append([]float32(nil), pair.Q.Logvar...), append([]float32(nil), pair.Q.Alpha...)
	u := func() float64 { return 2*rng.Float64() - 1 }
	for k := p; k < n*p; k++ {
		qp.Mu[k] += float32(d * u())
		if !gaussian {
			qp.Logvar[k] += float32(d / 2 * u())
		}
	}
	for i := 1; i < n && !gaussian; i++ {
		qp.Alpha[i] *= float32(math.Exp(d / 2 * u()))
	}
	return pair
}

// logDensityGonum is ln p_q(Z, pi) by gonum's normal density for Z and,
// for an NVDP release, the textbook Dirichlet density lnGamma(A) - sum_i
// lnGamma(alpha_i) + sum_i (alpha_i - 1) ln pi_i, which for N = 2 is
// checked against gonum's Beta density of pi_0.
func logDensityGonum(t *testing.T, q privacy.PosteriorView, z []float32, pi []float64, gaussian bool) float64 {
	var s float64
	for k, x := range z {
		s += distuv.Normal{Mu: float64(q.Mu[k]), Sigma: math.Exp(float64(q.Logvar[k]) / 2)}.LogProb(float64(x))
	}
	if gaussian {
		return s
	}
	var A, d float64
	for i, a := range q.Alpha {
		lg, _ := math.Lgamma(float64(a))
		A += float64(a)
		d += (float64(a)-1)*math.Log(pi[i]) - lg
	}
	lg, _ := math.Lgamma(A)
	d += lg
	if q.N == 2 {
		if beta := (distuv.Beta{Alpha: float64(q.Alpha[0]), Beta: float64(q.Alpha[1])}).LogProb(pi[0]); math.Abs(beta-d) > 1e-9*math.Max(1, math.Abs(d)) {
			t.Fatalf("Dirichlet log density %v, gonum Beta %v", d, beta)
		}
	}
	return s + d
}

// LogRatio equals the difference of the two log densities computed from
// gonum's Normal and the Dirichlet density (gonum's Beta for N = 2), at releases drawn from either posterior and
// at points far from both, for NVDP and gaussian pairs.
func TestLogRatioGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		n, p     int
		s        float64
		gaussian bool
	}{{2, 1, 1, false}, {4, 3, 2, false}, {6, 5, 0.3, false}, {4, 3, 2, true}, {9, 8, 5, true}} {
		pair := randomPair(rng, tc.n, tc.p, tc.s, tc.gaussian)
		lr, err := NewLogRatio(pair)
		if err != nil {
			t.Fatal(err)
		}
		for trial := range 30 {
			var z []float32
			var logPi []float64
			switch trial % 3 {
			case 0, 1:
				z, logPi = newSampler([]privacy.PosteriorView{pair.Q, pair.QPrime}[trial%2], tc.gaussian, nil).draw(rng)
			default: // far away
				z, logPi = make([]float32, tc.n*tc.p), make([]float64, tc.n)
				for k := range z {
					z[k] = float32(10 * rng.NormFloat64())
				}
				w := make([]float64, tc.n)
				var sum float64
				for i := range w {
					w[i] = rng.ExpFloat64()
					sum += w[i]
				}
				for i := range w {
					logPi[i] = math.Log(w[i] / sum)
				}
			}
			pi := make([]float64, tc.n)
			for i, lp := range logPi {
				pi[i] = math.Exp(lp)
			}
			want := logDensityGonum(t, pair.Q, z, pi, tc.gaussian) - logDensityGonum(t, pair.QPrime, z, pi, tc.gaussian)
			if got := lr.At(z, logPi); math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
				t.Fatalf("%+v trial %d: L = %.15g, gonum %.15g", tc, trial, got, want)
			}
		}
	}
}

// KL equals the pair's Renyi divergence (privacy.PairBound, an independent
// closed form) as the order tends to 1, for NVDP and gaussian pairs, and
// for a pair that differs only in its pseudo-counts (the Dirichlet part).
func TestKL(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dirichletOnly := randomPair(rng, 5, 3, 1, false)
	dirichletOnly.QPrime.Mu, dirichletOnly.QPrime.Logvar = dirichletOnly.Q.Mu, dirichletOnly.Q.Logvar
	pairs := []Pair{dirichletOnly}
	for i := range 10 {
		pairs = append(pairs, randomPair(rng, 5, 3, 1, i%2 == 0))
	}
	for i, pair := range pairs {
		b, err := privacy.PairBound(1+1e-7, pair.Q, pair.QPrime)
		if err != nil {
			t.Fatal(err)
		}
		if kl := pair.KL(); math.Abs(kl-b.Total) > 1e-5*math.Max(1, kl) || !(kl > 0) {
			t.Errorf("pair %d (gaussian %v): KL %v, RD at order 1+1e-7 %v", i, pair.Gaussian, kl, b.Total)
		}
	}
}

// The sampler and the density agree (what the privacy-loss bound rests on):
// over releases drawn by nvib's sampler from q, the mean of L is KL(q||q')
// and ln E_q[e^{L}] is the Renyi divergence of order 2 (privacy.PairBound);
// over releases of q', E_q'[e^{L}] = 1 (L is a density ratio). Each within
// 5 standard errors, for NVDP and gaussian releases.
func TestLogRatioMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const draws = 40000
	for _, gaussian := range []bool{false, true} {
		pair := nearPair(rng, 4, 3, 0.4, gaussian)
		lr, err := NewLogRatio(pair)
		if err != nil {
			t.Fatal(err)
		}
		exact, _ := exactLattice(pair) // the release's exact sampler where the pair has fixed noise
		moments := func(v privacy.PosteriorView, f func(float64) float64) (m, se float64) {
			s := newSampler(v, gaussian, exact)
			var sum, sum2 float64
			for range draws {
				x := f(lr.At(s.draw(rng)))
				sum += x
				sum2 += x * x
			}
			m = sum / draws
			return m, math.Sqrt((sum2/draws - m*m) / draws)
		}
		id := func(x float64) float64 { return x }
		if m, se := moments(pair.Q, id); math.Abs(m-pair.KL()) > 5*se {
			t.Errorf("gaussian %v: E_q[L] = %v ± %v, KL %v", gaussian, m, se, pair.KL())
		}
		rd2, err := privacy.PairBound(2, pair.Q, pair.QPrime)
		if err != nil {
			t.Fatal(err)
		}
		if m, se := moments(pair.Q, math.Exp); math.Abs(m-math.Exp(rd2.Total)) > 5*se {
			t.Errorf("gaussian %v: E_q[e^L] = %v ± %v, exp(D_2) %v", gaussian, m, se, math.Exp(rd2.Total))
		}
		if m, se := moments(pair.QPrime, math.Exp); math.Abs(m-1) > 5*se {
			t.Errorf("gaussian %v: E_q'[e^L] = %v ± %v, want 1", gaussian, m, se)
		}
	}
}

// Check and pairFromPosteriors reject what the density does not describe,
// naming the posterior, component or metadata.
func TestPairCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	good := randomPair(rng, 3, 2, 1, false)
	file := privacy.NewPosteriors(3, 3, 2)
	copy(file.Mu, good.Q.Mu)
	copy(file.Mu[6:], good.QPrime.Mu)
	copy(file.Logvar, good.Q.Logvar)
	copy(file.Logvar[6:], good.QPrime.Logvar)
	copy(file.Alpha, good.Q.Alpha)
	copy(file.Alpha[3:], good.QPrime.Alpha)
	for i := 6; i < 9; i++ {
		file.Alpha[i] = 1
	}
	if _, err := pairFromPosteriors(file, 0, 2); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(p *Pair)) Pair {
		p := good
		p.Q.Mu = append([]float32(nil), good.Q.Mu...)
		p.Q.Logvar = append([]float32(nil), good.Q.Logvar...)
		p.Q.Alpha = append([]float32(nil), good.Q.Alpha...)
		f(&p)
		return p
	}
	for _, tc := range []struct {
		pair Pair
		want string
	}{
		{mod(func(p *Pair) { p.Q.N, p.Q.Mu, p.Q.Logvar, p.Q.Alpha = 2, p.Q.Mu[:4], p.Q.Logvar[:4], p.Q.Alpha[:2] }), "shapes"},
		{mod(func(p *Pair) { p.Q.Mu[3] = float32(math.NaN()) }), "component 1, dim 1"},
		{mod(func(p *Pair) { p.Q.Logvar[0] = 800 }), "logvar 800"},
		{mod(func(p *Pair) { p.Q.Alpha[2] = 0 }), "component 2: alpha 0"},
		{mod(func(p *Pair) { p.Q.Alpha[1] = 2e8 }), "total pseudo-count"},
		{mod(func(p *Pair) { p.Q.Alpha[1] = 1e-30 }), "alpha/A"},
		{mod(func(p *Pair) { p.Gaussian = true }), "gaussian pair: component"},
	} {
		if _, err := NewLogRatio(tc.pair); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error with %q, got %v", tc.want, err)
		}
	}
	for _, tc := range []struct {
		i, j int
		md   map[string]string
		want string
	}{
		{0, 3, nil, "posterior 3: the file has 3"},
		{1, 1, nil, "two different"},
		{0, 1, map[string]string{"pads_released": "false"}, "pads_released"},
		{0, 1, map[string]string{nvib.MetaModel: nvib.ModelGaussian}, "gaussian pair"},
	} {
		f := *file
		f.Metadata = tc.md
		if _, err := pairFromPosteriors(&f, tc.i, tc.j); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("(%d, %d) %v: want an error with %q, got %v", tc.i, tc.j, tc.md, tc.want, err)
		}
	}
}

// The distinguishing test draws the releases of a fixed-noise pair exactly (exactLattice: one
// logvar, the same pseudo-counts, the prior component the same in both), every value on the
// lattice; a pair whose noise differs is drawn by the floating-point sampler.
func TestExactLattice(t *testing.T) {
	set := nvib.GaussianClipSet(0.5, 1, 4, 3)
	pair, _, err := WitnessPair(set, privacy.DefaultDelta, true)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := exactLattice(pair)
	if !ok {
		t.Fatal("the witness pair of a gaussian clip set has fixed noise but no lattice")
	}
	if want, _, _, _ := set.ReleaseLattice(); e.lat != want {
		t.Errorf("pair lattice %+v, the clip set's %+v", e.lat, want)
	}
	z, _ := newSampler(pair.Q, true, e).draw(rand.New(rand.NewPCG(1, 2)))
	for k, v := range z {
		if q := float64(v) / e.lat.G(); q != math.Trunc(q) {
			t.Fatalf("z[%d] = %v off the lattice", k, v)
		}
	}
	if _, ok := exactLattice(nearPair(rand.New(rand.NewPCG(3, 4)), 4, 3, 0.4, false)); ok {
		t.Error("a pair whose logvars and pseudo-counts differ has an exact lattice")
	}
}
