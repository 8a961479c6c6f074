package nn

import "testing"

// TestSetBLASThreads: the openblas build sets OpenBLAS's thread count and
// returns the one before; the pure-Go build does nothing and returns 0.
// n < 1 panics.
func TestSetBLASThreads(t *testing.T) {
	prev := SetBLASThreads(1)
	defer SetBLASThreads(max(prev, 1))
	want := 0
	if backendName == "openblas" {
		want = 1
	}
	if got := SetBLASThreads(1); got != want {
		t.Errorf("SetBLASThreads(1) after 1 returned %d, want %d", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("SetBLASThreads(0) did not panic")
		}
	}()
	SetBLASThreads(0)
}
