package privacy

import (
	"math"
	"testing"
)

func TestCompareBounds(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, tc := range []struct {
		a, b float64
		want int
	}{
		{1, 2, -1}, {2, 1, 1}, {3, 3, 0},
		{1, inf, -1}, {inf, 1, 1}, {inf, inf, 0},
		{1e300, nan, -1}, {nan, 1e300, 1}, // undefined is the loosest
		{nan, inf, 0}, {inf, nan, 0}, {nan, nan, 0},
		{0, nan, -1},
	} {
		if got := CompareBounds(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareBounds(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
