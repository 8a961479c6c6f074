// LayerNorm over the last dimension (dnn/layernorm.go; nn.LayerNorm):
// one block per row, block reductions through shared memory.

// block_sum256: the sum of v over the block's 256 threads (every thread
// gets it). buf is the block's shared scratch of 256 floats.
DEVICE float block_sum256(float v, float *buf) {
	int t = threadIdx.x;
	buf[t] = v;
	__syncthreads();
	for (int w = 128; w > 0; w >>= 1) {
		if (t < w) buf[t] += buf[t + w];
		__syncthreads();
	}
	float s = buf[0];
	__syncthreads();
	return s;
}

// layernorm_fwd: y = (x - mean) rstd w + b per row of x [rows, D]; mean and
// rstd = 1/sqrt(var + eps) (biased variance, two passes) saved per row.
KERNEL void layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b, int D, float eps) {
	__shared__ float buf[256];
	const float *xr = x + (long long)blockIdx.x * D;
	float *yr = y + (long long)blockIdx.x * D;
	float s = 0;
	for (int i = threadIdx.x; i < D; i += blockDim.x) s += xr[i];
	float m = block_sum256(s, buf) / D;
	float ss = 0;
	for (int i = threadIdx.x; i < D; i += blockDim.x) {
		float d = xr[i] - m;
		ss += d * d;
	}
	float r = rsqrtf(block_sum256(ss, buf) / D + eps);
	for (int i = threadIdx.x; i < D; i += blockDim.x) yr[i] = (xr[i] - m) * r * w[i] + b[i];
	if (threadIdx.x == 0) {
		mean[blockIdx.x] = m;
		rstd[blockIdx.x] = r;
	}
}

// layernorm_bwd: per row, dx = rstd (g - mean(g) - xhat mean(g xhat)) with
// g = dy w, xhat = (x - mean) rstd; dyxhat = dy xhat for the weight's
// gradient (summed over rows by colSumAcc, dnn/colsum.go: deterministic, no atomics).
KERNEL void layernorm_bwd(float *dx, float *dyxhat, const float *dy, const float *x, const float *mean, const float *rstd, const float *w, int D) {
	__shared__ float buf[256];
	long long off = (long long)blockIdx.x * D;
	float m = mean[blockIdx.x], r = rstd[blockIdx.x];
	float sg = 0, sgx = 0;
	for (int i = threadIdx.x; i < D; i += blockDim.x) {
		float xhat = (x[off + i] - m) * r;
		float g = dy[off + i] * w[i];
		sg += g;
		sgx += g * xhat;
		dyxhat[off + i] = dy[off + i] * xhat;
	}
	sg = block_sum256(sg, buf) / D;
	sgx = block_sum256(sgx, buf) / D;
	for (int i = threadIdx.x; i < D; i += blockDim.x) {
		float xhat = (x[off + i] - m) * r;
		dx[off + i] = r * (dy[off + i] * w[i] - sg - xhat * sgx);
	}
}
