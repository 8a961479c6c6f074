package privacy

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
)

// randomPosteriors draws posteriors around the clipping region: sigma in
// [sigmaLo, 1], alpha in [0.1, 1], |mu| < 1, prior component at index 0.
func randomPosteriors(rng *rand.Rand, m, n, p int, sigmaLo float64) *Posteriors {
	po := NewPosteriors(m, n, p)
	for x := range m {
		for i := range n {
			c := x*n + i
			po.Alpha[c] = float32(0.1 + 0.9*rng.Float64())
			if i == 0 {
				po.Alpha[c] = 1
			}
			for j := range p {
				k := c*p + j
				if i == 0 {
					continue // mu 0, logvar 0
				}
				po.Mu[k] = float32(rng.NormFloat64() * 0.4)
				s := sigmaLo + (1-sigmaLo)*rng.Float64()
				po.Logvar[k] = float32(2 * math.Log(s))
			}
		}
	}
	return po
}

// naiveRD is an independent float64 transcription of the paper's Eq. rdp
// (kappa = 1) for the ordered pair (q, q'), Gaussian term as printed; mask: a
// component counts if unpadded in both, totals over each one's unpadded ones.
// Returns +Inf where a log-gamma argument or a radicand is <= 0.
func naiveRD(lam float64, p *Posteriors, q, qp int, useMask bool, swap ...bool) float64 {
	N, P := p.N, p.P
	on := func(x, i int) bool { return !useMask || p.AttentionMask == nil || p.AttentionMask[x*N+i] == 1 }
	lg := func(x float64) float64 {
		if x <= 0 {
			return math.NaN()
		}
		v, _ := math.Lgamma(x)
		return v
	}
	var A, Ap float64
	for i := range N {
		if on(q, i) {
			A += float64(p.Alpha[q*N+i])
		}
		if on(qp, i) {
			Ap += float64(p.Alpha[qp*N+i])
		}
	}
	total := -(1/(lam-1)*lg(lam*A-(lam-1)*Ap) + lg(Ap) - lam/(lam-1)*lg(A))
	for i := range N {
		if !on(q, i) || !on(qp, i) {
			continue
		}
		a, ap := float64(p.Alpha[q*N+i]), float64(p.Alpha[qp*N+i])
		total += 1/(lam-1)*lg(lam*a-(lam-1)*ap) + lg(ap) - lam/(lam-1)*lg(a)
		var sq, lt float64
		for j := range P {
			k := (q*N+i)*P + j
			kp := (qp*N+i)*P + j
			sig := math.Sqrt(math.Exp(float64(p.Logvar[k])))
			sigp := math.Sqrt(math.Exp(float64(p.Logvar[kp])))
			if len(swap) > 0 && swap[0] {
				sig, sigp = sigp, sig
			}
			sprime := math.Sqrt((1-lam)*sigp*sigp + lam*sig*sig)
			z := (float64(p.Mu[k]) - float64(p.Mu[kp])) / sprime
			sq += z * z
			lt += math.Log(sprime / (math.Pow(sigp, 1-lam) * math.Pow(sig, lam)))
		}
		total += lam/2*sq + 1/(1-lam)*lt
	}
	if math.IsNaN(total) {
		return math.Inf(1)
	}
	return total
}

func TestPairBoundMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := randomPosteriors(rng, 6, 5, 7, 0.32)
	for _, lam := range []float64{1.05, 1.1, 2.1, 3} {
		for q := range p.M {
			for qp := range p.M {
				if q == qp {
					continue
				}
				got, err := PairBound(lam, p.View(q), p.View(qp))
				if err != nil {
					t.Fatal(err)
				}
				want := naiveRD(lam, p, q, qp, false, true)
				if math.IsInf(want, 1) {
					if !math.IsInf(got.Total, 1) || got.Undefined == "" {
						t.Errorf("lam %v (%d,%d): got %v (%q), want +Inf", lam, q, qp, got.Total, got.Undefined)
					}
					continue
				}
				if math.Abs(got.Total-want) > 1e-10*math.Max(1, math.Abs(want)) {
					t.Errorf("lam %v (%d,%d): PairBound %.12g, naive %.12g", lam, q, qp, got.Total, want)
				}
				if s := got.DirichletTotal + got.DirichletComponents + got.Gaussian; s != got.Total {
					t.Errorf("terms do not add up: %v vs %v", s, got.Total)
				}
			}
		}
	}
	// Identical posteriors: every term is 0.
	b, _ := PairBound(1.1, p.View(2), p.View(2))
	if math.Abs(b.Total) > 1e-12 {
		t.Errorf("D(q||q) = %v, want 0", b.Total)
	}
	if _, err := PairBound(1, p.View(0), p.View(1)); err == nil {
		t.Error("lambda = 1 accepted")
	}
	if _, err := PairBound(0.5, p.View(0), p.View(1)); err == nil {
		t.Error("lambda = 0.5 accepted")
	}
	bad := p.View(1)
	bad.Alpha = bad.Alpha[:2]
	if _, err := PairBound(1.1, p.View(0), bad); err == nil {
		t.Error("shape mismatch accepted")
	}
}

