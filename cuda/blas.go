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

// Gemm computes C = alpha op(A) op(B) + beta C for row-major FP32 matrices on the device, as
// nn.Gemm does on the host. It runs on the device goroutine.
//
// op(A) is m x k, op(B) is k x n and C is m x n. A is stored m x k, or k x m when transA is set; B
// is stored k x n, or n x k when transB is set; all are dense. cuBLAS is column-major, so Gemm
// computes C^T = op(B)^T op(A)^T, with the operands swapped.
//
// The arithmetic is IEEE FP32, or TF32 inputs on a tf32 device. A bf16 device runs Gemm in FP32
// too: dnn's layers call [Device.GemmBF16] there.
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

// GemmStridedBatched computes a batch of row-major GEMMs, such as the products for each batch row
// and head of attention; each matrix is as in nn.GemmStrided. lda, ldb and ldc are the leading
// dimensions, or row strides, and sa, sb and sc the strides between the batch's matrices, all
// counted in floats. It runs on the device goroutine.
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

// GemmBF16 is [Device.GemmStridedBatched] with BF16 operands, accumulated in FP32 by cuBLAS. It
// runs on the device goroutine.
//
// a and b hold bfloat16 values of 2 bytes each, the upper half of a float32's bits; lda, ldb, sa
// and sb count elements. c is FP32, with ldc and sc in floats; alpha and beta are FP32. The
// rounding of the operands to BF16 is the caller's, such as dnn's bf16_from_f32 kernel.
//
// One matrix goes to cublasGemmEx, more to cublasGemmStridedBatchedEx, with CUDA_R_16BF inputs,
// CUDA_R_32F output, CUBLAS_COMPUTE_32F and CUBLAS_GEMM_DEFAULT. Any device whose cuBLAS has the Ex
// functions runs it; on another, GemmBF16 returns an error naming them.
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
