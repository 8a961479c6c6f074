package encoder

import (
	"math"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
)

// geluWithGrad agrees with nn.GELU / nn.GELUBackward and with float64 erf.
func TestGeluWithGrad(t *testing.T) {
	x := nn.New(240001)
	for i := range x.Data {
		x.Data[i] = float32(i-120000) / 10000 // [-12, 12], off the table nodes too
	}
	y, d := geluWithGrad(x)
	ones := nn.New(x.Shape...)
	for i := range ones.Data {
		ones.Data[i] = 1
	}
	ny, nd := nn.GELU(x), nn.GELUBackward(x, ones)
	dx := geluGradMul(ones, d)
	for i, v := range x.Data {
		xf := float64(v)
		cdf := 0.5 * (1 + math.Erf(xf/math.Sqrt2))
		wy := xf * cdf
		wd := cdf + xf*math.Exp(-xf*xf/2)/math.Sqrt(2*math.Pi)
		if math.Abs(float64(y.Data[i])-wy) > 2e-7*math.Max(1, math.Abs(xf)) || math.Abs(float64(d.Data[i])-wd) > 2e-7*math.Max(1, math.Abs(xf)) {
			t.Fatalf("x=%v: gelu %v (want %v), grad %v (want %v)", v, y.Data[i], wy, d.Data[i], wd)
		}
		if g := gelu(nn.FromData([]float32{v}, 1)).Data[0]; g != y.Data[i] {
			t.Fatalf("gelu(%v) = %v, geluWithGrad %v", v, g, y.Data[i])
		}
		if math.Abs(float64(y.Data[i]-ny.Data[i])) > 1e-6 || math.Abs(float64(dx.Data[i]-nd.Data[i])) > 1e-6 {
			t.Fatalf("x=%v: differs from nn: %v %v vs %v %v", v, y.Data[i], dx.Data[i], ny.Data[i], nd.Data[i])
		}
	}
}

func TestPhiSpecialValues(t *testing.T) {
	nan := float32(math.NaN())
	if c, p := phi(nan); c == c || p == p {
		t.Fatal("phi(NaN) not NaN")
	}
	inf := float32(math.Inf(1))
	if c, p := phi(inf); c != 1 || p != 0 {
		t.Fatal("phi(+Inf)")
	}
	if c, p := phi(-inf); c != 0 || p != 0 {
		t.Fatal("phi(-Inf)")
	}
	if c, p := phi(0); math.Abs(float64(c)-0.5) > 1e-8 || math.Abs(float64(p)-0.3989422804) > 5e-8 {
		t.Fatalf("phi(0) = %v, %v", c, p)
	}
}
