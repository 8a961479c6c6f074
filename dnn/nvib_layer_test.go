package dnn_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
	"github.com/nvdp-project/nvdp/internal/fma"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// tolNVIBLayer is the NVIB layer's tolerance (relErr, FP32): its
// projections are GEMMs (the Linear twin's rounding of the summation
// order), the quadratic term and the clipping's norms are summed in double
// in another order, and the clipping is smooth where it is active, so the
// posterior and every gradient agree to the GEMMs' rounding. (A clamp whose
// input lies within that rounding of its bound could flip; the inputs are
// random, and the boundary rows are tested bit for bit on exact inputs in
// TestNVIBClipBitExact.)
// Derivation: the projections' GEMMs (tolLinear's K u, K <= 24: 1.4e-6) and double norms in another order (1e-15); the clip is 1-Lipschitz where active; FMA contraction merges roundings.
const tolNVIBLayer = 1e-5

// TestNVIBTwins runs the tests of the NVIB layer, its sampling and KL
// terms, the Gaussian-mechanism release, the NVDP block and the model on
// one device (one compilation of the kernels); run one with -run
// 'TestNVIBTwins/Layer'.
func TestNVIBTwins(t *testing.T) {
	d := cudaemu.OpenDevice(t)
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *dnn.Engine)
	}{
		{"Layer", testNVIBLayerTwin},
		{"ClipBitExact", testNVIBClipBitExact},
		{"GaussianRelease", testGaussianReleaseTwin},
		{"Draw", testNVIBDrawTwin},
		{"GammaLogGrad", testNVIBGammaLogGrad},
		{"DeviceDraw", testNVIBDrawDevice},
		{"KL", testNVIBKLTwin},
		{"Block", testNVDPBlockTwin},
		{"Model", testNVDPModelTwin},
	} {
		t.Run(c.name, func(t *testing.T) { withEngine(t, d, c.fn) })
	}
}

// nvibLayerCase is one configuration of the NVIB layer tests.
type nvibLayerCase struct {
	name     string
	mode     privacy.Mode
	clip     bool
	prior    nvib.Prior
	H, P     int
	cMu      float64
	pads     bool
	clipPrio bool
}

var nvibLayerCases = []nvibLayerCase{
	{name: "principled clipped", mode: privacy.ModePrincipled, clip: true, prior: nvib.DefaultPrior(), H: 12, P: 12, cMu: 1.5, pads: true},
	{name: "principled centre, P<H", mode: privacy.ModePrincipled, clip: true, prior: nvib.Prior{Mu: 0.5, Var: 2.5, LogAlpha: 1.2}, H: 12, P: 8, cMu: 0.19, pads: true, clipPrio: true},
	{name: "reference clipped", mode: privacy.ModeReference, clip: true, prior: nvib.DefaultPrior(), H: 10, P: 10, cMu: 1.2, pads: true},
	{name: "nvdp unclipped", mode: privacy.ModePrincipled, clip: false, prior: nvib.DefaultPrior(), H: 10, P: 10, cMu: 1, pads: false},
}

// newTestNVIBLayer builds the case's nvib.Layer with random parameters
// scaled so that every clamp is active on some components and inactive on
// others: mu norms around C_mu, logvar around its floor and cap, ln alpha
// around ln C_amin and ln C_amax.
func newTestNVIBLayer(tc nvibLayerCase, rng *rand.Rand) *nvib.Layer {
	cfg := nvib.DefaultClip(tc.mode, tc.cMu, 1.5)
	cfg.Enabled = tc.clip
	cfg.ClipPrior = tc.clipPrio
	l, err := nvib.NewLayer("nvib", nvib.LayerConfig{Hidden: tc.H, Latent: tc.P, Heads: 2, Mode: tc.mode, Prior: tc.prior, Clip: cfg,
		Init: nvib.InitHF, MuTau: 1, StdevTau: 0.1, AlphaTau: -10}, rng)
	orPanic(err)
	l.Mu.W.InitNormal(rng, tc.cMu/math.Sqrt(float64(tc.H*tc.P)))
	l.Mu.B.InitNormal(rng, 0.3*tc.cMu/math.Sqrt(float64(tc.P)))
	for j := range l.Mu.B.Value.Data { // mu about the ball's centre
		l.Mu.B.Value.Data[j] += float32(tc.prior.Mu)
	}
	floor, cap := cfg.LogvarBounds(tc.prior.Var)
	if math.IsInf(cap, 1) {
		cap = floor + 2
	}
	l.Logvar.W.InitNormal(rng, 0.5/math.Sqrt(float64(tc.H)))
	for j := range l.Logvar.B.Value.Data {
		l.Logvar.B.Value.Data[j] = float32(floor - 0.3 + rng.Float64()*(cap-floor+0.6))
	}
	l.AlphaLin.W.InitNormal(rng, 1.2/math.Sqrt(float64(tc.H)))
	l.AlphaLin.B.Fill(float32(math.Log(0.5)))
	l.AlphaQuad.InitNormal(rng, 0.05)
	return l
}

