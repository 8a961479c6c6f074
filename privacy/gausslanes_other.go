//go:build !amd64 || purego

package privacy

func gaussVectors(lam float64, ma, mb, sa, sb []float64, nvec int, st *lanes, inRange bool) bool {
	return gaussVectorsGo(lam, ma, mb, sa, sb, nvec, st, inRange)
}
