package attack

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAUCBruteForce: AUC equals the fraction of (positive, negative) pairs
// ordered correctly, ties half, on random samples with ties.
func TestAUCBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 50; trial++ {
		pos := make([]float64, 1+rng.IntN(40))
		neg := make([]float64, 1+rng.IntN(40))
		for i := range pos {
			pos[i] = float64(rng.IntN(10)) + 1
		}
		for i := range neg {
			neg[i] = float64(rng.IntN(10))
		}
		want := 0.0
		for _, p := range pos {
			for _, n := range neg {
				switch {
				case p > n:
					want++
				case p == n:
					want += 0.5
				}
			}
		}
		want /= float64(len(pos) * len(neg))
		got, err := AUC(pos, neg)
		if err != nil || math.Abs(got-want) > 1e-12 {
			t.Fatalf("trial %d: AUC %v (%v), want %v", trial, got, err, want)
		}
	}
}

func TestROCAndTPRAtFPR(t *testing.T) {
	roc, err := ROC([]float64{3, 2, 2, 1}, []float64{2, 0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	want := []ROCPoint{{math.Inf(1), 0, 0, 0, 0}, {3, 0.25, 0, 1, 0}, {2, 0.75, 0.25, 3, 1}, {1, 1, 0.25, 4, 1}, {0, 1, 1, 4, 4}}
	if len(roc) != len(want) {
		t.Fatalf("roc %+v", roc)
	}
	for i := range want {
		if roc[i] != want[i] {
			t.Fatalf("point %d: %+v, want %+v", i, roc[i], want[i])
		}
	}
	if got := tprAtFPR(roc, 0); got != 0.25 {
		t.Errorf("TPR at FPR 0 = %v", got)
	}
	if got := tprAtFPR(roc, 0.25); got != 1 {
		t.Errorf("TPR at FPR 0.25 = %v", got)
	}
	if _, err := ROC(nil, []float64{1}); err == nil {
		t.Error("empty sample accepted")
	}
	if _, err := ROC([]float64{math.NaN()}, []float64{1}); err == nil {
		t.Error("NaN accepted")
	}
}

// TestClopperPearson against closed forms at the ends (k = 0: hi = 1 -
// (alpha/2)^(1/n); k = n: lo = (alpha/2)^(1/n)) and a tabulated value
// (k = 5, n = 20, 95%: [0.0866, 0.4910], as R's binom.test).
func TestClopperPearson(t *testing.T) {
	for _, n := range []int{1, 10, 1000} {
		lo, hi, err := clopperPearson(0, n, 0.95)
		if err != nil || lo != 0 || math.Abs(hi-(1-math.Pow(0.025, 1/float64(n)))) > 1e-9 {
			t.Errorf("k=0 n=%d: [%v, %v] %v", n, lo, hi, err)
		}
		lo, hi, err = clopperPearson(n, n, 0.95)
		if err != nil || hi != 1 || math.Abs(lo-math.Pow(0.025, 1/float64(n))) > 1e-9 {
			t.Errorf("k=n=%d: [%v, %v] %v", n, lo, hi, err)
		}
	}
	lo, hi, err := clopperPearson(5, 20, 0.95)
	if err != nil || math.Abs(lo-0.08657) > 1e-4 || math.Abs(hi-0.49105) > 1e-4 {
		t.Errorf("k=5 n=20: [%v, %v] %v", lo, hi, err)
	}
	for _, c := range []struct {
		k, n int
		conf float64
	}{{1, 0, 0.95}, {-1, 5, 0.95}, {6, 5, 0.95}, {1, 5, 1}, {1, 5, 0}} {
		if _, _, err := clopperPearson(c.k, c.n, c.conf); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
