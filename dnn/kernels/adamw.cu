// The optimizer (dnn/adamw.go; nn/adamw.go, nn/param.go): the global
// gradient norm as a deterministic two-stage reduction into doubles, and
// AdamW's update with torch's operation order, rounded as nn rounds it.

// block_sum256_f64: the sum of v over the block's 256 threads (every
// thread gets it), a fixed tree through shared memory (deterministic). buf
// is the block's shared scratch of 256 doubles. (Also used by loss.cu,
// which comes after this file in the module.)
DEVICE double block_sum256_f64(double v, double *buf) {
	int t = threadIdx.x;
	buf[t] = v;
	__syncthreads();
	for (int w = 128; w > 0; w >>= 1) {
		if (t < w) buf[t] += buf[t + w];
		__syncthreads();
	}
	double s = buf[0];
	__syncthreads();
	return s;
}

// grad_sumsq_partial: partial[blockIdx.x] = the sum of g[i]^2 (in double)
// over the i of this block: i = blockIdx.x*256 + threadIdx.x, then strided
// by the whole grid. The partition depends only on n and the grid, so the
// sum is the same on every run.
KERNEL void grad_sumsq_partial(double *partial, const float *g, int n) {
	__shared__ double buf[256];
	double s = 0;
	long long stride = (long long)gridDim.x * blockDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		double x = (double)g[i];
		s += x * x;
	}
	s = block_sum256_f64(s, buf);
	if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// sum_f64: out[0] = the sum of x[0..n) in a fixed order (one block of 256
// threads: strided per thread, then the block's tree).
KERNEL void sum_f64(double *out, const double *x, int n) {
	__shared__ double buf[256];
	double s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
	s = block_sum256_f64(s, buf);
	if (threadIdx.x == 0) out[0] = s;
}

// exact_*: float operations each rounded on its own, as Go rounds nn's
// float32 code on amd64 (never fused into a multiply-add: CUDA's _rn
// intrinsics are never contracted; sqrt and division correctly rounded),
// so that a kernel written with them gives nn's bits. (Also used by
// pool.cu, which comes after this file in the module.)
#ifdef NVDP_EMU
DEVICE float exact_mul(float a, float b) { return a * b; }
DEVICE float exact_add(float a, float b) { return a + b; }
DEVICE float exact_sub(float a, float b) { return a - b; }
DEVICE float exact_div(float a, float b) { return a / b; }
DEVICE float exact_sqrt(float a) { return sqrtf(a); }
#else
DEVICE float exact_mul(float a, float b) { return __fmul_rn(a, b); }
DEVICE float exact_add(float a, float b) { return __fadd_rn(a, b); }
DEVICE float exact_sub(float a, float b) { return __fsub_rn(a, b); }
DEVICE float exact_div(float a, float b) { return __fdiv_rn(a, b); }
DEVICE float exact_sqrt(float a) { return __fsqrt_rn(a); }
#endif

// bf16_rne is defined in bf16.cu, which sorts after this file.
DEVICE unsigned short bf16_rne(float x);

// adamw_step: one AdamW update of n parameters w with gradient g and
// moments m, v, in torch's order (nn.AdamW.Update):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g g
//   w = w dec - ss (m / (sqrt(v) ibc2 + eps))
// each operation rounded as nn's (exact_*: equal bits), with the
// coefficients computed on the host in double and rounded once:
// b1, omb1 = 1-b1, b2, omb2 = 1-b2, dec = 1 - lr wd (1 for NoDecay), ss =
// lr / (1 - b1^t), ibc2 = 1 / sqrt(1 - b2^t). With w16 (not NULL: the
// weight's bfloat16 copy on a bf16 device, dnn/bf16.go), w16 = the new w
// rounded to bfloat16, so the copy changes exactly when w does. One thread
// per parameter.
KERNEL void adamw_step(float *w, float *m, float *v, const float *g, int n, float b1, float omb1, float b2, float omb2, float dec, float ss, float ibc2, float eps, unsigned short *w16) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float gi = g[i];
	float mi = exact_add(exact_mul(b1, m[i]), exact_mul(omb1, gi));
	float vi = exact_add(exact_mul(b2, v[i]), exact_mul(exact_mul(omb2, gi), gi));
	m[i] = mi;
	v[i] = vi;
	float denom = exact_add(exact_mul(exact_sqrt(vi), ibc2), eps);
	float wi = exact_sub(exact_mul(w[i], dec), exact_mul(ss, exact_div(mi, denom)));
	w[i] = wi;
	if (w16) w16[i] = bf16_rne(wi);
}
