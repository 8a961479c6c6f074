package nvib

import (
	"math"
	"math/rand/v2"
)

// Dirichlet numerical guards of the reference, from ref §2, step 2.
const (
	// PropFloor floors the proportions alpha_i/A before rescaling.
	PropFloor = 1e-23
	// TotalCap caps the total A used to rescale the proportions.
	TotalCap = 1e8
)

// DirichletSample is one draw of the Dirichlet weights for B examples of N
// components, as in ref §2, with what the backward pass needs. pi [B,N] is 0
// at masked components and ln pi is -Inf there.
type DirichletSample struct {
	B, N  int
	Pi    []float32 // [B,N] pi_i = g_i / sum_j g_j, 0 where masked
	LogPi []float64 // [B,N] ln pi_i (computed in log space), -Inf where masked

	mask   []float32
	alpha  []float32 // input pseudo-counts
	shape  []float64 // guarded shapes alpha'_i
	dlogG  []float64 // d ln g_i / d alpha'_i (implicit reparameterisation)
	total  []float64 // A per example
	floors []bool    // proportion floor active
}

// SampleDirichlet draws pi ~ Dir(alpha) for each example as normalised
// Gamma samples, with the reference's guards of ref §2:
//
//	A = sum of the unmasked alpha_i
//	alpha'_i = max(alpha_i/A, 1e-23) * min(A, 1e8)
//	g_i ~ Gamma(alpha'_i, 1), g_i = 0 at masked components
//	pi_i = g_i / sum_j g_j
//
// The reference samples masked components with shape 1e-15 and then zeroes
// them, which is the same. Sampling and normalisation run in log space, ln
// pi = ln g - logsumexp ln g, so no weight underflows to an exact 0 unless
// it is masked.
//
// alpha [B*N] must be positive and finite where the mask is 1; the caller
// checks. mask [B*N] holds 1 for a real component; nil means all real.
func SampleDirichlet(rng *rand.Rand, alpha []float32, mask []float32, B, N int) *DirichletSample {
	return sampleDirichlet(func(_ int, a float64) float64 { return SampleLogGamma(rng, a) }, alpha, mask, B, N, true)
}

// sampleDirichlet is SampleDirichlet with the ln-Gamma sampler injected
// (logGamma(k, shape) for flat component index k); tests use fixed quantiles.
// grad says whether the sample records the Gamma gradients Backward needs;
// without them (a release's weights, DrawWeights) it draws the same values,
// and Backward must not be called.
func sampleDirichlet(logGamma func(k int, a float64) float64, alpha []float32, mask []float32, B, N int, grad bool) *DirichletSample {
	d := &DirichletSample{B: B, N: N, Pi: make([]float32, B*N), LogPi: make([]float64, B*N),
		mask: mask, alpha: alpha, shape: make([]float64, B*N), dlogG: make([]float64, B*N),
		total: make([]float64, B), floors: make([]bool, B*N)}
	logG := make([]float64, N)
	for b := 0; b < B; b++ {
		var A float64
		for i := 0; i < N; i++ {
			if isReal(mask, b*N+i) {
				A += float64(alpha[b*N+i])
			}
		}
		d.total[b] = A
		scale := math.Min(A, TotalCap)
		mx := math.Inf(-1)
		for i := 0; i < N; i++ {
			k := b*N + i
			if !isReal(mask, k) {
				logG[i] = math.Inf(-1)
				continue
			}
			p := float64(alpha[k]) / A
			switch {
			case p < PropFloor:
				d.floors[k] = true
				d.shape[k] = PropFloor * scale
			case A <= TotalCap: // (alpha/A) A is alpha: taken as it is, since the rounding of the
				// product can move a shape of 1 across Marsaglia-Tsang's a < 1 branch
				d.shape[k] = float64(alpha[k])
			default:
				d.shape[k] = p * scale
			}
			logG[i] = logGamma(k, d.shape[k])
			if grad {
				d.dlogG[k] = GammaLogGrad(d.shape[k], logG[i])
			}
			mx = math.Max(mx, logG[i])
		}
		var s float64
		for i := 0; i < N; i++ {
			s += math.Exp(logG[i] - mx)
		}
		lse := mx + math.Log(s)
		for i := 0; i < N; i++ {
			lp := logG[i] - lse
			d.LogPi[b*N+i] = lp
			d.Pi[b*N+i] = float32(math.Exp(lp))
		}
	}
	return d
}

func isReal(mask []float32, k int) bool { return mask == nil || mask[k] != 0 }

// Backward maps dL/d ln pi [B*N] to dL/d alpha [B*N]. It goes through the
// normalisation, with d ln pi_i/d ln g_j = delta_ij - pi_j, the implicit
// Gamma gradient and the guards, exactly, including the floor and the cap.
// Masked components get 0.
func (d *DirichletSample) Backward(dLogPi []float64) []float32 {
	N := d.N
	out := make([]float32, d.B*N)
	gs := make([]float64, N) // dL/d alpha'_i
	for b := 0; b < d.B; b++ {
		var sum float64
		for i := 0; i < N; i++ {
			if isReal(d.mask, b*N+i) {
				sum += dLogPi[b*N+i]
			}
		}
		A := d.total[b]
		scale := math.Min(A, TotalCap)
		var sGA, sGR float64 // sum_i nf_i G_i alpha_i, sum_i G_i r_i
		for i := 0; i < N; i++ {
			k := b*N + i
			if !isReal(d.mask, k) {
				gs[i] = 0
				continue
			}
			pi := math.Exp(d.LogPi[k])
			gLogG := dLogPi[k] - pi*sum
			gs[i] = gLogG * d.dlogG[k]
			if !d.floors[k] {
				sGA += gs[i] * float64(d.alpha[k])
			}
			sGR += gs[i] * d.shape[k] / scale
		}
		capOn := 0.0
		if A < TotalCap {
			capOn = 1
		}
		// alpha'_i = r_i c, r_i = max(alpha_i/A, floor), c = min(A, cap):
		// dL/dalpha_j = c nf_j G_j / A - (c/A^2) sum_i nf_i G_i alpha_i + [A<cap] sum_i G_i r_i
		for i := 0; i < N; i++ {
			k := b*N + i
			if !isReal(d.mask, k) {
				continue
			}
			g := -scale/(A*A)*sGA + capOn*sGR
			if !d.floors[k] {
				g += scale * gs[i] / A
			}
			out[k] = float32(g)
		}
	}
	return out
}
