package audit

import (
	"fmt"
	quantilepkg "github.com/nvdp-project/nvdp/internal/quantile"
	"math"
	"slices"

	"gonum.org/v1/gonum/mathext"
)

// StudentTUpper returns t such that P(T > t) = tail for Student's t with df
// degrees of freedom, accurate down to tail = 1e-300. As ref §7.2
// prescribes, it solves 0.5 * I_{df/(df+t^2)}(df/2, 1/2) = tail by bisection
// on ln t, where I is the regularised incomplete beta of gonum
// mathext.RegIncBeta. distuv.StudentsT.Quantile receives 1 - tail instead,
// and loses every digit once tail approaches 1e-16.
//
// It returns an error when df <= 0 or tail is outside (0, 0.5].
func StudentTUpper(df, tail float64) (float64, error) {
	if !(df > 0) || math.IsInf(df, 0) {
		return 0, fmt.Errorf("student t: degrees of freedom %v must be > 0", df)
	}
	if !(tail > 0 && tail <= 0.5) {
		return 0, fmt.Errorf("student t: tail probability %v must be in (0, 0.5]", tail)
	}
	if tail == 0.5 {
		return 0, nil
	}
	upper := func(t float64) float64 { return 0.5 * mathext.RegIncBeta(df/2, 0.5, df/(df+t*t)) }
	lo, hi := 0.0, 1.0 // bounds on ln t
	for upper(math.Exp(hi)) > tail {
		lo = hi
		hi *= 2
		if hi > 1e4 {
			return math.Inf(1), nil
		}
	}
	if upper(1) <= tail {
		lo = -40
		hi = 0
	}
	for range 200 {
		mid := 0.5 * (lo + hi)
		if upper(math.Exp(mid)) > tail {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 1e-15 {
			break
		}
	}
	return math.Exp(0.5 * (lo + hi)), nil
}

// logAcc accumulates ln-values L_p (X_p = exp(L_p)) for a Student-t upper
// confidence bound on the mean of X, in log space: s1 = sum exp(L - max),
// s2 = sum exp(2 (L - max)).
type logAcc struct {
	n      int
	max    float64
	s1, s2 float64
	inf    bool // some L = +Inf
}

func (a *logAcc) add(L float64) {
	if math.IsInf(L, 1) || math.IsNaN(L) {
		a.inf = true
		return
	}
	if a.n == 0 {
		a.n, a.max, a.s1, a.s2 = 1, L, 1, 1
		return
	}
	a.n++
	if L > a.max {
		r := math.Exp(a.max - L)
		a.s1 = a.s1*r + 1
		a.s2 = a.s2*r*r + 1
		a.max = L
		return
	}
	r := math.Exp(L - a.max)
	a.s1 += r
	a.s2 += r * r
}

// estimable reports whether ucb has a value: +Inf when a value was +Inf
// (the expectation is infinite whatever the other values), else at least
// 3 values for the t bound.
func (a *logAcc) estimable() bool { return a.inf || a.n >= 3 }

func (a *logAcc) merge(b logAcc) {
	inf := a.inf || b.inf
	if b.n == 0 {
		a.inf = inf
		return
	}
	if a.n == 0 {
		*a = b
		a.inf = inf
		return
	}
	hi, lo := *a, b
	if lo.max > hi.max {
		hi, lo = lo, hi
	}
	r := math.Exp(lo.max - hi.max)
	*a = logAcc{n: hi.n + lo.n, max: hi.max, s1: hi.s1 + lo.s1*r, s2: hi.s2 + lo.s2*r*r, inf: inf}
}

// ucb returns ln( mean X + t_{df=n-1}(tail) * std X / sqrt(n-1) ), std the
// population standard deviation (Triastcyn & Faltings 2020, ref §7.2): the
// one-sided Student-t upper confidence bound on E[X] at confidence 1 - tail.
// +Inf if some value was +Inf; error if n < 3 (as the released accountant).
func (a *logAcc) ucb(tail float64) (float64, error) {
	if a.inf {
		return math.Inf(1), nil
	}
	if a.n < 3 {
		return 0, fmt.Errorf("Student-t bound needs at least 3 values, have %d", a.n)
	}
	n := float64(a.n)
	m1 := a.s1 / n
	v := max(a.s2/n-m1*m1, 0)
	t, err := StudentTUpper(n-1, tail)
	if err != nil {
		return 0, err
	}
	return a.max + math.Log(m1+t*math.Sqrt(v)/math.Sqrt(n-1)), nil
}

// quantile is the audit's quantile convention (quantile.Linear, "type 7"):
// report.json's p50/p90/p99 depend on it.
func quantile(sorted []float64, q float64) float64 { return quantilepkg.Linear(sorted, q) }

// Histogram is a histogram of len(Counts) equal-width bins. Edges has
// len(Counts)+1 entries, and the last bin is closed. Below and Above count
// the values outside the edges. They are always 0 when the edges span the
// values, as in the one-process audit, and possibly not when the edges were
// fixed before the values were seen, as in a sharded audit's [Part].
type Histogram struct {
	Edges  []float64 `json:"edges"`
	Counts []int     `json:"counts"`
	Below  int       `json:"below,omitempty"`
	Above  int       `json:"above,omitempty"`
}

// newFixedHistogram is an empty histogram on edges (a copy), nil without
// edges.
func newFixedHistogram(edges []float64) *Histogram {
	if len(edges) < 2 {
		return nil
	}
	return &Histogram{Edges: slices.Clone(edges), Counts: make([]int, len(edges)-1)}
}

// add counts x in the bin [Edges[i], Edges[i+1]) holding it (the last bin
// closed), else in Below or Above. A nil histogram counts nothing.
func (h *Histogram) add(x float64) {
	if h == nil {
		return
	}
	n := len(h.Edges)
	switch {
	case x < h.Edges[0]:
		h.Below++
	case x > h.Edges[n-1]:
		h.Above++
	case x == h.Edges[n-1]:
		h.Counts[n-2]++
	default:
		i, _ := slices.BinarySearch(h.Edges, x) // first edge >= x
		if i < n && h.Edges[i] == x {
			h.Counts[i]++ // x on an edge: the bin it opens
		} else {
			h.Counts[i-1]++
		}
	}
}

// merge adds o's counts (the same edges) into h.
func (h *Histogram) merge(o *Histogram) {
	if h == nil || o == nil {
		return
	}
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	h.Below += o.Below
	h.Above += o.Above
}

// histogram bins sorted finite values into bins equal-width bins from the
// smallest to the largest (the last bin closed). The edges are finite for
// any finite values: a range too wide for float64 (bins (hi - lo) = +Inf)
// is computed from halves.
func histogram(sorted []float64, bins int) Histogram {
	if len(sorted) == 0 {
		return Histogram{}
	}
	lo, hi := sorted[0], sorted[len(sorted)-1]
	if hi == lo {
		hi = lo + 1e-12*max(1, math.Abs(lo))
	}
	h := Histogram{Edges: make([]float64, bins+1), Counts: make([]int, bins)}
	b := float64(bins)
	span := hi - lo
	if math.IsInf(b*span, 0) {
		half := hi/2 - lo/2
		for i := range h.Edges {
			x := half * (float64(i) / b)
			h.Edges[i] = lo + x + x
		}
		for _, v := range sorted {
			h.Counts[min(max(int(b*((v/2-lo/2)/half)), 0), bins-1)]++
		}
		h.Edges[bins] = hi
		return h
	}
	for i := range h.Edges {
		h.Edges[i] = lo + span*float64(i)/b
	}
	for _, v := range sorted {
		h.Counts[min(max(int(b*(v-lo)/span), 0), bins-1)]++
	}
	return h
}
