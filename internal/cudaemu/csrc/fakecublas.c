/* fakecublas.c: a CPU stand-in of the subset of cuBLAS that package cuda
 * calls (libcublas.so.13): column-major SGEMM, plain and strided-batched,
 * accumulating in double (the reference the tests compare against); and
 * the BF16 GEMMs of --precision bf16 (cublasGemmEx,
 * cublasGemmStridedBatchedEx with CUDA_R_16BF A and B, CUDA_R_32F C,
 * CUBLAS_COMPUTE_32F), which widen each bfloat16 exactly to float and
 * accumulate in FP32, as tensor cores do (below). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int cublasStatus_t;
typedef struct {
	int math_mode;
} handle_t;

const char *cublasGetStatusString(cublasStatus_t s) {
	switch (s) {
	case 0: return "CUBLAS_STATUS_SUCCESS";
	case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case 7: return "CUBLAS_STATUS_INVALID_VALUE";
	case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
	}
	return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasCreate_v2(handle_t **h) { *h = calloc(1, sizeof **h); return 0; }
cublasStatus_t cublasDestroy_v2(handle_t *h) { free(h); return 0; }
cublasStatus_t cublasGetVersion_v2(handle_t *h, int *v) { (void)h; *v = 130000; return 0; }
cublasStatus_t cublasSetMathMode(handle_t *h, int mode) {
	if (mode != 0 && mode != 3) return 7;
	h->math_mode = mode;
	return 0;
}

/* gemm is C = alpha op(A) op(B) + beta C, column-major, op(A) m x k. */
static cublasStatus_t gemm(int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda, const float *B, int ldb,
                           float beta, float *C, int ldc) {
	if (m < 0 || n < 0 || k < 0 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1)) return 7;
	if (lda < (ta ? (k > 1 ? k : 1) : (m > 1 ? m : 1)) || ldb < (tb ? (n > 1 ? n : 1) : (k > 1 ? k : 1)) || ldc < (m > 1 ? m : 1)) return 7;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			double s = 0;
			for (int l = 0; l < k; l++) {
				double a = ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda];
				double b = tb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb];
				s += a * b;
			}
			float *c = &C[i + (size_t)j * ldc];
			*c = (float)(alpha * s + (beta == 0 ? 0.0 : (double)beta * *c));
		}
	return 0;
}

cublasStatus_t cublasSgemm_v2(handle_t *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc) {
	(void)h;
	return gemm(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
}

cublasStatus_t cublasSgemmStridedBatched(handle_t *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *A,
                                         int lda, long long sa, const float *B, int ldb, long long sb, const float *beta, float *C,
                                         int ldc, long long sc, int batch) {
	(void)h;
	for (int i = 0; i < batch; i++) {
		cublasStatus_t s = gemm(ta, tb, m, n, k, *alpha, A + i * sa, lda, B + i * sb, ldb, *beta, C + i * sc, ldc);
		if (s) return s;
	}
	return 0;
}

/* cudaDataType_t and cublasComputeType_t values of the BF16 GEMMs. */
enum { CUDA_R_32F = 0, CUDA_R_16BF = 14, CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_PEDANTIC = 69 };

/* bf16 widens a bfloat16 (the upper 16 bits of a float32) to float:
 * exact. */
static inline float bf16(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* gemm_bf16 is C = alpha op(A) op(B) + beta C, column-major, A and B
 * bfloat16, C float. The inputs arrive rounded (package dnn's
 * bf16_from_f32 kernel, round to nearest even from FP32: the same source
 * runs here and on the GPU, so the stand-in sees the GPU's bits). Each
 * product of two bfloat16 values (8-bit significands) is exact in float
 * (16 bits), and the sum runs in float in the order l = 0..k-1 with a
 * rounding per term: FP32 accumulation, as on tensor cores (whose order of
 * summation differs: the same error bound, k ulps of FP32). alpha and beta
 * apply in float. */
static cublasStatus_t gemm_bf16(int ta, int tb, int m, int n, int k, float alpha, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                                float beta, float *C, int ldc) {
	if (m < 0 || n < 0 || k < 0 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1)) return 7;
	if (lda < (ta ? (k > 1 ? k : 1) : (m > 1 ? m : 1)) || ldb < (tb ? (n > 1 ? n : 1) : (k > 1 ? k : 1)) || ldc < (m > 1 ? m : 1)) return 7;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			float s = 0;
			for (int l = 0; l < k; l++) {
				float a = bf16(ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda]);
				float b = bf16(tb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb]);
				s += a * b;
			}
			float *c = &C[i + (size_t)j * ldc];
			*c = alpha * s + (beta == 0 ? 0.0f : beta * *c);
		}
	return 0;
}

/* ex_types checks the types of a GemmEx call: the BF16 case only. */
static cublasStatus_t ex_types(int at, int bt, int ct, int compute) {
	if (at != CUDA_R_16BF || bt != CUDA_R_16BF || ct != CUDA_R_32F || (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC))
		return 15; /* CUBLAS_STATUS_NOT_SUPPORTED: not in the stand-in */
	return 0;
}

cublasStatus_t cublasGemmEx(handle_t *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at, int lda,
                            const void *B, int bt, int ldb, const void *beta, void *C, int ct, int ldc, int compute, int algo) {
	(void)h;
	(void)algo;
	cublasStatus_t s = ex_types(at, bt, ct, compute);
	if (s) return s;
	return gemm_bf16(ta, tb, m, n, k, *(const float *)alpha, A, lda, B, ldb, *(const float *)beta, C, ldc);
}

cublasStatus_t cublasGemmStridedBatchedEx(handle_t *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at,
                                          int lda, long long sa, const void *B, int bt, int ldb, long long sb, const void *beta, void *C,
                                          int ct, int ldc, long long sc, int batch, int compute, int algo) {
	(void)h;
	(void)algo;
	cublasStatus_t s = ex_types(at, bt, ct, compute);
	if (s) return s;
	for (int i = 0; i < batch; i++) {
		s = gemm_bf16(ta, tb, m, n, k, *(const float *)alpha, (const uint16_t *)A + i * sa, lda, (const uint16_t *)B + i * sb, ldb,
		              *(const float *)beta, (float *)C + i * sc, ldc);
		if (s) return s;
	}
	return 0;
}