// tokenMask returns a [B*S] mask with the last k_b tokens of example b
// padding (k_b = b mod S), or nil without pads.
func tokenMask(B, S int, pads bool) []float32 {
	if !pads {
		return nil
	}
	m := make([]float32, B*S)
	for b := 0; b < B; b++ {
		for i := 0; i < S; i++ {
			if i < S-b%S {
				m[b*S+i] = 1
			}
		}
	}
	return m
}

// orPanic panics with a non-nil err. Inside onDevice's function t.Fatal
// would end the device goroutine instead of the test; a panic comes back
// from Do as an error, which onDevice reports.
func orPanic(err error) {
	if err != nil {
		panic(err)
	}
}

// clone returns a copy of x.
func clone(x *nn.Tensor) *nn.Tensor {
	return nn.FromData(append([]float32(nil), x.Data...), x.Shape...)
}

// testNVIBLayerTwin: the device NVIB layer's posterior (mu, logvar, alpha,
// mask) and its backward pass (dx and every parameter's gradient) equal
// nvib.Layer's on the same input and parameters, in principled (with and
// without a centre, P < H, prior clipped) and reference mode and without
// clipping, with padding, with clamps active and inactive; an invalid
// posterior is refused with nvib's error.
func testNVIBLayerTwin(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(11, 3))
	for _, tc := range nvibLayerCases {
		l := newTestNVIBLayer(tc, rng)
		dl := e.NewNVIBLayer(l)
		B, S := 3, 5
		x := randn(rng, 1, B, S, tc.H)
		mask := tokenMask(B, S, tc.pads)
		post, c, err := l.Forward(x, mask)
		orPanic(err)
		dpost, dc, err := dl.Forward(e, e.Upload(x), mask)
		orPanic(err)
		near(t, e, tc.name+" mu", dpost.Mu, post.Mu, tolNVIBLayer)
		near(t, e, tc.name+" logvar", dpost.Logvar, post.Logvar, tolNVIBLayer)
		near(t, e, tc.name+" alpha", dpost.Alpha, post.Alpha, tolNVIBLayer)
		near(t, e, tc.name+" mask", dpost.Mask, nn.FromData(post.Mask, post.B, post.N), 0)
		if dpost.PadsReleased != post.PadsReleased {
			t.Errorf("%s: PadsReleased %v, want %v", tc.name, dpost.PadsReleased, post.PadsReleased)
		}
		checkClampsMixed(t, tc, l, post)
		dmu, dlv, dal := randn(rng, 1, B, S+1, tc.P), randn(rng, 1, B, S+1, tc.P), randn(rng, 1, B, S+1)
		ddx := dl.Backward(e, dc, e.Upload(dmu), e.Upload(dlv), e.Upload(dal))
		dx := l.Backward(c, clone(dmu), clone(dlv), clone(dal))
		near(t, e, tc.name+" dx", ddx, dx, tolNVIBLayer)
		for i, p := range l.Params() {
			nearParam(t, e, dl.Params()[i], p, tolNVIBLayer)
		}
		e.FreeParams(dl.Params())
	}
	// a posterior value nvib refuses (alpha = exp(200) overflows float32
	// without clipping) is refused with nvib's error
	tc := nvibLayerCases[3]
	l := newTestNVIBLayer(tc, rng)
	l.AlphaLin.B.Fill(200)
	dl := e.NewNVIBLayer(l)
	x := randn(rng, 1, 2, 3, tc.H)
	_, _, err := l.Forward(x, nil)
	_, _, derr := dl.Forward(e, e.Upload(x), nil)
	if err == nil || derr == nil || err.Error() != derr.Error() || !strings.Contains(derr.Error(), "tensor alpha") {
		t.Errorf("device error %v, nvib %v", derr, err)
	}
	e.FreeParams(dl.Params())
}

