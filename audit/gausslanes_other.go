//go:build !amd64 || purego

package audit

// gaussVectors runs the kernel's vector loop over the first laneWidth*nvec
// dimensions into st and reports whether every radicand was in range:
// gaussVectorsGo (no assembly kernel on this architecture or build). With
// inRange (proved by the caller) the check is skipped and the result is
// true.
func gaussVectors(lam float64, ma, mb, sa, sb []float64, nvec int, st *lanes, inRange bool) bool {
	return gaussVectorsGo(lam, ma, mb, sa, sb, nvec, st, inRange)
}
