package audit

import (
	"fmt"
	"math"
	"slices"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

// summarise writes the statistics of the audited pairs at the audit's order
// into r: the pair counts, the undefined pairs listed with their reasons,
// rd_max (+Inf when no pair is finite) and its argmax, rd_mean, and the
// order statistics of the finite bounds kept (rd_min, p50/p90/p99, a 20-bin
// histogram), with notes on what they are over.
func summarise(r *Report, s *rdStats, c *collector, p *privacy.Posteriors) {
	r.InvalidExamples = listInvalid(s.invalidList, c, p)
	if summariseCounts(r, s) {
		orderStatistics(r, s.values, c.stride)
	}
}

// summariseCounts writes the pair counts, rd_max (+Inf when no pair is
// finite) with its argmax and rd_mean into r, with the note on undefined
// pairs; it reports whether some pair is finite (order statistics apply).
func summariseCounts(r *Report, s *rdStats) bool {
	r.Pairs, r.FinitePairs, r.InvalidPairs = s.finite+s.invalid, s.finite, s.invalid
	if s.invalid > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d of %d ordered pairs have an undefined bound (+Inf); rd_max, rd_mean and the quantiles are over the %d finite pairs only",
			s.invalid, r.Pairs, s.finite))
	}
	if s.finite == 0 {
		r.RDMax = jsonfloat.Float(math.Inf(1))
		return false
	}
	r.RDMax = jsonfloat.Float(s.max)
	r.Argmax = []int{s.argA, s.argB}
	r.RDMean = jsonfloat.New(s.sum / float64(s.finite))
	return true
}

// listInvalid sorts the listed undefined pairs, drops repeats (a sample
// may draw a pair twice), keeps the first Options.ListInvalid and gives each
// the reason its bound is undefined (PairBoundWith).
func listInvalid(list []InvalidPair, c *collector, p *privacy.Posteriors) []InvalidPair {
	list = firstInvalid(list, c.opt.ListInvalid)
	for i := range list {
		ip := &list[i]
		t, _ := privacy.PairBoundWith(c.opt.Order, p.View(ip.Q), p.View(ip.QPrime), privacy.BoundOptions{UseMask: c.opt.UseMask, Direction: c.opt.Direction})
		ip.Reason = t.Undefined
	}
	return list
}

// reportQuantiles are the quantiles of Report.Quantiles.
var reportQuantiles = []struct {
	key string
	q   float64
}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}}

// orderStatistics writes rd_min, the quantiles and the histogram of the kept
// finite bounds (one in stride of them; none: nothing, with a note).
func orderStatistics(r *Report, values []float64, stride uint64) {
	if len(values) == 0 {
		r.Notes = append(r.Notes, "no finite bound kept for rd_min, the quantiles and the histogram (none stored, or the subsample missed every finite pair)")
		return
	}
	slices.Sort(values)
	r.RDMin = jsonfloat.New(values[0])
	r.Quantiles = map[string]jsonfloat.Float{}
	for _, q := range reportQuantiles {
		r.Quantiles[q.key] = jsonfloat.Float(quantile(values, q.q))
	}
	r.QuantilesFrom = len(values)
	h := histogram(values, histogramBins)
	r.Histogram = &h
	if stride > 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("rd_min, quantiles and histogram from a deterministic subsample of %d finite pairs (1 in %d); rd_max, rd_mean exact", len(values), stride))
	}
}

// firstInvalid sorts the listed undefined pairs by (q, q'), drops repeats
// and keeps the first n.
func firstInvalid(list []InvalidPair, n int) []InvalidPair {
	slices.SortFunc(list, func(x, y InvalidPair) int {
		if x.Q != y.Q {
			return x.Q - y.Q
		}
		return x.QPrime - y.QPrime
	})
	list = slices.CompactFunc(list, func(x, y InvalidPair) bool { return x.Q == y.Q && x.QPrime == y.QPrime })
	return list[:min(len(list), n)]
}
