package noise

import (
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

// TestBernoulliSteps checks each Bernoulli step of Algorithm N against its
// exact probability (a binomial count within 5 standard errors):
// exp(-1/2) (H), exp(-x) for x below and above 1/2 (E), exp(-k x) of step
// N4 for k x above 1 (k successive E trials), exp(-x^2/2) (B), and
// exp(-m/2) as m trials of exp(-1/2) (the tail's proposal and acceptance).
func TestBernoulliSteps(t *testing.T) {
	const trials = 200_000
	x := func(v float64) *deviate { return fixedDeviate(uint64(v * (1 << 63) * 2)) }
	cases := []struct {
		name string
		p    float64
		try  func(n *normal) bool
	}{
		{"H exp(-1/2)", math.Exp(-0.5), func(n *normal) bool { return n.halfExpBern() }},
		{"E exp(-0.1)", math.Exp(-0.1), func(n *normal) bool { return n.truncExpBern(x(0.1)) }},
		{"E exp(-0.75)", math.Exp(-0.75), func(n *normal) bool { return n.truncExpBern(x(0.75)) }},
		{"N4 exp(-3*0.6) (gamma 1.8 > 1)", math.Exp(-1.8), func(n *normal) bool {
			d := x(0.6)
			for range 3 {
				if !n.truncExpBern(d) {
					return false
				}
			}
			return true
		}},
		{"B exp(-0.3^2/2)", math.Exp(-0.045), func(n *normal) bool { return n.truncNormBern(x(0.3)) }},
		{"B exp(-0.95^2/2)", math.Exp(-0.95 * 0.95 / 2), func(n *normal) bool { return n.truncNormBern(x(0.95)) }},
		{"exp(-3/2): 3 trials of exp(-1/2) (the tail's steps)", math.Exp(-1.5), func(n *normal) bool { return n.halfExpPow(3) }},
		{"exp(-0): no trial", 1, func(n *normal) bool { return n.halfExpPow(0) }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNormal(pcg(uint64(7 + i)))
			hits := 0
			for range trials {
				if tc.try(n) {
					hits++
				}
			}
			got, se := float64(hits)/trials, math.Sqrt(tc.p*(1-tc.p)/trials)
			if math.Abs(got-tc.p) > 5*se {
				t.Errorf("frequency %.5f, want %.5f within 5 standard errors (%.2g)", got, tc.p, se)
			}
		})
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

// TestExpHalfDigits: the expansion of exp(-1/2) agrees with math.Exp in its
// first 52 bits, and a longer computation extends the cached digits.
func TestExpHalfDigits(t *testing.T) {
	tablesInit()
	top := uint64(expHalf[0])<<37 | uint64(expHalf[1])<<21 | uint64(expHalf[2])<<5 | uint64(expHalf[3])>>11
	if want := uint64(math.Exp(-0.5) * (1 << 53)); top != want && top != want-1 {
		t.Errorf("first 53 bits of exp(-1/2): %x, math.Exp gives %x", top, want)
	}
	longer := expHalfDigits(expHalfCached + 2)
	for i, w := range expHalf {
		if longer[i] != w {
			t.Fatalf("digit %d: %x cached, %x from the longer expansion", i, w, longer[i])
		}
	}
	if expHalfDigit(expHalfCached+1) != longer[expHalfCached+1] {
		t.Error("expHalfDigit past the cache disagrees with expHalfDigits")
	}
}

// TestIntPart: the cumulative probabilities' expansions agree with float64 in their first 52 bits
// and a longer computation extends them; the integer part's draws match exp(-k^2/2)/theta
// (chi-squared, p > 1e-4), and so do the tail's k >= kTable (its own sampler, drawn directly).
func TestIntPart(t *testing.T) {
	tablesInit()
	var theta float64
	for k := range 40 {
		theta += math.Exp(-float64(k*k) / 2)
	}
	longer := kCDFDigits(kCDFCached + 2)
	cum := 0.0
	p := make([]float64, kTable+1)
	for j := range kTable {
		cum += math.Exp(-float64(j*j)/2) / theta
		p[j] = math.Exp(-float64(j*j)/2) / theta
		top := uint64(kCDFDigit(j, 0))<<48 | uint64(kCDFDigit(j, 1))<<32 | uint64(kCDFDigit(j, 2))<<16 | uint64(kCDFDigit(j, 3))
		if got := float64(top) / (1 << 64); math.Abs(got-cum) > 1e-14 {
			t.Errorf("F(%d): %.17g from the expansion, %.17g in float64", j, got, cum)
		}
		for i := range kCDFCached {
			if longer[j][i] != kCDFDigit(j, i) {
				t.Fatalf("F(%d) digit %d: %x cached, %x from the longer computation", j, i, kCDFDigit(j, i), longer[j][i])
			}
		}
		if kCDFDigit(j, kCDFCached+1) != longer[j][kCDFCached+1] {
			t.Errorf("F(%d): a digit past the cache disagrees", j)
		}
	}
	p[kTable] = 1 - cum
	n := newNormal(pcg(77))
	counts := make([]int, kTable+1)
	for range 200_000 {
		counts[min(n.intPart(), kTable)]++
	}
	if pv := chiSquare(t, counts, p); pv < 1e-4 {
		t.Errorf("integer part: chi-squared p-value %.3g (counts %v)", pv, counts)
	}
	// the tail's own sampler, at k0 = 1 (where its law has several values to test) and at kTable
	for _, k0 := range []uint64{1, 2, kTable} {
		tail := make([]int, 5)
		for range 50_000 {
			tail[min(n.tail(k0)-k0, 4)]++
		}
		var z float64
		w := make([]float64, 60)
		for d := range w {
			k := float64(k0) + float64(d)
			w[d] = math.Exp(-k*k/2 + float64(k0*k0)/2)
			z += w[d]
		}
		pt := make([]float64, 5)
		for d, v := range w {
			pt[min(d, 4)] += v / z
		}
		if pv := chiSquare(t, tail, pt); !(pv >= 1e-4) && k0 < kTable {
			t.Errorf("tail from %d: chi-squared p-value %.3g (counts %v, p %v)", k0, pv, tail, pt)
		}
		if k0 == kTable && tail[0] < 49_990 {
			t.Errorf("tail from %d: %v, want nearly all at d = 0 (P(d >= 1) = %.2g)", k0, tail, 1-pt[0])
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
