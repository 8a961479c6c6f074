package dnn_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
	"github.com/nvdp-project/nvdp/internal/fma"
	"github.com/nvdp-project/nvdp/nn"
)

// Tolerances of the optimizer twins. The gradient norm sums the same
// squares in double in another order (a tree): 1e-12 relative. The AdamW
// update rounds each float operation as nn's Go code does (adamw_step: no
// fused multiply-add, correctly rounded sqrt and division), and the
// clipping scale is the same float32 of the host's division, so the
// parameters and moments are equal bit for bit (tolAdamW 0) where Go does
// not fuse nn's multiply-adds (fma.Fuses false) and the kernels' C does
// not either (the stand-in on amd64, or a GPU). Elsewhere an ulp per
// operation: tolAdamWFused. (A test of the update with a tolerance of 1e-6
// would miss a wrong order: the weight decay's term is lr*wd ~ 1e-4 of an
// update of size lr.)
const (
	// Derivation: a double sum of n <= 1e4 float32 squares (exact in double) in another order: n 1.1e-16 = 1e-12 at most; an FMA in double merges a rounding.
	tolGradNorm = 1e-12
	// Derivation: adamw_step's 9 operations each 1 ulp apart where a side fuses (exact_* keeps the kernel unfused; only Go may fuse): 9 ulps = 5e-7 < 1e-6.
	tolAdamWFused = 1e-6
)

func tolAdamW() float64 {
	if exactFloat() {
		return 0
	}
	return tolAdamWFused
}

// exactFloat reports whether a kernel written with exact_* (each float
// operation rounded on its own) gives the bits of nn's Go code: Go does
// not fuse multiply-adds in this build (fma.Fuses false) and the kernels
// run on a GPU (the intrinsics are never contracted) or on the stand-in on
// amd64 (the C compiler has no FMA to contract into at its default
// target).
func exactFloat() bool {
	return !fma.Fuses && (!cudaemu.Emulated() || runtime.GOARCH == "amd64")
}

// optParams is a set of parameters for the optimizer tests: a decayed
// matrix, a NoDecay bias, a decayed vector wider than a block, and an empty
// one.
func optParams(rng *rand.Rand) []*nn.Param {
	ps := []*nn.Param{nn.NewParam("w", 4, 70), nn.NewParam("b", 70), nn.NewParam("v", 300), nn.NewParam("empty", 0)}
	ps[1].NoDecay = true
	for _, p := range ps {
		p.InitNormal(rng, 0.5)
	}
	return ps
}

// setGrads draws N(0, s^2) gradients into the host params and uploads them
// to the device twins.
func setGrads(e *dnn.Engine, rng *rand.Rand, s float64, ps []*nn.Param, dps []*dnn.Param) {
	for i, p := range ps {
		for j := range p.Grad.Data {
			p.Grad.Data[j] = float32(rng.NormFloat64() * s)
		}
		if err := cuda.Upload(e.Dev, dps[i].Grad.Buf, p.Grad.Data); err != nil {
			panic(err)
		}
	}
}

// testGradNormTwin: the device's global gradient norm equals nn.GradNorm's,
// for gradients spanning one block, several, and more than normBlocks
// blocks' worth of threads (the grid-strided first stage, with normBlocks
// lowered to 3), and no gradients at all.
func testGradNormTwin(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(7, 7))
	defer dnn.SetNormBlocks(3)() // at most 3 blocks a gradient: "c" strides over the grid
	ps := []*nn.Param{nn.NewParam("a", 3), nn.NewParam("b", 1000), nn.NewParam("c", 3*256*2+77)}
	var dps []*dnn.Param
	for _, p := range ps {
		dps = append(dps, e.Param(p))
	}
	defer e.FreeParams(dps)
	setGrads(e, rng, 1, ps, dps)
	for n := range len(ps) + 1 {
		got, want := e.GradNorm(dps[:n]), nn.GradNorm(ps[:n])
		if r := relErr64(got, want); !(r <= tolGradNorm) {
			t.Errorf("%d params: norm %v, nn %v (relative %.3g)", n, got, want, r)
		}
	}
}