// renyiGauss1D integrates D_lambda(N(m1,s1^2) || N(m2,s2^2)) numerically.
func renyiGauss1D(lam, m1, s1, m2, s2 float64) float64 {
	pdf := func(x, m, s float64) float64 { return math.Exp(-(x-m)*(x-m)/(2*s*s)) / (s * math.Sqrt(2*math.Pi)) }
	var sum float64
	const h = 1e-3
	for x := -30.0; x <= 30; x += h {
		sum += math.Pow(pdf(x, m1, s1), lam) * math.Pow(pdf(x, m2, s2), 1-lam) * h
	}
	return math.Log(sum) / (lam - 1)
}

// The paper's Gaussian term is D(N_q' || N_q); DirectionStandard is D(N_q || N_q').
func TestGaussianDirection(t *testing.T) {
	lam := 1.5
	m1, s1, m2, s2 := 0.3, 0.6, -0.4, 0.9
	mk := func(m, s float64) PosteriorView {
		return PosteriorView{N: 1, P: 1, Mu: []float32{float32(m)}, Logvar: []float32{float32(2 * math.Log(s))}, Alpha: []float32{1}}
	}
	q, qp := mk(m1, s1), mk(m2, s2)
	m1, m2 = float64(q.Mu[0]), float64(qp.Mu[0])
	s1, s2 = math.Exp(float64(q.Logvar[0])/2), math.Exp(float64(qp.Logvar[0])/2)
	paper, _ := PairBoundWith(lam, q, qp, BoundOptions{Direction: DirectionPaper})
	std, _ := PairBoundWith(lam, q, qp, BoundOptions{Direction: DirectionStandard})
	relClose(t, "paper = D(N_q'||N_q)", paper.Gaussian, renyiGauss1D(lam, m2, s2, m1, s1), 1e-6)
	relClose(t, "standard = D(N_q||N_q')", std.Gaussian, renyiGauss1D(lam, m1, s1, m2, s2), 1e-6)
	if math.Abs(paper.Gaussian-std.Gaussian) < 1e-3 {
		t.Error("test not discriminating: directions agree")
	}
}

func TestEngineMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	// M spans several tiles; P=13 exercises the tail of the 8-chunks.
	p := randomPosteriors(rng, 37, 4, 13, 0.2) // sigma down to 0.2 < 0.3015: some pairs undefined
	p.AttentionMask = make([]uint8, p.M*p.N)
	for x := range p.M {
		for i := range 4 - rng.IntN(3) { // 2 to 4 real components, the rest padding
			p.AttentionMask[x*p.N+i] = 1
		}
	}
	for _, useMask := range []bool{false, true} {
		for _, dir := range []GaussianDirection{DirectionPaper, DirectionStandard} {
			orders := []float64{1.1, 2.1, 1.05}
			e := newEngine(p, orders, BoundOptions{UseMask: useMask, Direction: dir})
			var seen, inf atomic.Int64
			err := e.run(context.Background(), 3, e.tiles(0, e.M), func(int) pairSink {
				return func(a, b int, v []float64) {
					seen.Add(1)
					for k, lam := range orders {
						for d, qq := range [][2]int{{a, b}, {b, a}} {
							want := naiveRD(lam, p, qq[0], qq[1], useMask, dir == DirectionStandard)
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
	p := randomPosteriors(rng, 23, 5, 6, 0.32)
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
			v := naiveRD(1.1, p, q, qp, false, true)
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
	relClose(t, "rd_max", float64(r.RDMax), maxv, 1e-10)
	if !slices.Equal(r.Argmax, arg) {
		t.Errorf("argmax %v, want %v", r.Argmax, arg)
	}
	var s float64
	for _, v := range vals {
		s += v
	}
	relClose(t, "rd_mean", float64(*r.RDMean), s/float64(len(vals)), 1e-10)
	sort.Float64s(vals)
	relClose(t, "p50", float64(r.Quantiles["p50"]), vals[len(vals)/2], 0.02)
	if n := sumInts(r.Histogram.Counts); n != len(vals) {
		t.Errorf("histogram counts %d, want %d", n, len(vals))
	}

	// BDP: two-pass recomputation from the naive bounds.
	tail := 1 - DefaultConfidence
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
					out = append(out, l*naiveRD(lam, p, x, y, false, true))
					in = append(in, l*naiveRD(lam, p, y, x, false, true))
				}
			}
			worst = math.Max(worst, math.Max(ucbTwoPass(out, tail), ucbTwoPass(in, tail)))
		}
		var pooled []float64
		for a := range p.M {
			for b := a + 1; b < p.M; b++ {
				d := math.Max(naiveRD(lam, p, a, b, false, true), naiveRD(lam, p, b, a, false, true))
				infAny = infAny || math.IsInf(d, 1)
				pooled = append(pooled, l*d)
			}
		}
		bo := r.BDPOrders[k]
		if bo.Finite == infAny {
			t.Errorf("order %v finite=%v but infinite pairs=%v", l, bo.Finite, infAny)
		}
		if !math.IsInf(worst, 1) {
			relClose(t, "bdp worst cost", float64(*bo.Cost), worst, 1e-9)
			best = math.Min(best, (worst-lnDG)/l)
		} else if !math.IsInf(float64(*bo.Cost), 1) {
			t.Errorf("order %v: cost %v, want +Inf", l, bo.Cost)
		}
		if c := ucbTwoPass(pooled, tail); !math.IsInf(c, 1) {
			relClose(t, "bdp pooled cost", float64(*bo.CostPooled), c, 1e-9)
			bestPooled = math.Min(bestPooled, (c-lnDG)/l)
		}
	}
	relClose(t, "bdp_epsilon", float64(*r.BDPEpsilon), best, 1e-9)
	relClose(t, "bdp_epsilon_pooled", float64(*r.BDPEpsilonPooled), bestPooled, 1e-9)
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
	p := randomPosteriors(rng, 24, 3, 4, 0.32)
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
	relClose(t, "sampled argmax value", float64(r1.RDMax), naiveRD(1.1, p, r1.Argmax[0], r1.Argmax[1], false, true), 1e-10)
	relClose(t, "sampled mean ~ full mean", float64(*r1.RDMean), float64(*full.RDMean), 0.1)
}

// TestAuditOptionErrors: every bad option (on top of DefaultOptions) is an
// error that names it in the library's terms, never a CLI flag; an explicit
// 0 is never replaced by a default; the reference q is explained when it
// was not given.
func TestAuditOptionErrors(t *testing.T) {
	p := randomPosteriors(rand.New(rand.NewPCG(1, 1)), 5, 2, 2, 0.5)
	for _, tc := range []struct {
		set  func(*Options)
		want string
	}{
		{func(o *Options) { o.Order = 1 }, "Renyi order lambda = 1"},
		{func(o *Options) { o.Order = 0.9 }, "Renyi order lambda = 0.9"},
		{func(o *Options) { o.Order = math.Inf(1) }, "Renyi order lambda = +Inf"},
		{func(o *Options) { o.Order = 0 }, "Renyi order lambda = 0:"},
		{func(o *Options) { o.Delta = -1 }, "delta_mu = -1:"},
		{func(o *Options) { o.Delta = 0 }, "delta_mu = 0:"},
		{func(o *Options) { o.Delta = 1e-20 }, "failure probability"},
		{func(o *Options) { o.Confidence = 1.5 }, "confidence = 1.5:"},
		{func(o *Options) { o.Confidence = 0 }, "confidence = 0:"},
		{func(o *Options) { o.BDPOrders = []float64{0.5, -1} }, "BDP moment order l = -1"},
		{func(o *Options) { o.BDPOrders = []float64{} }, "no BDP moment order"},
		{func(o *Options) { o.Mode = "other" }, `mode "other"`},
		{func(o *Options) { o.Pairs = -3 }, "pairs -3"},
		{func(o *Options) { o.Direction = "x" }, `Gaussian direction "x"`},
		{func(o *Options) { o.Workers = -1 }, "workers -1"},
		{func(o *Options) { o.MaxStoredPairs = -1 }, "max stored pairs -1"},
		{func(o *Options) { o.ListInvalid = -1 }, "invalid pairs to list -1"},
		{func(o *Options) { o.Mode, o.UseMask = ModeReference, true }, "principled mode only"},
		{func(o *Options) { o.Mode, o.Pairs = ModeReference, 10 }, "principled mode only"},
		{func(o *Options) { o.Mode, o.Direction = ModeReference, DirectionPaper }, "principled mode only"},
		{func(o *Options) { o.Mode, o.BatchSize = ModeReference, 1 }, "batch size 1: must be >= 2"},
		{func(o *Options) { o.Mode, o.BatchSize = ModeReference, 0 }, "batch size 0: must be >= 2"},
		{func(o *Options) { o.Mode, o.BatchSize, o.Q = ModeReference, 4, 1.5 }, "sampling ratio q = 1.5: must be in (0, 1]"},
		// q not given, 5 examples < batch size 16: the message says why, not "q must be in (0, 1]".
		{func(o *Options) { o.Mode = ModeReference }, "q = batch size / M = 16/5 > 1: the file has fewer examples than one batch"},
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
	if _, err := Audit(context.Background(), randomPosteriors(rand.New(rand.NewPCG(1, 1)), 1, 2, 2, 0.5), DefaultOptions()); err == nil ||
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
	p := randomPosteriors(rand.New(rand.NewPCG(19, 20)), 21, 4, 11, 0.3)
	orders := []float64{1.1, 1.05, 1.5, 2.1, 3, 1.2}
	for _, dir := range []GaussianDirection{DirectionPaper, DirectionStandard} {
		collect := func(orders []float64) map[[2]int][]float64 {
			var mu sync.Mutex
			got := map[[2]int][]float64{}
			e := newEngine(p, orders, BoundOptions{Direction: dir})
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