// checkClampsMixed fails t unless the clipped case has, among the token
// components, projected and unprojected means, logvars at the floor, at the
// cap (when capped) and inside, and alphas at both bounds and inside: the
// twin test then covers the gradient's active and inactive branches.
func checkClampsMixed(t *testing.T, tc nvibLayerCase, l *nvib.Layer, post *nvib.Posterior) {
	t.Helper()
	if !tc.clip {
		return
	}
	cfg := l.Cfg.Clip
	floor, cap := cfg.LogvarBounds(tc.prior.Var)
	R := privacy.StoredRadius(cfg.CMu)
	var onBall, inBall, atFloor, atCap, lvIn, aMin, aMax, aIn int
	for r := 0; r < post.B*post.N; r++ {
		if r%post.N == 0 {
			continue
		}
		var d2 float64
		for j := 0; j < post.P; j++ {
			d := float64(post.Mu.Data[r*post.P+j]) - float64(float32(l.Cfg.Prior.Mu))
			if cfg.ReferenceCenter || l.Cfg.Prior.Mu == 0 {
				d = float64(post.Mu.Data[r*post.P+j])
			}
			d2 += d * d
			switch v := post.Logvar.Data[r*post.P+j]; {
			case v == float32(floor):
				atFloor++
			case !math.IsInf(cap, 1) && v == float32(cap):
				atCap++
			default:
				lvIn++
			}
		}
		if math.Sqrt(d2) > R*(1-1e-5) {
			onBall++
		} else {
			inBall++
		}
		switch a := float64(post.Alpha.Data[r]); {
		case a == float64(float32(cfg.CAlphaMin)):
			aMin++
		case a == float64(float32(cfg.CAlphaMax)):
			aMax++
		default:
			aIn++
		}
	}
	capped := atCap > 0 || math.IsInf(cap, 1)
	if onBall == 0 || inBall == 0 || atFloor == 0 || !capped || lvIn == 0 || aMax == 0 || aIn == 0 || (aMin == 0 && cfg.CAlphaMin > 0) {
		t.Errorf("%s: clamps not mixed: mu on/in ball %d/%d, logvar floor/cap/in %d/%d/%d, alpha min/max/in %d/%d/%d",
			tc.name, onBall, inBall, atFloor, atCap, lvIn, aMin, aMax, aIn)
	}
}

// boundaryRows returns rows of width P (P >= 3) around the ball of radius
// cMu about the centre c, each given to the clip as is: exactly on the
// sphere, one float32 step inside and outside, rows whose distance lies in
// (StoredRadius(cMu), cMu] (when cMu is no float32), far outside, huge
// (±MaxFloat32 entries), zero, and far from a large centre (where the
// shrink loop must iterate).
func boundaryRows(rng *rand.Rand, P int, c float32, cMu float64) [][]float32 {
	row := func(v ...float32) []float32 {
		r := make([]float32, P)
		for j := range r {
			r[j] = c
		}
		for j, x := range v {
			r[j] = c + x
		}
		return r
	}
	var rows [][]float32
	// a Pythagorean triple scaled to the radius: (3k, 4k) at distance 5k
	k := float32(cMu / 5)
	rows = append(rows, row(3*k, 4*k), row(3*k, math.Nextafter32(4*k, 0)), row(3*k, math.Nextafter32(4*k, 10)),
		row(0, 0, float32(cMu)), row(0, 0, math.Nextafter32(float32(cMu), 0)), row(0, 0, math.Nextafter32(float32(cMu), 10)))
	// distances in (R, cMu], on the sphere at random angles
	R := privacy.StoredRadius(cMu)
	for found, it := 0, 0; found < 2 && it < 1_000_000 && R < cMu; it++ {
		th := rng.Float64() * math.Pi / 2
		a, b := float32(cMu*math.Cos(th)), float32(cMu*math.Sin(th))
		if n := math.Hypot(float64(a), float64(b)); n > R && n <= cMu && c == 0 {
			rows = append(rows, row(a, b))
			found++
		}
	}
	for i := 0; i < 6; i++ { // random directions just outside, far outside
		r := make([]float32, P)
		var n float64
		for j := range r {
			v := rng.NormFloat64()
			r[j] = float32(v)
			n += v * v
		}
		s := []float64{1 + 1e-7, 1 + 3e-7, 1.5, 10, 1e6, 1 - 1e-7}[i] * cMu / math.Sqrt(n)
		for j := range r {
			r[j] = c + float32(float64(r[j])*s)
		}
		rows = append(rows, r)
	}
	big := make([]float32, P)
	for j := range big {
		big[j] = math.MaxFloat32
		if j%2 == 1 {
			big[j] = -math.MaxFloat32
		}
	}
	rows = append(rows, big, row(1e30, -1e30), make([]float32, P), row())
	return rows
}

