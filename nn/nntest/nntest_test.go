package nntest

import (
	"math"
	"testing"
)

func TestCompareGrad(t *testing.T) {
	x := []float32{0.5, -1.5, 2, 0.1}
	f := func() float64 { // sum x_i^3
		var s float64
		for _, v := range x {
			s += float64(v) * float64(v) * float64(v)
		}
		return s
	}
	grad := func(scale []float32) []float32 {
		g := make([]float32, len(x))
		for i, v := range x {
			g[i] = 3 * v * v * scale[i]
		}
		return g
	}
	for _, tc := range []struct {
		name  string
		scale []float32
		ok    bool
	}{
		{"exact", []float32{1, 1, 1, 1}, true},
		{"3% off on the largest", []float32{1, 1, 1.03, 1}, false},
		{"sign flip on a small one", []float32{-1, 1, 1, 1}, false},
		{"missing factor", []float32{1.0 / 3, 1.0 / 3, 1.0 / 3, 1.0 / 3}, false},
	} {
		err := CompareGrad(f, x, grad(tc.scale), GradOpts{Eps: 1e-3})
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok = %v", tc.name, err, tc.ok)
		}
	}
	if x[0] != 0.5 || x[3] != 0.1 {
		t.Fatalf("x not restored: %v", x)
	}
	num := NumericGrad(f, x, []int{2}, 1e-3)
	if math.Abs(num[0]-12) > 1e-3 {
		t.Fatalf("numeric d/dx x^3 at 2 = %v, want 12", num[0])
	}
}
