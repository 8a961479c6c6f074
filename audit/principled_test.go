package audit

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/privacy/privacytest"
)

func TestEngineMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	// M spans several tiles; P=13 exercises the tail of the 8-chunks.
	p := privacytest.RandomPosteriors(rng, 37, 4, 13, 0.2) // sigma down to 0.2 < 0.3015: some pairs undefined
	p.AttentionMask = make([]uint8, p.M*p.N)
	for x := range p.M {
		for i := range 4 - rng.IntN(3) { // 2 to 4 real components, the rest padding
			p.AttentionMask[x*p.N+i] = 1
		}
	}
	for _, useMask := range []bool{false, true} {
		for _, dir := range []privacy.GaussianDirection{privacy.DirectionPaper, privacy.DirectionStandard} {
			orders := []float64{1.1, 2.1, 1.05}
			e := newEngine(p, orders, privacy.BoundOptions{UseMask: useMask, Direction: dir})
			var seen, inf atomic.Int64
			err := e.run(context.Background(), 3, e.tiles(0, e.M), func(int) pairSink {
				return func(a, b int, v []float64) {
					seen.Add(1)
					for k, lam := range orders {
						for d, qq := range [][2]int{{a, b}, {b, a}} {
							want := privacytest.NaiveRD(lam, p, qq[0], qq[1], useMask, dir == privacy.DirectionStandard)
							got := v[2*k+d]
							if math.IsInf(want, 1) || math.IsNaN(want) {
								if !math.IsInf(got, 1) {
									t.Errorf("mask %v dir %s lam %v (%d,%d): got %v want +Inf", useMask, dir, lam, qq[0], qq[1], got)
								}
								inf.Add(1)
								continue
							}
							if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
								t.Errorf("mask %v dir %s lam %v (%d,%d): engine %.12g naive %.12g", useMask, dir, lam, qq[0], qq[1], got, want)
							}
						}
					}
				}
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if seen.Load() != int64(p.M*(p.M-1)/2) {
				t.Fatalf("engine visited %d pairs, want %d", seen.Load(), p.M*(p.M-1)/2)
			}
			if inf.Load() == 0 {
				t.Errorf("mask %v dir %s: no undefined pair, test does not cover them", useMask, dir)
			}
		}
	}
}

func TestAuditPrincipled(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	p := privacytest.RandomPosteriors(rng, 23, 5, 6, 0.32)
	// Example 4 has a tiny sigma: pairs (x, 4) have sigma'^2 < 0 for some x.
	for j := range p.P {
		p.Logvar[(4*p.N+2)*p.P+j] = float32(2 * math.Log(0.05))
	}
	r, err := Audit(context.Background(), p, opts(func(o *Options) { o.Workers = 2 }))
	if err != nil {
		t.Fatal(err)
	}
	var vals []float64
	maxv, arg := math.Inf(-1), []int{-1, -1}
	var inval int64
	for q := range p.M {
		for qp := range p.M {
			if q == qp {
				continue
			}
			v := privacytest.NaiveRD(1.1, p, q, qp, false, true)
			if math.IsInf(v, 1) {
				inval++
				continue
			}
			vals = append(vals, v)
			if v > maxv {
				maxv, arg = v, []int{q, qp}
			}
		}
	}
	if inval == 0 || r.InvalidPairs != inval || r.FinitePairs != int64(len(vals)) || r.Pairs != int64(p.M*(p.M-1)) {
		t.Fatalf("pairs %d finite %d invalid %d, want %d %d %d", r.Pairs, r.FinitePairs, r.InvalidPairs, p.M*(p.M-1), len(vals), inval)
	}
	for _, ip := range r.InvalidExamples {
		if ip.Q != 4 && ip.QPrime != 4 || !strings.Contains(ip.Reason, "sigma") {
			t.Errorf("invalid example %+v", ip)
		}
	}
	privacytest.RelClose(t, "rd_max", float64(r.RDMax), maxv, 1e-10)
	if !slices.Equal(r.Argmax, arg) {
		t.Errorf("argmax %v, want %v", r.Argmax, arg)
	}
	var s float64
	for _, v := range vals {
		s += v
	}
	privacytest.RelClose(t, "rd_mean", float64(*r.RDMean), s/float64(len(vals)), 1e-10)
	sort.Float64s(vals)
	privacytest.RelClose(t, "p50", float64(r.Quantiles["p50"]), vals[len(vals)/2], 0.02)
	if n := sumInts(r.Histogram.Counts); n != len(vals) {
		t.Errorf("histogram counts %d, want %d", n, len(vals))
	}

	// BDP: two-pass recomputation from the naive bounds.
	tail := 1 - defaultConfidence
	lnDG := math.Log(1e-5 - tail)
	best, bestPooled := math.Inf(1), math.Inf(1)
	for k, l := range DefaultBDPOrders {
		lam := l + 1
		worst := math.Inf(-1)
		infAny := false
		for x := range p.M {
			var out, in []float64
			for y := range p.M {
				if y != x {
					out = append(out, l*privacytest.NaiveRD(lam, p, x, y, false, true))
					in = append(in, l*privacytest.NaiveRD(lam, p, y, x, false, true))
				}
			}
			worst = math.Max(worst, math.Max(ucbTwoPass(out, tail), ucbTwoPass(in, tail)))
		}
		var pooled []float64
		for a := range p.M {
			for b := a + 1; b < p.M; b++ {
				d := math.Max(privacytest.NaiveRD(lam, p, a, b, false, true), privacytest.NaiveRD(lam, p, b, a, false, true))
				infAny = infAny || math.IsInf(d, 1)
				pooled = append(pooled, l*d)
			}
		}
		bo := r.BDPOrders[k]
		if bo.Finite == infAny {
			t.Errorf("order %v finite=%v but infinite pairs=%v", l, bo.Finite, infAny)
		}
		if !math.IsInf(worst, 1) {
			privacytest.RelClose(t, "bdp worst cost", float64(*bo.Cost), worst, 1e-9)
			best = math.Min(best, (worst-lnDG)/l)
		} else if !math.IsInf(float64(*bo.Cost), 1) {
			t.Errorf("order %v: cost %v, want +Inf", l, bo.Cost)
		}
		if c := ucbTwoPass(pooled, tail); !math.IsInf(c, 1) {
			privacytest.RelClose(t, "bdp pooled cost", float64(*bo.CostPooled), c, 1e-9)
			bestPooled = math.Min(bestPooled, (c-lnDG)/l)
		}
	}
	privacytest.RelClose(t, "bdp_epsilon", float64(*r.BDPEpsilon), best, 1e-9)
	privacytest.RelClose(t, "bdp_epsilon_pooled", float64(*r.BDPEpsilonPooled), bestPooled, 1e-9)
}

