package audit

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/privacy/privacytest"
)

// closeRel says whether a and b agree to rel relative (both +Inf, or both
// NaN, count as equal).
func closeRel(a, b, rel float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) || math.IsNaN(a) || math.IsNaN(b) {
		return a == b || (math.IsNaN(a) && math.IsNaN(b))
	}
	return math.Abs(a-b) <= rel*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// finiteBounds are the finite bounds of every ordered pair of p at the
// options' order, sorted (an independent pass of the engine).
func finiteBounds(t *testing.T, p *privacy.Posteriors, opt Options) []float64 {
	t.Helper()
	e := newEngine(p, []float64{opt.Order}, privacy.BoundOptions{UseMask: opt.UseMask, Direction: opt.Direction})
	var vals []float64
	if err := e.run(context.Background(), 1, e.tiles(0, p.M), func(int) pairSink {
		return func(_, _ int, v []float64) {
			for _, x := range v[:2] {
				if !math.IsInf(x, 1) {
					vals = append(vals, x)
				}
			}
		}
	}, nil); err != nil {
		t.Fatal(err)
	}
	slices.Sort(vals)
	return vals
}

// TestShardMergeEqualsAudit runs n shards in process, merges their parts
// (written to files and read back) and compares with the one-process
// audit: counts, undefined pairs, rd_max, argmax and rd_min identical;
// rd_mean and the BDP accountant to 1e-12 relative (sums in another
// order); the quantiles within the sketch's relative accuracy of the
// exact order statistics; the histogram counts every finite bound.
func TestShardMergeEqualsAudit(t *testing.T) {
	p := privacytest.RandomPosteriors(rand.New(rand.NewPCG(21, 22)), 43, 4, 9, 0.3)
	set := synthClipSet(p.N, p.P)
	cases := []struct {
		name string
		n    int
		set  func(*Options)
	}{
		{"1 shard", 1, func(o *Options) {}},
		{"3 shards", 3, func(o *Options) { o.Workers = 2 }},
		{"7 shards, paper direction, mask", 7, func(o *Options) {
			o.Direction, o.UseMask = privacy.DirectionPaper, true
		}},
		{"4 shards, certified skip", 4, func(o *Options) { o.Certified = &set; o.Workers = 1 }},
		{"43 shards (one row each)", 43, func(o *Options) {}},
	}
	p.AttentionMask = make([]uint8, p.M*p.N)
	for x := range p.M {
		for i := range p.N - x%2 {
			p.AttentionMask[x*p.N+i] = 1
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt := DefaultOptions()
			opt.ListInvalid = p.M * p.M // every undefined pair listed: the lists compare
			c.set(&opt)
			want, err := Audit(context.Background(), p, opt)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			var parts []*Part
			for i := range c.n {
				part, err := AuditShard(context.Background(), p, opt, Shard{Index: i, Count: c.n})
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, "part.json")
				if err := WritePart(path, part); err != nil {
					t.Fatal(err)
				}
				if part, err = ReadPart(path); err != nil {
					t.Fatal(err)
				}
				parts = append(parts, part)
			}
			slices.Reverse(parts) // any order
			got, err := Merge(parts)
			if err != nil {
				t.Fatal(err)
			}
			if got.Pairs != want.Pairs || got.FinitePairs != want.FinitePairs || got.InvalidPairs != want.InvalidPairs {
				t.Errorf("pairs %d finite %d invalid %d, one process %d %d %d", got.Pairs, got.FinitePairs, got.InvalidPairs, want.Pairs, want.FinitePairs, want.InvalidPairs)
			}
			if want.InvalidPairs == 0 || want.FinitePairs == 0 {
				t.Fatalf("%d undefined, %d finite pairs: the test needs both", want.InvalidPairs, want.FinitePairs)
			}
			if !reflect.DeepEqual(got.InvalidExamples, want.InvalidExamples) {
				t.Errorf("invalid examples\n%v\none process\n%v", got.InvalidExamples, want.InvalidExamples)
			}
			if math.Float64bits(float64(got.RDMax)) != math.Float64bits(float64(want.RDMax)) || !slices.Equal(got.Argmax, want.Argmax) {
				t.Errorf("rd_max %v at %v, one process %v at %v", got.RDMax, got.Argmax, want.RDMax, want.Argmax)
			}
			if *got.RDMin != *want.RDMin {
				t.Errorf("rd_min %v, one process %v", *got.RDMin, *want.RDMin)
			}
			if !closeRel(float64(*got.RDMean), float64(*want.RDMean), 1e-12) {
				t.Errorf("rd_mean %v, one process %v", *got.RDMean, *want.RDMean)
			}
			vals := finiteBounds(t, p, func() Options { o := opt; _ = o.resolve(p.M); return o }())
			if int64(len(vals)) != want.FinitePairs || got.QuantilesFrom != len(vals) {
				t.Fatalf("%d finite bounds, report %d, quantiles from %d", len(vals), want.FinitePairs, got.QuantilesFrom)
			}
			for _, q := range reportQuantiles {
				h := q.q * float64(len(vals)-1)
				lo, hi := vals[int(math.Floor(h))], vals[int(math.Ceil(h))]
				v := float64(got.Quantiles[q.key])
				a := SketchRelativeAccuracy
				if !(v >= lo-a*math.Abs(lo) && v <= hi+a*math.Abs(hi)) {
					t.Errorf("%s: sketch %v, exact order statistics [%v, %v] (one process %v), accuracy %v", q.key, v, lo, hi, want.Quantiles[q.key], a)
				}
			}
			if got.QuantileAccuracy == nil || *got.QuantileAccuracy != SketchRelativeAccuracy || got.Shards != c.n {
				t.Errorf("quantile accuracy %v, shards %d", got.QuantileAccuracy, got.Shards)
			}
			h := got.Histogram
			tot := h.Below + h.Above
			for _, n := range h.Counts {
				tot += n
			}
			if int64(tot) != want.FinitePairs || len(h.Edges) != histogramBins+1 {
				t.Errorf("histogram counts %d bounds on %d edges, want %d on %d", tot, len(h.Edges), want.FinitePairs, histogramBins+1)
			}
			for _, eps := range [][2]*float64{{(*float64)(got.BDPEpsilon), (*float64)(want.BDPEpsilon)}, {(*float64)(got.BDPEpsilonPooled), (*float64)(want.BDPEpsilonPooled)}} {
				if (eps[0] == nil) != (eps[1] == nil) || (eps[0] != nil && !closeRel(*eps[0], *eps[1], 1e-12)) {
					t.Errorf("bdp epsilon %v, one process %v", eps[0], eps[1])
				}
			}
			if *got.BDPWorstExample != *want.BDPWorstExample || !closeRel(float64(*got.BDPOrder), float64(*want.BDPOrder), 0) {
				t.Errorf("bdp worst example %d at order %v, one process %d at %v", *got.BDPWorstExample, *got.BDPOrder, *want.BDPWorstExample, *want.BDPOrder)
			}
			finite := 0
			for k, g := range got.BDPOrders {
				w := want.BDPOrders[k]
				if g.Finite != w.Finite || g.InfPairs != w.InfPairs || g.WorstExample != w.WorstExample || g.Skipped != w.Skipped {
					t.Errorf("BDP order %v: %+v, one process %+v", g.Order, g, w)
				}
				for _, f := range [][2]*float64{{(*float64)(g.Cost), (*float64)(w.Cost)}, {(*float64)(g.Epsilon), (*float64)(w.Epsilon)}, {(*float64)(g.EpsPooled), (*float64)(w.EpsPooled)}} {
					if (f[0] == nil) != (f[1] == nil) || (f[0] != nil && !closeRel(*f[0], *f[1], 1e-12)) {
						t.Errorf("BDP order %v: %v, one process %v", g.Order, f[0], f[1])
					}
				}
				if w.Epsilon != nil && !math.IsInf(float64(*w.Epsilon), 1) {
					finite++
				}
			}
			if finite == 0 {
				t.Errorf("no finite BDP order: the accountant's sums are not compared")
			}
		})
	}
}

