package noise

import (
	"math/rand/v2"
)

// bitSource hands out uniform random bits from a 64-bit generator: runs
// of bits (take) and 16-bit digits, each from a buffer of its own (every
// bit is uniform and independent of the others; a bit dropped is never
// seen). A buffer is refilled with one Uint64 call when it cannot answer,
// so the bits a draw uses depend only on the order in which it asks for
// bits and digits.
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

// take returns n <= 64 uniform bits (an integer below 2^n) from the bit buffer, refilled with
// one Uint64 call, its leftover bits dropped, when it holds fewer than n.
func (b *bitSource) take(n uint) uint64 {
	if b.nBits < n {
		b.bits, b.nBits = b.next(), 64
	}
	v := b.bits & (1<<n - 1)
	b.bits >>= n
	b.nBits -= n
	return v
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

// normal is the exact sampler of the standard normal of this package (cells.go): a draw is a
// sign, an integer part k >= 0 and the fractional part x, a deviate whose undrawn digits are
// uniform. Every step compares uniform deviates digit by digit, or random integers with exact
// constants: no floating-point operation.
type normal struct {
	b       bitSource
	x, p, q deviate
}

func newNormal(src rand.Source) *normal {
	tablesInit()
	return &normal{b: newBitSource(src)}
}

// draw samples X = (-1)^neg (k + x) ~ N(0, 1) exactly: it returns the sign and the integer
// part; the fractional part is the deviate n.x, whose further digits the caller may draw. It
// draws a cell (cell) and tries it (trial) until a trial keeps its y.
func (n *normal) draw() (neg bool, k uint64) {
	for {
		M := n.cell()
		if kept, neg := n.trial(M); kept {
			return neg, M >> cellBits
		}
	}
}

// trial draws y = a_M + delta w in cell M, x = frac(y) in n.x, and keeps it with probability
// exp(-y^2/2) / g_M = exp(-c w) exp(-(delta w)^2/2) (expRuns, normRun); it returns whether it did
// and the sign. Its first trialBits bits are taken at once: x's first digit (M's j and
// fracFreshBits fresh bits), the first comparisons of expRuns and normRun, and the sign.
func (n *normal) trial(M uint64) (kept, neg bool) {
	t := n.b.take(trialBits)
	n.x.setFirst(uint16(M&cellMask<<fracFreshBits | t&(1<<fracFreshBits-1)))
	t >>= fracFreshBits
	if !n.expRuns(2*M, t&(expUnit-1), true) {
		return false, false
	}
	t >>= expUnitBits
	return n.normRun(t & (1<<normBits - 1)), t>>normBits != 0
}
