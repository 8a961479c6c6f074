package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/privacy"
)

// Sharded audits (docs/privacy.md, "Shards"). Shard i of n audits the
// complete rows of the i-th block of first indices q: every ordered pair
// (q, q') with q in [i M/n, (i+1) M/n). It evaluates every unordered pair
// with an example in its rows (both directions at once, as the engine
// does), so the BDP sums of its examples are complete within the shard;
// a pair with one example in each of two shards is evaluated by both (the
// total work is (2 - 1/n) times the one-process audit's at most). Merge
// gives the one-process report: counts, rd_max and argmax, rd_min and the
// undefined pairs exactly, rd_mean and the BDP accountant as sums in
// another order (relative differences ~1e-15, as between runs with
// different worker counts); the quantiles from a mergeable sketch
// (DDSketch, relative accuracy SketchRelativeAccuracy) and the histogram
// on edges fixed before the pass (a seeded sample of edgeSamplePairs pairs,
// the same in every shard).

// partFormat names the JSON layout of a shard's part file.
const partFormat = "nvdp-audit-part/1"

// SketchRelativeAccuracy is the relative accuracy alpha of the quantile
// sketch of a sharded audit: a quantile q of the merged report is within
// alpha |x_q| of the value x_q of rank q (n-1) among the finite bounds. The
// sketch is DDSketch, from Masson, Rim and Lee 2019, as in
// github.com/DataDog/sketches-go.
const SketchRelativeAccuracy = 0.005

// sketchMaxBins bounds each sketch's store (positive and negative values):
// 4096 bins at alpha = 0.005 span a ratio of e^41 between the largest and
// the smallest bound before the lowest bins are collapsed.
const sketchMaxBins = 4096

// edgeSamplePairs is how many ordered pairs (drawn with PCG seeded with
// edgeSeed, the same in every shard) fix the histogram's edges of a sharded
// audit: 20 equal bins from the smallest to the largest finite bound of the
// sample; bounds outside them are counted in Histogram.Below / Above.
const edgeSamplePairs = 1024

// edgeSeed seeds the sample that fixes the histogram's edges ("edge").
const edgeSeed = 0x65646765

// histogramBins is the number of bins of the audit's histograms.
const histogramBins = 20

// Shard is shard Index of Count of an all-pairs audit, with
// 0 <= Index < Count.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// Validate checks 0 <= Index < Count.
func (s Shard) Validate() error {
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("shard %d/%d: want 0 <= index < count", s.Index, s.Count)
	}
	return nil
}

// Rows returns the block [lo, hi) of first indices q of the shard among m
// examples, which is [Index m / Count, (Index+1) m / Count).
func (s Shard) Rows(m int) (lo, hi int) {
	return int(int64(s.Index) * int64(m) / int64(s.Count)), int(int64(s.Index+1) * int64(m) / int64(s.Count))
}

// partSpec is what a shard's collector needs besides the rows.
type partSpec struct {
	edges []float64 // the histogram's edges (nil: no finite bound in the sample)
}

// newSketch is an empty quantile sketch of a part.
func (*partSpec) newSketch() *ddsketch.DDSketch {
	s, err := ddsketch.LogCollapsingLowestDenseDDSketch(SketchRelativeAccuracy, sketchMaxBins)
	if err != nil {
		panic(err) // a constant accuracy in (0, 1)
	}
	return s
}

// PartOptions are the options a part was computed with; the parts of one
// audit must agree on all of them.
type PartOptions struct {
	Order       float64                   `json:"order"`
	Delta       float64                   `json:"delta"`
	Confidence  float64                   `json:"confidence"`
	BDPOrders   []float64                 `json:"bdp_orders"`
	Mask        bool                      `json:"mask"`
	Direction   privacy.GaussianDirection `json:"gaussian_direction"`
	ListInvalid int                       `json:"list_invalid"`
	Skipped     []string                  `json:"skipped,omitempty"` // per BDP order: why not evaluated ("" evaluated)
}

