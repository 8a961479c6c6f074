package audit

import "math"

// The Gaussian kernel of the all-pairs engine (engine.go): for one pair of
// components (a, b) at one Renyi order lambda, over the P dimensions j,
//
//	r1_j = sb_j + lambda (sa_j - sb_j)      (= (1-lambda) sb_j + lambda sa_j)
//	r2_j = sa_j - lambda (sa_j - sb_j)      (= (1-lambda) sa_j + lambda sb_j, the reverse direction's)
//	t_j  = d_j^2 / (r1_j r2_j),  d = mu_a - mu_b
//	q1 = sum_j t_j r2_j = sum_j d_j^2 / r1_j,   q2 = sum_j t_j r1_j = sum_j d_j^2 / r2_j
//	l1 = sum_j ln r1_j,                         l2 = sum_j ln r2_j
//
// (the sums of paper Eq. rdp's Gaussian term, both directions at once: one
// division per dimension). The logarithms are not taken here: the kernel
// returns prod_j r_j as a mantissa in [1, 16) and a binary exponent, which the
// engine multiplies over the components of a pair before taking one
// logarithm per pair, order and direction.
//
// The arithmetic is fixed, so that the pure-Go kernel (gaussVectorsGo) and the
// AVX2 kernel (gausslanes_amd64.s) give the same bits: dimension j goes to
// lane j mod 4 of four lanes, each lane sums its t r and multiplies its r in
// dimension order, a lane's product has its binary exponent peeled off after
// every 8 of its factors (and at the end), and the lanes are combined as
// (0 + 1) + (2 + 3). Every product and sum is rounded on its own (no fused
// multiply-add; the float64 conversions below forbid the Go compiler to fuse).
// The dimensions past the last multiple of 4 go, in order, to lanes 0, 1, 2.
//
// A radicand outside [2^-100, 2^100) (<= 0 or NaN included) makes the kernel
// report !ok: the engine then takes the per-dimension path (gaussSafe), which
// decides validity exactly. Within that range a lane's product of 8 factors
// times a mantissa in [1, 2) stays in [2^-800, 2^801): no overflow, no
// subnormal.

// laneWidth is the number of lanes (float64 in a 256-bit vector), peelEvery
// the number of a lane's factors between exponent peels.
const (
	laneWidth = 4
	peelEvery = 8
)

// lanes is the state of the kernel: lane l of each field holds the
// dimensions j = l mod laneWidth. e1, e2 are sums of biased exponents
// (bits >> 52) of the peeled products; the AVX2 kernel stores its state
// here with this exact layout (offsets in gausslanes_amd64.s).
type lanes struct {
	q1, q2, p1, p2 [laneWidth]float64
	e1, e2         [laneWidth]int64
}

// gaussSums is one kernel result: q1, q2 as above, and prod_j r1_j =
// m1 2^e1, prod_j r2_j = m2 2^e2 with m1, m2 in [1, 16).
type gaussSums struct {
	q1, q2 float64
	m1, m2 float64
	e1, e2 int64
}

// Radicand range of the fast kernel and the bits of its exponent peel.
const (
	radLo     = 0x1p-100
	radHi     = 0x1p100
	rLoBits   = uint64(0x39b0000000000000) // bits of radLo
	rSpanBits = uint64(0x4630000000000000) - rLoBits
	mantMask  = uint64(1)<<52 - 1
	oneExp    = uint64(1023) << 52
)

