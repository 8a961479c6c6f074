package noise

import (
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// pcg is a seeded generator for tests (releases use ChaCha8 keyed from crypto/rand).
func pcg(seed uint64) rand.Source { return rand.NewPCG(seed, 0x9e3779b97f4a7c15) }

// lattice returns a Lattice with sigma'/G = a 2^t (any scale, for tests).
func lattice(a uint64, t int) Lattice {
	return Lattice{Exp: 0, Sigma: math.Ldexp(float64(a), t), a: a, t: t}
}

// roundedNormalP is the exact probability that round(c X) = j (ties away
// from zero, probability 0): Phi((|j|+1/2)/c) - Phi((|j|-1/2)/c), and
// P(|cX| < 1/2) at j = 0.
func roundedNormalP(c float64, j int64) float64 {
	aj := math.Abs(float64(j))
	if j == 0 {
		return math.Erf(0.5 / c / math.Sqrt2)
	}
	lo, hi := (aj-0.5)/c/math.Sqrt2, (aj+0.5)/c/math.Sqrt2
	return 0.5 * (math.Erfc(lo) - math.Erfc(hi))
}

// binP is P(j in [lo, hi]) (integers) under roundedNormalP: the binned
// probability of the coarse test at large scales.
func binP(c float64, lo, hi int64) float64 {
	cdf := func(v float64) float64 { return 0.5 * math.Erfc(-v/c/math.Sqrt2) } // P(cX <= v)
	// n in [lo, hi] <=> cX in [lo-1/2, hi+1/2) (up to the measure-0 ties)
	return cdf(float64(hi)+0.5) - cdf(float64(lo)-0.5)
}

// chiSquare returns the p-value of Pearson's chi-squared test of counts
// against probabilities p (summing to 1 over the bins given); bins with
// expected count < 5 are merged into their neighbour.
func chiSquare(t *testing.T, counts []int, p []float64) float64 {
	t.Helper()
	total := 0
	for _, c := range counts {
		total += c
	}
	var stat float64
	var df int
	accC, accE := 0.0, 0.0
	for i := range counts {
		accC += float64(counts[i])
		accE += p[i] * float64(total)
		if accE < 5 && i < len(counts)-1 {
			continue
		}
		stat += (accC - accE) * (accC - accE) / accE
		df++
		accC, accE = 0, 0
	}
	df--
	return 1 - distuv.ChiSquared{K: float64(df)}.CDF(stat)
}

// TestNoiseDistribution draws round(c X) at several scales and tests the
// counts against the exact probabilities (chi-squared, p > 1e-4) and the
// first two moments against the exact ones (5 standard errors): c = 0.5, 1
// and 8 bin by bin, the main job's scale 2^18 (sigma 1, lattice 2^-18) in
// 40 bins of equal width 0.25 sigma, and an odd multiplier 3 * 2^-1
// (sigma'/G not a power of two: the rounding's general path).
func TestNoiseDistribution(t *testing.T) {
	const draws = 200_000
	cases := []struct {
		name string
		a    uint64
		t    int
		bin  int64 // width of a bin in lattice steps (1: every value)
	}{
		{"c=0.5", 1, -1, 1},
		{"c=1", 1, 0, 1},
		{"c=1.5", 3, -1, 1},
		{"c=8", 1, 3, 1},
		{"c=2^18 (main job), bins of sigma/4", 1, 18, 1 << 16},
		{"c=3*2^16, bins of sigma/4", 3, 16, 3 << 14},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := lattice(tc.a, tc.t)
			c := math.Ldexp(float64(tc.a), tc.t)
			s := NewNoise(l, pcg(uint64(100+ci)))
			limit := int64(math.Ceil(6*c)) / tc.bin // bins -limit..limit, tails merged into the end bins
			counts := make([]int, 2*limit+3)
			var sum, sum2 float64
			for range draws {
				n := s.Draw()
				sum += float64(n)
				sum2 += float64(n) * float64(n)
				b := floorDiv(n+tc.bin/2, tc.bin) // the bin of n: [b*bin - bin/2, b*bin + bin/2)
				b = max(-limit-1, min(limit+1, b))
				counts[b+limit+1]++
			}
			p := make([]float64, len(counts))
			var varExact float64
			for b := -limit - 1; b <= limit+1; b++ {
				lo, hi := b*tc.bin-tc.bin/2, b*tc.bin+tc.bin/2-1
				if tc.bin == 1 {
					lo, hi = b, b
				}
				switch b {
				case -limit - 1:
					p[0] = binP(c, math.MinInt32, hi)
				case limit + 1:
					p[len(p)-1] = binP(c, lo, math.MaxInt32)
				default:
					p[b+limit+1] = binP(c, lo, hi)
				}
			}
			for j := int64(1); float64(j) < 40*c+1; j++ {
				varExact += 2 * float64(j) * float64(j) * roundedNormalP(c, j)
			}
			if pv := chiSquare(t, counts, p); pv < 1e-4 {
				t.Errorf("chi-squared p-value %.3g < 1e-4 (counts %v)", pv, counts)
			}
			mean, v := sum/draws, sum2/draws-(sum/draws)*(sum/draws)
			if se := math.Sqrt(varExact / draws); math.Abs(mean) > 5*se {
				t.Errorf("mean %.4g, want 0 within 5 standard errors (%.3g)", mean, se)
			}
			// the variance's standard error: sqrt((mu4 - var^2)/n), mu4 = 3 var^2 for a normal
			if se := varExact * math.Sqrt(2.0/draws); math.Abs(v-varExact) > 5*se {
				t.Errorf("variance %.6g, want %.6g within 5 standard errors (%.3g)", v, varExact, se)
			}
		})
	}
}

