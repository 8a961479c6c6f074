package nvib

import (
	"math"

	"gonum.org/v1/gonum/mathext"
)

// Prior holds the NVIB prior component (ref §1): mean Mu (every dimension),
// variance Var (every dimension) and log pseudo-count LogAlpha. Defaults 0, 1, 0.
// The prior is frozen (not trained).
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
	// MaskPads excludes padding components (N = the unmasked count). The
	// models never set it: the reference ignores the mask (every component
	// counts, N = S+1; ref §4, §10 item 1) and principled mode releases pads
	// as ordinary components, so they are regularised like the tokens
	// (Model.KLConfig, docs/model.md). It remains for a release that omits pads.
	MaskPads bool
}

// KLResult holds per-example L_G and L_D (nats) and their batch means.
type KLResult struct {
	LG, LD         []float64 // [B]
	MeanLG, MeanLD float64
}

// KL computes the NVIB regularisers of ref §4 for a posterior (mu, logvar
// [B,N,P], alpha [B,N], mask [B,N] 1 = real; component 0 = prior):
//
//	L_G = 0.5 sum_i pibar_i (1/P) sum_j [ var_ij/var_p + (mu_ij-mu_p)^2/var_p - 1 - ln(var_ij/var_p) ],  pibar_i = alpha_i/alpha0
//	L_D = [ lnG(alpha0) - lnG(alpha0_p) + (alpha0-alpha0_p)(psi(alpha0/N) - psi(alpha0)) + N(lnG(alpha0_p/N) - lnG(alpha0/N)) ] / N
//
// with alpha0 = sum_i alpha_i and N the number of components summed
// (MaskPads: the unmasked ones; reference: all S+1), alpha0_p =
// exp(prior log alpha) + delta (N-1). Float64 throughout. Test vector (ref §11,
// e0): L_G = 0.2947536138, L_D = 0.0394616248.
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

// KLBackward accumulates into dmu, dlogvar ([B,N,P]) and dalpha ([B,N]) the
// gradient of wG*mean_b L_G + wD*mean_b L_D.
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
