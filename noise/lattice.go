package noise

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
)

// SamplerName names the release noise of this package in metadata: the exact normal of the
// staircase sampler (cells.go) rounded correctly to the lattice. Until issue 40's sixth stop the
// normal was Karney's Algorithm N, named "karney-exact-normal-rounded-to-lattice"; the law of the
// values is the same.
const SamplerName = "exact-normal-cells-rounded-to-lattice"

// Lattice sizing. The values a release holds are G n for integers n with |n| < 2^SignificandBits,
// exactly representable as float32, as long as a coordinate's mean lies within the bound of 0 and
// its noise within TailSigmas standard deviations. A normal deviate beyond 32 has probability below
// 1e-200; a larger one is still released, as the float32 nearest G n.
const (
	SignificandBits = 24 // float32's significand, the sign apart
	TailSigmas      = 32
	// MinSteps is the fewest lattice steps per noise standard deviation NewLattice accepts. The
	// rounding adds a variance of at most G^2/12 = sigma^2/3072, which costs utility only; a
	// coarser lattice would waste more.
	MinSteps = 16
)

// Lattice is the grid of released values, G = 2^Exp, and the noise drawn on it:
// n = round(Sigma X / G) for X ~ N(0, 1). Ties, of probability 0, round away from zero.
type Lattice struct {
	// Exp is the lattice exponent: G = 2^Exp.
	Exp int `json:"lattice_exp"`
	// Sigma is sigma', the standard deviation of the noise drawn: a float32 value at least the
	// certified sigma, from [NoiseSigma].
	Sigma float64 `json:"noise_sigma"`
	a     uint64  // Sigma / G = a 2^t, a odd
	t     int
}

// G returns the lattice spacing 2^Exp.
func (l Lattice) G() float64 { return math.Ldexp(1, l.Exp) }

