package cuda

import "fmt"

// cublasOperation_t values.
const (
	opN = 0
	opT = 1
)

// cudaDataType_t, cublasComputeType_t and cublasGemmAlgo_t values of the
// BF16 GEMMs.
const (
	cudaR32F       = 0  // CUDA_R_32F
	cudaR16BF      = 14 // CUDA_R_16BF
	computeF32     = 68 // CUBLAS_COMPUTE_32F: FP32 accumulation, inputs as they are
	gemmAlgDefault = -1 // CUBLAS_GEMM_DEFAULT
)

// Gemm computes C = alpha op(A) op(B) + beta C for row-major FP32 matrices
// on the device (IEEE FP32, or TF32 inputs on a tf32 device; a bf16 device
// runs these in FP32 too: dnn's layers call GemmBF16 there), as nn.Gemm
// does on the host: op(A) is m x k, op(B) is k x n, C is
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
	ta, tb := blasOp(transA), blasOp(transB)
	al, be := alpha, beta
	var code int32
	d.blasCalls.Add(1)
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

// GemmBF16 is GemmStridedBatched with BF16 operands: a and b hold
// bfloat16 values (2 bytes each: the upper half of a float32's bits; lda,
// ldb, sa, sb count elements), c is FP32 (ldc, sc in floats), alpha and beta
// FP32, and cuBLAS accumulates in FP32 (cublasGemmEx for one matrix,
// cublasGemmStridedBatchedEx for more: CUDA_R_16BF inputs, CUDA_R_32F
// output, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT). The operands' rounding
// to BF16 is the caller's (dnn's bf16_from_f32 kernel). On the device
// goroutine, on any device whose cuBLAS has the Ex functions (else the
// error naming them).
func (d *Device) GemmBF16(transA, transB bool, m, n, k int, alpha float32, a Buffer, lda, sa int, b Buffer, ldb, sb int, beta float32, c Buffer, ldc, sc int, batch int) error {
	if d.a.blasBF16Err != nil {
		return d.a.blasBF16Err
	}
	if m == 0 || n == 0 || batch == 0 {
		return nil
	}
	ta, tb := blasOp(transA), blasOp(transB)
	al, be := alpha, beta
	var code int32
	fn := "cublasGemmEx"
	d.blasCalls.Add(1)
	if batch == 1 {
		code = d.a.cublasGemmEx(d.blas, tb, ta, int32(n), int32(m), int32(k), &al, b.Ptr, cudaR16BF, int32(ldb),
			a.Ptr, cudaR16BF, int32(lda), &be, c.Ptr, cudaR32F, int32(ldc), computeF32, gemmAlgDefault)
	} else {
		fn = "cublasGemmStridedBatchedEx"
		code = d.a.cublasGemmStridedBatchedEx(d.blas, tb, ta, int32(n), int32(m), int32(k), &al, b.Ptr, cudaR16BF, int32(ldb), int64(sb),
			a.Ptr, cudaR16BF, int32(lda), int64(sa), &be, c.Ptr, cudaR32F, int32(ldc), int64(sc), int32(batch), computeF32, gemmAlgDefault)
	}
	if err := d.a.checkBLAS(fn, code); err != nil {
		return fmt.Errorf("bf16 gemm %dx%dx%d (batch %d): %w", m, n, k, batch, err)
	}
	return nil
}

// blasOp is cuBLAS's operation for an operand: transposed or not.
func blasOp(trans bool) int32 {
	if trans {
		return opT
	}
	return opN
}