// TestMergeErrors: parts that do not make one audit are refused with the
// reason.
func TestMergeErrors(t *testing.T) {
	p := privacytest.RandomPosteriors(rand.New(rand.NewPCG(23, 24)), 10, 3, 4, 0.5)
	opt := DefaultOptions()
	shard := func(p *privacy.Posteriors, opt Options, i, n int) *Part {
		part, err := AuditShard(context.Background(), p, opt, Shard{Index: i, Count: n})
		if err != nil {
			t.Fatal(err)
		}
		return part
	}
	other := privacytest.RandomPosteriors(rand.New(rand.NewPCG(25, 26)), 10, 3, 4, 0.5)
	order := opt
	order.Order = 1.2
	for _, c := range []struct {
		name  string
		parts []*Part
		want  string
	}{
		{"none", nil, "no part"},
		{"missing", []*Part{shard(p, opt, 0, 3), shard(p, opt, 2, 3)}, "2 parts of an audit in 3 shards"},
		{"repeated", []*Part{shard(p, opt, 0, 2), shard(p, opt, 0, 2)}, "shard 1/2 missing"},
		{"other file", []*Part{shard(p, opt, 0, 2), shard(other, opt, 1, 2)}, "parts of different files"},
		{"other options", []*Part{shard(p, opt, 0, 2), shard(p, order, 1, 2)}, "options"},
		{"other count", []*Part{shard(p, opt, 0, 2), shard(p, opt, 1, 3)}, "one of 3 shards"},
	} {
		if _, err := Merge(c.parts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	for _, s := range []Shard{{-1, 2}, {2, 2}, {0, 0}} {
		if _, err := AuditShard(context.Background(), p, opt, s); err == nil || !strings.Contains(err.Error(), "want 0 <= index < count") {
			t.Errorf("shard %v: error %v", s, err)
		}
	}
	sampled := opt
	sampled.Pairs = 5
	if _, err := AuditShard(context.Background(), p, sampled, Shard{0, 2}); err == nil || !strings.Contains(err.Error(), "no pair sample") {
		t.Errorf("sampled shard: error %v", err)
	}
}

// FuzzDecodePart: any bytes either fail to decode with an error or give a
// part that a one-shard Merge handles without panicking.
func FuzzDecodePart(f *testing.F) {
	p := privacytest.RandomPosteriors(rand.New(rand.NewPCG(27, 28)), 4, 2, 1, 0.3)
	opt := DefaultOptions()
	opt.BDPOrders = []float64{0.1}
	for _, n := range []int{1, 2} {
		part, err := AuditShard(context.Background(), p, opt, Shard{Index: 0, Count: n})
		if err != nil {
			f.Fatal(err)
		}
		data, err := json.Marshal(part)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"format":"nvdp-audit-part/1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		part, err := DecodePart(data)
		if err != nil {
			return
		}
		_, _ = Merge([]*Part{part})
	})
}
