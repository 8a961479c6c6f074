package noise

import (
	"math/big"
	"math/rand/v2"
)

// bitSource hands out uniform random bits from a 64-bit generator: single
// bits and 16-bit digits, each from a buffer of its own (every bit is
// uniform and independent of the others). A buffer is refilled with one
// Uint64 call when a bit or digit is asked of it empty, so the bits a draw
// uses depend only on the order in which it asks for bits and digits.
type bitSource struct {
	bits, digits uint64
	nBits        uint // bits left in bits
	nDigits      uint // 16-bit digits left in digits
	// src, and src again when it is a *rand.ChaCha8 or a *rand.Rand (called
	// directly, not through the interface: a Rand's Uint64 is its source's)
	src rand.Source
	cc  *rand.ChaCha8
	rr  *rand.Rand
}

func newBitSource(src rand.Source) bitSource {
	b := bitSource{src: src}
	switch s := src.(type) {
	case *rand.ChaCha8:
		b.cc = s
	case *rand.Rand:
		b.rr = s
	}
	return b
}

// next returns the source's next Uint64.
func (b *bitSource) next() uint64 {
	if b.cc != nil {
		return b.cc.Uint64()
	}
	if b.rr != nil {
		return b.rr.Uint64()
	}
	return b.src.Uint64()
}

// bit returns one uniform bit.
func (b *bitSource) bit() bool {
	if b.nBits == 0 {
		return b.refillBit()
	}
	b.nBits--
	v := b.bits&1 != 0
	b.bits >>= 1
	return v
}

// refillBit refills the bit buffer and returns its first bit.
//
//go:noinline
func (b *bitSource) refillBit() bool {
	v := b.next()
	b.bits, b.nBits = v>>1, 63
	return v&1 != 0
}

// digit returns 16 uniform bits.
func (b *bitSource) digit() uint16 {
	if b.nDigits == 0 {
		return b.refillDigit()
	}
	b.nDigits--
	v := uint16(b.digits)
	b.digits >>= digitBits
	return v
}

// refillDigit refills the digit buffer and returns its first digit.
//
//go:noinline
func (b *bitSource) refillDigit() uint16 {
	v := b.next()
	b.digits, b.nDigits = v>>digitBits, 64/digitBits-1
	return uint16(v)
}

// digitBits is the width of a deviate's digit: two fresh deviates differ
// in their first digit but with probability 2^-16, so a comparison mostly
// costs 32 random bits.
const digitBits = 16

// inlineDigits is how many digits a deviate holds without allocating.
const inlineDigits = 8

// deviate is a uniform deviate in (0, 1) known by a prefix of its base-2^16
// digits (the most significant first); the next digit is drawn only when a
// comparison or the rounding needs it (Karney's u-rand).
type deviate struct {
	n    int                  // digits drawn
	d    [inlineDigits]uint16 // digits 0 .. inlineDigits-1
	more []uint16             // digits inlineDigits, ...
}

// reset makes u a fresh deviate (no digit drawn). The digits in u.more are
// those past inlineDigits only while u.n > inlineDigits: draw empties it
// before it appends digit inlineDigits.
func (u *deviate) reset() { u.n = 0 }

// fresh makes u a fresh deviate and draws its first digit, which it
// returns.
func (u *deviate) fresh(b *bitSource) uint16 {
	v := b.digit()
	u.d[0], u.n = v, 1
	return v
}

// first returns digit 0 of u, drawing it if need be.
func (u *deviate) first(b *bitSource) uint16 {
	if u.n == 0 {
		u.d[0], u.n = b.digit(), 1
	}
	return u.d[0]
}

// at returns digit i of u, drawing the digits up to it.
func (u *deviate) at(i int, b *bitSource) uint16 {
	if i < u.n && i < inlineDigits {
		return u.d[i]
	}
	return u.draw(i, b)
}

// draw draws the digits of u up to i and returns digit i.
func (u *deviate) draw(i int, b *bitSource) uint16 {
	for u.n <= i {
		if u.n < inlineDigits {
			u.d[u.n] = b.digit()
		} else {
			if u.n == inlineDigits {
				u.more = u.more[:0]
			}
			u.more = append(u.more, b.digit())
		}
		u.n++
	}
	if i < inlineDigits {
		return u.d[i]
	}
	return u.more[i-inlineDigits]
}

// digits is the number of digits of u drawn.
func (u *deviate) digits() int { return u.n }

// freshLess makes p a fresh deviate and reports p < q, drawing digits of
// either until they differ (two deviates are equal with probability 0):
// digit i of p before digit i of q. The first digits decide it but with
// probability 2^-16.
func freshLess(p, q *deviate, b *bitSource) bool {
	x := p.fresh(b)
	if y := q.first(b); x != y {
		return x < y
	}
	return lessFrom(p, q, b)
}

// lessFrom reports p < q for p and q equal in their first digit, drawing
// digits of either from the second on until they differ.
//
//go:noinline
func lessFrom(p, q *deviate, b *bitSource) bool {
	for i := 1; ; i++ {
		x, y := p.at(i, b), q.at(i, b)
		if x != y {
			return x < y
		}
	}
}

// normal is Karney's exact sampler of the standard normal (Algorithm N with
// the step of Du, Fan & Wei 2022), as MPFR's mpfr_nrandom implements it: a
// draw is a sign, an integer part k >= 0 and the fractional part x, a
// deviate whose undrawn digits are uniform. Every step compares uniform
// deviates digit by digit: no floating-point operation.
type normal struct {
	b       bitSource
	x, p, q deviate
}

