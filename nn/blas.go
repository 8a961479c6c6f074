package nn

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// Backend names the BLAS implementation in use: "openblas" when built with
// the `openblas` build tag, which uses cgo and Debian's libopenblas-dev,
// and "gonum (pure Go)" otherwise. Commands log it at start-up.
func Backend() string { return backendName }

func setImpl(impl blas.Float32) { blas32.Use(impl) }

// SetBLASThreads sets the threads of each OpenBLAS call for the whole
// process to n >= 1 and returns the count before (the openblas build; the
// pure-Go build does nothing and returns 0). A service that runs several
// forward passes at once sets 1: its parallelism is across requests, and
// OpenBLAS's idle threads would otherwise spin (sched_yield) on the cores
// the other requests need (docs/performance.md, "Where a release's time
// goes"). Call it before any work: OpenBLAS's results depend on its thread
// count (docs/engine.md, "OpenBLAS's bits depend on its thread count").
// It panics for n < 1, a programmer's error.
func SetBLASThreads(n int) int {
	if n < 1 {
		panic(fmt.Sprintf("nn.SetBLASThreads(%d): want at least 1", n))
	}
	return setBLASThreads(n)
}

// BLASThreads returns the thread count [SetBLASThreads] last set, 0 when it was never called or in
// the pure-Go build. At 1 every BLAS call runs on its caller's thread, so that forward passes on
// several goroutines at once use a core each, without waiting for each other.
func BLASThreads() int { return blasThreadsSet() }

// Gemm computes C = alpha * op(A) * op(B) + beta * C for row-major matrices,
// where op(A) is m x k, op(B) is k x n and C is m x n.
//
// A is stored m x k, or k x m when transA is set; B is stored k x n, or
// n x k when transB is set. Shapes are the caller's responsibility: BLAS
// panics on a programmer error.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, b []float32, beta float32, c []float32) {
	if m == 0 || n == 0 {
		return
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	lda, ldb := k, n
	ra, ca := m, k
	rb, cb := k, n
	if transA {
		ta, lda, ra, ca = blas.Trans, m, k, m
	}
	if transB {
		tb, ldb, rb, cb = blas.Trans, k, n, k
	}
	blas32.Gemm(ta, tb, alpha,
		blas32.General{Rows: ra, Cols: ca, Stride: lda, Data: a[:ra*lda]},
		blas32.General{Rows: rb, Cols: cb, Stride: ldb, Data: b[:rb*ldb]},
		beta,
		blas32.General{Rows: m, Cols: n, Stride: n, Data: c[:m*n]})
}

// GemmStrided is [Gemm] on row-major sub-matrices with explicit leading
// dimensions, or row strides, lda, ldb and ldc. Per-head slices of a
// [B, T, H*dh] activation can then be multiplied in place without copies.
// a, b and c start at the first element of their sub-matrix.
func GemmStrided(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	ra, ca := m, k
	rb, cb := k, n
	if transA {
		ta, ra, ca = blas.Trans, k, m
	}
	if transB {
		tb, rb, cb = blas.Trans, n, k
	}
	blas32.Gemm(ta, tb, alpha,
		blas32.General{Rows: ra, Cols: ca, Stride: lda, Data: a[:(ra-1)*lda+ca]},
		blas32.General{Rows: rb, Cols: cb, Stride: ldb, Data: b[:(rb-1)*ldb+cb]},
		beta,
		blas32.General{Rows: m, Cols: n, Stride: ldc, Data: c[:(m-1)*ldc+n]})
}
