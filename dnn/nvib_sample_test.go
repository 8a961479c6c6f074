package dnn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"gonum.org/v1/gonum/mathext"
)

// Tolerances of the NVIB sampling twins.
const (
	// tolNVIBSample (relErr, FP32) for Z, pi, ln pi and the gradients into
	// mu, logvar, alpha: nvib computes them in double and rounds to float32
	// once; the device's exp, log and lgamma differ from Go's by an ulp or
	// two of double and its sums over components run in another order, far
	// below float32's rounding. Z rounds eps to float32 first on the device
	// (the stored eps; nvib uses the float64 normal), one float32 ulp.
	// Derivation: double results rounded once to float32 (1 ulp, 6e-8) plus eps rounded to float32 (1 ulp); the double's own error (lgamma 4 ulps of double) is 1e-15; 1e-6 = 16 float32 ulps.
	tolNVIBSample = 1e-6
	// tolGammaLogGrad (relative, per element, in double) for the implicit
	// Gamma gradient: where g >= 1 it is a central difference with step
	// 1e-4 a of the regularised incomplete gamma function, which amplifies
	// the last-bit differences of exp, pow, lgamma and erfc between CUDA (or
	// C) and Go by up to ~1/(1e-4 a) relative to P; 6e-12 observed on the
	// stand-in (glibc against Go), CUDA's functions are a few ulp less
	// accurate: 1e-9 leaves the margin.
	// Derivation: lgamma (CUDA 4 ulps of double, 4.4e-16) and exp/pow/erfc (2 ulps) in P, amplified by the central difference's 1/(1e-4 a) ~ 1e4: ~4e-12 per element (6e-12 seen on the stand-in); FMAs in the double series merge roundings; 1e-9 is 200x that.
	tolGammaLogGrad = 1e-9
	// tolLogPi (relErr, double) for ln pi: a log-sum-exp in double summed
	// in another order.
	// Derivation: a double log-sum-exp over K <= 16 components in another order: K 1.1e-16 plus log/exp 2 ulps: < 1e-14.
	tolLogPi = 1e-12
)

// relErrF64 is relErr over float64 slices.
func relErrF64(got, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var diff, scale float64
	for i := range want {
		if math.IsInf(want[i], 0) || math.IsInf(got[i], 0) {
			if got[i] != want[i] {
				return math.Inf(1)
			}
			continue
		}
		if math.IsNaN(got[i]) != math.IsNaN(want[i]) {
			return math.Inf(1)
		}
		diff = math.Max(diff, math.Abs(got[i]-want[i]))
		scale = math.Max(scale, math.Abs(want[i]))
	}
	if scale == 0 {
		return diff
	}
	return diff / scale
}

// hostPosterior is an nvib.Posterior with the given pseudo-counts (alpha
// [B*N]) and random means and log variances.
func hostPosterior(rng *rand.Rand, B, N, P int, alpha, mask []float32, padsReleased bool) *nvib.Posterior {
	p := &nvib.Posterior{B: B, N: N, P: P, Mu: randn(rng, 1, B, N, P), Logvar: randn(rng, 0.5, B, N, P),
		Alpha: nn.FromData(alpha, B, N), Mask: mask, PadsReleased: padsReleased}
	if p.Mask == nil {
		p.Mask = make([]float32, B*N)
		for i := range p.Mask {
			p.Mask[i] = 1
		}
	}
	return p
}

// drawCase is a posterior of TestNVIBDrawTwin: pseudo-counts of every
// regime of the Dirichlet path (the proportion floor 1e-23, shapes below
// and above 1, Cephes' asymptotic regimes a > 20 and a > 200, the total's
// cap 1e8) and a mask.
type drawCase struct {
	name   string
	alpha  []float32 // [2*6]
	mask   []float32 // nil: every component
	padsRe bool
}

var drawCases = []drawCase{
	{name: "principled", alpha: []float32{1, 0.14, 1.5, 0.8, 1.2, 0.3, 1, 1.5, 1.5, 0.14, 0.9, 1.1}, padsRe: true},
	{name: "reference pads", alpha: []float32{1, 0.7, 1.4, 0.05, 1e-3, 1, 1, 0.5, 0.2, 1.3, 0.6, 0.01},
		mask: []float32{1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0}},
	{name: "floor and large shapes", alpha: []float32{1, 1e-30, 25, 150, 500, 3, 1, 2e-25, 40, 700, 1e4, 0.02}, padsRe: true},
	{name: "total cap", alpha: []float32{1, 3e8, 1, 2e-20, 5e7, 0.5, 1, 1e9, 1e9, 1e-16, 10, 1}, padsRe: true},
}

