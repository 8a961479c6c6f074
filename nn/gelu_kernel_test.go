package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/nn/internal/gelukernel"
)

// TestGELUAVX2 pins the AVX2 GELU to normalCDF bit for bit over lengths and offsets that cover no
// whole group, whole groups and tails, with elements outside (-10, 10), NaN and ±Inf (which hand
// their group back to Go) sprinkled at several rates, and the boundaries themselves.
func TestGELUAVX2(t *testing.T) {
	if !gelukernel.Available {
		t.Skip("no AVX2 kernel on this CPU or build")
	}
	r := rand.New(rand.NewPCG(5, 6))
	edges := []float32{10, -10, math.Nextafter32(10, 0), -math.Nextafter32(10, 0), 0, float32(math.Copysign(0, -1)),
		float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-30, -1e-30, 9.999, -9.999}
	for _, n := range []int{1, 3, 4, 5, 7, 8, 9, 63, 64, 65, 1000, 4099} {
		for _, rate := range []float64{0, 0.001, 0.05, 0.5} {
			xs := make([]float32, n+3)
			for i := range xs {
				xs[i] = float32(r.NormFloat64() * 4)
				if r.Float64() < rate {
					xs[i] = edges[r.IntN(len(edges))]
				}
			}
			for off := range 3 {
				x := xs[off : off+n]
				got := make([]float32, n)
				geluInto(x, got)
				for i, v := range x {
					if want := v * normalCDF(v); math.Float32bits(got[i]) != math.Float32bits(want) {
						t.Fatalf("n %d rate %v offset %d: GELU(%v) = %v, normalCDF gives %v", n, rate, off, v, got[i], want)
					}
				}
			}
		}
	}
	// Every group in range: the kernel writes them all and returns n.
	x := []float32{-9.5, -1, 0, 1, 2, 3, 9.5, 0.25}
	if got := gelukernel.AVX2(&x[0], &make([]float32, 8)[0], 8, &phiCDFTab[0]); got != 8 {
		t.Errorf("kernel wrote %d of 8 elements in range", got)
	}
	x[5] = 10
	if got := gelukernel.AVX2(&x[0], &make([]float32, 8)[0], 8, &phiCDFTab[0]); got != 4 {
		t.Errorf("kernel wrote %d elements before the group holding 10, want 4", got)
	}
}
