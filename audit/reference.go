package audit

import (
	"context"
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

// Reference mode: the released NVDP-Clipping code, quirk for quirk (ref §6, §7).

// refAlphaFloor is the pseudo-count filter of the released code: alpha <= 1e-4
// is set to 0 before the RD and the accountant (ref §6.2, §7.2 step 1).
const refAlphaFloor = 1e-4

// refAccountantOrder is the accountant's moment order ("powers = 1.1"), fixed
// in the released code whatever the RD order (ref §7.2).
const refAccountantOrder = 1.1

const float32Max = math.MaxFloat32

// refPairRD is the released code's per-pair "RD" (ref §6.2) for q = a (earlier
// in the batch) and q' = b at order lambda: F1 + F2 + F3 with the Dirichlet
// totals and components divided by N, the Gaussian part averaged over the P
// dimensions and divided by N, q' alphas replaced by the rescaled q alphas,
// the Gaussian direction reversed, NaN terms skipped (NANSUM/NANMEAN).
// Inputs are the clipped posteriors; alphas <= refAlphaFloor are zeroed here.
func refPairRD(lam float64, a, b privacy.PosteriorView) (rd, f1, f2, f3 float64) {
	N, P := a.N, a.P
	fa := func(x float32) float64 {
		if float64(x) <= refAlphaFloor {
			return 0
		}
		return float64(x)
	}
	var sa, sb float64
	for i := range N {
		sa += fa(a.Alpha[i])
		sb += fa(b.Alpha[i])
	}
	c := lam / (lam - 1)
	f1 = (-(1/(lam-1))*lgamma(lam*sa-(lam-1)*sb) - lgamma(sb) + c*lgamma(sa)) / float64(N)
	r := sb / sa
	for i := range N {
		ai := fa(a.Alpha[i])
		adj := r * ai
		t := (1/(lam-1))*lgamma(lam*ai-(lam-1)*adj) + lgamma(adj) - c*lgamma(ai)
		if !math.IsNaN(t) {
			f2 += t
		}
	}
	f2 /= float64(N)
	for i := range N {
		var s1, s2 float64
		var n1, n2 int
		for j := i * P; j < (i+1)*P; j++ {
			va, vb := math.Exp(float64(a.Logvar[j])), math.Exp(float64(b.Logvar[j]))
			t2 := (1-lam)*vb + lam*va
			t := math.Sqrt(t2)
			d := float64(a.Mu[j]) - float64(b.Mu[j])
			if x := d * d / (t * t); !math.IsNaN(x) {
				s1 += x
				n1++
			}
			// ln( t / (sigma_a^lambda sigma_b^(1-lambda)) )
			if x := math.Log(t) - lam*0.5*float64(a.Logvar[j]) - (1-lam)*0.5*float64(b.Logvar[j]); !math.IsNaN(x) {
				s2 += x
				n2++
			}
		}
		g := lam/2*(s1/float64(n1)) + (1/(1-lam))*(s2/float64(n2)) // NaN if a mean has no values
		if !math.IsNaN(g) {
			f3 += g
		}
	}
	f3 /= float64(N)
	return f1 + f2 + f3, f1, f2, f3
}

// refZFilter applies the released code's batch filter (ref §6.3): values more
// than 0.5 population standard deviations from the batch mean are set to 0
// (nothing when the std is 0); returns the batch max and mean afterwards.
func refZFilter(v []float64) (bmax, bmean float64) {
	n := float64(len(v))
	var m float64
	for _, x := range v {
		m += x
	}
	m /= n
	var ss float64
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	s := math.Sqrt(ss / n)
	bmax = math.Inf(-1)
	for _, x := range v {
		if z := (x - m) / s; math.Abs(z) > 0.5 {
			x = 0
		}
		bmax = math.Max(bmax, x)
		bmean += x
	}
	return bmax, bmean / n
}

// nanTo maps NaN to 0 and +-Inf to +-float32 max (torch.nan_to_num on float32).
func nanTo(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return 0
	case math.IsInf(x, 1):
		return float32Max
	case math.IsInf(x, -1):
		return -float32Max
	}
	return x
}

// refG is the accountant's "scaled" Gaussian term G(k; mu_l, mu_r, s_l, s_r) (ref §7.2).
func refG(k float64, ml, mr []float64, sl, sr float64, N, P int) float64 {
	t := math.Sqrt((1-k)*sl*sl + k*sr*sr)
	var sum1 float64
	for i := range N {
		var s float64
		var n int
		for j := i * P; j < (i+1)*P; j++ {
			d := mr[j] - ml[j]
			if x := d * d / (t * t); !math.IsNaN(x) {
				s += x
				n++
			}
		}
		term1 := nanTo(k * (k - 1) / 2 * (s / float64(n)))
		sum1 += term1
	}
	km1 := k - 1
	term2 := nanTo(km1 / (1 - k) * math.Log(t/(math.Pow(sl, 1-k)*math.Pow(sr, k))))
	return (sum1 + float64(N)*term2) / float64(N)
}