// fineDraws is how many values TestNoiseFineBins draws (a tenth with -short; go test -run
// FineBins ./noise -args -fine-draws N for more).
var (
	fineDraws = flag.Int("fine-draws", 20_000_000, "values TestNoiseFineBins draws")
	fineSeed  = flag.Uint64("fine-seed", 2024, "the PCG seed of TestNoiseFineBins")
)

// TestNoiseFineBins draws round(256 X), every lattice value its own bin out to 5 sigma: bins four
// times finer than the sampler's cells (1/64), so that a wrong slope within the cells (a trial
// kept with the wrong probability, which the coarser bins of TestNoiseDistribution average out)
// shows in the chi-squared statistic (p > 1e-4 against the exact probabilities). Of 20 million
// values: a trial that kept the points of each cell with probability 1 - c (1 - w) instead of
// exp(-c w) (expRun's first comparison answered the wrong way) gives p = 6e-16; 4 million do not
// see it (p = 0.1), where TestTrial does.
func TestNoiseFineBins(t *testing.T) {
	const c, limit = 256, 5 * 256
	s := NewNoise(lattice(1, 8), pcg(*fineSeed))
	counts := make([]int, 2*limit+3)
	draws := *fineDraws
	if testing.Short() {
		draws /= 10
	}
	for range draws {
		n := max(-limit-1, min(limit+1, s.Draw()))
		counts[n+limit+1]++
	}
	p := make([]float64, len(counts))
	p[0] = binP(c, math.MinInt32, -limit-1)
	p[len(p)-1] = binP(c, limit+1, math.MaxInt32)
	for j := int64(-limit); j <= limit; j++ {
		p[j+limit+1] = roundedNormalP(c, j)
	}
	pv := chiSquare(t, counts, p)
	t.Logf("%d values in %d bins: chi-squared p-value %.3g", draws, len(counts), pv)
	if pv < 1e-4 {
		t.Errorf("chi-squared p-value %.3g < 1e-4", pv)
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// fixedDeviate returns a deviate whose first 64 bits are w (the rest drawn
// when needed): x = w 2^-64 up to 2^-64.
func fixedDeviate(w uint64) *deviate {
	return &deviate{n: 4, d: [inlineDigits]uint16{uint16(w >> 48), uint16(w >> 32), uint16(w >> 16), uint16(w)}}
}

// TestBernoulliSteps checks each Bernoulli step of the sampler against its exact probability
// (a binomial count within 5 standard errors), for x fixed (so w = frac(64 x) is): expRuns's
// exp(-m 2^-13 w) with one run (m <= 2^13) and several (m > 2^13), and its exp(-m 2^-13),
// and normRun past its first round, whose law given the first round's bits all zero is
// (exp(-(w/64)^2/2) - 1 + 2^-7) / 2^-7 (P(true) = exp(-(delta w)^2/2) less the first round's
// stops, 1 - delta/2, over P(z = 0) = delta/2).
func TestBernoulliSteps(t *testing.T) {
	const trials = 200_000
	x := func(v float64) *deviate { return fixedDeviate(uint64(v * (1 << 63) * 2)) }
	w := func(v float64) float64 { return v*64 - math.Floor(v*64) }
	normZ := func(v float64) float64 {
		d := w(v) / 64
		return (math.Expm1(-d*d/2) + 1.0/128) * 128
	}
	cases := []struct {
		name string
		x    float64
		p    float64
		try  func(n *normal) bool
	}{
		{"expRuns(w) m=8000 w=0.2", 0.3, math.Exp(-8000.0 / 8192 * w(0.3)), func(n *normal) bool { return n.expRuns(8000, n.b.take(expUnitBits), true) }},
		{"expRuns(w) m=8192 w=0.9 (one unit)", 0.7515625, math.Exp(-w(0.7515625)), func(n *normal) bool { return n.expRuns(8192, n.b.take(expUnitBits), true) }},
		{"expRuns(w) m=3*8192+500 w=0.9 (four runs)", 0.7515625, math.Exp(-(3 + 500.0/8192) * w(0.7515625)), func(n *normal) bool {
			return n.expRuns(3*8192+500, n.b.take(expUnitBits), true)
		}},
		{"expRuns(w) m=0", 0.3, 1, func(n *normal) bool { return n.expRuns(0, n.b.take(expUnitBits), true) }},
		{"expRuns(1) m=4096 (exp(-1/2))", 0.3, math.Exp(-0.5), func(n *normal) bool { return n.expRuns(4096, n.b.take(expUnitBits), false) }},
		{"expRuns(1) m=20000", 0.3, math.Exp(-20000.0 / 8192), func(n *normal) bool { return n.expRuns(20000, n.b.take(expUnitBits), false) }},
		{"expRuns(1) m=1280 (the tail's proposal at M0 = 640)", 0.3, math.Exp(-1280.0 / 8192), func(n *normal) bool { return n.expRuns(1280, n.b.take(expUnitBits), false) }},
		{"normRun(0) w=0.9", 0.7515625, normZ(0.7515625), func(n *normal) bool { return n.normRun(0) }},
		{"normRun(0) w=0.2", 0.3, normZ(0.3), func(n *normal) bool { return n.normRun(0) }},
		{"normRun(z) w=0.9, z nonzero", 0.7515625, 1, func(n *normal) bool { return n.normRun(1 + n.b.take(normBits-1)) }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNormal(pcg(uint64(7 + i)))
			hits := 0
			for range trials {
				n.x = *x(tc.x)
				if tc.try(n) {
					hits++
				}
			}
			got, se := float64(hits)/trials, math.Sqrt(tc.p*(1-tc.p)/trials)
			if math.Abs(got-tc.p) > 5*se || tc.p == 1 && hits != trials {
				t.Errorf("frequency %.5f, want %.5f within 5 standard errors (%.2g)", got, tc.p, se)
			}
		})
	}
}

// TestTrial: the y a trial keeps in cell M has density proportional to exp(-c w - (delta
// w)^2/2) in w = (y - a_M) / delta (the density exp(-y^2/2) on the cell): the kept w in 16 bins
// against that law's integrals (chi-squared, p > 1e-4), for cells whose slope c = M/4096 is
// small, large, and above 1 (several runs of expRuns).
func TestTrial(t *testing.T) {
	const bins, draws = 16, 200_000
	for i, M := range []uint64{5, 300, 4000, 9000} {
		t.Run(fmt.Sprint("M=", M), func(t *testing.T) {
			n := newNormal(pcg(uint64(300 + i)))
			c, d := float64(M)/4096, 1.0/(1<<cellBits)
			f := func(w float64) float64 { return math.Exp(-c*w - d*d*w*w/2) }
			p := make([]float64, bins)
			var z float64
			for b := range p { // Simpson's rule on each bin
				lo, hi := float64(b)/bins, float64(b+1)/bins
				p[b] = (hi - lo) / 6 * (f(lo) + 4*f((lo+hi)/2) + f(hi))
				z += p[b]
			}
			for b := range p {
				p[b] /= z
			}
			counts := make([]int, bins)
			kept := 0
			for range draws {
				ok, _ := n.trial(M)
				if !ok {
					continue
				}
				kept++
				if int(n.x.d[0]>>fracFreshBits) != int(M&cellMask) {
					t.Fatalf("x's first digit %#x is not in cell %d", n.x.d[0], M)
				}
				w := uint64(n.x.d[0])&(1<<fracFreshBits-1)<<digitBits | uint64(n.x.at(1, &n.b)) // w's first 26 bits
				counts[w>>(fracFreshBits+digitBits-4)]++
			}
			if pv := chiSquare(t, counts, p); pv < 1e-4 {
				t.Errorf("chi-squared p-value %.3g (counts %v)", pv, counts)
			}
			// kept with probability z (the mean of exp(-c w - (delta w)^2/2))
			if se := math.Sqrt(z * (1 - z) / draws); math.Abs(float64(kept)/draws-z) > 5*se {
				t.Errorf("kept %d of %d, want %.5f within 5 standard errors", kept, draws, z)
			}
		})
	}
}

// TestLessW: lessW compares a fresh deviate with w = frac(64 x) digit by digit, x's digits
// shifted by cellBits: against a v drawn from the same bits, the answer is the integers'.
func TestLessW(t *testing.T) {
	r := rand.New(pcg(5))
	for i := range 2000 {
		xv := r.Uint64()
		n := newNormal(pcg(uint64(i)))
		n.x = *fixedDeviate(xv)
		probe := newBitSource(pcg(uint64(i))) // the digits lessW's v will get
		v := uint64(probe.digit())<<48 | uint64(probe.digit())<<32 | uint64(probe.digit())<<16 | uint64(probe.digit())
		wv := xv << cellBits // w's first 58 bits, then x's undrawn digits (drawn after v's)
		want := v < wv
		if v>>cellBits == wv>>cellBits {
			continue // decided past the first 58 bits
		}
		if got := n.lessW(&n.p); got != want {
			t.Fatalf("x %#x, v %#x: lessW %v, want %v", xv, v, got, want)
		}
	}
}

// TestRoundExact checks the integer rounding against exact rational
// arithmetic: for each draw, every x consistent with the digits drawn
// (x in [X_D 2^-16D, (X_D+1) 2^-16D)) rounds to the value returned, that is
// floor(c (k + x) + 1/2) is the same at both ends. Multipliers: powers of
// two, odd ones (3, 5 * 2^-3, a 24-bit float32 mantissa), and deviates
// placed just below a rounding boundary so that 64 bits cannot decide it
// (the big-integer path).
func TestRoundExact(t *testing.T) {
	type mult struct {
		a uint64
		t int
	}
	mults := []mult{{1, 18}, {1, 0}, {3, 0}, {5, -3}, {0xb504f3, -5}, {0xb504f3, 12}}
	check := func(t *testing.T, m mult, k uint64, s *Noise) {
		t.Helper()
		got := s.round(k)
		D := s.n.x.digits()
		c := new(big.Rat).SetFrac(new(big.Int).SetUint64(m.a), big.NewInt(1))
		if m.t >= 0 {
			c.Mul(c, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(m.t))))
		} else {
			c.Quo(c, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(-m.t))))
		}
		X := new(big.Int)
		for i := range D {
			X.Lsh(X, digitBits).Add(X, big.NewInt(int64(s.n.x.at(i, &s.n.b))))
		}
		scale := new(big.Int).Lsh(big.NewInt(1), uint(digitBits*D))
		at := func(num *big.Int) *big.Rat { // c (k + num/2^32D) + 1/2
			v := new(big.Rat).SetFrac(new(big.Int).Add(new(big.Int).Mul(new(big.Int).SetUint64(k), scale), num), scale)
			v.Mul(v, c)
			return v.Add(v, big.NewRat(1, 2))
		}
		lo, hi := at(X), at(new(big.Int).Add(X, big.NewInt(1)))
		g := new(big.Rat).SetInt(new(big.Int).SetUint64(got))
		g1 := new(big.Rat).SetInt(new(big.Int).SetUint64(got + 1))
		if lo.Cmp(g) < 0 || hi.Cmp(g1) > 0 {
			t.Fatalf("a %d t %d k %d digits %x: round %d, but c(k+x)+1/2 spans [%s, %s]", m.a, m.t, k, s.n.x.d[:min(s.n.x.n, inlineDigits)], got, lo.FloatString(6), hi.FloatString(6))
		}
	}
	for mi, m := range mults {
		s := NewNoise(lattice(m.a, m.t), pcg(uint64(mi)))
		for i := range 2000 {
			s.n.x.reset()
			check(t, m, uint64(i%5), s)
		}
		// just below the boundary c (k + x) + 1/2 = j: x = (j - 1/2)/c - k minus one 2^-64 step
		bigPath := 0
		for j := uint64(1); j < 50; j++ {
			k := uint64(0)
			c := new(big.Rat).SetFrac(new(big.Int).SetUint64(m.a), big.NewInt(1))
			if m.t >= 0 {
				c.Mul(c, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(m.t))))
			} else {
				c.Quo(c, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(-m.t))))
			}
			xb := new(big.Rat).Quo(new(big.Rat).Sub(new(big.Rat).SetInt64(int64(j)), big.NewRat(1, 2)), c)
			if xb.Cmp(big.NewRat(1, 1)) >= 0 {
				break
			}
			num := new(big.Int).Quo(new(big.Int).Lsh(xb.Num(), 64), xb.Denom()) // floor(xb 2^64)
			w := num.Uint64()
			s.n.x = *fixedDeviate(w)
			check(t, m, k, s)
			if s.n.x.digits() > 4 {
				bigPath++
			}
		}
		if m.a > 1 && bigPath == 0 {
			t.Errorf("a %d t %d: no boundary case reached the big-integer path", m.a, m.t)
		}
	}
}

