package fma

import "testing"

// TestFuses: where Fuses is false, x*y + z rounds twice (the product, then
// the sum): x*y = 1 + 2^-51 + 2^-104 exactly, its rounding drops the 2^-104
// that one fused rounding of the sum with -(1 + 2^-51) keeps.
func TestFuses(t *testing.T) {
	x, z := 1+0x1p-52, -(1 + 0x1p-51)
	got := mulAdd(x, x, z)
	if !Fuses && got != 0 {
		t.Errorf("Fuses is false but x*y + z = %v (two roundings give 0, one 2^-104)", got)
	}
	t.Logf("Fuses %v: x*y + z = %v", Fuses, got)
}

//go:noinline
func mulAdd(x, y, z float64) float64 { return x*y + z }
