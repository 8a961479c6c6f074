package cuda

import "fmt"

// cublasOperation_t values.
const (
	opN = 0
	opT = 1
)

// Gemm computes C = alpha op(A) op(B) + beta C for row-major matrices on the
// device, as nn.Gemm does on the host: op(A) is m x k, op(B) is k x n, C is
// m x n; A is stored m x k (k x m when transA), B k x n (n x k when
// transB), all dense (on the device goroutine). cuBLAS is column-major, so
// it computes C^T = op(B)^T op(A)^T: the operands swap places.
func (d *Device) Gemm(transA, transB bool, m, n, k int, alpha float32, a, b Buffer, beta float32, c Buffer) error {
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	return d.GemmStridedBatched(transA, transB, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, n, 0, 1)
}

// GemmStridedBatched is batch row-major GEMMs with leading dimensions (row
// strides, in floats) lda, ldb, ldc and strides between the batch's
// matrices sa, sb, sc (in floats): the per-(batch, head) products of
// attention, as nn.GemmStrided per matrix (on the device goroutine).
func (d *Device) GemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a Buffer, lda, sa int, b Buffer, ldb, sb int, beta float32, c Buffer, ldc, sc int, batch int) error {
	if m == 0 || n == 0 || batch == 0 {
		return nil
	}
	ta, tb := int32(opN), int32(opN)
	if transA {
		ta = opT
	}
	if transB {
		tb = opT
	}
	al, be := alpha, beta
	var code int32
	if batch == 1 {
		code = d.a.cublasSgemm(d.blas, tb, ta, int32(n), int32(m), int32(k), &al, b.Ptr, int32(ldb), a.Ptr, int32(lda), &be, c.Ptr, int32(ldc))
	} else {
		code = d.a.cublasSgemmStridedBatched(d.blas, tb, ta, int32(n), int32(m), int32(k), &al, b.Ptr, int32(ldb), int64(sb),
			a.Ptr, int32(lda), int64(sa), &be, c.Ptr, int32(ldc), int64(sc), int32(batch))
	}
	if err := d.a.checkBLAS("cublasSgemm", code); err != nil {
		return fmt.Errorf("gemm %dx%dx%d (batch %d): %w", m, n, k, batch, err)
	}
	return nil
}