// TestLattice pins the lattice of the main job (sigma 1, |mean| <= 0.493:
// G = 2^-18), the sizing rule, the rounding toward the centre and the
// errors.
func TestLattice(t *testing.T) {
	l, err := NewLattice(1, 0.493)
	if err != nil {
		t.Fatal(err)
	}
	if l.Exp != -18 || l.a != 1 || l.t != 18 {
		t.Errorf("main job lattice: Exp %d, a %d, t %d; want -18, 1, 18", l.Exp, l.a, l.t)
	}
	for _, tc := range []struct{ sigma, bound float64 }{
		{1, 0}, {0.5, 0.493}, {float64(float32(0.3)), 2}, {4, 100}, {1, 32},
	} {
		got, err := NewLattice(tc.sigma, tc.bound)
		if err != nil {
			t.Fatal(err)
		}
		v := tc.bound + TailSigmas*tc.sigma
		if g := math.Ldexp(1, got.Exp+SignificandBits); g < v || g/2 >= v && g/2 != v {
			t.Errorf("sigma %v bound %v: 2^(Exp+24) = %v, want the power of two just at or above %v", tc.sigma, tc.bound, g, v)
		}
		if steps := tc.sigma / got.G(); steps < MinSteps {
			t.Errorf("sigma %v bound %v: %v steps per sigma", tc.sigma, tc.bound, steps)
		}
	}
	for _, bad := range []struct{ sigma, bound float64 }{
		{0, 1}, {-1, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {0.1, 1}, // 0.1 is no float32
		{1, -1}, {1, math.NaN()}, {1, math.Inf(1)}, {1, 1e7},
	} {
		if _, err := NewLattice(bad.sigma, bad.bound); err == nil {
			t.Errorf("NewLattice(%v, %v): no error", bad.sigma, bad.bound)
		}
	}
	G := l.G()
	for _, tc := range []struct {
		mu     float32
		centre int64
		want   int64
	}{
		{0.25, 0, 1 << 16},
		{float32(0.25 + G/2), 0, 1 << 16},     // above the centre: floor
		{float32(-0.25 - G/2), 0, -(1 << 16)}, // below: ceil
		{float32(3 * G / 4), 0, 0},
		{float32(-3 * G / 4), 0, 0},
		{float32(5 * G / 4), 2, 2}, // below centre 2G: ceil(1.25) = 2
		{float32(-G / 4), -1, -1},  // above centre -G: floor(-0.25) = -1
	} {
		got, err := l.MeanIndex(tc.mu, tc.centre)
		if err != nil || got != tc.want {
			t.Errorf("MeanIndex(%v, %d) = %d, %v; want %d", tc.mu, tc.centre, got, err, tc.want)
		}
		if c := float64(tc.centre) * G; math.Abs(float64(got)*G-c) > math.Abs(float64(tc.mu)-c) {
			t.Errorf("MeanIndex(%v, %d) = %d moved away from the centre", tc.mu, tc.centre, got)
		}
	}
	if _, err := l.MeanIndex(float32(math.NaN()), 0); err == nil {
		t.Error("MeanIndex(NaN): no error")
	}
	if _, err := l.CentreIndex(float32(G / 2)); err == nil {
		t.Error("CentreIndex(G/2): no error")
	}
	if c, err := l.CentreIndex(-3); err != nil || c != -3<<18 {
		t.Errorf("CentreIndex(-3) = %d, %v", c, err)
	}
	for _, n := range []int64{0, 1, -1, 1<<24 - 1, -(1<<24 - 1), 123456} {
		z := l.Value(n)
		if float64(z)/G != float64(n) {
			t.Errorf("Value(%d) = %v: not exactly %d G", n, z, n)
		}
	}
}

// TestNoiseSigma: sigma' is a float32 at or above exp(lv/2), 1 exactly at lv = 0.
func TestNoiseSigma(t *testing.T) {
	for _, lv := range []float32{0, -0.5, 0.7, -2.3978953, float32(math.Log(0.3))} {
		s := NoiseSigma(lv)
		if float64(float32(s)) != s || s < math.Exp(0.5*float64(lv)) {
			t.Errorf("NoiseSigma(%v) = %v: want a float32 >= %v", lv, s, math.Exp(0.5*float64(lv)))
		}
		if below := float64(math.Nextafter32(float32(s), 0)); below > math.Exp(0.5*float64(lv))*(1+1e-15) {
			t.Errorf("NoiseSigma(%v) = %v: not the nearest float32 above (%v is)", lv, s, below)
		}
	}
	if s := NoiseSigma(0); s != 1 {
		t.Errorf("NoiseSigma(0) = %v, want 1", s)
	}
}

// TestNoiseSeeded: a seeded source gives the same draws again.
func TestNoiseSeeded(t *testing.T) {
	l, _ := NewLattice(1, 0.5)
	a, b := make([]int64, 1000), make([]int64, 1000)
	NewNoise(l, pcg(3)).Fill(a)
	NewNoise(l, pcg(3)).Fill(b)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("draw %d: %d then %d", i, a[i], b[i])
		}
	}
}

