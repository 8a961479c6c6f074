package audit

import (
	"math"
	"testing"
)

// TestLnGammaTerm: inside the range the term is carried by the product,
// outside it is lnGamma(g)*inv; either way the total is lnGamma(g)*inv, and
// a product of many terms keeps the sum of their logarithms.
func TestLnGammaTerm(t *testing.T) {
	var all logAccum
	all.reset()
	var direct, want float64
	for _, g := range []float64{1e-9, gammaProdLo, 0.07, 0.3, 0.999, 1, 1.7, 2, 24, gammaProdHi, 25.5, 30, 1e4} {
		var acc logAccum
		acc.reset()
		inv := 20.0
		d := lnGammaTerm(g, &acc, inv)
		inside := g >= gammaProdLo && g <= gammaProdHi
		if inside != (d == 0) {
			t.Errorf("g %v: direct part %v, product %v: inside the range %v", g, d, acc.log(), inside)
		}
		got, w := d+inv*acc.log(), lgamma(g)*inv
		if math.Abs(got-w) > 1e-13*math.Max(1, math.Abs(w)) {
			t.Errorf("g %v: %v, want %v", g, got, w)
		}
		direct += lnGammaTerm(g, &all, inv)
		want += w
	}
	if got := direct + 20*all.log(); math.Abs(got-want) > 1e-13*math.Abs(want) {
		t.Errorf("sum of the terms %v, want %v", got, want)
	}
}