// radicandsInRange reports whether every radicand the kernel computes at
// order lam (> 1) from s2_a in [xlo, xhi] and s2_b in [ylo, yhi] (all > 0)
// is in [2^-100, 2^100): a sufficient condition, with room for the
// rounding. The exact radicands are linear in (x, y), so they lie between
//
//	r1: lam xlo - (lam-1) yhi  and  lam xhi - (lam-1) ylo,
//	r2: the same with x and y exchanged;
//
// the computed ones (m = fl(lam fl(x - y)), r1 = fl(y + m), r2 = fl(x - m))
// differ from the exact by at most about 3u (lam |x - y| + r) with u = 2^-53;
// the slack s = 8u lam (width + xhi + yhi) covers that and the rounding of
// the bounds themselves, and the range is required with a factor 2 to spare.
func radicandsInRange(lam, xlo, xhi, ylo, yhi float64) bool {
	const u = 0x1p-53
	w := max(xhi-ylo, yhi-xlo)
	s := 8 * u * lam * (w + xhi + yhi)
	c := lam - 1
	ok := func(lo, hi float64) bool { return lo-s >= 2*radLo && hi+s < radHi/2 }
	return ok(lam*xlo-c*yhi, lam*xhi-c*ylo) && ok(lam*ylo-c*xhi, lam*yhi-c*xlo)
}

// kernelAsm is set (by gausslanes_amd64.go, on a CPU with AVX2) when
// gaussVectors runs the assembly kernel; tests clear it to compare.
var kernelAsm bool

// gaussLanes runs the kernel over all len(ma) dimensions (mb, sa, sb at
// least as long); ok = false if a radicand is out of range (sums then
// undefined). inRange says that the caller has proved every radicand in
// range (radicandsInRange): the vector loop then skips its check.
func gaussLanes(lam float64, ma, mb, sa, sb []float64, inRange bool) (g gaussSums, ok bool) {
	n := len(ma)
	mb, sa, sb = mb[:n], sa[:n], sb[:n]
	nvec := n / laneWidth
	var st lanes
	if ok = gaussVectors(lam, ma, mb, sa, sb, nvec, &st, inRange); !ok {
		return g, false
	}
	for j := nvec * laneWidth; j < n; j++ {
		l := j - nvec*laneWidth
		c, r1, r2 := lane{st.q1[l], st.q2[l], st.p1[l], st.p2[l]}.step(lam, ma[j], mb[j], sa[j], sb[j])
		if !radicandsOK(r1, r2) {
			return g, false
		}
		st.q1[l], st.q2[l], st.p1[l], st.p2[l] = c.q1, c.q2, c.p1, c.p2
	}
	for l := range laneWidth {
		peel(&st.p1[l], &st.e1[l])
		peel(&st.p2[l], &st.e2[l])
	}
	// Each lane was peeled nvec/peelEvery times in the loop and once here.
	bias := int64(laneWidth) * 1023 * int64(nvec/peelEvery+1)
	g.q1 = (st.q1[0] + st.q1[1]) + (st.q1[2] + st.q1[3])
	g.q2 = (st.q2[0] + st.q2[1]) + (st.q2[2] + st.q2[3])
	g.m1 = float64(st.p1[0]*st.p1[1]) * float64(st.p1[2]*st.p1[3])
	g.m2 = float64(st.p2[0]*st.p2[1]) * float64(st.p2[2]*st.p2[3])
	g.e1 = (st.e1[0] + st.e1[1] + st.e1[2] + st.e1[3]) - bias
	g.e2 = (st.e2[0] + st.e2[1] + st.e2[2] + st.e2[3]) - bias
	return g, true
}

// gaussVectorsGo is the pure-Go vector loop (the reference for the AVX2
// kernel): the lanes start at q = 0, p = 1, e = 0, and lane l takes
// lane.step's steps. The lanes being independent, it runs lanes 0 and 1,
// then 2 and 3, each pair in local variables (all four would not fit in
// amd64's 16 floating-point registers).
func gaussVectorsGo(lam float64, ma, mb, sa, sb []float64, nvec int, st *lanes, inRange bool) bool {
	okA := gaussLanePair(lam, ma, mb, sa, sb, nvec, 0, st, inRange)
	okB := gaussLanePair(lam, ma, mb, sa, sb, nvec, 2, st, inRange)
	return okA && okB
}

