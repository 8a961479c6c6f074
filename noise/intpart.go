package noise

import (
	"math/big"
	"sync"
)

// The integer part k of Karney's normal (steps N1 and N2 of Algorithm N,
// as Du, Fan & Wei improve them) has P(k) = exp(-k^2/2) / theta, theta =
// sum over k >= 0 of exp(-k^2/2). Algorithm N draws it by a geometric run
// of Bernoulli(exp(-1/2)) trials kept when its length is a perfect square
// (about 5 trials per normal deviate). intPart draws it in one step
// instead: a uniform deviate U against the exact binary expansions of the
// cumulative probabilities F(j) = P(k <= j), j < kTable, computed once in
// integer interval arithmetic (kCDFDigits); k is the first j with U < F(j)
// (decided at the first digit where U and F(j) differ). The tail k >=
// kTable (probability below 1e-27) has a rejection sampler of its own
// (tail) from Bernoulli(exp(-1/2)) trials.

// kTable is the number of cumulative probabilities tabulated.
const kTable = 10

// kCDFCached is how many base-2^16 digits of each F(j) are computed once;
// more are computed when a deviate agrees with all of them (probability
// 2^-512 per comparison).
const kCDFCached = 32

var (
	tablesOnce sync.Once
	kCDF       [kTable][]uint16
	kCDF0      [kTable]uint16 // the first digit of each F(j)
	// kByDigit[h] is the integer part k of every uniform whose first digit
	// d has d>>8 = h, where d decides it (d < F(k) and d > F(k-1) in their
	// first digits, for all 256 such d), and kTable where some d does not.
	kByDigit [256]uint8
)

// tablesInit computes the cached expansions of exp(-1/2) and of the F(j)
// (about 10 ms), once, when the first sampler is made (newNormal): not
// when a program that imports the package starts.
func tablesInit() {
	tablesOnce.Do(func() {
		expHalf = expHalfDigits(expHalfCached)
		kCDF = kCDFDigits(kCDFCached)
		for j := range kTable {
			kCDF0[j] = kCDF[j][0]
		}
		for h := range kByDigit {
			// the first digits in h's range, d = h<<8 .. h<<8 + 255, all below
			// F(k) and above F(k-1)
			lo, hi := uint16(h<<8), uint16(h<<8|0xff)
			k := 0
			for k < kTable && kCDF0[k] <= lo {
				k++
			}
			if k < kTable && hi < kCDF0[k] && (k == 0 || kCDF0[k-1] < lo) {
				kByDigit[h] = uint8(k)
			} else {
				kByDigit[h] = kTable
			}
		}
	})
}

// kCDFDigit is digit i (base 2^16, the most significant first) of F(j),
// computed afresh past the cached ones (tablesInit first).
func kCDFDigit(j, i int) uint16 {
	if i < kCDFCached {
		return kCDF[j][i]
	}
	return kCDFDigits(i + 1)[j][i]
}

// kCDFDigits returns the first D base-2^16 digits of F(j) for j < kTable,
// exactly: with P bits of guard beyond 16 D, every quantity is bracketed
// by integers scaled by 2^P (floor for lower bounds, ceiling for upper
// ones): exp(-1/2) between consecutive partial sums of its alternating
// series, exp(-k^2/2) as its k^2-th power, theta between its partial sum
// up to terms below 2^-P and that sum plus a bound of the rest, F(j) = A(j)/theta between
// A_lo/theta_hi and A_hi/theta_lo. Where the two bounds of F(j) do not
// agree on D digits (F(j) is irrational, so only for want of precision),
// it doubles the guard and tries again.
func kCDFDigits(D int) [kTable][]uint16 {
	for guard := uint(64); ; guard *= 2 {
		if out, ok := kCDFAt(D, guard); ok {
			return out
		}
	}
}

