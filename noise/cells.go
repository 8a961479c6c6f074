package noise

import (
	"math/big"
	"sort"
	"sync"
)

// The sampler of |X|, X ~ N(0, 1): rejection from a staircase envelope (docs/privacy.md,
// "Floating-point safety"). [0, inf) is cut into cells of width delta = 2^-cellBits; cell M is
// [a_M, a_M + delta), a_M = M delta. The envelope is constant on each cell at the density's
// value at its left end, g_M = exp(-a_M^2/2), which is its maximum there. A draw
//
//  1. picks the cell M with probability g_M / Theta, Theta = sum over M >= 0 of g_M: a uniform
//     deviate U against the exact binary expansions of the cumulative probabilities F(c) =
//     P(M <= c), c < cellTable (cell), the rest by a sampler of its own (cellTail);
//  2. draws y = a_M + delta w, w uniform in [0, 1): the fractional part x of y (y = k + x, k = M
//     >> cellBits) has its first cellBits bits from M and the rest fresh;
//  3. keeps y with probability exp(-y^2/2) / g_M = exp(-c w) exp(-(delta w)^2/2), c = a_M delta =
//     M delta^2: two Bernoulli trials, Karney's Algorithms E and B run on the scaled deviates c w
//     and delta w (expRuns, normRun);
//  4. and a sign bit.
//
// The kept y has density proportional to exp(-y^2/2) on [0, inf): rejection sampling from an
// envelope that bounds the density (g_M >= exp(-y^2/2) on cell M, since y >= a_M >= 0). A cell
// keeps its y with probability at least exp(-c - delta^2/2), so a draw is kept with probability
// sqrt(pi/2) / (delta Theta), about 0.994, where Algorithm N keeps about 0.72.
//
// Every step compares uniform deviates or random integers with exact constants: the expansions
// of F(c), computed once in integer interval arithmetic (cellCDFDigits), and the dyadic
// rationals c = 2M 2^-expUnitBits and delta. A scaled comparison V < c y, for a uniform V and a
// constant c in (0, 1], is V < c (a random integer of expUnitBits bits below 2M) and then V/c <
// y, where V/c, given V < c, is a fresh uniform deviate: the same event with the same
// probability, so each Algorithm runs with its own law on c w (or delta w).

const (
	// cellBits: a cell is 2^-cellBits wide, 64 cells per unit of y.
	cellBits = 6
	// cellMask is the cell's index within its unit, j = M & cellMask.
	cellMask = 1<<cellBits - 1
	// cellTable is the number of cells whose cumulative probabilities are tabulated: y < 10
	// (the rest, probability below 2e-23, is cellTail's).
	cellTable = 10 << cellBits
	// fracFreshBits is how many of the first digit of x are drawn fresh (the rest are M's j).
	fracFreshBits = digitBits - cellBits
	// expUnitBits: the exponents of expRun are multiples of 2^-expUnitBits = delta^2/2, so c =
	// M delta^2 is 2M units.
	expUnitBits = 2*cellBits + 1
	// expUnit is one in units of 2^-expUnitBits (the largest constant of one run).
	expUnit = 1 << expUnitBits
	// normBits is the first round of normRun: one bit (Algorithm B's step B2(a)) and the
	// cellBits leading bits of the deviate compared with delta w (zero with probability delta).
	normBits = 1 + cellBits
	// trialBits are the bits of one trial of a draw, taken at once: x's fresh bits
	// (fracFreshBits), the first comparison of expRun (expUnitBits), the first round of
	// normRun (normBits) and the sign.
	trialBits = fracFreshBits + expUnitBits + normBits + 1
	// guideBits is how many leading bits of U index cellGuide (its 16384 entries, 32 KiB,
	// stay in a core's L1 cache, where 2^16 of them would not).
	guideBits = 14
	// cellAmbiguous marks leading bits of U that do not decide the cell in cellGuide.
	cellAmbiguous = 0xffff
	// cellCDFCached is how many base-2^16 digits of each F(c) are computed once; more are
	// computed when a deviate agrees with all of them (probability 2^-512 per comparison).
	cellCDFCached = 32
)