// PartAcc is a BDP log-space accumulator in a part file.
type PartAcc struct {
	N   int     `json:"n"`
	Max float64 `json:"max"`
	S1  float64 `json:"s1"`
	S2  float64 `json:"s2"`
	Inf bool    `json:"inf,omitempty"`
}

// PartBDP is one BDP moment order of a part. It holds the undefined ordered
// pairs of its rows; the pooled accumulator over its unordered pairs {a < b}
// with a in its rows; and the complete per-example accumulators of its rows.
// Individual[2(x-lo)+d] is l D(x||x') over x' for d = 0, and l D(x'||x) for
// d = 1.
type PartBDP struct {
	InfPairs   int64     `json:"inf_pairs"`
	Pooled     PartAcc   `json:"pooled"`
	Individual []PartAcc `json:"individual"`
}

// Part is the result of one shard of a sharded audit, from [AuditShard], and
// the input of [Merge]. Its JSON is a part file; see [WritePart] and
// [ReadPart].
type Part struct {
	Format string `json:"format"` // partFormat
	Shard  Shard  `json:"shard"`
	Rows   [2]int `json:"rows"` // [lo, hi): the first indices q audited
	// Fingerprint is the SHA-256 of the posteriors (shapes, tensors,
	// prior): parts of different files are not merged.
	Fingerprint string      `json:"fingerprint"`
	Options     PartOptions `json:"options"`
	Examples    int         `json:"examples"`
	Components  int         `json:"components"`
	Dims        int         `json:"dims"`
	// Statistics of the ordered pairs of the rows at the audit's order.
	FinitePairs  int64           `json:"finite_pairs"`
	InvalidPairs int64           `json:"invalid_pairs"`
	Sum          jsonfloat.Float `json:"sum"` // of the finite bounds
	RDMax        jsonfloat.Float `json:"rd_max"`
	RDMin        jsonfloat.Float `json:"rd_min"`
	Argmax       [2]int          `json:"argmax"` // -1, -1 when no pair is finite
	// InvalidExamples are the first undefined pairs met, with reasons.
	InvalidExamples []InvalidPair `json:"invalid_examples,omitempty"`
	// Sketch is the DDSketch of the finite bounds, SketchRelativeAccuracy
	// its accuracy; Unsketched counts the finite bounds beyond the
	// sketch's range (|x| > about 1e308, or so small they count as 0: none).
	Sketch                 PartSketch `json:"sketch"`
	SketchRelativeAccuracy float64    `json:"sketch_relative_accuracy"`
	Unsketched             int64      `json:"unsketched,omitempty"`
	Histogram              *Histogram `json:"histogram,omitempty"` // on the fixed edges
	BDP                    []PartBDP  `json:"bdp"`
	Seconds                float64    `json:"seconds"`
	// Metadata and the prior are the file's (Posteriors): with them the
	// merge rebuilds the clip set of the file (ClipSet).
	Metadata map[string]string `json:"metadata,omitempty"`
	PriorMu  []float64         `json:"prior_mu"`
	PriorVar []float64         `json:"prior_var"`
}

// ClipSet is ClipSetFromMetadata of the file the part was computed from.
func (p *Part) ClipSet() (set privacy.ClipSet, ok bool, err error) {
	return privacy.ClipSetFromMetadata(&privacy.Posteriors{M: p.Examples, N: p.Components, P: p.Dims, PriorMu: p.PriorMu, PriorVar: p.PriorVar, Metadata: p.Metadata})
}