// BenchmarkNoise is the sampler's rate on one core at the main job's
// lattice (sigma 1, G = 2^-18), drawn from ChaCha8 as releases are, one
// release (65 x 128 values) per iteration: samples/s = 8320 / (ns/op) * 1e9.
// cpu-ns/value is the process's CPU time a value (where the system reports
// it): unlike ns/op, it does not grow while other processes take the cores.
func BenchmarkNoise(b *testing.B) {
	l, _ := NewLattice(1, 0.493)
	s := NewNoise(l, rand.NewChaCha8([32]byte{1}))
	dst := make([]int64, 65*128)
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		s.Fill(dst)
	}
	values := float64(b.N) * float64(len(dst))
	b.ReportMetric(values/b.Elapsed().Seconds(), "samples/s")
	if cpu > 0 {
		b.ReportMetric(float64(cpuTime()-cpu)/values, "cpu-ns/value")
	}
}

// BenchmarkNoiseRand is BenchmarkNoise with the ChaCha8 behind a *rand.Rand, as package release
// hands it to NewNoise.
func BenchmarkNoiseRand(b *testing.B) {
	l, _ := NewLattice(1, 0.493)
	s := NewNoise(l, rand.New(rand.NewChaCha8([32]byte{1})))
	dst := make([]int64, 65*128)
	cpu := cpuTime()
	for b.Loop() {
		s.Fill(dst)
	}
	if cpu > 0 {
		b.ReportMetric(float64(cpuTime()-cpu)/(float64(b.N)*float64(len(dst))), "cpu-ns/value")
	}
}