var (
	tablesOnce sync.Once
	cellCDF    [cellTable][]uint16
	cellCDF0   [cellTable]uint16 // the first digit of each F(c)
	// cellGuide[e] is the cell of every uniform U whose first guideBits bits are e, where they
	// decide it (F(c-1) < e 2^-guideBits and (e+1) 2^-guideBits <= F(c)), and cellAmbiguous
	// where they do not.
	cellGuide [1 << guideBits]uint16
)

// tablesInit computes the cached expansions of the F(c) and the guide (a few ms), once, when
// the first sampler is made (newNormal): not when a program that imports the package starts.
func tablesInit() {
	tablesOnce.Do(func() {
		cellCDF = cellCDFDigits(cellCDFCached)
		for c := range cellTable {
			cellCDF0[c] = cellCDF[c][0]
		}
		c := 0
		const span = 1 << (digitBits - guideBits) // first digits per entry
		for e := range 1 << guideBits {
			lo := e * span // the entry's first digits are lo .. lo+span-1
			for c < cellTable && int(cellCDF0[c]) < lo {
				c++
			}
			// c: the first cell with F(c) >= lo 2^-16; F(c-1) < lo 2^-16 by its first digit
			if c < cellTable && int(cellCDF0[c]) >= lo+span {
				cellGuide[e] = uint16(c)
			} else {
				cellGuide[e] = cellAmbiguous
			}
		}
	})
}

// cellCDFDigit is digit i (base 2^16, the most significant first) of F(c), computed afresh past
// the cached ones (tablesInit first).
func cellCDFDigit(c, i int) uint16 {
	if i < cellCDFCached {
		return cellCDF[c][i]
	}
	return cellCDFDigits(i + 1)[c][i]
}

// cellCDFDigits returns the first D base-2^16 digits of F(c) for c < cellTable, exactly. With P
// bits of guard beyond 16 D, every quantity is bracketed by integers scaled by 2^P (floor for
// lower bounds, ceiling for upper ones): e = exp(-delta^2/2) between consecutive partial sums of
// its alternating series; g_M = exp(-M^2 delta^2/2) as g_{M-1} e^(2M-1), the ratio e^(2M-1) kept
// as the previous one times e^2; Theta between its partial sum up to terms below 2^-P and that
// sum plus a bound of the rest (the ratios decrease, so the rest from K is at most g_K / (1 -
// e^(2K+1))); F(c) = A(c) / Theta between A_lo / Theta_hi and A_hi / Theta_lo. Where the two
// bounds of F(c) do not agree on D digits it doubles the guard and tries again. (It would try
// forever only if some F(c) were a dyadic rational of at most 16 D bits; tablesInit returns in
// about 10 ms. A digit it returns is exact either way.)
func cellCDFDigits(D int) [cellTable][]uint16 {
	for guard := uint(64); ; guard *= 2 {
		if out, ok := cellCDFAt(D, guard); ok {
			return out
		}
	}
}

func cellCDFAt(D int, guard uint) (out [cellTable][]uint16, ok bool) {
	B := uint(digitBits * D)
	P := B + guard
	one := new(big.Int).Lsh(big.NewInt(1), P)
	mulFloor := func(x, y *big.Int) *big.Int { return new(big.Int).Rsh(new(big.Int).Mul(x, y), P) }
	mulCeil := func(x, y *big.Int) *big.Int {
		z := new(big.Int).Mul(x, y)
		z.Add(z, new(big.Int).Sub(one, big.NewInt(1)))
		return z.Rsh(z, P)
	}
	// e = exp(-delta^2/2) = exp(-2^-expUnitBits)
	eLo, eHi := expBounds(big.NewRat(1, expUnit), P)
	e2Lo, e2Hi := mulFloor(eLo, eLo), mulCeil(eHi, eHi)
	gLo, gHi := new(big.Int).Set(one), new(big.Int).Set(one) // g_0 = 1
	rLo, rHi := eLo, eHi                                     // g_1 / g_0 = e
	thetaLo, thetaHi := new(big.Int), new(big.Int)
	var aLo, aHi [cellTable]*big.Int
	accLo, accHi := new(big.Int), new(big.Int)
	// the terms until M^2 delta^2 / 2 > P ln 2 + 8, well below 2^-P
	for M := 0; M < cellTable || float64(M*M)/expUnit <= float64(P)*0.6931471805599453+8; M++ {
		thetaLo.Add(thetaLo, gLo)
		thetaHi.Add(thetaHi, gHi)
		if M < cellTable {
			accLo.Add(accLo, gLo)
			accHi.Add(accHi, gHi)
			aLo[M], aHi[M] = new(big.Int).Set(accLo), new(big.Int).Set(accHi)
		}
		gLo, gHi = mulFloor(gLo, rLo), mulCeil(gHi, rHi)
		rLo, rHi = mulFloor(rLo, e2Lo), mulCeil(rHi, e2Hi)
	}
	// the rest from K on: at most g_K / (1 - r_K), r_K = g_{K+1} / g_K < 1
	rest := new(big.Int).Mul(gHi, one)
	den := new(big.Int).Sub(one, rHi)
	if den.Sign() <= 0 {
		return out, false
	}
	rest.Add(rest, new(big.Int).Sub(den, big.NewInt(1)))
	rest.Quo(rest, den)
	thetaHi.Add(thetaHi, rest)
	for c := range cellTable {
		fLo := new(big.Int).Lsh(aLo[c], B)
		fLo.Quo(fLo, thetaHi)
		fHi := new(big.Int).Lsh(aHi[c], B)
		fHi.Quo(fHi, thetaLo)
		if fLo.Cmp(fHi) != 0 {
			return out, false
		}
		out[c] = digitsOf(fLo, D)
	}
	return out, true
}