// testNVIBDrawTwin: the device draw with the host's random numbers
// (NVIBDrawHost) gives nvib.Draw's sample from the same seed (eps exactly,
// Z, pi and ln pi), and its backward pass (dZ into mu and logvar, d ln pi
// through the normalisation, the implicit Gamma gradient and the guards
// into alpha) equals nvib.Sample.Backward's, with the proportion floor and
// the total's cap active and inactive and padding masked (reference) or
// released (principled). NVIBDrawInjected with the same draws made by the
// caller gives the same sample.
func testNVIBDrawTwin(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(21, 2))
	B, N, P := 2, 6, 3
	for i, tc := range drawCases {
		post := hostPosterior(rng, B, N, P, tc.alpha, tc.mask, tc.padsRe)
		dpost := e.UploadPosterior(post)
		s := nvib.Draw(post, rand.New(rand.NewPCG(uint64(i), 9)))
		ds := e.NVIBDrawHost(dpost, rand.New(rand.NewPCG(uint64(i), 9)))
		near(t, e, tc.name+" eps", ds.Eps, s.Eps, 0)
		near(t, e, tc.name+" z", ds.Z, s.Z, tolNVIBSample)
		pi, logPi := ds.Dir.Download(e)
		if r := relErr(pi, s.Dir.Pi); !(r <= tolNVIBSample) {
			t.Errorf("%s pi: relative error %.3g (device %v, nvib %v)", tc.name, r, pi, s.Dir.Pi)
		}
		if r := relErrF64(logPi, s.Dir.LogPi); !(r <= tolLogPi) {
			t.Errorf("%s ln pi: relative error %.3g (device %v, nvib %v)", tc.name, r, logPi, s.Dir.LogPi)
		}
		dZ, dLogPi := randn(rng, 1, B, N, P), randn(rng, 1, B, N)
		dl64 := make([]float64, B*N)
		for k, v := range dLogPi.Data {
			dl64[k] = float64(v)
		}
		dmu, dlv, dal := nn.New(B, N, P), nn.New(B, N, P), nn.New(B, N)
		s.Backward(post, dZ, dl64, dmu, dlv, dal)
		ddmu, ddlv, ddal := e.Zeros(B, N, P), e.Zeros(B, N, P), e.Zeros(B, N)
		ds.Backward(e, dpost, e.Upload(dZ), e.Upload(dLogPi), ddmu, ddlv, ddal)
		near(t, e, tc.name+" dmu", ddmu, dmu, tolNVIBSample)
		near(t, e, tc.name+" dlogvar", ddlv, dlv, tolNVIBSample)
		near(t, e, tc.name+" dalpha", ddal, dal, tolNVIBSample)
	}
	// NVIBDrawInjected with the draws nvib.SampleLogGamma makes at the
	// shapes NVIBDirichletShapes returns is NVIBDrawHost
	tc := drawCases[1]
	post := hostPosterior(rng, 2, 6, 3, tc.alpha, tc.mask, tc.padsRe)
	dpost := e.UploadPosterior(post)
	a := e.NVIBDrawHost(dpost, rand.New(rand.NewPCG(1, 1)))
	r := rand.New(rand.NewPCG(1, 1))
	eps := nn.New(2, 6, 3)
	for k := range eps.Data {
		eps.Data[k] = float32(r.NormFloat64())
	}
	shape := e.NVIBDirichletShapes(dpost)
	logG := make([]float64, len(shape))
	for k := range logG {
		logG[k] = math.Inf(-1)
		if tc.mask[k] != 0 {
			logG[k] = nvib.SampleLogGamma(r, shape[k])
		}
	}
	b := e.NVIBDrawInjected(dpost, e.Upload(eps), logG)
	pa, la := a.Dir.Download(e)
	pb, lb := b.Dir.Download(e)
	if relErr(pa, pb) != 0 || relErrF64(la, lb) != 0 {
		t.Errorf("pi %v / %v, ln pi %v / %v", pa, pb, la, lb)
	}
	near(t, e, "z", b.Z, e.Download(a.Z), 0)
}