// BenchmarkZiggurat is the float sampler it replaces (math/rand/v2's
// NormFloat64 on ChaCha8), for the ratio.
func BenchmarkZiggurat(b *testing.B) {
	r := rand.New(rand.NewChaCha8([32]byte{1}))
	dst := make([]float32, 65*128)
	for b.Loop() {
		for i := range dst {
			dst[i] = float32(r.NormFloat64())
		}
	}
	b.ReportMetric(float64(b.N)*float64(len(dst))/b.Elapsed().Seconds(), "samples/s")
}

// TestExpBounds: exp(-x) 2^P lies between the bounds, which are a few units apart, against
// math.Exp (x = 1/2, 2^-13, 1) and against a longer computation.
func TestExpBounds(t *testing.T) {
	for _, x := range []*big.Rat{big.NewRat(1, 2), big.NewRat(1, expUnit), big.NewRat(1, 1)} {
		lo, hi := expBounds(x, 200)
		if d := new(big.Int).Sub(hi, lo); d.Sign() < 0 || d.Cmp(big.NewInt(4)) > 0 {
			t.Errorf("exp(-%v): bounds %v apart", x, d)
		}
		f, _ := x.Float64()
		top, _ := new(big.Float).SetInt(new(big.Int).Rsh(lo, 200-60)).Float64()
		if got, want := top/(1<<60), math.Exp(-f); math.Abs(got-want) > 1e-15 {
			t.Errorf("exp(-%v): %.17g from the bounds, math.Exp %.17g", x, got, want)
		}
		lo2, hi2 := expBounds(x, 400)
		lo2.Rsh(lo2, 200)
		hi2.Add(hi2, new(big.Int).Lsh(big.NewInt(1), 200)).Rsh(hi2, 200)
		if lo2.Cmp(lo) < 0 && hi2.Cmp(lo) < 0 || lo2.Cmp(hi) > 0 {
			t.Errorf("exp(-%v): the bounds at 400 bits, %v..%v (scaled), miss those at 200, %v..%v", x, lo2, hi2, lo, hi)
		}
	}
}

