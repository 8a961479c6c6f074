// The NVDP block's denoising-attention inputs (dnn/nvib_block.go;
// nvib/block.go): the queries read from the sample's token components, the
// key bias ln pi_j - ||z_j||^2/(2 sqrt d_h) and their backward passes.

// nvib_block_query: q [B, S, P] = z [B, N, P] components 1..S (N = S+1),
// one thread per element.
KERNEL void nvib_block_query(float *q, const float *z, int B, int S, int P) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	long long sp = (long long)S * P;
	if (i >= B * sp) return;
	long long b = i / sp;
	q[i] = z[b * (sp + P) + P + i % sp];
}

// nvib_block_query_bwd: dz [B, N, P] components 1..S += dq [B, S, P].
KERNEL void nvib_block_query_bwd(float *dz, const float *dq, int B, int S, int P) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	long long sp = (long long)S * P;
	if (i >= B * sp) return;
	long long b = i / sp;
	dz[b * (sp + P) + P + i % sp] += dq[i];
}

// nvib_block_bias: the key bias of component row k of [B, N] (one block
// per row), l2 = ||z_k||^2/(2 sq) summed in double: principled,
// float32(ln pi_k - l2); reference (the released code), v = float32(ln
// max(pi_k, tiny) - l2), + 1 where pi_k <= 0, + (-float32 max) at padding
// (mask 0), with clamped[k] = 1 where pi_k <= tiny (no gradient into pi).
KERNEL void nvib_block_bias(float *bias, float *clamped, const float *z, const double *logpi, const float *pi, const float *mask,
                            int reference, int P, double sq) {
	__shared__ double buf[256];
	long long k = blockIdx.x;
	double nz = 0;
	for (int j = threadIdx.x; j < P; j += blockDim.x) {
		double v = (double)z[k * P + j];
		nz += v * v;
	}
	nz = nvib_block_sum_d(nz, buf);
	if (threadIdx.x != 0) return;
	double l2 = nz / (2 * sq);
	if (!reference) {
		bias[k] = (float)(logpi[k] - l2);
		clamped[k] = 0;
		return;
	}
	const double tiny = 1.1754943508222875e-38;
	float p = pi[k];
	double lp = log((double)p > tiny ? (double)p : tiny);
	clamped[k] = (double)p <= tiny ? 1 : 0;
	float v = (float)(lp - l2);
	if (p <= 0) v += 1;
	if (mask[k] == 0) v += -3.40282346638528859811704183484516925440e+38f;
	bias[k] = v;
}

// nvib_block_bias_bwd: for component row k (one block per row) with key-bias
// gradient g = dbias[k] != 0 and ln pi_k finite: dlogpi[k] = g (0 where
// clamped), dz_k += -g z_k/sq; else dlogpi[k] = 0.
KERNEL void nvib_block_bias_bwd(float *dlogpi, float *dz, const float *dbias, const float *z, const double *logpi,
                                const float *clamped, int P, double sq) {
	long long k = blockIdx.x;
	double g = (double)dbias[k];
	int skip = g == 0 || (isinf(logpi[k]) && logpi[k] < 0);
	if (threadIdx.x == 0) dlogpi[k] = skip || clamped[k] != 0 ? 0 : (float)g;
	if (skip) return;
	for (int j = threadIdx.x; j < P; j += blockDim.x) dz[k * P + j] += (float)(-g * (double)z[k * P + j] / sq);
}