// gaussLanePair runs lanes l and l+1 of gaussVectorsGo into st (without
// the range check when inRange: proved by the caller).
func gaussLanePair(lam float64, ma, mb, sa, sb []float64, nvec, l int, st *lanes, inRange bool) bool {
	A, B := lane{p1: 1, p2: 1}, lane{p1: 1, p2: 1}
	var e1A, e1B, e2A, e2B int64
	ok := true
	for v := range nvec {
		j := v*laneWidth + l
		a, b := ma[j:j+2:j+2], mb[j:j+2:j+2]
		x, y := sa[j:j+2:j+2], sb[j:j+2:j+2]
		var r1A, r2A, r1B, r2B float64
		A, r1A, r2A = A.step(lam, a[0], b[0], x[0], y[0])
		B, r1B, r2B = B.step(lam, a[1], b[1], x[1], y[1])
		if !inRange && (!radicandsOK(r1A, r2A) || !radicandsOK(r1B, r2B)) {
			ok = false
		}
		if v%peelEvery == peelEvery-1 {
			A.p1, e1A = peelBits(A.p1, e1A)
			A.p2, e2A = peelBits(A.p2, e2A)
			B.p1, e1B = peelBits(B.p1, e1B)
			B.p2, e2B = peelBits(B.p2, e2B)
		}
	}
	st.q1[l], st.q1[l+1], st.q2[l], st.q2[l+1] = A.q1, B.q1, A.q2, B.q2
	st.p1[l], st.p1[l+1], st.p2[l], st.p2[l+1] = A.p1, B.p1, A.p2, B.p2
	st.e1[l], st.e1[l+1], st.e2[l], st.e2[l+1] = e1A, e1B, e2A, e2B
	return ok
}

// lane is one lane's sums and products (a value: kept in registers).
type lane struct{ q1, q2, p1, p2 float64 }

// step adds dimension (a, b, x, y) = (mu_a, mu_b, s2_a, s2_b) to the lane
// and returns its radicands r1, r2 (the lane is updated whatever they are,
// as the vector kernel does; radicandsOK tells). Every lane of either kernel
// takes these steps.
func (c lane) step(lam, a, b, x, y float64) (lane, float64, float64) {
	d := a - b
	m := float64(lam * (x - y))
	r1, r2 := y+m, x-m
	t := d * d / (r1 * r2) // no addition: nothing to fuse
	c.q1 += float64(t * r2)
	c.q2 += float64(t * r1)
	c.p1 *= r1
	c.p2 *= r2
	return c, r1, r2
}

// radicandsOK reports whether r1 and r2 are in [2^-100, 2^100) (false for NaN).
func radicandsOK(r1, r2 float64) bool {
	return math.Float64bits(r1)-rLoBits < rSpanBits && math.Float64bits(r2)-rLoBits < rSpanBits
}

// peelBits is peel on values: the mantissa of p (> 0, normal) in [1, 2)
// and e plus its biased exponent.
func peelBits(p float64, e int64) (float64, int64) {
	b := math.Float64bits(p)
	return math.Float64frombits(b&mantMask | oneExp), e + int64(b>>52)
}

// peel moves the binary exponent of *p (> 0, normal) into *e (biased) and
// leaves its mantissa in [1, 2).
func peel(p *float64, e *int64) { *p, *e = peelBits(*p, *e) }

// logAccum is a product kept as a mantissa in [1, 2) and a binary exponent;
// its logarithm is taken once (one math.Log per pair, order and direction).
type logAccum struct {
	m float64
	e int64
}

func (a *logAccum) reset() { a.m, a.e = 1, 0 }

// mul multiplies m 2^e (m in [1, 16)) into the accumulator.
func (a *logAccum) mul(m float64, e int64) {
	a.e += e
	a.mulf(m)
}

// mulf multiplies x in [2^-100, 2^100] into the accumulator.
func (a *logAccum) mulf(x float64) {
	a.m *= x
	b := math.Float64bits(a.m)
	a.e += int64(b>>52) - 1023
	a.m = math.Float64frombits(b&mantMask | oneExp)
}

// log is the natural logarithm of the product.
func (a *logAccum) log() float64 { return math.Log(a.m) + float64(a.e)*math.Ln2 }