func sumInts(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

// ucbTwoPass: ln(mean X + t std X / sqrt(n-1)), X = exp(L), two passes.
func ucbTwoPass(L []float64, tail float64) float64 {
	M := math.Inf(-1)
	for _, v := range L {
		if math.IsInf(v, 1) {
			return math.Inf(1)
		}
		M = math.Max(M, v)
	}
	n := float64(len(L))
	var m float64
	for _, v := range L {
		m += math.Exp(v - M)
	}
	m /= n
	var ss float64
	for _, v := range L {
		d := math.Exp(v-M) - m
		ss += d * d
	}
	tq, _ := StudentTUpper(n-1, tail)
	return M + math.Log(m+tq*math.Sqrt(ss/n)/math.Sqrt(n-1))
}

// TestAuditSampled: a sample (500 of the 24 x 23 = 552 ordered pairs: a
// sample of 552 or more audits every pair, TestAuditSampleCoversAllPairs)
// is reproducible, its max a real pair's and at most the full max, its mean
// near the full mean.
func TestAuditSampled(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	p := privacytest.RandomPosteriors(rng, 24, 3, 4, 0.32)
	opt := opts(func(o *Options) { o.Pairs, o.Seed, o.Workers = 500, 42, 3 })
	r1, err := Audit(context.Background(), p, opt)
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := Audit(context.Background(), p, opt)
	if !r1.Sampled || r1.Pairs != 500 || r1.RDMax != r2.RDMax || *r1.RDMean != *r2.RDMean {
		t.Errorf("sampled audit: %+v vs %+v", r1, r2)
	}
	// The sampled max is attained by a real pair and never exceeds the full max.
	full, _ := Audit(context.Background(), p, DefaultOptions())
	if r1.RDMax > full.RDMax {
		t.Errorf("sample max %v > full max %v", r1.RDMax, full.RDMax)
	}
	privacytest.RelClose(t, "sampled argmax value", float64(r1.RDMax), privacytest.NaiveRD(1.1, p, r1.Argmax[0], r1.Argmax[1], false, true), 1e-10)
	privacytest.RelClose(t, "sampled mean ~ full mean", float64(*r1.RDMean), float64(*full.RDMean), 0.1)
}

// TestAuditOptionErrors: every bad option (on top of DefaultOptions) is an
// error that names it in the library's terms, never a CLI flag; an explicit
// 0 is never replaced by a default; the reference q is explained when it
// was not given.
func TestAuditOptionErrors(t *testing.T) {
	p := privacytest.RandomPosteriors(rand.New(rand.NewPCG(1, 1)), 5, 2, 2, 0.5)
	for _, tc := range []struct {
		set  func(*Options)
		want string
	}{
		{func(o *Options) { o.Order = 1 }, "order 1: the Renyi order lambda must be finite and > 1"},
		{func(o *Options) { o.Order = 0.9 }, "order 0.9: the Renyi order"},
		{func(o *Options) { o.Order = math.Inf(1) }, "order +Inf: the Renyi order"},
		{func(o *Options) { o.Order = 0 }, "order 0: the Renyi order"},
		{func(o *Options) { o.Delta = -1 }, "delta -1: must be in (0, 1)"},
		{func(o *Options) { o.Delta = 0 }, "delta 0: must be in (0, 1)"},
		{func(o *Options) { o.Delta = 1e-20 }, "failure probability"},
		{func(o *Options) { o.Confidence = 1.5 }, "confidence 1.5: must be in (0.5, 1)"},
		{func(o *Options) { o.Confidence = 0 }, "confidence 0: must be in (0.5, 1)"},
		{func(o *Options) { o.BDPOrders = []float64{0.5, -1} }, "bdp_orders -1: every BDP moment order l must be finite and > 0"},
		{func(o *Options) { o.BDPOrders = []float64{} }, "bdp_orders: no BDP moment order"},
		{func(o *Options) { o.Mode = "other" }, `mode "other": want principled or reference`},
		{func(o *Options) { o.Pairs = -3 }, "pairs -3: must be >= 0"},
		{func(o *Options) { o.Direction = "x" }, `gaussian_direction "x": want standard or paper`},
		{func(o *Options) { o.Workers = -1 }, "workers -1: must be >= 0"},
		{func(o *Options) { o.MaxStoredPairs = -1 }, "max_stored_pairs -1: must be >= 0"},
		{func(o *Options) { o.ListInvalid = -1 }, "list_invalid -1: must be >= 0"},
		{func(o *Options) { o.Mode, o.UseMask = privacy.ModeReference, true }, "principled mode only"},
		{func(o *Options) { o.Mode, o.Pairs = privacy.ModeReference, 10 }, "principled mode only"},
		{func(o *Options) { o.Mode, o.Direction = privacy.ModeReference, privacy.DirectionPaper }, "principled mode only"},
		{func(o *Options) { o.Mode, o.BatchSize = privacy.ModeReference, 1 }, "batch_size 1: reference mode: must be >= 2"},
		{func(o *Options) { o.Mode, o.BatchSize = privacy.ModeReference, 0 }, "batch_size 0: reference mode: must be >= 2"},
		{func(o *Options) { o.Mode, o.BatchSize, o.Q = privacy.ModeReference, 4, 1.5 }, "q 1.5: reference mode: the sampling ratio must be in (0, 1]"},
		// q not given, 5 examples < batch size 16: the message says why, not "q must be in (0, 1]".
		{func(o *Options) { o.Mode = privacy.ModeReference }, "q = batch size / M = 16/5 > 1: the file has fewer examples than one batch"},
	} {
		o := opts(tc.set)
		_, err := Audit(context.Background(), p, o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("options %+v: error %v, want %q", o, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "--") {
			t.Errorf("library error names a flag: %v", err)
		}
	}
	if _, err := Audit(context.Background(), privacytest.RandomPosteriors(rand.New(rand.NewPCG(1, 1)), 1, 2, 2, 0.5), DefaultOptions()); err == nil ||
		!strings.Contains(err.Error(), "at least 2 examples") {
		t.Errorf("one example: error %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Audit(ctx, p, DefaultOptions()); err == nil {
		t.Error("cancelled audit succeeded")
	}
}

// TestEngineOnePassEqualsPerOrder: the engine over every order in one pass
// gives, at each order, the bounds of an engine at that order alone, bit for
// bit (the per-order pass is the oracle), undefined pairs included.
func TestEngineOnePassEqualsPerOrder(t *testing.T) {
	p := privacytest.RandomPosteriors(rand.New(rand.NewPCG(19, 20)), 21, 4, 11, 0.3)
	orders := []float64{1.1, 1.05, 1.5, 2.1, 3, 1.2}
	for _, dir := range []privacy.GaussianDirection{privacy.DirectionPaper, privacy.DirectionStandard} {
		collect := func(orders []float64) map[[2]int][]float64 {
			var mu sync.Mutex
			got := map[[2]int][]float64{}
			e := newEngine(p, orders, privacy.BoundOptions{Direction: dir})
			if err := e.run(context.Background(), 2, e.tiles(0, e.M), func(int) pairSink {
				return func(a, b int, v []float64) {
					mu.Lock()
					got[[2]int{a, b}] = slices.Clone(v)
					mu.Unlock()
				}
			}, nil); err != nil {
				t.Fatal(err)
			}
			return got
		}
		all := collect(orders)
		var inf, finite int
		for k, lam := range orders {
			one := collect([]float64{lam})
			for pair, v := range one {
				for d := range 2 {
					if w := all[pair][2*k+d]; math.Float64bits(w) != math.Float64bits(v[d]) {
						t.Errorf("dir %s order %v pair %v direction %d: one pass %v, order alone %v", dir, lam, pair, d, w, v[d])
					}
					if math.IsInf(v[d], 1) {
						inf++
					} else {
						finite++
					}
				}
			}
		}
		if inf == 0 || finite == 0 {
			t.Fatalf("dir %s: %d undefined and %d finite bounds: the test needs both", dir, inf, finite)
		}
	}
}
