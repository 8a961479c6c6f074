// Pooling of a sequence into one vector (dnn/pool.go; nn/pool.go):
// masked mean pooling and first-token pooling, forward and backward.

// masked_mean_pool: y[b, i] = sum_s mask[b, s] x[b, s, i] / max(sum_s
// mask[b, s], 1e-9) for x [B, S, D], mask [B, S]; one thread per (b, i).
// As nn.MaskedMeanPool, to the bit: the weighted sum in float32 over s in
// order (exact_* of adamw.cu: no fused multiply-add), positions of mask 0
// skipped (a padded NaN or Inf stays out), the denominator summed in double
// and the quotient taken in double.
KERNEL void masked_mean_pool(float *y, const float *x, const float *mask, int B, int S, int D) {
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)B * D) return;
	int b = (int)(k / D), i = (int)(k % D);
	const float *mr = mask + (long long)b * S;
	float acc = 0;
	double den = 0;
	for (int s = 0; s < S; s++) {
		float m = mr[s];
		den += (double)m;
		if (m != 0) acc = exact_add(acc, exact_mul(m, x[((long long)b * S + s) * D + i]));
	}
	y[k] = (float)((double)acc / fmax(den, 1e-9));
}

// masked_mean_weights: w[b, s] = mask[b, s] / max(sum_s mask[b, s], 1e-9)
// rounded to float (nn.MaskedMeanPoolBackward's weight), one thread per
// (b, s).
KERNEL void masked_mean_weights(float *w, const float *mask, int B, int S) {
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)B * S) return;
	const float *mr = mask + (k / S) * S;
	double den = 0;
	for (int s = 0; s < S; s++) den += (double)mr[s];
	w[k] = (float)((double)mask[k] / fmax(den, 1e-9));
}

// masked_mean_pool_bwd: dx[b, s, i] = w[b, s] dy[b, i] (0 where the mask
// is 0) for dx [B, S, D], w [B, S] of masked_mean_weights; one thread per
// element of dx.
KERNEL void masked_mean_pool_bwd(float *dx, const float *dy, const float *w, const float *mask, int B, int S, int D) {
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)B * S * D) return;
	long long row = k / D; // b*S + s
	int i = (int)(k % D);
	long long b = row / S;
	dx[k] = mask[row] == 0 ? 0.0f : exact_mul(w[row], dy[b * D + i]);
}

// first_token: y[b, i] = x[b, 0, i] for x [B, S, D]; one thread per (b, i).
KERNEL void first_token(float *y, const float *x, int B, int S, int D) {
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)B * D) return;
	long long b = k / D;
	y[k] = x[b * S * D + k % D];
}

// first_token_bwd: dx[b, 0, i] = dy[b, i], dx[b, s, i] = 0 for s > 0 (dx
// [B, S, D] written whole); one thread per element of dx.
KERNEL void first_token_bwd(float *dx, const float *dy, int B, int S, int D) {
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)B * S * D) return;
	long long row = k / D;
	dx[k] = row % S == 0 ? dy[(row / S) * D + k % D] : 0.0f;
}
