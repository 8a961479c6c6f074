package dnn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/nn"
)

// Tolerances of the element-wise activations (relErr). GELU: the device
// computes Phi with float32 erfcf (CUDA: 4 ulp at most, glibc about 1),
// nn interpolates a table to 1e-8 absolute; both round to float32, so they
// agree to a few float32 ulps (6e-8 each) of the largest value; 1e-6
// leaves room for the GPU's erfcf and fused multiply-adds and still fails
// a wrong term (a missing x phi(x) changes dy/dx by up to 0.24). Tanh: both
// compute in float64 and round, the backward in float32 (an FMA on the GPU
// may round 1 - y^2 once instead of twice).
const (
	// Derivation: erfcf within 4 ulps (CUDA) and nn's table within 1e-8 absolute, plus ~3 roundings: ~8 ulps = 5e-7 of the largest value; an FMA merges two of them.
	tolGELU = 1e-6
	// Derivation: tanh in float64 rounded once (<= 1 ulp), 1 - y^2 and the product in float32 (2 ulps, 1 with an FMA): 3 ulps = 2e-7 < 1e-6.
	tolTanh = 1e-6
)

// testGELUTwin: GELU, GELUWithGrad, GELUGradMul, GELUBackward, Tanh and
// TanhBackward of the device equal nn's, on lengths below and above the
// block size: special values (the edges of nn's table at |x| = 10, far
// tails, signed zeros), then N(0, 9) draws; NaN stays NaN.
func testGELUTwin(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(5, 5))
	special := []float32{0, float32(math.Copysign(0, -1)), 10, -10, 9.999, -9.999, -10.5, 40, -40, 1e-30, -3.7}
	for _, n := range []int{len(special), 256, 700} {
		x := randn(rng, 3, n)
		if n == len(special) {
			copy(x.Data, special)
		}
		dx := e.Upload(x)
		g := randn(rng, 1, n)
		dg := e.Upload(g)

		near(t, e, "GELU", e.GELU(dx), nn.GELU(x), tolGELU)
		y, d := nn.GELUWithGrad(x)
		dy, dd := e.GELUWithGrad(dx)
		near(t, e, "GELUWithGrad y", dy, y, tolGELU)
		near(t, e, "GELUWithGrad dydx", dd, d, tolGELU)
		near(t, e, "GELUGradMul", e.GELUGradMul(dg, dd), nn.GELUGradMul(g, d), tolGELU)
		near(t, e, "GELUBackward", e.GELUBackward(dx, dg), nn.GELUBackward(x, g), tolGELU)

		ty := nn.Tanh(x)
		dty := e.Tanh(dx)
		near(t, e, "Tanh", dty, ty, tolTanh)
		near(t, e, "TanhBackward", e.TanhBackward(dty, dg), nn.TanhBackward(ty, g), tolTanh)
	}
	nan := e.Upload(nn.FromData([]float32{float32(math.NaN())}, 1))
	for name, v := range map[string]*dnn.Tensor{"GELU": e.GELU(nan), "GELUBackward": e.GELUBackward(nan, nan), "Tanh": e.Tanh(nan)} {
		if got := e.Download(v).Data[0]; !math.IsNaN(float64(got)) {
			t.Errorf("%s(NaN) = %v", name, got)
		}
	}
}
