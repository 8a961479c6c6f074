package noise

// The sampler's hot path. draw is normal.draw and Noise.round written out
// as one function: the digit and bit buffers of the bitSource live in
// local variables, and each comparison of two deviates is decided by
// their first digits in line, but with probability 2^-16. It asks for
// exactly the digits and bits, in exactly the order, that the methods it
// stands for ask for (normal.draw, intPart, truncExpBern, truncNormBern,
// round), so it draws the same values from the same source:
// TestDrawReference compares the two on sources chosen to make the rare
// paths common, and TestNoiseGolden pins the values. Every rare path
// (digits after the first, the integer part's tail, rounding past 64
// bits) stores the buffers back and calls those methods.

// draw returns one draw of round(sigma' X / G).
func (s *Noise) draw() int64 {
	n := s.n
	b, x := &n.b, &n.x
	dg, nd := b.digits, b.nDigits // the digit buffer
	bt, nb := b.bits, b.nBits     // the bit buffer (the rare paths use digits only)
	cc, rr := b.cc, b.rr          // a ChaCha8 or Rand source, called here without b.next's call
	var k uint64
	var sign uint64
draws:
	for {
		// steps N1, N2: the integer part (intPart), from the deviate n.p
		p, q := &n.p, &n.q
		if nd == 0 {
			if cc != nil {
				dg = cc.Uint64()
			} else if rr != nil {
				dg = rr.Uint64()
			} else {
				dg = b.src.Uint64()
			}
			nd = 64 / digitBits
		}
		d0 := uint16(dg)
		dg >>= digitBits
		nd--
		p.setFirst(d0)
		if k = uint64(kByDigit[d0>>8]); k == kTable { // rare: d0 near the first digit of an F(j)
			for j, f := range &kCDF0 {
				if d0 < f {
					k = uint64(j)
					break
				}
				if d0 == f {
					b.digits, b.nDigits = dg, nd
					below := n.intPartBelow(j)
					dg, nd = b.digits, b.nDigits
					if below {
						k = uint64(j)
						break
					}
				}
			}
			if k == kTable {
				b.digits, b.nDigits = dg, nd
				k = n.tail(kTable)
				dg, nd = b.digits, b.nDigits
			}
		}

		// step N3: x afresh; its first digit x0 is drawn at its first comparison
		x.reset()
		var x0 uint16

		// step N4: k trials of exp(-x) (truncExpBern), each a run of fresh
		// deviates x > p > q > p > ...: the trial succeeds when the first
		// comparison to fail is one of p (a run of odd length)
		for j := k; j > 0; j-- {
			var lt bool
			// p afresh, p < x
			if nd == 0 {
				if cc != nil {
					dg = cc.Uint64()
				} else if rr != nil {
					dg = rr.Uint64()
				} else {
					dg = b.src.Uint64()
				}
				nd = 64 / digitBits
			}
			pd := uint16(dg)
			dg >>= digitBits
			nd--
			p.setFirst(pd)
			if x.n == 0 {
				if nd == 0 {
					if cc != nil {
						dg = cc.Uint64()
					} else if rr != nil {
						dg = rr.Uint64()
					} else {
						dg = b.src.Uint64()
					}
					nd = 64 / digitBits
				}
				x0 = uint16(dg)
				dg >>= digitBits
				nd--
				x.d[0], x.n = x0, 1
			}
			if pd != x0 {
				lt = pd < x0
			} else {
				lt, dg, nd = n.lessFrom(p, x, dg, nd)
			}
			for lt {
				// q afresh, q < p
				if nd == 0 {
					if cc != nil {
						dg = cc.Uint64()
					} else if rr != nil {
						dg = rr.Uint64()
					} else {
						dg = b.src.Uint64()
					}
					nd = 64 / digitBits
				}
				qd := uint16(dg)
				dg >>= digitBits
				nd--
				q.setFirst(qd)
				if qd != pd {
					lt = qd < pd
				} else {
					lt, dg, nd = n.lessFrom(q, p, dg, nd)
				}
				if !lt {
					continue draws // the trial fails: reject
				}
				// p afresh, p < q
				if nd == 0 {
					if cc != nil {
						dg = cc.Uint64()
					} else if rr != nil {
						dg = rr.Uint64()
					} else {
						dg = b.src.Uint64()
					}
					nd = 64 / digitBits
				}
				pd = uint16(dg)
				dg >>= digitBits
				nd--
				p.setFirst(pd)
				if pd != qd {
					lt = pd < qd
				} else {
					lt, dg, nd = n.lessFrom(p, q, dg, nd)
				}
			}
		}

		// step N5: exp(-x^2/2) (truncNormBern): rounds of a bit, q < c and
		// p < x, where c is x in the first round and the previous round's
		// deviate after; the parity of the rounds completed decides
		c, c0 := x, x0
		for parity := 0; ; parity ^= 1 {
			if nb == 0 {
				if cc != nil {
					bt = cc.Uint64()
				} else if rr != nil {
					bt = rr.Uint64()
				} else {
					bt = b.src.Uint64()
				}
				nb = 64
			}
			bit := bt&1 != 0
			bt >>= 1
			nb--
			if bit { // step B2(a)
				if parity != 0 {
					continue draws
				}
				break
			}
			if nd == 0 {
				if cc != nil {
					dg = cc.Uint64()
				} else if rr != nil {
					dg = rr.Uint64()
				} else {
					dg = b.src.Uint64()
				}
				nd = 64 / digitBits
			}
			qd := uint16(dg)
			dg >>= digitBits
			nd--
			q.setFirst(qd)
			if c.n == 0 { // c is x, not compared yet
				if nd == 0 {
					if cc != nil {
						dg = cc.Uint64()
					} else if rr != nil {
						dg = rr.Uint64()
					} else {
						dg = b.src.Uint64()
					}
					nd = 64 / digitBits
				}
				x0 = uint16(dg)
				dg >>= digitBits
				nd--
				x.d[0], x.n = x0, 1
				c0 = x0
			}
			var lt bool
			if qd != c0 {
				lt = qd < c0
			} else {
				lt, dg, nd = n.lessFrom(q, c, dg, nd)
			}
			if !lt { // step B2(b)
				if parity != 0 {
					continue draws
				}
				break
			}
			if nd == 0 {
				if cc != nil {
					dg = cc.Uint64()
				} else if rr != nil {
					dg = rr.Uint64()
				} else {
					dg = b.src.Uint64()
				}
				nd = 64 / digitBits
			}
			pd := uint16(dg)
			dg >>= digitBits
			nd--
			p.setFirst(pd)
			if pd != x0 { // x0 is drawn: x was compared in the first round
				lt = pd < x0
			} else {
				lt, dg, nd = n.lessFrom(p, x, dg, nd)
			}
			if !lt { // step B2(c)
				if parity != 0 {
					continue draws
				}
				break
			}
			c, c0 = q, qd // p <- q: the deviate compared against next
			p, q = q, p
		}

		// the sign: 1 for negative
		if nb == 0 {
			if cc != nil {
				bt = cc.Uint64()
			} else if rr != nil {
				bt = rr.Uint64()
			} else {
				bt = b.src.Uint64()
			}
			nb = 64
		}
		sign = bt & 1
		bt >>= 1
		nb--
		break
	}
	b.bits, b.nBits = bt, nb

	// round: x's first D digits, D from s.first up, until decided; at
	// D = s.first, in 64 bits where they hold W (s.k64)
	var v uint64
	rounded := false
	if s.first > 0 && k < 1<<20 {
		if D := s.first; k < s.k64 {
			var X uint64 // x's first D digits
			i := 0
			for ; i < min(D, x.n); i++ {
				X = X<<digitBits | uint64(x.d[i&(inlineDigits-1)])
			}
			for ; i < D; i++ {
				if nd == 0 {
					if cc != nil {
						dg = cc.Uint64()
					} else if rr != nil {
						dg = rr.Uint64()
					} else {
						dg = b.src.Uint64()
					}
					nd = 64 / digitBits
				}
				d := uint16(dg)
				dg >>= digitBits
				nd--
				x.d[i&(inlineDigits-1)] = d
				X = X<<digitBits | uint64(d)
			}
			x.n = max(x.n, D)
			v, rounded = s.lat.round64(k, X, D)
		}
		for D := s.first; !rounded && D <= 64/digitBits; D++ {
			if B := digitBits * D; B <= s.lat.t || B-s.lat.t > 126 {
				continue // not when D >= s.first (as round128)
			}
			for x.n < D {
				if nd == 0 {
					if cc != nil {
						dg = cc.Uint64()
					} else if rr != nil {
						dg = rr.Uint64()
					} else {
						dg = b.src.Uint64()
					}
					nd = 64 / digitBits
				}
				x.d[x.n&(inlineDigits-1)] = uint16(dg)
				dg >>= digitBits
				nd--
				x.n++
			}
			var X uint64
			for _, d := range x.d[:D] {
				X = X<<digitBits | uint64(d)
			}
			v, rounded = s.lat.round128(k, X, D)
		}
	}
	b.digits, b.nDigits = dg, nd
	if !rounded {
		v = s.roundBig(k)
	}
	m := -int64(sign) // 0 or -1: the sign applied without a branch on it
	return int64(v) ^ m - m
}

// setFirst makes u a fresh deviate whose first digit is d.
func (u *deviate) setFirst(d uint16) { u.d[0], u.n = d, 1 }

// lessFrom is the package's lessFrom (p < q for p and q equal in their first
// digit) with the digit buffer in dg, nd, which it returns updated.
func (n *normal) lessFrom(p, q *deviate, dg uint64, nd uint) (bool, uint64, uint) {
	n.b.digits, n.b.nDigits = dg, nd
	lt := lessFrom(p, q, &n.b)
	return lt, n.b.digits, n.b.nDigits
}
