package privacy

import (
	"fmt"
	"math"
	"slices"

	"github.com/nvdp-project/nvdp/jsonfloat"
)

// summarise writes the statistics of the audited pairs at the audit's order
// into r: the pair counts, the undefined pairs listed with their reasons,
// rd_max (+Inf when no pair is finite) and its argmax, rd_mean, and the
// order statistics of the finite bounds kept (rd_min, p50/p90/p99, a 20-bin
// histogram), with notes on what they are over.
func summarise(r *Report, s *rdStats, c *collector, p *Posteriors) {
	r.Pairs, r.FinitePairs, r.InvalidPairs = s.finite+s.invalid, s.finite, s.invalid
	r.InvalidExamples = listInvalid(s.invalidList, c, p)
	if s.invalid > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d of %d ordered pairs have an undefined bound (+Inf); rd_max, rd_mean and the quantiles are over the %d finite pairs only",
			s.invalid, r.Pairs, s.finite))
	}
	if s.finite == 0 {
		r.RDMax = jsonfloat.Float(math.Inf(1))
		return
	}
	r.RDMax = jsonfloat.Float(s.max)
	r.Argmax = []int{s.argA, s.argB}
	r.RDMean = jsonfloat.New(s.sum / float64(s.finite))
	orderStatistics(r, s.values, c.stride)
}

// listInvalid sorts the listed undefined pairs, drops repeats (a sample
// may draw a pair twice), keeps the first Options.ListInvalid and gives each
// the reason its bound is undefined (PairBoundWith).
func listInvalid(list []InvalidPair, c *collector, p *Posteriors) []InvalidPair {
	slices.SortFunc(list, func(x, y InvalidPair) int {
		if x.Q != y.Q {
			return x.Q - y.Q
		}
		return x.QPrime - y.QPrime
	})
	list = slices.Compact(list)
	list = list[:min(len(list), c.opt.ListInvalid)]
	for i := range list {
		ip := &list[i]
		t, _ := PairBoundWith(c.opt.Order, p.View(ip.Q), p.View(ip.QPrime), BoundOptions{UseMask: c.opt.UseMask, Direction: c.opt.Direction})
		ip.Reason = t.Undefined
	}
	return list
}

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
	for _, q := range []struct {
		k string
		v float64
	}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}} {
		r.Quantiles[q.k] = jsonfloat.Float(quantile(values, q.v))
	}
	r.QuantilesFrom = len(values)
	h := histogram(values, 20)
	r.Histogram = &h
	if stride > 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("rd_min, quantiles and histogram from a deterministic subsample of %d finite pairs (1 in %d); rd_max, rd_mean exact", len(values), stride))
	}
}
