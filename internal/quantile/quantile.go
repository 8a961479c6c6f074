// Package quantile holds the quantile conventions of nvdp, one named
// function each. They differ on purpose and file formats depend on them, so
// a reported number keeps its convention:
//
//   - Linear ("type 7" of Hyndman & Fan 1996, R's and NumPy's default):
//     the audit's p50/p90/p99 in audit.Report (report.json, the sweep
//     tables).
//   - Empirical (type 1, the inverse of the empirical CDF, gonum's
//     stat.Empirical): the bootstrap intervals of the attacks.
//   - NearestRank: the load generator's latency percentiles.
//
// The sharded audit's quantiles come from a DDSketch (privacy, relative
// accuracy stated in its report), not from here.
package quantile

import (
	"math"

	"gonum.org/v1/gonum/stat"
)

// Linear returns the q-quantile of sorted (ascending) values by linear
// interpolation between the order statistics at h = q (n-1) ("type 7"), NaN
// when sorted is empty. A span between neighbours wider than float64 is
// interpolated without overflow.
func Linear(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	h := q * float64(len(sorted)-1)
	lo := int(math.Floor(h))
	hi := min(lo+1, len(sorted)-1)
	f := h - float64(lo)
	if f == 0 {
		return sorted[lo]
	}
	if d := sorted[hi] - sorted[lo]; !math.IsInf(d, 0) {
		return sorted[lo] + f*d
	}
	return (1-f)*sorted[lo] + f*sorted[hi] // a span wider than float64
}

// Empirical returns the p-quantile of sorted (ascending, non-empty) values
// as the inverse of the empirical distribution function ("type 1": the
// smallest value whose empirical CDF reaches p), gonum's stat.Empirical.
func Empirical(sorted []float64, p float64) float64 {
	return stat.Quantile(p, stat.Empirical, sorted, nil)
}

// NearestRank returns the p-th percentile (p in [0, 100]) of sorted
// (ascending, non-empty) values by the nearest-rank method: the value of
// rank ceil(p/100 n), the smallest for p = 0.
func NearestRank(sorted []float64, p float64) float64 {
	return sorted[max(0, int(math.Ceil(p/100*float64(len(sorted))))-1)]
}
