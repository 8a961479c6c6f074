package dnn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
	"github.com/nvdp-project/nvdp/nn"
)

// onDevice runs fn with an Engine on the test's device (the CPU stand-in,
// or the GPU with NVDP_CUDA_REAL=1), inside Do.
func onDevice(t *testing.T, fn func(e *dnn.Engine)) {
	t.Helper()
	withEngine(t, cudaemu.OpenDevice(t), func(_ *testing.T, e *dnn.Engine) { fn(e) })
}

// relErr is the relative error of got against want: max |got - want| over
// max |want| (the norm-wise error the tolerances of docs/engine.md state).
func relErr(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var diff, scale float64
	for i := range want {
		if math.IsNaN(float64(got[i])) != math.IsNaN(float64(want[i])) {
			return math.Inf(1)
		}
		diff = math.Max(diff, math.Abs(float64(got[i])-float64(want[i])))
		scale = math.Max(scale, math.Abs(float64(want[i])))
	}
	if scale == 0 {
		return diff
	}
	return diff / scale
}

// near fails t when the device tensor got differs from want by more than
// tol (relErr), naming what.
func near(t *testing.T, e *dnn.Engine, what string, got *dnn.Tensor, want *nn.Tensor, tol float64) {
	t.Helper()
	g := e.Download(got)
	if len(g.Data) != len(want.Data) {
		t.Errorf("%s: %v, want shape %v", what, got.Shape, want.Shape)
		return
	}
	if r := relErr(g.Data, want.Data); !(r <= tol) {
		t.Errorf("%s: relative error %.3g > %g", what, r, tol)
	}
}

// nearParam fails t when the device gradient of dp differs from p's.
func nearParam(t *testing.T, e *dnn.Engine, dp *dnn.Param, p *nn.Param, tol float64) {
	t.Helper()
	near(t, e, p.Name+" grad", dp.Grad, p.Grad, tol)
}

// randn returns a tensor of N(0, s^2) draws.
func randn(rng *rand.Rand, s float64, shape ...int) *nn.Tensor {
	x := nn.New(shape...)
	for i := range x.Data {
		x.Data[i] = float32(rng.NormFloat64() * s)
	}
	return x
}

// Tolerances of the twins (relErr, FP32): GEMM-based layers agree to
// rounding of the summation order; LayerNorm to its float32 statistics.
const (
	// Derivation: a float32 GEMM of inner dimension K <= 24 errs by at most K u sum|a b| (u = 2^-24: 1.4e-6 of the operands' norms); an FMA only merges two roundings into one; 1e-5 is 7x that, an O(1) wrong term fails.
	tolLinear = 1e-5
	// Derivation: float32 two-pass mean and variance over D <= 300 err by ~sqrt(D) u (1e-6; worst case D u = 1.8e-5, not reached on random rows), the normalisation adds 3 ulps; an FMA merges roundings (<= 1 ulp each).
	tolLayerNorm = 1e-5
)

// TestLinearTwin: forward and backward of the device Linear equal
// nn.Linear's on the same input and parameters, with and without bias.
func TestLinearTwin(t *testing.T) {
	onDevice(t, func(e *dnn.Engine) {
		rng := rand.New(rand.NewPCG(1, 1))
		for _, bias := range []bool{true, false} {
			l := nn.NewLinear("dense", 24, 10, bias)
			l.InitHF(rng, 0.5)
			if bias {
				l.B.InitNormal(rng, 0.3)
			}
			dl := e.NewLinear(l)
			x := randn(rng, 1, 2, 7, 24)
			y, cx := l.Forward(x)
			dy, dcx := dl.Forward(e, e.Upload(x))
			near(t, e, "linear y", dy, y, tolLinear)
			g := randn(rng, 1, 2, 7, 10)
			dx := l.Backward(cx, g)
			ddx := dl.Backward(e, dcx, e.Upload(g))
			near(t, e, "linear dx", ddx, dx, tolLinear)
			for i, p := range l.Params() {
				nearParam(t, e, dl.Params()[i], p, tolLinear)
			}
			e.FreeParams(dl.Params())
		}
	})
}

// TestLayerNormTwin: forward and backward of the device LayerNorm equal
// nn.LayerNorm's, over widths above and below the block size.
func TestLayerNormTwin(t *testing.T) {
	onDevice(t, func(e *dnn.Engine) {
		rng := rand.New(rand.NewPCG(2, 2))
		for _, D := range []int{5, 256, 300} {
			l := nn.NewLayerNorm("ln", D, 1e-12)
			l.Weight.InitNormal(rng, 1)
			l.Bias.InitNormal(rng, 1)
			dl := e.NewLayerNorm(l)
			x := randn(rng, 3, 3, 4, D)
			y, c := l.Forward(x)
			dy, dc := dl.Forward(e, e.Upload(x))
			near(t, e, "layernorm y", dy, y, tolLayerNorm)
			g := randn(rng, 1, 3, 4, D)
			dx := l.Backward(c, g)
			ddx := dl.Backward(e, dc, e.Upload(g))
			near(t, e, "layernorm dx", ddx, dx, tolLayerNorm)
			for i, p := range l.Params() {
				nearParam(t, e, dl.Params()[i], p, tolLayerNorm)
			}
			e.FreeParams(dl.Params())
		}
	})
}
