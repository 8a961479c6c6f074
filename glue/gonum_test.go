package glue

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat"
)

// TestCorrelationsVsGonum cross-checks Pearson against gonum's stat.Correlation and Spearman
// against stat.Correlation of average ranks computed by a brute-force O(n^2) ranker.
func TestCorrelationsVsGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		n := 5 + rng.IntN(200)
		x, y := make([]float64, n), make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64()
			y[i] = 0.5*x[i] + rng.NormFloat64()
			if trial%2 == 1 { // many ties, like STS-B scores in steps of 0.2
				y[i] = math.Round(y[i]*5) / 5
				x[i] = math.Round(x[i])
			}
		}
		r, err := Pearson(x, y)
		if err != nil {
			t.Fatal(err)
		}
		if want := stat.Correlation(x, y, nil); math.Abs(r-want) > 1e-12 {
			t.Errorf("trial %d: pearson %v, gonum %v", trial, r, want)
		}
		bruteRank := func(v []float64) []float64 {
			out := make([]float64, len(v))
			for i := range v {
				less, eq := 0, 0
				for j := range v {
					if v[j] < v[i] {
						less++
					} else if v[j] == v[i] {
						eq++
					}
				}
				out[i] = float64(less) + float64(eq+1)/2
			}
			return out
		}
		s, _ := Spearman(x, y)
		if want := stat.Correlation(bruteRank(x), bruteRank(y), nil); math.Abs(s-want) > 1e-12 {
			t.Errorf("trial %d: spearman %v, want %v", trial, s, want)
		}
	}
}