// cellWeights returns g_M / Theta for M < n in float64 (Theta summed to M = 2000, where the terms
// are below 1e-200).
func cellWeights(n int) []float64 {
	var theta float64
	for M := range 2000 {
		a := float64(M) / (1 << cellBits)
		theta += math.Exp(-a * a / 2)
	}
	p := make([]float64, n)
	for M := range p {
		a := float64(M) / (1 << cellBits)
		p[M] = math.Exp(-a*a/2) / theta
	}
	return p
}

// TestCellCDF: the expansions of the cumulative probabilities F(c) agree with float64 in their
// first 50 bits and a longer computation extends them; the guide gives each first digit the
// cell every uniform with that digit falls in, by the expansions; cell's draws match g_M/Theta
// (chi-squared on the cells, p > 1e-4); and cellTail's law is g_M / (its
// sum from M0) (chi-squared) from M0 = 256 and cellTable (its proposal, a geometric run of
// ratio exp(-M0/4096), is made for large M0 only).
func TestCellCDF(t *testing.T) {
	tablesInit()
	longer := cellCDFDigits(cellCDFCached + 2)
	// f64 is the first 64 bits of F(c)'s expansion
	f64 := func(c int) uint64 {
		return uint64(cellCDFDigit(c, 0))<<48 | uint64(cellCDFDigit(c, 1))<<32 | uint64(cellCDFDigit(c, 2))<<16 | uint64(cellCDFDigit(c, 3))
	}
	w := cellWeights(cellTable)
	cum := 0.0
	for c := range cellTable {
		cum += w[c]
		if got := float64(f64(c)) / (1 << 64); math.Abs(got-cum) > 1e-14 { // cum: 640 float64 sums
			t.Errorf("F(%d): %.17g from the expansion, %.17g in float64", c, got, cum)
		}
		for i := range cellCDFCached {
			if longer[c][i] != cellCDFDigit(c, i) {
				t.Fatalf("F(%d) digit %d: %x cached, %x from the longer computation", c, i, cellCDFDigit(c, i), longer[c][i])
			}
		}
		if cellCDFDigit(c, cellCDFCached+1) != longer[c][cellCDFCached+1] {
			t.Errorf("F(%d): a digit past the cache disagrees", c)
		}
	}
	// the guide: for decided leading bits e, F(c-1) < e 2^-14 and (e+1) 2^-14 <= F(c), both by
	// the first 64 bits of the expansions
	ambiguous := 0
	const shift = 64 - guideBits
	for e := range 1 << guideBits {
		c := int(cellGuide[e])
		if c == cellAmbiguous {
			ambiguous++
			continue
		}
		if lo := uint64(e) << shift; c > 0 && f64(c-1) >= lo || uint64(e+1)<<shift > f64(c) && e+1 < 1<<guideBits {
			t.Fatalf("guide: bits %#x give cell %d, F(c-1) %#x, F(c) %#x", e, c, f64(max(c-1, 0)), f64(c))
		}
	}
	if ambiguous > 1<<guideBits/50 {
		t.Errorf("%d leading bits of %d do not decide the cell", ambiguous, 1<<guideBits)
	}
	t.Logf("%d leading bits of %d do not decide the cell", ambiguous, 1<<guideBits)

	n := newNormal(pcg(77))
	const bins = 8 * 64 // y < 8, the rest in one bin
	counts := make([]int, bins+1)
	p := make([]float64, bins+1)
	copy(p, w[:bins])
	for _, v := range w[:bins] {
		p[bins] -= v
	}
	p[bins]++
	for range 400_000 {
		counts[min(n.cell(), bins)]++
	}
	if pv := chiSquare(t, counts, p); pv < 1e-4 {
		t.Errorf("cells: chi-squared p-value %.3g", pv)
	}
	for _, M0 := range []uint64{256, cellTable} {
		const top = 200
		tail := make([]int, top+1)
		for range 50_000 {
			tail[min(n.cellTail(M0)-M0, top)]++
		}
		all := cellWeights(int(M0) + 1000)
		var z float64
		for _, v := range all[M0:] {
			z += v
		}
		pt := make([]float64, top+1)
		for d, v := range all[M0:] {
			pt[min(d, top)] += v / z
		}
		if pv := chiSquare(t, tail, pt); !(pv >= 1e-4) {
			t.Errorf("tail from %d: chi-squared p-value %.3g", M0, pv)
		}
	}
}

