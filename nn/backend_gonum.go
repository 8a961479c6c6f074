//go:build !openblas

package nn

import "gonum.org/v1/gonum/blas/gonum"

// backendName is reported by Backend.
const backendName = "gonum (pure Go)"

func init() { setImpl(gonum.Implementation{}) }

// serialBLAS runs fn; gonum's kernels are goroutine-based, so small BLAS
// calls from parallel goroutines need no special treatment.
func serialBLAS(fn func()) { fn() }

// setBLASThreads does nothing: gonum's kernels take GOMAXPROCS.
func setBLASThreads(int) int { return 0 }

func blasThreadsSet() int { return 0 }
