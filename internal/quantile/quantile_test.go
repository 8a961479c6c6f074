package quantile

import (
	"math"
	"testing"
)

// TestConventions: the three conventions on the same sample, against values
// computed by hand (R's quantile(x, type = 7) and type = 1 give the same).
func TestConventions(t *testing.T) {
	x := []float64{1, 2, 3, 4, 10}
	cases := []struct {
		name      string
		got, want float64
	}{
		{"linear p50", Linear(x, 0.5), 3},
		{"linear p90", Linear(x, 0.9), 4 + 0.6*6},
		{"linear p25", Linear(x, 0.25), 2},
		{"linear p10", Linear(x, 0.1), 1.4},
		{"empirical p50", Empirical(x, 0.5), 3},
		{"empirical p90", Empirical(x, 0.9), 10},
		{"empirical p10", Empirical(x, 0.1), 1},
		{"nearest rank 50", NearestRank(x, 50), 3},
		{"nearest rank 90", NearestRank(x, 90), 10},
		{"nearest rank 0", NearestRank(x, 0), 1},
		{"nearest rank 20", NearestRank(x, 20), 1},
		{"nearest rank 21", NearestRank(x, 21), 2},
	}
	for _, c := range cases {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if !math.IsNaN(Linear(nil, 0.5)) {
		t.Error("Linear of nothing is not NaN")
	}
	if q := Linear([]float64{-math.MaxFloat64, math.MaxFloat64}, 0.25); math.IsInf(q, 0) || math.IsNaN(q) {
		t.Errorf("Linear across the float64 range: %v", q)
	}
}