func newNormal(src rand.Source) *normal {
	tablesInit()
	return &normal{b: newBitSource(src)}
}

// halfExpBern is true with probability exp(-1/2): a uniform deviate U,
// drawn 16 bits at a time, against the binary expansion of exp(-1/2)
// (expHalfDigits): true when U < exp(-1/2), decided at the first digit
// where they differ. The expansion is exact (rational arithmetic), so the
// probability is exactly exp(-1/2); von Neumann's run (Karney's Algorithm
// H) gives the same law with several deviates per trial.
func (n *normal) halfExpBern() bool {
	for i := 0; ; i++ {
		if u, w := n.b.digit(), expHalfDigit(i); u != w {
			return u < w
		}
	}
}

// truncExpBern is true with probability exp(-x) for the deviate x
// (Karney's Algorithm E).
func (n *normal) truncExpBern(x *deviate) bool {
	b, p, q := &n.b, &n.p, &n.q
	if !freshLess(p, x, b) {
		return true
	}
	for {
		if !freshLess(q, p, b) {
			return false
		}
		if !freshLess(p, q, b) {
			return true
		}
	}
}

// truncNormBern is true with probability exp(-x^2/2) for the deviate x
// (Karney's Algorithm B).
func (n *normal) truncNormBern(x *deviate) bool {
	b, p, q := &n.b, &n.p, &n.q
	if b.bit() || !freshLess(q, x, b) || !freshLess(p, x, b) { // steps B2(a), (b), (c) of the first round
		return true
	}
	// p <- q: the previous round's deviate is q (p is drawn afresh next)
	p, q = q, p
	for parity := 1; ; parity ^= 1 {
		if b.bit() || !freshLess(q, p, b) || !freshLess(p, x, b) {
			return parity == 0
		}
		p, q = q, p
	}
}

// draw samples X = (-1)^neg (k + x) ~ N(0, 1) exactly: it returns the sign
// and the integer part; the fractional part is the deviate n.x, whose
// further digits the caller may draw.
func (n *normal) draw() (neg bool, k uint64) {
	x := &n.x
outer:
	for {
		k = n.intPart()          // steps N1, N2: P(k) ~ exp(-k^2/2), in one step
		x.reset()                // step N3
		for j := k; j > 0; j-- { // step N4: accept with probability exp(-k x)
			if !n.truncExpBern(x) {
				continue outer
			}
		}
		if n.truncNormBern(x) { // step N5: exp(-x^2/2)
			return n.b.bit(), k
		}
	}
}

// expHalfCached is how many base-2^16 digits of exp(-1/2) are computed once
// (a uniform deviate agrees with the first 32 with probability 2^-512).
const expHalfCached = 32

// expHalf holds the first expHalfCached base-2^16 digits of exp(-1/2)
// (tablesInit).
var expHalf []uint16

// expHalfDigit is digit i of exp(-1/2) in base 2^16 (0 the most
// significant), computed afresh past the cached ones (tablesInit first).
func expHalfDigit(i int) uint16 {
	if i < len(expHalf) {
		return expHalf[i]
	}
	return expHalfDigits(i + 1)[i]
}

// expHalfDigits returns the first D base-2^16 digits of exp(-1/2), exactly:
// floor(exp(-1/2) 2^(16D)), known when the bounds of expHalfBounds with
// guard bits beyond 16 D agree on it (exp(-1/2) is irrational, so they do
// with enough guard bits).
func expHalfDigits(D int) []uint16 {
	B := uint(digitBits * D)
	for guard := uint(64); ; guard *= 2 {
		lo, hi := expHalfBounds(B + guard)
		lo.Rsh(lo, guard)
		hi.Rsh(hi, guard)
		if lo.Cmp(hi) == 0 {
			return digitsOf(lo, D)
		}
	}
}

// expHalfBounds brackets exp(-1/2) 2^P between the integers lo and hi: the
// floor and ceiling of two consecutive partial sums of the alternating
// series sum (-1/2)^n / n!, whose terms decrease from the first on, so
// that the limit lies between them; the last term is below 2^-P.
func expHalfBounds(P uint) (lo, hi *big.Int) {
	sum, term := big.NewRat(1, 1), big.NewRat(1, 1)
	prev := new(big.Rat).Set(sum)
	for n := int64(1); n <= int64(P/2)+8; n++ {
		prev.Set(sum)
		term.Mul(term, big.NewRat(-1, 2*n))
		sum.Add(sum, term)
	}
	a, b := sum, prev
	if a.Cmp(b) > 0 {
		a, b = b, a
	}
	scale := new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), P))
	a.Mul(a, scale)
	b.Mul(b, scale)
	lo = new(big.Int).Quo(a.Num(), a.Denom()) // a > 0: the floor
	hi, m := new(big.Int).QuoRem(b.Num(), b.Denom(), new(big.Int))
	if m.Sign() != 0 {
		hi.Add(hi, big.NewInt(1))
	}
	return lo, hi
}

// digitsOf returns the D base-2^16 digits of v < 2^(16D), the most
// significant first.
func digitsOf(v *big.Int, D int) []uint16 {
	out := make([]uint16, D)
	v = new(big.Int).Set(v)
	mask := big.NewInt(1<<digitBits - 1)
	for i := D - 1; i >= 0; i-- {
		out[i] = uint16(new(big.Int).And(v, mask).Uint64())
		v.Rsh(v, digitBits)
	}
	return out
}