// testNVIBGammaLogGrad: the device's implicit Gamma gradient d ln g/d a
// equals nvib.GammaLogGrad at the device's shapes for draws at fixed
// quantiles u (ln g = ln P^-1(a, u)) over shapes from 1e-23 to 1e5 (every
// branch: the series for g < 1, P below the mode, Q above it, Cephes'
// power series, continued fraction, Q series and asymptotic regimes).
func testNVIBGammaLogGrad(t *testing.T, e *dnn.Engine) {
	shapes := []float64{1e-23, 1e-5, 0.01, 0.3, 0.9, 1, 1.5, 4, 19, 25, 60, 150, 250, 1e3, 3e4}
	us := []float64{1e-6, 0.01, 0.2, 0.5, 0.8, 0.99, 1 - 1e-6}
	N := len(shapes) + 1
	B := len(us)
	alpha := make([]float32, B*N)
	for b := range us {
		alpha[b*N] = 1
		for i, a := range shapes {
			alpha[b*N+1+i] = float32(a)
		}
	}
	rng := rand.New(rand.NewPCG(3, 3))
	post := hostPosterior(rng, B, N, 1, alpha, nil, true)
	dpost := e.UploadPosterior(post)
	shape := e.NVIBDirichletShapes(dpost)
	logG := make([]float64, B*N)
	for k, a := range shape {
		logG[k] = quantileLogGamma(a, us[k/N])
	}
	ds := e.NVIBDrawInjected(dpost, e.Zeros(B, N, 1), logG)
	got := ds.Dir.DLogG(e)
	var worst float64
	for k, a := range shape {
		want := nvib.GammaLogGrad(a, logG[k])
		d := math.Abs(got[k]-want) / math.Max(math.Abs(want), 1e-300)
		worst = math.Max(worst, d)
		if !(d <= tolGammaLogGrad) {
			t.Errorf("a %v, u %v (ln g %v): device %v, nvib %v (relative %.3g)", a, us[k/N], logG[k], got[k], want, d)
		}
	}
	t.Logf("largest relative difference %.3g", worst)
}

// testNVIBDrawDevice: NVIBDrawDevice's draws from the device's Philox
// stream have nvib's distribution: eps standard normal (mean, variance), ln
// g of Gamma(a, 1) for shapes below, at and above 1 (the mean of g is a,
// the mean of ln g is digamma(a) with variance trigamma(a)), each within 5
// standard errors; the stream advances by the draws documented, and the
// same stream position gives the same draws.
func testNVIBDrawDevice(t *testing.T, e *dnn.Engine) {
	shapes := []float64{0.3, 1.5, 7}
	B, N := 2, 1500
	alpha := make([]float32, B*N)
	for k := range alpha {
		alpha[k] = float32(shapes[k%3])
	}
	rng := rand.New(rand.NewPCG(6, 1))
	post := hostPosterior(rng, B, N, 1, alpha, nil, true)
	dpost := e.UploadPosterior(post)
	g := &dnn.Philox{Key: 77, Pos: 5}
	again := *g
	s := e.NVIBDrawDevice(dpost, g)
	if want := uint64(5 + 2*B*N + 97*B*N); g.Pos != want {
		t.Errorf("Pos %d after the draw, want %d", g.Pos, want)
	}
	shape := e.NVIBDirichletShapes(dpost)
	logG := s.Dir.LogG(e)
	for c, a := range shapes {
		a = float64(float32(a)) // the stored pseudo-count
		var n, sg, sl, sl2 float64
		for k := c; k < B*N; k += 3 {
			if math.Abs(shape[k]-a) > 1e-9*a {
				t.Errorf("shape %v, want %v", shape[k], a)
				return
			}
			n++
			sg += math.Exp(logG[k])
			sl += logG[k]
			sl2 += logG[k] * logG[k]
		}
		mg, ml := sg/n, sl/n
		vl := sl2/n - ml*ml
		if d := math.Abs(mg - a); d > 5*math.Sqrt(a/n) {
			t.Errorf("a = %v: mean of g %v (%.1f standard errors)", a, mg, d/math.Sqrt(a/n))
		}
		psi, tri := mathext.Digamma(a), nvib.Trigamma(a)
		if d := math.Abs(ml - psi); d > 5*math.Sqrt(tri/n) {
			t.Errorf("a = %v: mean of ln g %v, want %v (%.1f standard errors)", a, ml, psi, d/math.Sqrt(tri/n))
		}
		if d := math.Abs(vl - tri); d > 0.15*tri {
			t.Errorf("a = %v: variance of ln g %v, want %v", a, vl, tri)
		}
	}
	eps := e.Download(s.Eps).Data
	var m, v float64
	for _, x := range eps {
		m += float64(x)
		v += float64(x) * float64(x)
	}
	n := float64(len(eps))
	m /= n
	v = v/n - m*m
	if math.Abs(m) > 5/math.Sqrt(n) || math.Abs(v-1) > 5*math.Sqrt(2/n) {
		t.Errorf("eps: mean %v, variance %v over %v draws", m, v, n)
	}
	s2 := e.NVIBDrawDevice(dpost, &again)
	if relErrF64(s2.Dir.LogG(e), logG) != 0 || relErr(e.Download(s2.Eps).Data, eps) != 0 {
		t.Errorf("the same stream position gave other draws")
	}
}