// refDr is the accountant's Dirichlet term Dr(k; A, B) (ref §7.2), not scaled by (k-1).
func refDr(k float64, A, B []float64) float64 {
	N := len(A)
	var sA, sB float64
	for i := range N {
		sA += A[i]
		sB += B[i]
	}
	km1 := k - 1
	f1 := -(1/km1)*lgamma(k*sA-km1*sB) - lgamma(sB) + (k/km1)*lgamma(sA)
	if math.IsNaN(f1) || math.IsInf(f1, 0) {
		f1 = 0
	}
	f1 /= float64(N)
	var f2 float64
	for i := range N {
		adj := sB * A[i] / sA
		t := (1/km1)*lgamma(k*A[i]-km1*adj) + lgamma(adj) - (k/km1)*lgamma(A[i])
		if !math.IsNaN(t) {
			f2 += t
		}
	}
	f2 /= float64(N)
	if math.IsNaN(f2) || math.IsInf(f2, 0) {
		f2 = 0
	}
	return f1 + f2
}

// refBatch is one batch prepared for the accountant: filtered alphas, mus
// (zeroed where alpha was filtered), and the scalar sigmas.
type refBatch struct {
	mu    [][]float64 // [B][N*P]
	alpha [][]float64 // [B][N]
	sL    float64     // mean sqrt(prior_var)
	sR    float64     // mean sigma over the batch tensor after the filter
}

func newRefBatch(p *privacy.Posteriors, start, end int) refBatch {
	N, P := p.N, p.P
	rb := refBatch{}
	var sig float64
	for x := start; x < end; x++ {
		mu := make([]float64, N*P)
		al := make([]float64, N)
		for i := range N {
			a := float64(p.Alpha[x*N+i])
			off := (x*N + i) * P
			if a <= refAlphaFloor {
				sig += float64(P) // l := 0, sigma := 1; mu := 0
				continue
			}
			al[i] = a
			for j := range P {
				mu[i*P+j] = float64(p.Mu[off+j])
				sig += math.Exp(0.5 * float64(p.Logvar[off+j]))
			}
		}
		rb.mu = append(rb.mu, mu)
		rb.alpha = append(rb.alpha, al)
	}
	rb.sR = sig / float64((end-start)*N*P)
	for _, v := range p.PriorVar {
		rb.sL += math.Sqrt(v)
	}
	rb.sL /= float64(P)
	return rb
}

// refLogMGF is max(c_L, c_R) for the pair (a, b) of the batch (ref §7.2 step 3-4),
// with binomial weights Bin(k; 2, q) over k = 0, 1, 2 (the weight of k = 3 is 0).
func (rb refBatch) refLogMGF(a, b int, q float64, N, P int) float64 {
	w := []float64{(1 - q) * (1 - q), 2 * q * (1 - q), q * q}
	side := func(ml, mr []float64, sl, sr float64, A, B []float64) float64 {
		var s float64
		for k := range 3 {
			kf := float64(k)
			s += w[k] * math.Exp(refG(kf, ml, mr, sl, sr, N, P)+refDr(kf, A, B))
		}
		return math.Log(s)
	}
	cL := side(rb.mu[a], rb.mu[b], rb.sL, rb.sR, rb.alpha[a], rb.alpha[b])
	cR := side(rb.mu[b], rb.mu[a], rb.sR, rb.sL, rb.alpha[b], rb.alpha[a])
	return math.Max(cL, cR)
}

// refBatchCost is the released accountant's cost of one batch from the
// per-pair log-MGFs (ref §7.2 step 5): ln(mean X + t_{conf, n-1} std X /
// sqrt(n-1)), X = exp(logmgf), population std, with NVDP's isclose snap, or
// ln mean X when the std of the logmgfs is below 2.22e-16. Needs >= 3 pairs.
func refBatchCost(logmgf []float64, conf float64) (float64, error) {
	n := len(logmgf)
	if n < 3 {
		return 0, fmt.Errorf("accountant needs at least 3 pairs per batch, have %d", n)
	}
	nf := float64(n)
	var m float64
	for _, v := range logmgf {
		m += v
	}
	m /= nf
	var ss float64
	for _, v := range logmgf {
		ss += (v - m) * (v - m)
	}
	M := math.Inf(-1)
	for _, v := range logmgf {
		M = math.Max(M, v)
	}
	var se float64
	for _, v := range logmgf {
		se += math.Exp(v - M)
	}
	lbar := M + math.Log(se/nf)
	if math.Sqrt(ss/nf) < 2.220446049250313e-16 {
		return lbar, nil
	}
	var sum float64
	e2 := math.Exp(2 * (lbar - M))
	for _, v := range logmgf {
		x := math.Exp(2 * (v - M))
		if math.Abs(x-1) <= 1e-8+1e-5 {
			x = 1
		}
		sum += x - e2
	}
	lnStd := 0.5 * (2*M - math.Log(nf) + math.Log(sum))
	t, err := StudentTUpper(nf-1, 1-conf)
	if err != nil {
		return 0, err
	}
	pen := math.Log(t) + lnStd - 0.5*math.Log(nf-1)
	hi, lo := math.Max(lbar, pen), math.Min(lbar, pen)
	return hi + math.Log1p(math.Exp(lo-hi)), nil
}