func kCDFAt(D int, guard uint) (out [kTable][]uint16, ok bool) {
	B := uint(digitBits * D)
	P := B + guard
	one := new(big.Int).Lsh(big.NewInt(1), P)
	eLo, eHi := expHalfBounds(P) // exp(-1/2) in [eLo, eHi] / 2^P
	mulFloor := func(x, y *big.Int) *big.Int { return new(big.Int).Rsh(new(big.Int).Mul(x, y), P) }
	mulCeil := func(x, y *big.Int) *big.Int {
		z := new(big.Int).Mul(x, y)
		z.Add(z, new(big.Int).Sub(one, big.NewInt(1)))
		return z.Rsh(z, P)
	}
	// theta's terms exp(-k^2/2) in [rLo, rHi] / 2^P, rounded outward: each the
	// previous times exp(-1/2)^(2k+1), until they are below 2^-P (K^2/2 > P ln 2),
	// where the rest of the series, below 2 exp(-K^2/2), adds 2 to the upper bound
	K := 2
	for float64(K*K)/2 <= float64(P)*0.6931471805599453+4 {
		K++
	}
	rLo, rHi := new(big.Int).Set(one), new(big.Int).Set(one)
	thetaLo, thetaHi := new(big.Int), new(big.Int).SetInt64(2)
	var aLo, aHi [kTable]*big.Int
	accLo, accHi := new(big.Int), new(big.Int)
	for k := range K {
		thetaLo.Add(thetaLo, rLo)
		thetaHi.Add(thetaHi, rHi)
		if k < kTable {
			accLo.Add(accLo, rLo)
			accHi.Add(accHi, rHi)
			aLo[k], aHi[k] = new(big.Int).Set(accLo), new(big.Int).Set(accHi)
		}
		for range 2*k + 1 {
			rLo, rHi = mulFloor(rLo, eLo), mulCeil(rHi, eHi)
		}
	}
	// F(j) = A(j)/theta in [aLo/thetaHi, aHi/thetaLo]: its first B bits floor(F 2^B)
	// are known when the bounds' floors agree
	for j := range kTable {
		fLo := new(big.Int).Lsh(aLo[j], B)
		fLo.Quo(fLo, thetaHi)
		fHi := new(big.Int).Lsh(aHi[j], B)
		fHi.Quo(fHi, thetaLo)
		if fLo.Cmp(fHi) != 0 {
			return out, false
		}
		out[j] = digitsOf(fLo, D)
	}
	return out, true
}

// intPart draws k >= 0 with P(k) = exp(-k^2/2)/theta exactly.
func (n *normal) intPart() uint64 {
	u := &n.p
	d0 := u.fresh(&n.b)
	for j, f := range &kCDF0 {
		if d0 < f {
			return uint64(j) // decided by the first digit but with probability 2^-16
		}
		if d0 == f && n.intPartBelow(j) {
			return uint64(j)
		}
	}
	return n.tail(kTable)
}

// intPartBelow reports U < F(j) for the deviate U = n.p, whose first digit
// is that of F(j): the digits after the first decide.
//
//go:noinline
func (n *normal) intPartBelow(j int) bool {
	for i := 1; ; i++ {
		if d, f := n.p.at(i, &n.b), kCDFDigit(j, i); d != f {
			return d < f
		}
	}
}

// tail draws k >= k0 with P(k) proportional to exp(-k^2/2): k = k0 + d,
// exp(-k^2/2) = exp(-k0^2/2) exp(-k0 d) exp(-d^2/2), so d is proposed with
// P(d) ~ exp(-k0 d) (a geometric run of Bernoulli(exp(-k0)) trials, each
// 2 k0 trials of exp(-1/2)) and kept with probability exp(-d^2/2) (d^2
// trials of exp(-1/2)).
func (n *normal) tail(k0 uint64) uint64 {
	for {
		var d uint64
		for n.halfExpPow(2 * k0) {
			d++
		}
		if n.halfExpPow(d * d) {
			return k0 + d
		}
	}
}

// halfExpPow is true with probability exp(-m/2): m trials of exp(-1/2).
func (n *normal) halfExpPow(m uint64) bool {
	for range m {
		if !n.halfExpBern() {
			return false
		}
	}
	return true
}
