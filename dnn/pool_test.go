package dnn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/nn"
)

// Tolerances of the pooling twins (relErr). The masked mean is nn's float32
// weighted sum in nn's order, each operation rounded as Go rounds it
// (exact_* in the kernels), with the denominator and the quotient in
// double: equal bit for bit where exactFloat holds; where Go or the C of
// the stand-in fuses multiply-adds, a few ulps of the sum
// (tolMeanPoolFused). First-token pooling copies: exact everywhere.
const (
	// Derivation: nn's float32 sum of S <= 16 terms where one side fuses: S ulps = 1e-6 at most (exact_* keeps the kernel unfused on a GPU too).
	tolMeanPoolFused = 1e-6
	// Derivation: a copy: 0 ulps.
	tolFirstToken = 0
)

func tolMeanPool() float64 {
	if exactFloat() {
		return 0
	}
	return tolMeanPoolFused
}

// testMaskedMeanPool: forward and backward of the device masked mean
// pooling equal nn's, with padding, fractional weights, weights summing to
// less than 1e-6 (nn's floor is 1e-9), an all-padding row (pooled to 0), a
// NaN at a padded position of x (kept out, as nn skips it) and a NaN row
// of dy (the padded positions of its dx stay 0), for widths below and above
// the block size.
func testMaskedMeanPool(t *testing.T, e *dnn.Engine) {
	tol := tolMeanPool()
	rng := rand.New(rand.NewPCG(3, 3))
	for _, tc := range []struct {
		name    string
		S, D    int
		mask    []float32 // [4, S]
		nanAt   int       // a flat (b*S+s) position of x set to NaN, -1 none
		wantNaN bool
		nanDy   int // a row of dy set to NaN (its padded positions' dx stay 0), -1 none
	}{
		{"padded", 5, 7, []float32{1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, 3, false, 0},
		{"fractional", 3, 300, []float32{0.5, 1, 0.25, 1, 1, 1, 0, 0, 0, 2, 0, 1e-3}, 7, false, -1},
		{"tiny weights", 2, 5, []float32{1e-7, 0, 1, 1, 0, 2e-8, 0, 0}, -1, false, -1}, // sums below 1e-6, above the 1e-9 floor
		{"random weights", 6, 3, randomMask(24), -1, false, -1},                        // sums no float holds: the double denominator shows
		{"ones", 4, 256, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, -1, false, -1},
		{"nan in a real token", 2, 9, []float32{1, 1, 1, 0, 0, 0, 1, 1}, 1, true, -1},
	} {
		B := 4
		x := randn(rng, 2, B, tc.S, tc.D)
		if tc.nanAt >= 0 {
			for i := range tc.D {
				x.Data[tc.nanAt*tc.D+i] = float32(math.NaN())
			}
		}
		y := nn.MaskedMeanPool(x, tc.mask)
		if hasNaN(y.Data) != tc.wantNaN {
			t.Errorf("%s: the CPU pool has NaN %v, the case wants %v", tc.name, hasNaN(y.Data), tc.wantNaN)
			continue
		}
		e.Reset()
		mask := e.Upload(nn.FromData(tc.mask, B, tc.S))
		dy := e.MaskedMeanPool(e.Upload(x), mask)
		nearNaN(t, e, tc.name+": mean pool y", dy, y, tol)
		g := randn(rng, 1, B, tc.D)
		if tc.nanDy >= 0 {
			for i := range tc.D {
				g.Data[tc.nanDy*tc.D+i] = float32(math.NaN())
			}
		}
		dx := nn.MaskedMeanPoolBackward(tc.mask, g, tc.S)
		dirty(e, []int{B, tc.S}, []int{B, tc.D}, []int{B, tc.S, tc.D})
		mask = e.Upload(nn.FromData(tc.mask, B, tc.S))
		ddx := e.MaskedMeanPoolBackward(mask, e.Upload(g), tc.S)
		nearNaN(t, e, tc.name+": mean pool dx", ddx, dx, tol)
	}
}

// testFirstToken: the device first-token pooling and its backward equal
// nn's (the backward's zeros included).
func testFirstToken(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, sh := range [][3]int{{3, 5, 7}, {2, 1, 300}, {1, 4, 256}} {
		B, S, D := sh[0], sh[1], sh[2]
		x := randn(rng, 1, B, S, D)
		near(t, e, "first token y", e.FirstToken(e.Upload(x)), nn.FirstToken(x), tolFirstToken)
		g := randn(rng, 1, B, D)
		dirty(e, []int{B, D}, []int{B, S, D})
		ddx := e.FirstTokenBackward(e.Upload(g), S)
		near(t, e, "first token dx", ddx, nn.FirstTokenBackward(g, S), tolFirstToken)
	}
}

// randomMask is n weights drawn uniformly in [0.05, 1).
func randomMask(n int) []float32 {
	rng := rand.New(rand.NewPCG(12, 12))
	m := make([]float32, n)
	for i := range m {
		m[i] = float32(0.05 + 0.95*rng.Float64())
	}
	return m
}

// dirty resets the arena and fills its first tensors, of the shapes given,
// with NaN, then resets it again: tensors allocated next in the same order
// and shapes start as NaN, so that an element a kernel fails to write (a
// zero of a backward) shows in the comparison.
func dirty(e *dnn.Engine, shapes ...[]int) {
	e.Reset()
	for _, sh := range shapes {
		x := nn.New(sh...)
		for i := range x.Data {
			x.Data[i] = float32(math.NaN())
		}
		e.Upload(x)
	}
	e.Reset()
}

// nearNaN is near where want may hold NaN: got must be NaN at the same
// places and near want elsewhere.
func nearNaN(t *testing.T, e *dnn.Engine, what string, got *dnn.Tensor, want *nn.Tensor, tol float64) {
	t.Helper()
	g := e.Download(got)
	if len(g.Data) != len(want.Data) {
		t.Errorf("%s: %v, want shape %v", what, got.Shape, want.Shape)
		return
	}
	var gv, wv []float32
	for i, w := range want.Data {
		if (w != w) != (g.Data[i] != g.Data[i]) {
			t.Errorf("%s: element %d is %v, want %v", what, i, g.Data[i], w)
			return
		}
		if w == w {
			gv, wv = append(gv, g.Data[i]), append(wv, w)
		}
	}
	if r := relErr(gv, wv); !(r <= tol) {
		t.Errorf("%s: relative error %.3g > %g", what, r, tol)
	}
}

func hasNaN(v []float32) bool {
	for _, x := range v {
		if x != x {
			return true
		}
	}
	return false
}
