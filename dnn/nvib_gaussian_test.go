package dnn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/internal/fma"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// tolGaussianRelease (relErr, FP32): the release without a projection is
// the clipped input, bit for bit (checked as such); with one, the
// projection is a GEMM (tolLinear's rounding) and the clip is smooth; the
// backward pass's dot products run in double in another order.
// Derivation: one GEMM (K u, 1.4e-6 at K = 24) and a 1-Lipschitz clip; backward dots in double (1e-15); FMA merges roundings.
const tolGaussianRelease = 1e-5

// gaussCase is a configuration of TestGaussianReleaseTwin.
type gaussCase struct {
	name string
	H, P int
	C    float64
	mask bool
}

// testGaussianReleaseTwin: the device Gaussian-mechanism release's
// posterior (mu, logvar, alpha, mask; N = L+1 with positions past S
// released as 0) and backward pass (dx, the projection's gradients) equal
// nvib.GaussianRelease's, without a projection (P = H: mu is the clipped
// input bit for bit, ±Inf and ±MaxFloat32 entries included) and with one
// (P != H), with padding; its draw (GaussianDrawHost) is nvib.DrawGaussian's
// from the same seed, with uniform weights; it refuses what nvib refuses.
func testGaussianReleaseTwin(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(17, 5))
	for _, tc := range []gaussCase{{"P=H", 6, 6, 0.19, true}, {"P<H projected", 8, 4, 1.5, true}, {"P=H no mask", 5, 5, 2, false}} {
		cfg := nvib.Config{Hidden: tc.H, LatentDim: tc.P, ReleaseLen: 6, Prior: nvib.Prior{Mu: 0, Var: 0.7}}
		cfg.Clip.CMu = tc.C
		g := nvib.NewGaussianRelease(cfg)
		if g.Proj != nil {
			g.Proj.W.InitNormal(rng, 1/math.Sqrt(float64(tc.H)))
			g.Proj.B.InitNormal(rng, 0.3)
		}
		dg := e.NewGaussianRelease(g)
		B, S := 3, 4
		x := randn(rng, tc.C/math.Sqrt(float64(tc.H)), B, S, tc.H)
		for k := range x.Data { // about half the rows outside the ball
			if (k/tc.H)%2 == 0 {
				x.Data[k] *= 3
			}
		}
		if g.Proj == nil {
			x.Data[1*tc.H] = float32(math.Inf(1))
			x.Data[1*tc.H+2] = float32(math.Inf(-1))
			x.Data[2*tc.H+1] = math.MaxFloat32
		}
		mask := tokenMask(B, S, tc.mask)
		post, c, err := g.Forward(x, mask)
		orPanic(err)
		dpost, dc, err := dg.Forward(e, e.Upload(x), mask)
		orPanic(err)
		if g.Proj == nil && !fma.Fuses {
			if ok, i := sameBits(e.Download(dpost.Mu).Data, post.Mu.Data); !ok {
				t.Errorf("%s: mu differs from nvib's at %d", tc.name, i)
			}
		}
		near(t, e, tc.name+" mu", dpost.Mu, post.Mu, tolGaussianRelease)
		near(t, e, tc.name+" logvar", dpost.Logvar, post.Logvar, 0)
		near(t, e, tc.name+" alpha", dpost.Alpha, post.Alpha, 0)
		near(t, e, tc.name+" mask", dpost.Mask, nn.FromData(post.Mask, post.B, post.N), 0)
		got := e.Download(dpost.Mu)
		for r := 0; r < post.B*post.N; r++ {
			if d := rowDist(got.Data[r*tc.P:(r+1)*tc.P], 0); d > privacy.StoredRadius(tc.C) {
				t.Errorf("%s: row %d at distance %v > stored radius %v", tc.name, r, d, privacy.StoredRadius(tc.C))
			}
		}
		dmu := randn(rng, 1, post.B, post.N, tc.P)
		dx := g.Backward(c, clone(dmu))
		ddx := dg.Backward(e, dc, e.Upload(dmu))
		near(t, e, tc.name+" dx", ddx, dx, tolGaussianRelease)
		for i, p := range g.Params() {
			nearParam(t, e, dg.Params()[i], p, tolGaussianRelease)
		}
		s := nvib.DrawGaussian(post, rand.New(rand.NewPCG(4, 2)))
		ds := e.GaussianDrawHost(dpost, rand.New(rand.NewPCG(4, 2)))
		near(t, e, tc.name+" z", ds.Z, s.Z, tolNVIBSample)
		pi, logPi := ds.Dir.Download(e)
		if relErr(pi, s.Dir.Pi) != 0 || relErrF64(logPi, s.Dir.LogPi) != 0 {
			t.Errorf("%s: uniform weights %v %v, want %v %v", tc.name, pi[:2], logPi[:2], s.Dir.Pi[:2], s.Dir.LogPi[:2])
		}
		e.FreeParams(dg.Params())
	}
	// what nvib refuses (a batch longer than L, a NaN row), with nvib's error
	g := &nvib.GaussianRelease{C: 1, Var: 1, L: 3}
	dg := e.NewGaussianRelease(g)
	long := randn(rng, 1, 1, 4, 2)
	nan := randn(rng, 1, 2, 3, 2)
	nan.Data[9] = float32(math.NaN())
	for _, x := range []*nn.Tensor{long, nan} {
		_, _, err := g.Forward(x, nil)
		_, _, derr := dg.Forward(e, e.Upload(x), nil)
		if err == nil || derr == nil || err.Error() != derr.Error() {
			t.Errorf("device error %v, nvib %v", derr, err)
		}
	}
}