// refEpsilon converts the summed accountant cost C over T batches to eps_mu =
// (C - ln(delta - (1 - conf^T))) / 1.1 (ref §7.2 step 6).
func refEpsilon(C float64, batches int, delta, conf float64) (float64, error) {
	gamma := 1 - math.Exp(float64(batches)*math.Log(conf))
	if !(delta > gamma) {
		return 0, fmt.Errorf("delta %g must exceed the accountant's failure probability %g", delta, gamma)
	}
	return (C - math.Log(delta-gamma)) / refAccountantOrder, nil
}

func auditReference(ctx context.Context, p *privacy.Posteriors, opt Options) (*Report, error) {
	M, B := p.M, opt.BatchSize
	r := &Report{Mode: privacy.ModeReference, Order: opt.Order, Delta: opt.Delta, Confidence: opt.Confidence,
		Examples: M, Components: p.N, Dims: p.P, BatchSize: B, Q: opt.Q}
	rdMax, rdMaxU := math.Inf(-1), math.Inf(-1)
	var sumMeans, sumU float64
	var nU int64
	var C float64
	steps := 0
	for s := 0; s < M; s += B {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e := min(s+B, M)
		r.Batches++
		if e-s < 2 {
			r.SkippedBatches = append(r.SkippedBatches, r.Batches-1)
			r.Notes = append(r.Notes, fmt.Sprintf("batch %d (examples %d..%d) has no pair: skipped", r.Batches-1, s, e-1))
			continue
		}
		var v []float64
		for a := s; a < e; a++ {
			for b := a + 1; b < e; b++ {
				rd, _, _, _ := refPairRD(opt.Order, p.View(a), p.View(b))
				if math.IsNaN(rd) || math.IsInf(rd, 0) {
					r.InvalidPairs++
				} else {
					rdMaxU = math.Max(rdMaxU, rd)
					sumU += rd
					nU++
				}
				v = append(v, rd)
			}
		}
		r.Pairs += int64(len(v))
		bmax, bmean := refZFilter(v)
		rdMax = math.Max(rdMax, bmax)
		sumMeans += bmean
		// Accountant.
		if len(v) < 3 {
			r.SkippedBatches = append(r.SkippedBatches, r.Batches-1)
			r.Notes = append(r.Notes, fmt.Sprintf("batch %d has %d pair(s): the released accountant raises an error below 3 pairs; batch left out of the BDP", r.Batches-1, len(v)))
			continue
		}
		rb := newRefBatch(p, s, e)
		var lm []float64
		for a := 0; a < e-s; a++ {
			for b := a + 1; b < e-s; b++ {
				lm = append(lm, rb.refLogMGF(a, b, opt.Q, p.N, p.P))
			}
		}
		cost, err := refBatchCost(lm, opt.Confidence)
		if err != nil {
			return nil, fmt.Errorf("reference accountant, batch %d: %w", r.Batches-1, err)
		}
		C += cost
		steps++
	}
	nb := r.Batches - countNoPair(r.SkippedBatches, p, B)
	r.RDMax = jsonfloat.Float(rdMax)
	if nb > 0 {
		r.RDMean = jsonfloat.New(sumMeans / float64(nb))
	}
	if nU > 0 {
		r.RDMaxUnfiltered = jsonfloat.New(rdMaxU)
		r.RDMeanUnfiltered = jsonfloat.New(sumU / float64(nU))
	}
	r.FinitePairs = nU
	if steps > 0 { // else not computed: no batch has the accountant's 3 pairs
		eps, err := refEpsilon(C, steps, opt.Delta, opt.Confidence)
		if err != nil {
			return nil, err
		}
		r.AccountantCost, r.BDPEpsilon = jsonfloat.New(C), jsonfloat.New(eps)
	}
	r.Notes = append(r.Notes, "rd_max/rd_mean: released code (pairs inside consecutive batches, |z| > 0.5 filter, max of batch maxima, mean of batch means); rd_max_unfiltered is the max over the same pairs without the filter")
	if r.InvalidPairs > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d pairs have a non-finite RD; the released code would propagate NaN/Inf", r.InvalidPairs))
	}
	return r, nil
}

// countNoPair counts skipped batches that had no pair at all (a single example).
func countNoPair(skipped []int, p *privacy.Posteriors, B int) int {
	n := 0
	for _, b := range skipped {
		if min((b+1)*B, p.M)-b*B < 2 {
			n++
		}
	}
	return n
}
