package audit

import (
	"math"
	"math/rand/v2"
	"testing"
)

// kernelInput draws n dimensions: mu ~ N(0, 1), s2 = exp(N(0, spread^2)),
// and with probability bad per dimension a sigma^2 tiny enough to make a
// radicand <= 0 at lambda 1.1 or a huge one.
func kernelInput(rng *rand.Rand, n int, spread, bad float64) (ma, mb, sa, sb []float64) {
	ma, mb, sa, sb = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for j := range n {
		ma[j], mb[j] = rng.NormFloat64(), rng.NormFloat64()
		sa[j], sb[j] = math.Exp(spread*rng.NormFloat64()), math.Exp(spread*rng.NormFloat64())
		if rng.Float64() < bad {
			switch rng.IntN(4) {
			case 0:
				sa[j] = 1e-3 * sb[j] // r1 = sb + lam (sa - sb) < 0 at lam >= 1.01
			case 1:
				sb[j] = 1e-3 * sa[j]
			case 2:
				sa[j] = 1e-35 // r1 = lam*1e-35 - (lam-1)*1e-35 ~ 1e-35 < 2^-100
				sb[j] = 1e-35
			default:
				sa[j], sb[j] = 1e31, 1e31 // > 2^100
			}
		}
	}
	return
}

func sameLanes(a, b lanes) bool {
	for l := range laneWidth {
		for _, c := range [][2]float64{{a.q1[l], b.q1[l]}, {a.q2[l], b.q2[l]}, {a.p1[l], b.p1[l]}, {a.p2[l], b.p2[l]}} {
			if math.Float64bits(c[0]) != math.Float64bits(c[1]) {
				return false
			}
		}
	}
	return a.e1 == b.e1 && a.e2 == b.e2
}

// gaussLanesPureGo is gaussLanes with the assembly kernel switched off.
func gaussLanesPureGo(lam float64, ma, mb, sa, sb []float64) (gaussSums, bool) {
	saved := kernelAsm
	kernelAsm = false
	defer func() { kernelAsm = saved }()
	return gaussLanes(lam, ma, mb, sa, sb, false)
}

func sameBits(a, b gaussSums) bool {
	return math.Float64bits(a.q1) == math.Float64bits(b.q1) && math.Float64bits(a.q2) == math.Float64bits(b.q2) &&
		math.Float64bits(a.m1) == math.Float64bits(b.m1) && math.Float64bits(a.m2) == math.Float64bits(b.m2) &&
		a.e1 == b.e1 && a.e2 == b.e2
}

// TestGaussLanesMatchesSafe: the kernel (whichever this CPU runs) against
// the per-dimension path with a logarithm per dimension: the same sums to
// 1e-12, mantissas in [1, 16), and out of range exactly when gaussSafe finds
// a radicand <= 0 or the range check trips.
func TestGaussLanesMatchesSafe(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 7, 8, 9, 64, 130, 768} {
		for _, bad := range []float64{0, 0.05} {
			ma, mb, sa, sb := kernelInput(rng, n, 0.7, bad)
			for _, lam := range []float64{1.01, 1.1, 2} {
				g, ok := gaussLanes(lam, ma, mb, sa, sb, false)
				q1, q2, l1, l2, b1, b2 := gaussSafe(lam, ma, mb, sa, sb)
				inRange := true
				for j := range n {
					r1 := sb[j] + lam*(sa[j]-sb[j])
					r2 := sa[j] + sb[j] - r1
					inRange = inRange && r1 >= radLo && r1 < radHi && r2 >= radLo && r2 < radHi
				}
				if ok != inRange {
					t.Fatalf("n %d lam %v bad %v: ok %v, radicands in range %v", n, lam, bad, ok, inRange)
				}
				if !ok {
					continue
				}
				if b1 || b2 {
					t.Fatalf("n %d lam %v: kernel accepted what gaussSafe finds undefined", n, lam)
				}
				for _, m := range []float64{g.m1, g.m2} {
					if !(m >= 1 && m < 16) {
						t.Fatalf("n %d lam %v: mantissa %v outside [1, 16)", n, lam, m)
					}
				}
				f1 := math.Log(g.m1) + float64(g.e1)*math.Ln2
				f2 := math.Log(g.m2) + float64(g.e2)*math.Ln2
				for _, c := range [][3]float64{{q1, g.q1, 0}, {q2, g.q2, 0}, {l1, f1, 1}, {l2, f2, 1}} {
					if math.Abs(c[0]-c[1]) > 1e-12*math.Max(1, math.Abs(c[0]))*float64(n) {
						t.Errorf("n %d lam %v: safe %v kernel %v", n, lam, c[0], c[1])
					}
				}
			}
		}
	}
	// Tiny radicands force the fallback.
	if _, ok := gaussLanes(1.1, []float64{0}, []float64{1}, []float64{1e-40}, []float64{1e-40}, false); ok {
		t.Error("radicand 1e-40 not sent to the safe path")
	}
}