// expBounds brackets exp(-x) 2^P, 0 < x <= 1, between the integers lo and hi: the floor and
// ceiling of two consecutive partial sums of the alternating series sum (-x)^n / n!, whose terms
// decrease from the first on, so that the limit lies between them; the last term is below 2^-P.
func expBounds(x *big.Rat, P uint) (lo, hi *big.Int) {
	scale := new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), P))
	small := new(big.Rat).Inv(scale) // 2^-P
	sum, term := big.NewRat(1, 1), big.NewRat(1, 1)
	prev := new(big.Rat).Set(sum)
	for n := int64(1); new(big.Rat).Abs(term).Cmp(small) >= 0; n++ {
		prev.Set(sum)
		term.Mul(term, new(big.Rat).Mul(x, big.NewRat(-1, n)))
		sum.Add(sum, term)
	}
	a, b := new(big.Rat).Set(sum), new(big.Rat).Set(prev)
	if a.Cmp(b) > 0 {
		a, b = b, a
	}
	a.Mul(a, scale)
	b.Mul(b, scale)
	lo = new(big.Int).Quo(a.Num(), a.Denom()) // a > 0: the floor
	hi, m := new(big.Int).QuoRem(b.Num(), b.Denom(), new(big.Int))
	if m.Sign() != 0 {
		hi.Add(hi, big.NewInt(1))
	}
	return lo, hi
}

// digitsOf returns the D base-2^16 digits of v < 2^(16D), the most significant first.
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

// cell draws the cell M >= 0 with P(M) = g_M / Theta exactly: U = n.p against the F(c). Its
// first guideBits bits decide it but for 227 of their 16384 values, 1.4% of draws (cellGuide).
func (n *normal) cell() uint64 {
	d0 := n.p.fresh(&n.b)
	if c := cellGuide[d0>>(digitBits-guideBits)]; c != cellAmbiguous {
		return uint64(c)
	}
	return n.cellFrom(d0)
}

// cellFrom is cell for a first digit d0 of U = n.p whose leading bits do not decide the cell: the first c
// with U < F(c), from the first whose F(c) has a first digit at or above d0 (every earlier F is
// below d0 2^-16 <= U), decided digit by digit; U beyond every F(c) of the table goes to
// cellTail.
//
//go:noinline
func (n *normal) cellFrom(d0 uint16) uint64 {
	c := sort.Search(cellTable, func(c int) bool { return cellCDF0[c] >= d0 })
	for ; c < cellTable; c++ {
		if n.uBelow(c) {
			return uint64(c)
		}
	}
	return n.cellTail(cellTable)
}

// uBelow reports U < F(c) for the deviate U = n.p, decided at the first digit where they differ
// (F(c) is irrational, U a uniform deviate: they differ with probability 1).
func (n *normal) uBelow(c int) bool {
	for i := 0; ; i++ {
		if d, f := n.p.at(i, &n.b), cellCDFDigit(c, i); d != f {
			return d < f
		}
	}
}

