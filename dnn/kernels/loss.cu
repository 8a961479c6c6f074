// Losses (dnn/loss.go; nn/loss.go): softmax cross-entropy and mean squared
// error, their gradients, and the loss reduced on the device in double
// (block_sum256_f64 of adamw.cu).

// ce_block_max256: the maximum of v over the block's 256 threads (every
// thread gets it); NaN is ignored as fmaxf ignores it (a NaN logit still
// makes the row's sum of exponentials NaN). buf: 256 floats of shared
// scratch.
DEVICE float ce_block_max256(float v, float *buf) {
	int t = threadIdx.x;
	buf[t] = v;
	__syncthreads();
	for (int w = 128; w > 0; w >>= 1) {
		if (t < w) buf[t] = fmaxf(buf[t], buf[t + w]);
		__syncthreads();
	}
	float s = buf[0];
	__syncthreads();
	return s;
}

// ce_rows: per row b of logits [B, C] (one block per row), with y =
// labels[b], as nn.SoftmaxCrossEntropy in double: lse = max + log(sum_j
// exp(l_j - max)); rowloss[b] = lse - l_y; dlogits[b, j] = (exp(l_j - lse)
// - [j == y]) inv (inv = 1/B), rounded to float. A label outside [0, C)
// makes the row's loss and gradient NaN (the host then names it).
KERNEL void ce_rows(float *dlogits, double *rowloss, const float *logits, const int *labels, int C, double inv) {
	__shared__ float fbuf[256];
	__shared__ double dbuf[256];
	long long off = (long long)blockIdx.x * C;
	const float *row = logits + off;
	int y = labels[blockIdx.x];
	bool ok = y >= 0 && y < C;
	float mx = __int_as_float((int)0xff800000); // -Inf
	for (int j = threadIdx.x; j < C; j += blockDim.x) mx = fmaxf(mx, row[j]);
	double dmx = (double)ce_block_max256(mx, fbuf);
	double z = 0;
	for (int j = threadIdx.x; j < C; j += blockDim.x) z += exp((double)row[j] - dmx);
	double lse = dmx + log(block_sum256_f64(z, dbuf));
	double nan = (double)__int_as_float(0x7fc00000);
	for (int j = threadIdx.x; j < C; j += blockDim.x) {
		double p = exp((double)row[j] - lse);
		if (j == y) p -= 1;
		dlogits[off + j] = (float)(ok ? p * inv : nan);
	}
	if (threadIdx.x == 0) rowloss[blockIdx.x] = ok ? lse - (double)row[y] : nan;
}

// mse_loss: dpred[i] = 2 (pred[i] - target[i]) / n (rounded to float) and
// out[0] = sum_i (pred[i] - target[i])^2 / n, in double (one block).
KERNEL void mse_loss(float *dpred, double *out, const float *pred, const float *target, int n) {
	__shared__ double buf[256];
	double s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		double d = (double)pred[i] - (double)target[i];
		s += d * d;
		dpred[i] = (float)(2 * d / (double)n);
	}
	s = block_sum256_f64(s, buf);
	if (threadIdx.x == 0) out[0] = s / (double)n;
}
