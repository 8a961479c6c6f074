//go:build !purego

package audit

import (
	"math/rand/v2"
	"testing"
)

// TestGaussLanesAVX2 pins the AVX2 kernel to the pure-Go one bit for bit
// (state, sums, products and the out-of-range flag; the unchecked variants
// where every radicand is in range) over lengths that cover
// no vector, partial peel groups, whole groups and tails.
func TestGaussLanesAVX2(t *testing.T) {
	if !kernelAsm {
		t.Skip("no AVX2 kernel on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(21, 22))
	var flagged, clean int
	for _, n := range []int{1, 3, 4, 5, 8, 31, 32, 33, 36, 63, 64, 65, 127, 128, 129, 768, 1023} {
		for trial := range 6 {
			bad := []float64{0, 0, 0, 0.002, 0.02, 0.3}[trial]
			ma, mb, sa, sb := kernelInput(rng, n, 0.5, bad)
			for _, lam := range []float64{1.01, 1.05, 1.1, 2, 11} {
				nvec := n / laneWidth
				if nvec > 0 {
					var asm, ref lanes
					okA := gaussVectorsAVX2(lam, &ma[0], &mb[0], &sa[0], &sb[0], nvec, &asm)
					okG := gaussVectorsGo(lam, ma, mb, sa, sb, nvec, &ref, false)
					if okA != okG {
						t.Fatalf("n %d lam %v: AVX2 ok %v, Go %v", n, lam, okA, okG)
					}
					if okA && !sameLanes(asm, ref) {
						t.Fatalf("n %d lam %v: AVX2 state %+v\nGo state %+v", n, lam, asm, ref)
					}
					if okA {
						// The unchecked kernels, on data in range: the same state.
						var asmU, refU lanes
						gaussVectorsAVX2Unchecked(lam, &ma[0], &mb[0], &sa[0], &sb[0], nvec, &asmU)
						if !gaussVectorsGo(lam, ma, mb, sa, sb, nvec, &refU, true) || !sameLanes(asmU, ref) || !sameLanes(refU, ref) {
							t.Fatalf("n %d lam %v: unchecked AVX2 %+v, Go %+v, checked %+v", n, lam, asmU, refU, ref)
						}
					}
				}
				gA, okA := gaussLanes(lam, ma, mb, sa, sb, false)
				gG, okG := gaussLanesPureGo(lam, ma, mb, sa, sb)
				if okA != okG || (okA && !sameBits(gA, gG)) {
					t.Fatalf("n %d lam %v: AVX2 %+v %v, Go %+v %v", n, lam, gA, okA, gG, okG)
				}
				if okA {
					clean++
				} else {
					flagged++
				}
			}
		}
	}
	if flagged == 0 || clean == 0 {
		t.Fatalf("%d in range, %d out of range: the test covers only one case", clean, flagged)
	}
}