// AuditShard computes shard's part of the principled all-pairs audit of p;
// see the package's sharding notes above [Shard]. opt is as for [Audit]. A
// pair sample, Pairs, and the reference mode are errors, and so is an invalid
// shard. The part is merged with the others by [Merge].
func AuditShard(ctx context.Context, p *privacy.Posteriors, opt Options, shard Shard) (*Part, error) {
	if err := shard.Validate(); err != nil {
		return nil, err
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if opt.Mode == privacy.ModeReference || opt.Pairs != 0 {
		return nil, fmt.Errorf("audit options: a shard audits every ordered pair of its rows in principled mode (no reference mode, no pair sample)")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := opt.resolve(p.M); err != nil {
		return nil, err
	}
	start := time.Now()
	skip, err := certifiedSkips(p, opt)
	if err != nil {
		return nil, err
	}
	c := newCollector(p, opt, skip)
	c.stride = 0 // the values are sketched, not kept
	c.lo, c.hi = shard.Rows(p.M)
	c.part = &partSpec{edges: c.edgeSample(ctx)}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := c.collect(ctx)
	if err != nil {
		return nil, err
	}
	part := &Part{Format: partFormat, Shard: shard, Rows: [2]int{c.lo, c.hi}, Fingerprint: fingerprint(p),
		Options: PartOptions{Order: opt.Order, Delta: opt.Delta, Confidence: opt.Confidence, BDPOrders: opt.BDPOrders,
			Mask: opt.UseMask, Direction: opt.Direction, ListInvalid: opt.ListInvalid, Skipped: skip},
		Examples: p.M, Components: p.N, Dims: p.P,
		FinitePairs: st.rd.finite, InvalidPairs: st.rd.invalid, Sum: jsonfloat.Float(st.rd.sum),
		RDMax: jsonfloat.Float(st.rd.max), RDMin: jsonfloat.Float(st.rd.min), Argmax: [2]int{st.rd.argA, st.rd.argB},
		InvalidExamples:        listInvalid(st.rd.invalidList, c, p),
		SketchRelativeAccuracy: SketchRelativeAccuracy, Histogram: st.rd.hist, Metadata: p.Metadata, PriorMu: p.PriorMu, PriorVar: p.PriorVar}
	part.Sketch, part.Unsketched = encodeSketch(st.rd.sketch), st.rd.unsketched
	M := p.M
	for k := range opt.BDPOrders {
		b := PartBDP{InfPairs: st.bdp.infPairs[k], Pooled: partAcc(st.bdp.pooled[k])}
		for x := c.lo; x < c.hi; x++ {
			b.Individual = append(b.Individual, partAcc(st.bdp.indiv[(k*M+x)*2]), partAcc(st.bdp.indiv[(k*M+x)*2+1]))
		}
		part.BDP = append(part.BDP, b)
	}
	part.Seconds = time.Since(start).Seconds()
	return part, nil
}

func partAcc(a logAcc) PartAcc { return PartAcc{N: a.n, Max: a.max, S1: a.s1, S2: a.s2, Inf: a.inf} }

// check validates an accumulator of at most n values: 0 <= N <= n, the
// sums finite and >= 0 (at least 1 with a value: the largest term is
// exp(0)), the maximum finite.
func (a PartAcc) check(n int64) error {
	fin := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if a.N < 0 || int64(a.N) > n || !fin(a.Max) || !fin(a.S1) || !fin(a.S2) || a.S1 < 0 || a.S2 < 0 || (a.N > 0 && (a.S1 < 1 || a.S2 < 1)) {
		return fmt.Errorf("accumulator %+v: want 0 <= n <= %d, finite max, sums >= 1 (0 when empty)", a, n)
	}
	return nil
}

func (a PartAcc) logAcc() logAcc { return logAcc{n: a.N, max: a.Max, s1: a.S1, s2: a.S2, inf: a.Inf} }

// edgeSample fixes the histogram's edges from the finite bounds at the
// audit's order of edgeSamplePairs ordered pairs drawn uniformly (PCG
// seeded with edgeSeed): the same edges in every shard. Nil when no sampled
// bound is finite.
func (c *collector) edgeSample(ctx context.Context) []float64 {
	rng := rand.New(rand.NewPCG(edgeSeed, sampleStream))
	var buf tileBuf
	var vals []float64
	for i := range edgeSamplePairs {
		if i%sampleBlock == 0 && ctx.Err() != nil {
			return nil
		}
		q, qp := c.draw(rng)
		a, b, d := q, qp, 0
		if a > b {
			a, b, d = b, a, 1
		}
		c.e.tile(&buf, a, a+1, b, b+1, func(_, _ int, v []float64) {
			if !math.IsInf(v[d], 1) {
				vals = append(vals, v[d])
			}
		})
	}
	if len(vals) == 0 {
		return nil
	}
	slices.Sort(vals)
	return histogram(vals, histogramBins).Edges
}

// PartSketch is a DDSketch in a part file: the bins of its positive and
// negative value stores, each an index in the logarithmic mapping of
// [SketchRelativeAccuracy] and a count, and the count of zeros. Decoding
// iterates over the listed bins only, so no count in the input sets a loop's
// length.
type PartSketch struct {
	ZeroCount float64     `json:"zero_count"`
	Positive  []SketchBin `json:"positive"`
	Negative  []SketchBin `json:"negative"`
}

// SketchBin is one bin of a sketch's store.
type SketchBin struct {
	Index int     `json:"i"`
	Count float64 `json:"n"`
}

func encodeSketch(s *ddsketch.DDSketch) PartSketch {
	bins := func(st interface {
		ForEach(func(int, float64) bool)
	}) []SketchBin {
		b := []SketchBin{}
		st.ForEach(func(i int, c float64) bool {
			b = append(b, SketchBin{i, c})
			return false
		})
		return b
	}
	return PartSketch{ZeroCount: s.GetZeroCount(), Positive: bins(s.GetPositiveValueStore()), Negative: bins(s.GetNegativeValueStore())}
}

// mergeInto adds the bins of p to s (a sketch of the same mapping).
func (p PartSketch) mergeInto(s *ddsketch.DDSketch) {
	_ = s.AddWithCount(0, p.ZeroCount) // a count >= 0 (check)
	for _, b := range p.Positive {
		s.GetPositiveValueStore().AddWithCount(b.Index, b.Count)
	}
	for _, b := range p.Negative {
		s.GetNegativeValueStore().AddWithCount(b.Index, b.Count)
	}
}

// check validates the counts (finite, >= 0, whole) and indices (within
// the mapping of SketchRelativeAccuracy) and returns the total count.
func (p PartSketch) check() (float64, error) {
	s := (*partSpec)(nil).newSketch()
	lo, hi := s.Index(s.MinIndexableValue()), s.Index(s.MaxIndexableValue())
	whole := func(c float64) bool { return c >= 0 && c < 1<<53 && c == math.Trunc(c) }
	if !whole(p.ZeroCount) {
		return 0, fmt.Errorf("sketch: zero count %v, want a whole number >= 0", p.ZeroCount)
	}
	tot := p.ZeroCount
	for _, bins := range [][]SketchBin{p.Positive, p.Negative} {
		for _, b := range bins {
			if !whole(b.Count) || b.Index < lo || b.Index > hi {
				return 0, fmt.Errorf("sketch: bin %d count %v, want an index in [%d, %d] and a whole count >= 0", b.Index, b.Count, lo, hi)
			}
			tot += b.Count
		}
	}
	return tot, nil
}

// fingerprint is the hex SHA-256 of the shapes, tensors and prior of p.
func fingerprint(p *privacy.Posteriors) string {
	h := sha256.New()
	var b [8]byte
	word := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	for _, v := range []int{p.M, p.N, p.P} {
		word(uint64(v))
	}
	buf := make([]byte, 0, 1<<16)
	for _, t := range [][]float32{p.Mu, p.Logvar, p.Alpha} {
		for i, v := range t {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			if len(buf) == cap(buf) || i == len(t)-1 {
				h.Write(buf)
				buf = buf[:0]
			}
		}
	}
	h.Write(p.AttentionMask)
	for _, t := range [][]float64{p.PriorMu, p.PriorVar} {
		for _, v := range t {
			word(math.Float64bits(v))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Merge combines the parts of every shard of one audit, in any order, into
// the report of the one-process audit. The counts, rd_max with its argmax,
// rd_min and the undefined pairs are exact; rd_mean and the BDP accountant
// come from the parts' sums; the quantiles come from the merged sketch, see
// Report.QuantileAccuracy; and the histogram is on the parts' fixed edges.
//
// It returns an error for no part; parts of different files, options or
// shard counts; a shard missing or repeated; a part inconsistent with its
// shard; and a sketch that does not decode.
func Merge(parts []*Part) (*Report, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("audit merge: no part")
	}
	parts = slices.Clone(parts)
	slices.SortFunc(parts, func(a, b *Part) int { return a.Shard.Index - b.Shard.Index })
	first := parts[0]
	n := first.Shard.Count
	if len(parts) != n {
		return nil, fmt.Errorf("audit merge: %d parts of an audit in %d shards", len(parts), n)
	}
	for i, pt := range parts {
		if err := first.compatible(pt); err != nil {
			return nil, fmt.Errorf("audit merge: shard %d/%d: %w", pt.Shard.Index, pt.Shard.Count, err)
		}
		if pt.Shard.Index != i {
			return nil, fmt.Errorf("audit merge: shard %d/%d missing (or shard %d repeated)", i, n, pt.Shard.Index)
		}
	}
	o := first.Options
	M := first.Examples
	opt := DefaultOptions()
	opt.Order, opt.Delta, opt.Confidence, opt.BDPOrders, opt.UseMask, opt.Direction, opt.ListInvalid =
		o.Order, o.Delta, o.Confidence, o.BDPOrders, o.Mask, o.Direction, o.ListInvalid
	rd := rdStats{max: math.Inf(-1), argA: -1, argB: -1, min: math.Inf(1)}
	sketch := (*partSpec)(nil).newSketch()
	hist := newFixedHistogram(nil)
	if first.Histogram != nil {
		hist = newFixedHistogram(first.Histogram.Edges)
	}
	K := len(o.BDPOrders)
	bdp := bdpStats{indiv: make([]logAcc, K*M*2), pooled: make([]logAcc, K), infPairs: make([]int64, K)}
	var seconds float64
	var unsketched int64
	for _, pt := range parts {
		ps := rdStats{finite: pt.FinitePairs, invalid: pt.InvalidPairs, sum: float64(pt.Sum), max: float64(pt.RDMax),
			argA: pt.Argmax[0], argB: pt.Argmax[1], invalidList: pt.InvalidExamples}
		rd.merge(&ps)
		rd.min = math.Min(rd.min, float64(pt.RDMin))
		pt.Sketch.mergeInto(sketch)
		unsketched += pt.Unsketched
		hist.merge(pt.Histogram)
		for k, b := range pt.BDP {
			bdp.infPairs[k] += b.InfPairs
			bdp.pooled[k].merge(b.Pooled.logAcc())
			for j, a := range b.Individual {
				bdp.indiv[(k*M+pt.Rows[0])*2+j] = a.logAcc()
			}
		}
		seconds += pt.Seconds
	}
	r := &Report{Mode: privacy.ModePrincipled, Order: o.Order, Delta: o.Delta, Confidence: o.Confidence,
		Examples: M, Components: first.Components, Dims: first.Dims, Mask: o.Mask, GaussianDirection: o.Direction,
		Shards: n, Seconds: seconds, Metadata: first.Metadata}
	r.InvalidExamples = firstInvalid(rd.invalidList, o.ListInvalid)
	if summariseCounts(r, &rd) {
		sketchStatistics(r, sketch, rd.min, hist)
	}
	if unsketched > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d finite bounds beyond the sketch's range (|x| > %g) are not in the quantiles", unsketched, sketch.MaxIndexableValue()))
	}
	r.Notes = append(r.Notes, fmt.Sprintf("merged from %d shards; seconds is the sum of theirs", n))
	if err := accountantOf(r, &bdp, opt, M, o.Skipped); err != nil {
		return nil, err
	}
	return r, nil
}

// sketchStatistics writes rd_min (exact), the quantiles from the merged
// sketch and the histogram on the fixed edges into r, with notes on what
// they are.
func sketchStatistics(r *Report, sketch *ddsketch.DDSketch, rdMin float64, hist *Histogram) {
	r.RDMin = jsonfloat.New(rdMin)
	r.Quantiles = map[string]jsonfloat.Float{}
	for _, q := range reportQuantiles {
		v, err := sketch.GetValueAtQuantile(q.q)
		if err != nil {
			v = math.NaN()
		}
		r.Quantiles[q.key] = jsonfloat.Float(v)
	}
	r.QuantilesFrom = int(sketch.GetCount())
	acc := SketchRelativeAccuracy
	r.QuantileAccuracy = &acc
	r.Notes = append(r.Notes, fmt.Sprintf("quantiles from a DDSketch of every finite bound: within %g relative of the exact quantile (quantile_relative_accuracy); rd_max, rd_min, rd_mean and the counts are exact", acc))
	if hist != nil {
		r.Histogram = hist
		r.Notes = append(r.Notes, fmt.Sprintf("histogram edges fixed before the pass from %d sampled pairs (seeded); %d bounds below and %d above them (histogram.below, histogram.above)", edgeSamplePairs, hist.Below, hist.Above))
	}
}

// compatible says why o cannot be merged with p (nil: it can).
func (p *Part) compatible(o *Part) error {
	switch {
	case o.Format != partFormat:
		return fmt.Errorf("format %q, want %q", o.Format, partFormat)
	case o.Shard.Validate() != nil:
		return o.Shard.Validate()
	case o.Shard.Count != p.Shard.Count:
		return fmt.Errorf("one of %d shards, the first part one of %d", o.Shard.Count, p.Shard.Count)
	case o.Fingerprint != p.Fingerprint:
		return fmt.Errorf("posteriors fingerprint %.12s..., the first part's %.12s...: parts of different files", o.Fingerprint, p.Fingerprint)
	case o.Examples != p.Examples || o.Components != p.Components || o.Dims != p.Dims:
		return fmt.Errorf("shape %d x %d x %d, the first part's %d x %d x %d", o.Examples, o.Components, o.Dims, p.Examples, p.Components, p.Dims)
	case o.SketchRelativeAccuracy != p.SketchRelativeAccuracy:
		return fmt.Errorf("sketch accuracy %v, the first part's %v", o.SketchRelativeAccuracy, p.SketchRelativeAccuracy)
	}
	a, _ := json.Marshal(o.Options)
	b, _ := json.Marshal(p.Options)
	if !bytes.Equal(a, b) {
		return fmt.Errorf("options %s, the first part's %s", a, b)
	}
	if (o.Histogram == nil) != (p.Histogram == nil) || (o.Histogram != nil && !slices.Equal(o.Histogram.Edges, p.Histogram.Edges)) {
		return fmt.Errorf("histogram edges differ from the first part's")
	}
	if lo, hi := o.Shard.Rows(o.Examples); o.Rows != [2]int{lo, hi} {
		return fmt.Errorf("rows %v, the shard's are [%d, %d)", o.Rows, lo, hi)
	}
	for k, b := range o.BDP {
		if len(b.Individual) != 2*(o.Rows[1]-o.Rows[0]) {
			return fmt.Errorf("BDP order %d: %d per-example accumulators, want 2 per row (%d)", k, len(b.Individual), 2*(o.Rows[1]-o.Rows[0]))
		}
	}
	if len(o.BDP) != len(o.Options.BDPOrders) {
		return fmt.Errorf("%d BDP orders, the options list %d", len(o.BDP), len(o.Options.BDPOrders))
	}
	if o.Histogram != nil && len(o.Histogram.Counts) != len(o.Histogram.Edges)-1 {
		return fmt.Errorf("histogram of %d counts on %d edges", len(o.Histogram.Counts), len(o.Histogram.Edges))
	}
	return nil
}

// WritePart writes part as JSON to path atomically. One shard's part is
// written by one process, so it first removes, with a log line, the temporary
// files that a process killed while writing path left beside it, named
// "." + name + ".tmp" + digits; see atomicfile.RemoveStaleOf.
func WritePart(path string, part *Part) error {
	if stale, err := atomicfile.RemoveStaleOf(path); err != nil {
		return fmt.Errorf("audit part: %w", err)
	} else if len(stale) > 0 {
		slog.Warn("audit part: removed the temporary files of an interrupted write", "out", path, "files", stale)
	}
	return atomicfile.WriteJSON(path, part)
}

// ReadPart reads a part file. Errors name the file: not JSON, another
// format, an invalid shard, a part inconsistent with its shard.
func ReadPart(path string) (*Part, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := DecodePart(data)
	if err != nil {
		return nil, fmt.Errorf("audit part %s: %w", path, err)
	}
	return p, nil
}

// DecodePart decodes and checks the JSON of a part file.
func DecodePart(data []byte) (*Part, error) {
	var p Part
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, err
	}
	if err := p.compatible(&p); err != nil {
		return nil, err
	}
	if p.Examples < 2 || p.Components < 1 || p.Dims < 1 {
		return nil, fmt.Errorf("shape %d x %d x %d: want at least 2 examples, 1 component, 1 dim", p.Examples, p.Components, p.Dims)
	}
	tot, err := p.Sketch.check()
	if err != nil {
		return nil, err
	}
	if p.Unsketched < 0 || tot != float64(p.FinitePairs-p.Unsketched) {
		return nil, fmt.Errorf("sketch of %v bounds (%d unsketched), the part has %d finite pairs", tot, p.Unsketched, p.FinitePairs)
	}
	rows := int64(p.Rows[1] - p.Rows[0])
	for k, b := range p.BDP {
		if b.InfPairs < 0 || b.InfPairs > rows*int64(p.Examples-1) {
			return nil, fmt.Errorf("BDP order %d: %d undefined pairs of %d", k, b.InfPairs, rows*int64(p.Examples-1))
		}
		if err := b.Pooled.check(rows * int64(p.Examples-1)); err != nil {
			return nil, fmt.Errorf("BDP order %d: pooled %w", k, err)
		}
		for i, a := range b.Individual {
			if err := a.check(int64(p.Examples - 1)); err != nil {
				return nil, fmt.Errorf("BDP order %d: example %d: %w", k, p.Rows[0]+i/2, err)
			}
		}
	}
	if len(p.PriorMu) != p.Dims || len(p.PriorVar) != p.Dims {
		return nil, fmt.Errorf("prior_mu/prior_var have %d/%d values, want P = %d", len(p.PriorMu), len(p.PriorVar), p.Dims)
	}
	if p.FinitePairs < 0 || p.InvalidPairs < 0 || p.FinitePairs+p.InvalidPairs != int64(p.Rows[1]-p.Rows[0])*int64(p.Examples-1) {
		return nil, fmt.Errorf("%d finite + %d undefined pairs, want (rows %d) x (M-1 = %d)", p.FinitePairs, p.InvalidPairs, p.Rows[1]-p.Rows[0], p.Examples-1)
	}
	for _, ip := range p.InvalidExamples {
		if ip.Q < 0 || ip.Q >= p.Examples || ip.QPrime < 0 || ip.QPrime >= p.Examples {
			return nil, fmt.Errorf("invalid pair (%d, %d) outside the %d examples", ip.Q, ip.QPrime, p.Examples)
		}
	}
	if len(p.Options.Skipped) != 0 && len(p.Options.Skipped) != len(p.Options.BDPOrders) {
		return nil, fmt.Errorf("%d skip reasons for %d BDP orders", len(p.Options.Skipped), len(p.Options.BDPOrders))
	}
	if p.FinitePairs > 0 && (p.Argmax[0] < 0 || p.Argmax[0] >= p.Examples || p.Argmax[1] < 0 || p.Argmax[1] >= p.Examples) {
		return nil, fmt.Errorf("argmax %v outside the %d examples", p.Argmax, p.Examples)
	}
	return &p, nil
}
