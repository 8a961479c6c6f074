package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/nn/internal/avx2"
)

// TestGELUAVX2 pins the AVX2 GELU to normalCDF bit for bit over lengths and offsets that cover no
// whole group, whole groups and tails, with elements outside (-10, 10), NaN and ±Inf (which hand
// their group back to Go) sprinkled at several rates, and the boundaries themselves.
func TestGELUAVX2(t *testing.T) {
	if !avx2.Available {
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
	if got := avx2.GELU(&x[0], &make([]float32, 8)[0], 8, &phiCDFTab[0]); got != 8 {
		t.Errorf("kernel wrote %d of 8 elements in range", got)
	}
	x[5] = 10
	if got := avx2.GELU(&x[0], &make([]float32, 8)[0], 8, &phiCDFTab[0]); got != 4 {
		t.Errorf("kernel wrote %d elements before the group holding 10, want 4", got)
	}
}

// TestExpShiftedAVX2 pins the AVX2 exponentials to Expf bit for bit over lengths that cover no
// whole group, whole groups and tails, with the values a softmax row meets (masked keys at -Inf,
// large negative biases) and those that take Expf's rare paths or are NaN (which hand their group
// back to Go), at several rates, over every float32 in [-90, 0] whose low 8 significand bits are
// zero, and over random bits.
func TestExpShiftedAVX2(t *testing.T) {
	if !avx2.Available {
		t.Skip("no AVX2 kernel on this CPU or build")
	}
	check := func(s []float32, mx float32, what string) {
		t.Helper()
		got := append([]float32(nil), s...)
		expShifted(got, mx)
		for i, v := range s {
			if want := Expf(v - mx); math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("%s: Expf(%v - %v) = %v, the kernel gives %v", what, v, mx, want, got[i])
			}
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	edges := []float32{float32(math.Inf(-1)), float32(math.NaN()), -1e9, -87.33654, math.Nextafter32(-87.33654, 0), -87, -86.99, -86.6,
		88.72283, 88.4, 100, float32(math.Inf(1)), 0, float32(math.Copysign(0, -1)), -1e-30}
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 64, 65, 1000} {
		for _, rate := range []float64{0, 0.01, 0.1, 0.5} {
			s := make([]float32, n)
			for i := range s {
				s[i] = float32(r.NormFloat64() * 5)
				if r.Float64() < rate {
					s[i] = edges[r.IntN(len(edges))]
				}
			}
			for _, mx := range []float32{0, 3, -2, float32(math.Inf(-1))} {
				check(s, mx, "row")
			}
		}
	}
	var grid []float32
	for b := math.Float32bits(0); b <= math.Float32bits(90); b += 1 << 8 {
		grid = append(grid, -math.Float32frombits(b))
	}
	check(grid, 0, "grid")
	random := make([]float32, 1<<16)
	for i := range random {
		random[i] = math.Float32frombits(r.Uint32())
	}
	check(random, 0, "random bits")
	// A group whose lanes are all ordinary is written whole; one with a NaN is left to Go.
	s := []float32{-1, -2, -3, -4, -5, -6, -7, -8, -1, -2, -3, float32(math.NaN()), -5, -6, -7, -8}
	if got := avx2.ExpShifted(&s[0], 16, 0); got != 8 {
		t.Errorf("kernel wrote %d elements before the group holding NaN, want 8", got)
	}
}
