package noise

// The sampler's hot path. draw is normal.draw and Noise.round written out
// as one function: the digit and bit buffers of the bitSource live in
// local variables, the cell comes from cellGuide and a trial's bits are
// tested in line. It asks for exactly the digits and bits, in exactly the
// order, that the methods it stands for ask for (normal.draw, cell,
// expRuns, normRun, round), so it draws the same values from the same
// source: TestDrawReference compares the two on sources chosen to make
// the rare paths common, and TestNoiseGolden pins the values. Every rare
// path (leading bits of U that do not decide the cell, 1.4% of the
// draws; a trial whose first comparisons do not decide it, about 2%: a
// random 13-bit integer below 2M, or the 7 bits of normRun's first round
// all zero; rounding past 64 bits) stores the buffers back and calls those
// methods.

// draw returns one draw of round(sigma' X / G).
func (s *Noise) draw() int64 {
	n := s.n
	b, x := &n.b, &n.x
	dg, nd := b.digits, b.nDigits // the digit buffer
	bt, nb := b.bits, b.nBits     // the bit buffer
	cc, rr := b.cc, b.rr          // a ChaCha8 or Rand source, called here without b.next's call
	var M, t uint64
	for {
		// the cell (cell): U's first digit, through the guide
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
		u0 := uint16(dg)
		dg >>= digitBits
		nd--
		if M = uint64(cellGuide[u0>>(digitBits-guideBits)]); M == cellAmbiguous {
			n.p.setFirst(u0)
			b.digits, b.nDigits, b.bits, b.nBits = dg, nd, bt, nb
			M = n.cellFrom(u0)
			dg, nd, bt, nb = b.digits, b.nDigits, b.bits, b.nBits
		}

		// the trial's bits (take(trialBits))
		if nb < trialBits {
			if cc != nil {
				bt = cc.Uint64()
			} else if rr != nil {
				bt = rr.Uint64()
			} else {
				bt = b.src.Uint64()
			}
			nb = 64
		}
		t = bt & (1<<trialBits - 1)
		bt >>= trialBits
		nb -= trialBits
		x.d[0], x.n = uint16(M&cellMask<<fracFreshBits|t&(1<<fracFreshBits-1)), 1
		v := t >> fracFreshBits & (expUnit - 1)
		z := t >> (fracFreshBits + expUnitBits) & (1<<normBits - 1)
		if v < 2*M || z == 0 { // rare: expRuns or normRun not decided by these bits
			b.digits, b.nDigits, b.bits, b.nBits = dg, nd, bt, nb
			ok := n.expRuns(2*M, v, true) && n.normRun(z)
			dg, nd, bt, nb = b.digits, b.nDigits, b.bits, b.nBits
			if !ok {
				continue
			}
		}
		break
	}
	k := M >> cellBits
	sign := t >> (trialBits - 1)
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