// NoiseSigma returns the noise standard deviation drawn for a stored float32 log-variance: the
// smallest float32 at or above exp(logvar/2). Every certificate of this package's callers is
// computed with the sigma of exp(float32 logvar), in package privacy, so sigma' >= sigma.
//
// exp(0) = 1 is exact. Any other exp(logvar/2) is irrational, and a float64 result that is already
// a float32 is moved up one float32 step to cover math.Exp's rounding.
func NoiseSigma(logvar float32) float64 {
	s := math.Exp(0.5 * float64(logvar))
	f := float32(s)
	if float64(f) < s {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	if logvar != 0 && float64(f) == s {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return float64(f)
}

// NewLattice returns the lattice of noise sigma, a positive float32 value such as [NoiseSigma]
// returns, for means whose coordinates lie within bound of 0, that is |centre| plus the clip
// radius. G = 2^Exp is the smallest power of two with 2^(Exp+SignificandBits) >= bound +
// TailSigmas sigma, so that every released value short of a 32-sigma deviate is G n with
// |n| < 2^24.
//
// NewLattice returns an error when sigma is not a positive finite float32 value, when bound is
// negative or not finite, or when the lattice would have fewer than [MinSteps] steps per sigma,
// that is for a bound above about 2^20 sigma.
func NewLattice(sigma, bound float64) (Lattice, error) {
	if !(sigma > 0) || math.IsInf(sigma, 0) || float64(float32(sigma)) != sigma || float32(sigma) < math.SmallestNonzeroFloat32*(1<<23) {
		return Lattice{}, fmt.Errorf("noise: sigma %v: want a positive, normal float32 value", sigma)
	}
	if !(bound >= 0) || math.IsInf(bound, 0) {
		return Lattice{}, fmt.Errorf("noise: mean bound %v: want a finite value >= 0", bound)
	}
	_, ex := math.Frexp(bound + TailSigmas*sigma) // bound + 32 sigma <= 2^ex
	l := Lattice{Exp: ex - SignificandBits, Sigma: sigma}
	u := math.Float32bits(float32(sigma))
	mant := uint64(u&0x7fffff | 0x800000)
	e := int(u>>23&0xff) - 127 - 23
	tz := bits.TrailingZeros64(mant)
	l.a, l.t = mant>>tz, e+tz-l.Exp
	if steps := sigma / l.G(); steps < MinSteps {
		return Lattice{}, fmt.Errorf("noise: mean bound %v is %.3g noise sigmas: the float32 lattice would have %.3g < %d steps per sigma", bound, bound/sigma, steps, MinSteps)
	}
	return l, nil
}

// CentreIndex returns the lattice index c/G of a ball centre c. It returns an error when c is not
// on the lattice or lies beyond 2^53 G.
func (l Lattice) CentreIndex(c float32) (int64, error) {
	m := float64(c) / l.G() // exact: a power of two
	if m != math.Trunc(m) || math.Abs(m) >= 1<<53 {
		return 0, fmt.Errorf("noise: ball centre %v is not on the lattice 2^%d", c, l.Exp)
	}
	return int64(m), nil
}

// MeanIndex returns the lattice index of a mean coordinate mu rounded toward the ball's centre,
// whose index centre comes from [Lattice.CentreIndex]: floor(mu/G) above the centre and ceil(mu/G)
// below. Then |G m - c| <= |mu - c|, so a mean in the clip ball stays in it. It returns an error
// when mu is not finite or lies beyond 2^53 G.
func (l Lattice) MeanIndex(mu float32, centre int64) (int64, error) {
	m, ok := meanIndex(mu, centre, 1/l.G())
	if !ok {
		return 0, l.meanRangeError(mu)
	}
	return m, nil
}

// meanIndex is MeanIndex with 1/G given, inv = 1/l.G(), exact: G is a power of two whose
// reciprocal is a normal float64 (NewLattice), so mu * inv is mu / G, bit for bit. ok is false for
// a mean MeanIndex refuses. Floor and ceiling are both computed and one is selected without a
// branch, so every mean takes the same operations, and the 50/50 side of the centre costs no
// mispredicted branch (BenchmarkLatticeRelease: 100 to 47 us for a release's 65 x 128 values).
func meanIndex(mu float32, centre int64, inv float64) (m int64, ok bool) {
	x := float64(mu) * inv
	m, up := int64(math.Ceil(x)), int64(math.Floor(x))
	if x >= float64(centre) {
		m = up
	}
	return m, math.Abs(x) < 1<<53
}

// meanRangeError is the error of a mean outside the lattice's range (MeanIndex).
func (l Lattice) meanRangeError(mu float32) error {
	return fmt.Errorf("noise: mean %v outside the lattice's range 2^%d", mu, l.Exp+53)
}

// Release sets z[k] = Value(MeanIndex(mu[k], centre) + n[k]) for the means mu and lattice noise n
// of a release, row-major [.., P]. The centre of value k is centres[k % len(centres)]: one centre
// for every dimension, or one per dimension with P = len(centres). Every value takes the same
// operations.
//
// Release returns an error for mismatched lengths, no centre, or a mean MeanIndex refuses, naming
// its index.
func (l Lattice) Release(z, mu []float32, n, centres []int64) error {
	if len(z) != len(mu) || len(n) != len(mu) || len(centres) == 0 {
		return fmt.Errorf("noise: release of %d means with %d noise values into %d, %d centres", len(mu), len(n), len(z), len(centres))
	}
	g := l.G()
	inv := 1 / g
	j := 0 // k mod len(centres)
	for k, v := range mu {
		m, ok := meanIndex(v, centres[j], inv)
		if !ok {
			return fmt.Errorf("value %d: %w", k, l.meanRangeError(v))
		}
		z[k] = value(m+n[k], g)
		if j++; j == len(centres) {
			j = 0
		}
	}
	return nil
}

// Value returns the released float32 of lattice index n: G n, exact while |n| < 2^24. The
// conversion is deterministic and takes the same operations for every n: an integer-to-float
// conversion and a product by a power of two.
func (l Lattice) Value(n int64) float32 { return value(n, l.G()) }

// value is Value with G given.
func value(n int64, g float64) float32 { return float32(float64(n) * g) }

// Noise draws lattice noise exactly, n = round(sigma' X / G) with X ~ N(0, 1), from the exact
// normal of cells.go and integer rounding. It is not safe for concurrent use.
type Noise struct {
	lat Lattice
	n   *normal
	// first is the number of digits round128 starts with, 1 to 4, or 0 when
	// t is beyond the range of its 128-bit arithmetic (then roundBig).
	first int
	// k64 bounds the integer parts k for which round64 holds the rounding
	// with first digits: k < k64 (0: none).
	k64 uint64
}

// NewNoise returns the noise of lattice l drawn from src: a ChaCha8 keyed from crypto/rand for
// releases, or a seeded source in tests.
func NewNoise(l Lattice, src rand.Source) *Noise {
	if l.a == 0 {
		panic("noise: NewNoise of a Lattice not made by NewLattice")
	}
	s := &Noise{lat: l, n: newNormal(src)}
	if l.t >= -60 && l.t < 63 {
		if D := max(1, (l.t+1+bits.Len64(l.a)+10+digitBits-1)/digitBits); D <= 64/digitBits {
			s.first = D
			s.k64 = l.round64Bound(D)
		}
	}
	return s
}

// Fill sets dst[i] to independent draws of round(sigma' X / G).
func (s *Noise) Fill(dst []int64) {
	for i := range dst {
		dst[i] = s.draw()
	}
}

// Draw returns one draw of round(sigma' X / G).
func (s *Noise) Draw() int64 { return s.draw() }

// drawRef is Draw as the sampler's steps (normal.draw, then round) spell
// it: the reference that draw, its hot path written out, stands for
// (TestDrawReference).
func (s *Noise) drawRef() int64 {
	neg, k := s.n.draw()
	v := int64(s.round(k))
	if neg {
		return -v
	}
	return v
}

// round returns floor(c (k + x) + 1/2) for c = sigma'/G = a 2^t and the
// deviate x = s.n.x, drawing x's digits until the rounding is decided: with
// x known to B bits, x = (X_B + r) 2^-B for an undrawn r in [0, 1), the
// value is floor((2W + 2^S + 2 a r) / 2^(S+1)) with W = a (k 2^B + X_B) and
// S = B - t, decided when it is the same for 2ar = 0 and 2ar -> 2a. It
// starts with the fewest 16-bit digits that decide it but with probability
// about 2^-10 (always, for a power-of-two c: a = 1), in 128-bit integers up
// to B = 64; the rare undecided case continues in big integers.
func (s *Noise) round(k uint64) uint64 {
	if s.first > 0 && k < 1<<20 {
		for D := s.first; D <= 64/digitBits; D++ {
			if q, ok := s.round128(k, D); ok {
				return q
			}
		}
	}
	return s.roundBig(k)
}

// round128 is round with x known to its first D digits (B = 16 D <= 64),
// in 128-bit integers; ok is false when that does not decide it, or when
// S = B - t is out of the range the arithmetic handles (then it draws no
// digit).
func (s *Noise) round128(k uint64, D int) (q uint64, ok bool) {
	x, b := &s.n.x, &s.n.b
	if B := digitBits * D; B <= s.lat.t || B-s.lat.t > 126 {
		return 0, false
	}
	var X uint64
	for i := range D {
		X = X<<digitBits | uint64(x.at(i, b))
	}
	return s.lat.round128(k, X, D)
}

// round128 is floor(c (k + x) + 1/2) for c = a 2^t and x = (X + r) 2^-B,
// B = 16 D, the same for every r in [0, 1): ok is false when it is not, or
// when S = B - t is not in [1, 126].
func (l Lattice) round128(k, X uint64, D int) (q uint64, ok bool) {
	a, t := l.a, l.t
	B := digitBits * D
	if B <= t || B-t > 126 {
		return 0, false
	}
	hi, lo := bits.Mul64(a, X) // a X_B
	kw := a * k                // a k 2^B: kw shifted left by B
	if B == 64 {
		hi += kw
	} else {
		var c uint64
		lo, c = bits.Add64(lo, kw<<B, 0)
		hi += kw>>(64-B) + c
	}
	S := uint(B - t)
	hi, lo = hi<<1|lo>>63, lo<<1 // 2W
	var c uint64
	if S < 64 {
		lo, c = bits.Add64(lo, 1<<S, 0)
		hi += c
	} else {
		hi += 1 << (S - 64)
	}
	uhi, ulo := hi, lo
	ulo, c = bits.Add64(ulo, 2*a-1, 0)
	uhi += c
	if q := shr128(hi, lo, S+1); q == shr128(uhi, ulo, S+1) {
		return q, true
	}
	return 0, false
}

// round64Bound is the bound k64 of round64 for D digits: a (k 2^B + X) +
// 2^(S-1) + a < 2^63 for every k < k64 and X < 2^B, and S = B - t in [1,
// 63]; 0 when no k qualifies.
func (l Lattice) round64Bound(D int) uint64 {
	B := digitBits * D
	S := B - l.t
	lk := 62 - bits.Len64(l.a) - B // a < 2^len(a), k 2^B + X < (k+1) 2^B <= 2^(lk+B)
	if S < 1 || S > 63 || lk < 0 {
		return 0
	}
	return 1 << lk
}

// round64 is round128 in 64-bit integers, for k below round64Bound(D):
// with L = W + 2^(S-1), W = a (k 2^B + X), the value is L >> S, decided
// when L mod 2^S + a - 1 < 2^S (the same value as floor((2W + 2^S + 2ar) /
// 2^(S+1)) of round128 for every r in [0, 1)).
func (l Lattice) round64(k, X uint64, D int) (q uint64, ok bool) {
	S := uint(digitBits*D - l.t)
	L := l.a*(k<<(digitBits*D)|X) + 1<<(S-1)
	if L&(1<<S-1)+l.a-1 < 1<<S {
		return L >> S, true
	}
	return 0, false
}

// shr128 is (hi:lo) >> s for s in [1, 127], as uint64 (the callers' values fit).
func shr128(hi, lo uint64, s uint) uint64 {
	if s >= 64 {
		return hi >> (s - 64)
	}
	return hi<<(64-s) | lo>>s
}

// roundBig is round in big integers, drawing digits of x until decided.
func (s *Noise) roundBig(k uint64) uint64 {
	a, t := new(big.Int).SetUint64(s.lat.a), s.lat.t
	x, b := &s.n.x, &s.n.b
	for D := 5; ; D++ {
		B := digitBits * D
		if B <= t {
			continue
		}
		W := new(big.Int).SetUint64(k)
		for i := range D {
			W.Lsh(W, digitBits).Add(W, new(big.Int).SetUint64(uint64(x.at(i, b))))
		}
		W.Mul(W, a)
		S := uint(B - t)
		L := new(big.Int).Lsh(W, 1)
		L.Add(L, new(big.Int).Lsh(big.NewInt(1), S))
		U := new(big.Int).Add(L, new(big.Int).Sub(new(big.Int).Lsh(a, 1), big.NewInt(1)))
		L.Rsh(L, S+1)
		U.Rsh(U, S+1)
		if L.Cmp(U) == 0 {
			return L.Uint64()
		}
	}
}