// rowDist is ||row - c||_2 as privacy computes the distance of a stored
// posterior: float64 of the float32 entries, summed in float64.
func rowDist(row []float32, c float32) float64 {
	var d2 float64
	for _, v := range row {
		d := float64(v) - float64(c)
		d2 += d * d
	}
	return math.Sqrt(d2)
}

// sameBits reports whether a and b hold the same float32 bit patterns; else
// the first index that differs.
func sameBits(a, b []float32) (bool, int) {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false, i
		}
	}
	return len(a) == len(b), len(a)
}

// clipBitCase is a configuration of TestNVIBClipBitExact: a radius, a
// prior mean (the centre in principled mode) and the width.
type clipBitCase struct {
	cMu   float64
	prior float64
	P     int
}

// testNVIBClipBitExact: what the certificate assumes of the mean clipping
// (nvib.ClipMu onto privacy.StoredRadius) holds on the device bit for bit.
// The NVIB layer, with W_mu the identity and b_mu 0 (so that the pre-clip
// mu is the input exactly, in any summation order), clips rows exactly on
// the sphere, a float32 step inside and outside, at distances in
// (StoredRadius, C_mu], far outside, huge (±MaxFloat32), zero, and about a
// centre of 100 where float32 rounding pushes the first projection outside
// the stored radius so that the shrink loop runs: the device's clipped mu
// equals nvib's bit for bit, and every projected row's stored distance (as
// privacy computes it) is within the stored radius. Where Go fuses
// multiply-adds (internal/fma), nvib.ClipMu's own sums round differently
// and only the distances are checked.
func testNVIBClipBitExact(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(5, 8))
	var loops, window int
	for _, tc := range []clipBitCase{{1.25, 0, 6}, {0.19, 0, 5}, {0.19, 100, 7}, {0.0693056955933, -3, 300}} {
		cfg := nvib.DefaultClip(privacy.ModePrincipled, tc.cMu, 1.5)
		prior := nvib.Prior{Mu: tc.prior, Var: 1, LogAlpha: 0}
		l, err := nvib.NewLayer("nvib", nvib.LayerConfig{Hidden: tc.P, Heads: 1, Mode: privacy.ModePrincipled, Prior: prior, Clip: cfg,
			Init: nvib.InitClip, MuTau: 1}, rng)
		orPanic(err)
		c := float32(tc.prior)
		rows := boundaryRows(rng, tc.P, c, tc.cMu)
		x := nn.New(1, len(rows), tc.P)
		for i, r := range rows {
			copy(x.Data[i*tc.P:], r)
		}
		post, _, err := l.Forward(x, nil)
		orPanic(err)
		dl := e.NewNVIBLayer(l)
		dpost, _, err := dl.Forward(e, e.Upload(x), nil)
		orPanic(err)
		got := e.Download(dpost.Mu)
		R := privacy.StoredRadius(tc.cMu)
		for i, r := range rows {
			k := (1 + i) * tc.P
			g, w := got.Data[k:k+tc.P], post.Mu.Data[k:k+tc.P]
			if ok, j := sameBits(g, w); !ok && !fma.Fuses {
				t.Errorf("C_mu %v centre %v row %d: device mu[%d] = %v (%08x), nvib %v (%08x)", tc.cMu, c, i, j, g[j], math.Float32bits(g[j]), w[j], math.Float32bits(w[j]))
			}
			n := rowDist(r, c)
			if n > R && n <= tc.cMu {
				window++ // distances in (R, C_mu]: projected onto R too (nvib.ClipMu compares with R)
			}
			if d := rowDist(g, c); d > R {
				t.Errorf("C_mu %v centre %v row %d: stored distance %.17g > stored radius %.17g", tc.cMu, c, i, d, R)
			}
			if n > R && firstProjectionOutside(r, c, n, R) {
				loops++
			}
		}
		e.FreeParams(dl.Params())
	}
	if loops == 0 || window == 0 {
		t.Errorf("the rows exercised the shrink loop %d times and the window (R, C_mu] %d times: want both", loops, window)
	}
}

// firstProjectionOutside reports whether nvib.ClipMu's first projection of
// row (distance n from c) onto radius R, rounded to float32, lies outside R,
// so that its shrink loop iterates.
func firstProjectionOutside(row []float32, c float32, n, R float64) bool {
	y := make([]float32, len(row))
	for j, v := range row {
		y[j] = float32(float64(c) + (float64(v)-float64(c))*(R/n))
	}
	return rowDist(y, c) > R
}
