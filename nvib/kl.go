package nvib

import (
	"math"

	"gonum.org/v1/gonum/mathext"
)

// Prior holds the frozen prior component of NVIB, as in ref §1. Mu is the
// mean and Var the variance of every dimension; LogAlpha is the log
// pseudo-count. The defaults are 0, 1 and 0. The prior is not trained.
type Prior struct {
	Mu       float64 `json:"mu"`
	Var      float64 `json:"var"`
	LogAlpha float64 `json:"log_alpha"`
}

// DefaultPrior is the standard prior N(0, I) with pseudo-count 1.
func DefaultPrior() Prior { return Prior{Mu: 0, Var: 1, LogAlpha: 0} }

// KLConfig controls the regularisers.
type KLConfig struct {
	Prior Prior
	// Delta is the conditional-prior strength in L_D: alpha0_p = exp(prior log alpha) + delta (N-1).
	// NVDP runs use 0 (ref §1).
	Delta float64
	// MaskPads excludes padding components, so that N is the unmasked count.
	// The models never set it. The reference ignores the mask, so every
	// component counts and N = S+1 (ref §4, §10 item 1), and principled mode
	// releases pads as ordinary components, so they are regularised like the
	// tokens; see [Model.KLConfig] and docs/model.md. It remains for a release
	// that omits pads.
	MaskPads bool
}

// KLResult holds the per-example regularisers L_G and L_D, in nats, and
// their batch means.
type KLResult struct {
	LG, LD         []float64 // [B]
	MeanLG, MeanLD float64
}

// KL computes the NVIB regularisers L_G and L_D of ref §4 for a posterior.
//
// The posterior has means mu and log variances logvar of shape [B,N,P],
// pseudo-counts alpha [B,N] and mask [B,N], with 1 for a real component.
// Component 0 is the prior. The regularisers are
//
//	L_G = 0.5 sum_i pibar_i (1/P) sum_j [ var_ij/var_p + (mu_ij-mu_p)^2/var_p - 1 - ln(var_ij/var_p) ],  pibar_i = alpha_i/alpha0
//	L_D = [ lnG(alpha0) - lnG(alpha0_p) + (alpha0-alpha0_p)(psi(alpha0/N) - psi(alpha0)) + N(lnG(alpha0_p/N) - lnG(alpha0/N)) ] / N
//
// with alpha0 = sum_i alpha_i, alpha0_p = exp(prior log alpha) + delta
// (N-1), and N the number of components summed: the unmasked ones with
// [KLConfig.MaskPads], else all S+1 as in the reference.
//
// The sums run in float64. The test vector of ref §11, e0, gives
// L_G = 0.2947536138 and L_D = 0.0394616248.
func KL(cfg KLConfig, mu, logvar, alpha []float32, mask []float32, B, N, P int) KLResult {
	r := KLResult{LG: make([]float64, B), LD: make([]float64, B)}
	for b := 0; b < B; b++ {
		lg, ld := klOne(cfg, mu, logvar, alpha, mask, b, N, P, nil, nil, nil, 0, 0)
		r.LG[b], r.LD[b] = lg, ld
		r.MeanLG += lg / float64(B)
		r.MeanLD += ld / float64(B)
	}
	return r
}

// KLBackward accumulates the gradient of wG*mean_b L_G + wD*mean_b L_D into
// dmu and dlogvar, of shape [B,N,P], and dalpha, of shape [B,N].
func KLBackward(cfg KLConfig, mu, logvar, alpha []float32, mask []float32, B, N, P int, wG, wD float64, dmu, dlogvar, dalpha []float32) {
	for b := 0; b < B; b++ {
		klOne(cfg, mu, logvar, alpha, mask, b, N, P, dmu, dlogvar, dalpha, wG/float64(B), wD/float64(B))
	}
}

// klOne computes L_G, L_D of example b and, when dmu != nil, accumulates the
// weighted gradients (w[0] for L_G, w[1] for L_D).
func klOne(cfg KLConfig, mu, logvar, alpha []float32, mask []float32, b, N, P int, dmu, dlogvar, dalpha []float32, wG, wD float64) (float64, float64) {
	in := func(i int) bool { return !cfg.MaskPads || isReal(mask, b*N+i) }
	var a0, n float64
	for i := 0; i < N; i++ {
		if in(i) {
			a0 += float64(alpha[b*N+i])
			n++
		}
	}
	vp, mp := cfg.Prior.Var, cfg.Prior.Mu
	comp := make([]float64, N)
	var lg float64
	for i := 0; i < N; i++ {
		if !in(i) {
			continue
		}
		var s float64
		for j := 0; j < P; j++ {
			k := (b*N+i)*P + j
			lv := float64(logvar[k])
			d := float64(mu[k]) - mp
			s += math.Exp(lv)/vp + d*d/vp - 1 - (lv - math.Log(vp))
		}
		comp[i] = 0.5 * s / float64(P)
		lg += float64(alpha[b*N+i]) / a0 * comp[i]
	}
	a0p := math.Exp(cfg.Prior.LogAlpha) + cfg.Delta*(n-1)
	lgA0, _ := math.Lgamma(a0)
	lgA0p, _ := math.Lgamma(a0p)
	lgA0pN, _ := math.Lgamma(a0p / n)
	lgA0N, _ := math.Lgamma(a0 / n)
	ld := (lgA0 - lgA0p + (a0-a0p)*(mathext.Digamma(a0/n)-mathext.Digamma(a0)) + n*(lgA0pN-lgA0N)) / n
	if dmu == nil {
		return lg, ld
	}
	// dL_D/dalpha0 = (alpha0-alpha0_p)(psi'(alpha0/N)/N - psi'(alpha0)) / N (the digamma terms cancel)
	dLD := (a0 - a0p) * (Trigamma(a0/n)/n - Trigamma(a0)) / n
	for i := 0; i < N; i++ {
		if !in(i) {
			continue
		}
		r := b*N + i
		pibar := float64(alpha[r]) / a0
		dalpha[r] += float32(wG*(comp[i]-lg)/a0 + wD*dLD)
		c := wG * 0.5 * pibar / float64(P)
		for j := 0; j < P; j++ {
			k := r*P + j
			dmu[k] += float32(c * 2 * (float64(mu[k]) - mp) / vp)
			dlogvar[k] += float32(c * (math.Exp(float64(logvar[k]))/vp - 1))
		}
	}
	return lg, ld
}
