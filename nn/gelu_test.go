package nn_test

import (
	"math"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
)

// GELUWithGrad, GELU, GELUGradMul and GELUBackward agree with each other
// and with float64 erf to 2e-7 (relative to max(1, |x|)) over [-12, 12].
func TestGELUWithGrad(t *testing.T) {
	x := nn.New(240001)
	for i := range x.Data {
		x.Data[i] = float32(i-120000) / 10000 // [-12, 12], off the table nodes too
	}
	y, d := nn.GELUWithGrad(x)
	ones := nn.New(x.Shape...)
	for i := range ones.Data {
		ones.Data[i] = 1
	}
	ny, nd := nn.GELU(x), nn.GELUBackward(x, ones)
	dx := nn.GELUGradMul(ones, d)
	for i, v := range x.Data {
		xf := float64(v)
		cdf := 0.5 * (1 + math.Erf(xf/math.Sqrt2))
		wy := xf * cdf
		wd := cdf + xf*math.Exp(-xf*xf/2)/math.Sqrt(2*math.Pi)
		if math.Abs(float64(y.Data[i])-wy) > 2e-7*math.Max(1, math.Abs(xf)) || math.Abs(float64(d.Data[i])-wd) > 2e-7*math.Max(1, math.Abs(xf)) {
			t.Fatalf("x=%v: gelu %v (want %v), grad %v (want %v)", v, y.Data[i], wy, d.Data[i], wd)
		}
		if g := nn.GELU(nn.FromData([]float32{v}, 1)).Data[0]; g != y.Data[i] {
			t.Fatalf("gelu(%v) = %v, geluWithGrad %v", v, g, y.Data[i])
		}
		if y.Data[i] != ny.Data[i] || dx.Data[i] != nd.Data[i] {
			t.Fatalf("x=%v: GELUWithGrad %v %v, GELU / GELUBackward %v %v", v, y.Data[i], dx.Data[i], ny.Data[i], nd.Data[i])
		}
	}
}