// TestLatticeRelease: Release is Value(MeanIndex(mu[k], centres[k mod len(centres)]) + n[k]) for
// each value, with one centre and with one per dimension, and names the value MeanIndex refuses.
func TestLatticeRelease(t *testing.T) {
	l, err := NewLattice(1, 4)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	const P = 5
	mu := make([]float32, 7*P)
	n := make([]int64, len(mu))
	for k := range mu {
		mu[k] = float32(r.NormFloat64() * 3)
		n[k] = int64(r.IntN(2001) - 1000)
	}
	for _, centres := range [][]int64{{0}, {5, -3, 0, 100000, -7}} {
		z := make([]float32, len(mu))
		if err := l.Release(z, mu, n, centres); err != nil {
			t.Fatal(err)
		}
		for k := range mu {
			m, err := l.MeanIndex(mu[k], centres[k%len(centres)])
			if want := l.Value(m + n[k]); err != nil || z[k] != want {
				t.Fatalf("%d centres: value %d is %v, want %v (%v)", len(centres), k, z[k], want, err)
			}
		}
	}
	bad := append([]float32(nil), mu...)
	bad[12] = float32(math.NaN())
	if err := l.Release(make([]float32, len(mu)), bad, n, []int64{0}); err == nil || !strings.Contains(err.Error(), "value 12:") {
		t.Errorf("NaN mean at 12: %v", err)
	}
}