// cellTail draws the cell M >= M0 with P(M) proportional to g_M: M = M0 + d, g_M / g_M0 =
// exp(-M0 d delta^2) exp(-d^2 delta^2/2), so d is proposed with P(d) ~ rho^d, rho = exp(-M0
// delta^2) (a geometric run of Bernoulli(rho) trials), and kept with probability exp(-d^2
// delta^2/2): in units of 2^-expUnitBits, exponents 2 M0 and d^2 (expRuns with y = 1).
func (n *normal) cellTail(M0 uint64) uint64 {
	for {
		var d uint64
		for n.expRuns(2*M0, n.b.take(expUnitBits), false) {
			d++
		}
		if n.expRuns(d*d, n.b.take(expUnitBits), false) {
			return M0 + d
		}
	}
}

// expRuns is true with probability exp(-m 2^-expUnitBits y), y = w (ofW: the deviate w =
// frac(x 2^cellBits), lessW) or 1, m >= 0: one run (expRun) per unit of the exponent and one
// for the rest, the first with the comparison v, a uniform integer of expUnitBits bits drawn by
// the caller, each later one with its own.
func (n *normal) expRuns(m, v uint64, ofW bool) bool {
	for ; m > expUnit; m -= expUnit {
		if !n.expRun(expUnit, v, ofW) {
			return false
		}
		v = n.b.take(expUnitBits)
	}
	return n.expRun(m, v, ofW)
}

// expRun is true with probability exp(-c y), c = m 2^-expUnitBits in [0, 1], y = w (ofW) or 1:
// Karney's Algorithm E on c y, the run c y > V1 > V2 > ... of uniform deviates, true when its
// length is even. Each V_i < c V'_{i-1} (V'_0 = y) is V_i < c, a uniform integer of
// expUnitBits bits below m (v for the first), and then a fresh uniform V'_i = V_i / c below
// V'_{i-1}.
func (n *normal) expRun(m, v uint64, ofW bool) bool {
	if v >= m {
		return true // the run's length is 0
	}
	b, p, q := &n.b, &n.p, &n.q
	if ofW {
		if !n.lessW(p) {
			return true // V'_1 >= w: the length is 0
		}
	} else {
		p.reset() // V'_1 < 1: drawn at its first comparison
	}
	for parity := 1; ; parity ^= 1 { // parity: the run's length so far, mod 2
		if b.take(expUnitBits) >= m || !freshLess(q, p, b) {
			return parity == 0
		}
		p, q = q, p
	}
}

// normRun is true with probability exp(-(delta w)^2/2): Karney's Algorithm B on delta w
// (truncNormBern's rounds of a bit, q < c and p < delta w, c = delta w in the first round and the
// previous round's q after, true when the rounds completed are even). z holds the first round's
// bit (bit 0) and the leading cellBits bits of its q (bits 1 on): q < delta c' is those bits
// zero and a fresh q' = q / delta below c'; p < delta w likewise.
func (n *normal) normRun(z uint64) bool {
	if z != 0 {
		return true // the first round stops at its bit or at q
	}
	b, p, q := &n.b, &n.p, &n.q
	if !n.lessW(q) || b.take(cellBits) != 0 || !n.lessW(p) {
		return true // the first round stops at q' < w or at p
	}
	for parity := 1; ; parity ^= 1 { // c' is q
		if b.take(normBits) != 0 || !freshLess(p, q, b) {
			return parity == 0
		}
		p, q = q, p // c' is the new q (now in q); p is free
		if b.take(cellBits) != 0 || !n.lessW(p) {
			return parity == 0
		}
	}
}

// lessW makes v a fresh deviate and reports v < w, w = frac(x 2^cellBits): x's digits after its
// first cellBits bits, digit i of w made of digits i and i+1 of x. Digit i of v is drawn before
// digit i+1 of x.
func (n *normal) lessW(v *deviate) bool {
	b, x := &n.b, &n.x
	v.reset()
	for i := 0; ; i++ {
		d := v.at(i, b)
		w := uint16(uint32(x.at(i, b))<<cellBits | uint32(x.at(i+1, b))>>fracFreshBits)
		if d != w {
			return d < w
		}
	}
}