// quantileLogGamma returns ln g for the u-quantile g of Gamma(a, 1) (where
// the quantile underflows, small a and u, ln g = (ln u + ln Gamma(a+1))/a,
// from P(a, g) ~ g^a/Gamma(a+1) for small g).
func quantileLogGamma(a, u float64) float64 {
	if x := mathext.GammaIncRegInv(a, u); a >= 1e-3 && x > 0 {
		return math.Log(x)
	}
	lg, _ := math.Lgamma(a + 1)
	return (math.Log(u) + lg) / a
}

// klCase is a configuration of TestNVIBKLTwin.
type klCase struct {
	cfg  nvib.KLConfig
	mask bool
}

// tolNVIBKL (relErr, double) for L_G and L_D: double sums in another
// order, and lgamma, digamma of the device's rounding (CUDA's lgamma is
// within 4 ulp, Go's and glibc's within 1-2) on arguments up to alpha0 ~ N,
// whose differences L_D takes: ~1e-13 of L_D, 1e-10 leaves the margin.
// tolNVIBKLGrad (relErr, FP32) for the gradients, rounded to float32 once
// from double.
const (
	// Derivation: L_D differences lgamma(alpha0) - sum lgamma(alpha_k) on alpha0 ~ N: 4 ulps of double (CUDA) on values ~N ln N, cancelling to ~1e-13 of L_D; 1e-10 is 1000x that.
	tolNVIBKL = 1e-10
	// Derivation: doubles rounded once to float32: 1 ulp = 6e-8; 1e-6 = 16 ulps.
	tolNVIBKLGrad = 1e-6
)

// testNVIBKLTwin: the device's L_G, L_D (per example and means) and their
// gradients into mu, logvar and alpha equal nvib.KL and nvib.KLBackward's,
// with the default and another prior, delta 0 and 0.5, padding counted
// (every model) and masked (KLConfig.MaskPads).
func testNVIBKLTwin(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(31, 7))
	B, N, P := 3, 7, 5
	for _, tc := range []klCase{
		{cfg: nvib.KLConfig{Prior: nvib.DefaultPrior()}},
		{cfg: nvib.KLConfig{Prior: nvib.Prior{Mu: 0.5, Var: 2.5, LogAlpha: 1.2}, Delta: 0.5}, mask: true},
		{cfg: nvib.KLConfig{Prior: nvib.Prior{Mu: -1, Var: 0.3, LogAlpha: -3}, MaskPads: true}, mask: true},
	} {
		name := fmt.Sprintf("prior %+v delta %v mask-pads %v", tc.cfg.Prior, tc.cfg.Delta, tc.cfg.MaskPads)
		alpha := make([]float32, B*N)
		for k := range alpha {
			alpha[k] = float32(0.1 + 2*rng.Float64())
		}
		var mask []float32
		if tc.mask {
			mask = nvibPadMask(B, N)
		}
		post := hostPosterior(rng, B, N, P, alpha, mask, !tc.mask)
		dpost := e.UploadPosterior(post)
		want := nvib.KL(tc.cfg, post.Mu.Data, post.Logvar.Data, post.Alpha.Data, post.Mask, B, N, P)
		got := e.NVIBKL(tc.cfg, dpost).Download(e)
		for _, c := range []struct {
			what      string
			got, want []float64
		}{{"L_G", got.LG, want.LG}, {"L_D", got.LD, want.LD},
			{"means", []float64{got.MeanLG, got.MeanLD}, []float64{want.MeanLG, want.MeanLD}}} {
			if r := relErrF64(c.got, c.want); !(r <= tolNVIBKL) {
				t.Errorf("%s %s: relative error %.3g (device %v, nvib %v)", name, c.what, r, c.got, c.want)
			}
		}
		wG, wD := 0.7, 1.3
		dmu, dlv, dal := randn(rng, 1, B, N, P), randn(rng, 1, B, N, P), randn(rng, 1, B, N)
		ddmu, ddlv, ddal := e.Upload(dmu), e.Upload(dlv), e.Upload(dal)
		nvib.KLBackward(tc.cfg, post.Mu.Data, post.Logvar.Data, post.Alpha.Data, post.Mask, B, N, P, wG, wD, dmu.Data, dlv.Data, dal.Data)
		e.NVIBKLBackward(tc.cfg, dpost, wG, wD, ddmu, ddlv, ddal)
		near(t, e, name+" dmu", ddmu, dmu, tolNVIBKLGrad)
		near(t, e, name+" dlogvar", ddlv, dlv, tolNVIBKLGrad)
		near(t, e, name+" dalpha", ddal, dal, tolNVIBKLGrad)
	}
}

// nvibPadMask is a [B*N] component mask: the prior and the first N-1-b
// tokens of example b real.
func nvibPadMask(B, N int) []float32 {
	m := make([]float32, B*N)
	for b := 0; b < B; b++ {
		for i := 0; i < N-b; i++ {
			m[b*N+i] = 1
		}
	}
	return m
}