// BenchmarkLatticeRelease: a release's 65 x 128 values from their means and noise, one centre per
// dimension.
func BenchmarkLatticeRelease(b *testing.B) {
	l, err := NewLattice(0.25, 8)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	mu, n, z := make([]float32, 65*128), make([]int64, 65*128), make([]float32, 65*128)
	centres := make([]int64, 128)
	for i := range mu {
		mu[i], n[i] = float32(rng.NormFloat64()), int64(rng.IntN(1<<16))-1<<15
	}
	for i := range centres {
		centres[i] = int64(rng.IntN(64)) - 32
	}
	for b.Loop() {
		if err := l.Release(z, mu, n, centres); err != nil {
			b.Fatal(err)
		}
	}
}

// meanIndexByDivision is MeanIndex as first written, dividing by G and branching on the side of the
// centre: the reference of TestMeanIndexSameAsDivision.
func meanIndexByDivision(mu float32, centre int64, g float64) (int64, bool) {
	m := float64(mu) / g
	if math.IsNaN(m) || math.Abs(m) >= 1<<53 {
		return 0, false
	}
	if m >= float64(centre) {
		return int64(math.Floor(m)), true
	}
	return int64(math.Ceil(m)), true
}

// TestMeanIndexSameAsDivision: the branchless MeanIndex, by the reciprocal of G, is the division's
// on every lattice of the tests' sigmas, for means on and between lattice points, on the centre,
// signed zeros, subnormals, the range's edge and beyond, NaN and infinities.
func TestMeanIndexSameAsDivision(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sb := range [][2]float64{{1, 0.493}, {0.25, 8}, {0x1p-100, 0x1p-98}, {0x1p100, 0x1p101}, {0.125, 1e4}} {
		l, err := NewLattice(sb[0], sb[1])
		if err != nil {
			t.Fatal(err)
		}
		g := l.G()
		mus := []float32{0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
			float32(g), float32(-g), float32(g / 2), float32(-1.5 * g), float32(0x1p53 * g), float32(-0x1p53 * g), float32(0x1p52 * g),
			math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
		for range 20000 {
			switch rng.IntN(3) {
			case 0:
				mus = append(mus, float32(rng.NormFloat64()*sb[1]))
			case 1:
				mus = append(mus, float32(float64(rng.IntN(1<<20)-1<<19)*g))
			default:
				mus = append(mus, float32((float64(rng.IntN(1<<20)-1<<19)+0.5)*g))
			}
		}
		for i, mu := range mus {
			for _, c := range []int64{0, 1, -1, int64(float64(mu) / g), int64(rng.IntN(64)) - 32} {
				if i >= 15 && c != 0 && rng.IntN(4) != 0 {
					continue
				}
				want, wok := meanIndexByDivision(mu, c, g)
				got, err := l.MeanIndex(mu, c)
				if (err == nil) != wok || wok && got != want {
					t.Fatalf("sigma %g: MeanIndex(%v, %d) = %d, %v; division %d, %v", sb[0], mu, c, got, err, want, wok)
				}
			}
		}
	}
}