// testAdamWTwin: several AdamW steps of the device (clipping, then the
// update) equal nn.ClipGradNorm + nn.AdamW.Update's on the same parameters
// and gradients: weight decay and a NoDecay parameter, the bias corrections
// of steps 1 to 6, a learning rate changing per step, clipping inactive (a
// bound above the norm, and no bound) and active. Then the device state is
// pulled into an nn.AdamW and compared with the host's moments, and a
// second device optimizer pushed from the host state continues in step
// with it (a resume).
func testAdamWTwin(t *testing.T, e *dnn.Engine) {
	tol := tolAdamW()
	rng := rand.New(rand.NewPCG(8, 8))
	ps := optParams(rng)
	var dps []*dnn.Param
	for _, p := range ps {
		dps = append(dps, e.Param(p))
	}
	defer e.FreeParams(dps)
	host := nn.NewAdamW(1e-3, nn.AdamBeta1, nn.AdamBeta2, nn.AdamEps, 0.1)
	dev := dnn.NewAdamW(1e-3, nn.AdamBeta1, nn.AdamBeta2, nn.AdamEps, 0.1)
	defer dev.Free(e)
	check := func(what string) {
		t.Helper()
		for i, p := range ps {
			near(t, e, what+": "+p.Name, dps[i].Value, p.Value, tol)
		}
	}
	steps := []struct {
		lr, clip, gradScale float64
		clipped             bool
	}{
		{1e-3, 1e3, 1, false}, // a bound above the norm
		{2e-3, 0, 5, false},   // no bound
		{5e-3, 1, 1, true},    // clipped
		{1e-2, 0.5, 0.01, false},
		{3e-3, 2, 10, true},
		{1e-3, 1, 3, true},
	}
	for k, st := range steps {
		e.Reset()
		setGrads(e, rng, st.gradScale, ps, dps)
		want := nn.ClipGradNorm(ps, st.clip)
		got := e.ClipGradNorm(dps, st.clip)
		if r := relErr64(got, want); !(r <= tolGradNorm) {
			t.Errorf("step %d: norm %v, nn %v", k+1, got, want)
		}
		if (st.clip > 0 && want > st.clip) != st.clipped {
			t.Errorf("step %d: norm %v with bound %v: the case wants clipped %v", k+1, want, st.clip, st.clipped)
			return
		}
		for i, p := range ps {
			near(t, e, "clipped grad "+p.Name, dps[i].Grad, p.Grad, tol)
		}
		host.Update(ps, st.lr)
		dev.Update(e, dps, st.lr)
		check(fmt.Sprint("step ", k+1))
	}
	if dev.Step != host.Step {
		t.Errorf("device step %d, host %d", dev.Step, host.Step)
	}
	pulled := nn.NewAdamW(0, 0, 0, 0, 0)
	dev.Pull(e, pulled, dps)
	if pulled.Step != host.Step {
		t.Errorf("pulled step %d, host %d", pulled.Step, host.Step)
	}
	for _, p := range ps {
		for _, mv := range []struct {
			name      string
			got, want []float32
		}{{"m", pulled.M[p.Name], host.M[p.Name]}, {"v", pulled.V[p.Name], host.V[p.Name]}} {
			if r := relErr(mv.got, mv.want); !(r <= tol) {
				t.Errorf("pulled %s of %s: relative error %.3g", mv.name, p.Name, r)
			}
		}
	}

	// A resume: a fresh device optimizer pushed from the host's state
	// (hyperparameters, step, moments) continues as the host does.
	res := dnn.NewAdamW(0, 0, 0, 0, 0)
	defer res.Free(e)
	res.Push(e, host, dps)
	if res.Step != host.Step || res.WeightDecay != host.WeightDecay || res.Beta2 != host.Beta2 || res.Eps != host.Eps {
		t.Errorf("pushed %+v, host %+v", *res, *host)
	}
	for k := range 2 {
		setGrads(e, rng, 1, ps, dps)
		host.Update(ps, 1e-3)
		res.Update(e, dps, 1e-3)
		check(fmt.Sprint("resumed step ", k+1))
	}
}

// testAdamWMomentsLifecycle: moments exist on the device only after a
// parameter's first update (as nn's, created lazily); Pull mirrors that
// (no entry in the host maps), and Push of a host optimizer without a
// parameter's moments drops the device's (its next update starts from
// zero, as nn's first).
func testAdamWMomentsLifecycle(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(9, 9))
	ps := optParams(rng)[:2]
	dps := []*dnn.Param{e.Param(ps[0]), e.Param(ps[1])}
	defer e.FreeParams(dps)
	o := dnn.NewAdamW(1e-3, nn.AdamBeta1, nn.AdamBeta2, nn.AdamEps, 0)
	defer o.Free(e)
	o.Update(e, dps[:1], 1e-3)
	h := nn.NewAdamW(0, 0, 0, 0, 0)
	h.M["b"], h.V["b"] = []float32{9}, []float32{9} // stale: must go
	o.Pull(e, h, dps)
	if h.Step != 1 || h.M["w"] == nil || h.M["b"] != nil || h.V["b"] != nil {
		t.Errorf("pulled step %d, moments of %v", h.Step, slices.Sorted(maps.Keys(h.M)))
		return
	}
	if o.M["b"] != nil {
		t.Errorf("moments of a parameter never updated")
	}
	o.Push(e, nn.NewAdamW(1e-3, nn.AdamBeta1, nn.AdamBeta2, nn.AdamEps, 0), dps)
	if o.Step != 0 || len(o.M) != 0 || len(o.V) != 0 {
		t.Errorf("after a push of a fresh optimizer: step %d, %d moments", o.Step, len(o.M))
	}
}
