package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExpf(t *testing.T) {
	worst := 0.0
	for x := -87.0; x <= 88.5; x += 0.0137 {
		got := float64(Expf(float32(x)))
		want := math.Exp(float64(float32(x)))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 3e-7 {
		t.Errorf("Expf max relative error %.3g > 3e-7", worst)
	}
	for _, tc := range []struct{ x, want float32 }{
		{float32(math.Inf(-1)), 0}, {-100, 0}, {0, 1}, {float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		if got := Expf(tc.x); got != tc.want {
			t.Errorf("Expf(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	if v := Expf(float32(math.NaN())); v == v {
		t.Errorf("Expf(NaN) = %v", v)
	}
}

// TestNormalCDFPDF checks the GELU table against float64 erf and exp on
// [-10, 10] (off the nodes too) and at the special values.
func TestNormalCDFPDF(t *testing.T) {
	worstCDF, worstPDF := 0.0, 0.0
	for x := -10.0; x <= 10; x += 0.001 {
		cdf, pdf := normalCDFPDF(float32(x))
		xf := float64(float32(x))
		wc := 0.5 * (1 + math.Erf(xf/math.Sqrt2))
		wp := math.Exp(-xf*xf/2) / math.Sqrt(2*math.Pi)
		worstCDF = math.Max(worstCDF, math.Abs(float64(cdf)-wc))
		worstPDF = math.Max(worstPDF, math.Abs(float64(pdf)-wp))
	}
	// float32 rounding of the result dominates the table's 1e-8.
	if worstCDF > 6e-8 || worstPDF > 3e-8 {
		t.Errorf("max abs error: Phi %.3g, phi %.3g (want <= 6e-8, 3e-8)", worstCDF, worstPDF)
	}
}

func TestPhiSpecialValues(t *testing.T) {
	nan := float32(math.NaN())
	if c, p := normalCDFPDF(nan); c == c || p == p {
		t.Fatal("normalCDFPDF(NaN) not NaN")
	}
	inf := float32(math.Inf(1))
	if c, p := normalCDFPDF(inf); c != 1 || p != 0 {
		t.Fatal("normalCDFPDF(+Inf)")
	}
	if c, p := normalCDFPDF(-inf); c != 0 || p != 0 {
		t.Fatal("normalCDFPDF(-Inf)")
	}
	if c, p := normalCDFPDF(0); math.Abs(float64(c)-0.5) > 1e-8 || math.Abs(float64(p)-0.3989422804) > 5e-8 {
		t.Fatalf("normalCDFPDF(0) = %v, %v", c, p)
	}
}

// TestNormalCDFSame: normalCDF, which inference uses, returns normalCDFPDF's Phi bit for bit, over
// every float32 of [-10.5, 10.5] whose low 7 significand bits are zero (about 1.6e7 values, each
// of the table's intervals many times), the special values and random others.
func TestNormalCDFSame(t *testing.T) {
	check := func(x float32) {
		if c, _ := normalCDFPDF(x); math.Float32bits(normalCDF(x)) != math.Float32bits(c) {
			t.Fatalf("normalCDF(%v) = %v, normalCDFPDF gives %v", x, normalCDF(x), c)
		}
	}
	for _, lim := range []float32{10.5, -10.5} {
		for b := uint32(0); b <= math.Float32bits(lim)&0x7fffffff; b += 1 << 7 {
			check(math.Float32frombits(b | math.Float32bits(lim)&0x80000000))
		}
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 10, -10, math.Nextafter(10, 0), -math.Nextafter(10, 0), 0, math.MaxFloat32, -math.MaxFloat32} {
		check(float32(x))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		check(math.Float32frombits(r.Uint32()))
	}
}
