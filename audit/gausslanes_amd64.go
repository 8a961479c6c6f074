//go:build !purego

package audit

import "golang.org/x/sys/cpu"

// gaussVectorsAVX2 is gaussVectorsGo in AVX2 (gausslanes_amd64.s); ma, mb,
// sa, sb point to at least 4 nvec float64 each.
//
//go:noescape
func gaussVectorsAVX2(lam float64, ma, mb, sa, sb *float64, nvec int, st *lanes) bool

// gaussVectorsAVX2Unchecked is gaussVectorsAVX2 without the range check.
//
//go:noescape
func gaussVectorsAVX2Unchecked(lam float64, ma, mb, sa, sb *float64, nvec int, st *lanes)

func init() { kernelAsm = cpu.X86.HasAVX2 }

// gaussVectors runs the kernel's vector loop over the first laneWidth*nvec
// dimensions into st and reports whether every radicand was in range:
// gaussVectorsGo, or the AVX2 kernel, which gives its bits, when kernelAsm
// is set. With inRange (proved by the caller) the check is skipped and the
// result is true.
func gaussVectors(lam float64, ma, mb, sa, sb []float64, nvec int, st *lanes, inRange bool) bool {
	if kernelAsm && nvec > 0 {
		n := laneWidth * nvec // the assembly reads this many of each: bounds-checked here
		_, _, _, _ = ma[n-1], mb[n-1], sa[n-1], sb[n-1]
		if inRange {
			gaussVectorsAVX2Unchecked(lam, &ma[0], &mb[0], &sa[0], &sb[0], nvec, st)
			return true
		}
		return gaussVectorsAVX2(lam, &ma[0], &mb[0], &sa[0], &sb[0], nvec, st)
	}
	return gaussVectorsGo(lam, ma, mb, sa, sb, nvec, st, inRange)
}