// TestLogAccum: a product of many factors carried as mantissa and exponent
// has the logarithm of the sum of the factors' logarithms, far past the
// float64 range.
func TestLogAccum(t *testing.T) {
	var a logAccum
	a.reset()
	var want float64
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		m := 1 + 15*rng.Float64()
		e := int64(rng.IntN(400) - 150)
		a.mul(m, e)
		want += math.Log(m) + float64(e)*math.Ln2
		if !(a.m >= 1 && a.m < 2) {
			t.Fatalf("mantissa %v outside [1, 2)", a.m)
		}
	}
	if got := a.log(); math.Abs(got-want) > 1e-12*math.Abs(want) {
		t.Errorf("log %v, want %v", got, want)
	}
}

// FuzzGaussLanes: on any finite inputs the AVX2 kernel and the pure-Go one
// agree bit for bit, flag included.
func FuzzGaussLanes(f *testing.F) {
	f.Add(1.1, 0.3, -0.2, 0.5, 0.9, uint8(9))
	f.Add(2.0, 1.0, 1.0, 1e-3, 1.0, uint8(40))
	f.Add(1.05, 0.0, 0.0, 1e-35, 1e-35, uint8(4))
	f.Fuzz(func(t *testing.T, lam, a, b, x, y float64, n uint8) {
		if !kernelAsm || !(lam > 1) || math.IsInf(lam, 0) {
			return
		}
		k := int(n%80) + 1
		ma, mb, sa, sb := make([]float64, k), make([]float64, k), make([]float64, k), make([]float64, k)
		for j := range k {
			// Vary the dimensions deterministically around the fuzzed values.
			f := 1 + float64(j%7)/8
			ma[j], mb[j], sa[j], sb[j] = a*f, b/f, x*f, y*(2-f/2)
		}
		gA, okA := gaussLanes(lam, ma, mb, sa, sb, false)
		gG, okG := gaussLanesPureGo(lam, ma, mb, sa, sb)
		if okA != okG || (okA && !sameBits(gA, gG)) {
			t.Fatalf("AVX2 %+v %v, Go %+v %v", gA, okA, gG, okG)
		}
	})
}

// TestRadicandsInRange: where radicandsInRange says every radicand is in
// range, the kernel's own arithmetic (lane.step) finds every one in range at
// the corners of the box and at random points inside, including boxes that
// touch the boundary (s2_a/s2_b near (lam-1)/lam, radicands near 2^-100 or
// 2^100); and it does say so for clipped posteriors (not vacuous).
func TestRadicandsInRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	var proved, refused int
	for range 20000 {
		lam := []float64{1.01, 1.05, 1.1, 1.6, 2, 11, 1e3}[rng.IntN(7)]
		scale := math.Exp2(float64(rng.IntN(220) - 110)) // radicands near 2^-100 and 2^100 too
		// Ratios s2_a/s2_b around the critical (lam-1)/lam.
		crit := (lam - 1) / lam
		xlo := scale * (0.5 + rng.Float64())
		xhi := xlo * (1 + rng.Float64()*rng.Float64())
		ylo := xhi * crit * (0.7 + 0.6*rng.Float64())
		yhi := ylo * (1 + rng.Float64()*rng.Float64())
		if rng.IntN(2) == 0 {
			xlo, xhi, ylo, yhi = ylo, yhi, xlo, xhi
		}
		if !radicandsInRange(lam, xlo, xhi, ylo, yhi) {
			refused++
			continue
		}
		proved++
		pts := [][2]float64{{xlo, ylo}, {xlo, yhi}, {xhi, ylo}, {xhi, yhi}}
		for range 20 {
			pts = append(pts, [2]float64{xlo + (xhi-xlo)*rng.Float64(), ylo + (yhi-ylo)*rng.Float64()})
		}
		for _, q := range pts {
			if _, r1, r2 := (lane{}).step(lam, 0.3, -0.2, q[0], q[1]); !radicandsOK(r1, r2) {
				t.Fatalf("lam %v, s2_a in [%v, %v], s2_b in [%v, %v] said in range; at (%v, %v) r1 %v r2 %v",
					lam, xlo, xhi, ylo, yhi, q[0], q[1], r1, r2)
			}
		}
	}
	// Boxes whose least exact radicand is a few ulp above 0, where the
	// computed one cancels to 0 or below: only the slack refuses them.
	for _, lam := range []float64{1.01, 1.1, 1.6, 2, 11} {
		for k := 1; k <= 4096; k *= 2 {
			for _, y := range []float64{1, 3.7, 0x1p60} {
				x := y * (lam - 1) / lam * (1 + float64(k)*0x1p-52)
				if !radicandsInRange(lam, x, x, y, y) {
					refused++
					continue
				}
				if _, r1, r2 := (lane{}).step(lam, 0, 0, x, y); !radicandsOK(r1, r2) {
					t.Fatalf("lam %v, s2_a %v, s2_b %v said in range; r1 %v r2 %v", lam, x, y, r1, r2)
				}
			}
		}
	}
	if proved < 1000 || refused < 1000 {
		t.Fatalf("%d boxes proved, %d refused: the draws do not test the boundary", proved, refused)
	}
	// The benchmark's clip set (sigma in [1.05 sqrt(0.1/1.1), 1]) at its order 1.1.
	lo := 1.05 * 1.05 * 0.1 / 1.1
	if !radicandsInRange(1.1, lo, 1, lo, 1) {
		t.Error("the clip set of order 1.1 not proved in range at order 1.1")
	}
	if radicandsInRange(1.5, lo, 1, lo, 1) {
		t.Error("order 1.5 proved in range where radicands <= 0 exist")
	}
}
