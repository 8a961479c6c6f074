/* fakecublas.c: a CPU stand-in of the subset of cuBLAS that package cuda
 * calls (libcublas.so.13): column-major SGEMM, plain and strided-batched,
 * accumulating in double (the reference the tests compare against). */
#include <stdint.h>
#include <stdlib.h>

typedef int cublasStatus_t;
typedef struct {
	int math_mode;
} handle_t;

const char *cublasGetStatusString(cublasStatus_t s) {
	switch (s) {
	case 0: return "CUBLAS_STATUS_SUCCESS";
	case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case 7: return "CUBLAS_STATUS_INVALID_VALUE";
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
