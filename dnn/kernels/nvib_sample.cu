// The NVIB posterior's sample (dnn/nvib_sample.go; nvib/layer.go Draw and
// Sample.Backward, nvib/dirichlet.go): Gaussian atoms z = mu + sigma eps
// and Dirichlet weights pi from ln-Gamma draws, with the reference's guards
// and the implicit Gamma gradient. A component is sampled where !use_mask
// or mask[k] != 0 (nvib.Posterior.SampleMask).

// nvib_gauss_sample: z = float32(mu + exp(lv/2) eps) in double (n elements).
KERNEL void nvib_gauss_sample(float *z, const float *mu, const float *lv, const float *eps, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) z[i] = (float)((double)mu[i] + exp(0.5 * (double)lv[i]) * (double)eps[i]);
}

// nvib_gauss_sample_bwd: dmu += dz, dlv += float32(dz eps exp(lv/2)/2) (n
// elements).
KERNEL void nvib_gauss_sample_bwd(float *dmu, float *dlv, const float *dz, const float *eps, const float *lv, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	dmu[i] += dz[i];
	dlv[i] += (float)((double)dz[i] * (double)eps[i] * 0.5 * exp(0.5 * (double)lv[i]));
}

// nvib_fill_f, nvib_fill_d: x[i] = v (n elements).
KERNEL void nvib_fill_f(float *x, float v, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = v;
}

KERNEL void nvib_fill_d(double *x, double v, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = v;
}

// nvib_dir_shape: per example b (one thread each), the total A = sum of the
// sampled alpha_i (in order) and the guarded shapes alpha'_i = max(alpha_i/A,
// 1e-23) min(A, 1e8) of the sampled components (0 elsewhere).
KERNEL void nvib_dir_shape(double *shape, double *total, const float *alpha, const float *mask, int use_mask, int B, int N) {
	int b = blockIdx.x * blockDim.x + threadIdx.x;
	if (b >= B) return;
	double A = 0;
	for (int i = 0; i < N; i++) {
		long long k = (long long)b * N + i;
		if (!use_mask || mask[k] != 0) A += (double)alpha[k];
	}
	total[b] = A;
	double scale = A > 1e8 ? 1e8 : A;
	for (int i = 0; i < N; i++) {
		long long k = (long long)b * N + i;
		double p = (double)alpha[k] / A;
		if (p < 1e-23) p = 1e-23;
		shape[k] = (!use_mask || mask[k] != 0) ? p * scale : 0;
	}
}

// nvib_dir_norm: per example (one block each), from the ln-Gamma draws logg
// [B, N] at the shapes: dlogg = d ln g/d alpha' (nvib_gamma_log_grad), ln pi
// = ln g - logsumexp ln g over the sampled components (-Inf elsewhere) and
// pi = exp(ln pi) in float32.
KERNEL void nvib_dir_norm(float *pi, double *logpi, double *dlogg, const double *shape, const double *logg, const float *mask,
                          int use_mask, int N) {
	__shared__ double buf[256];
	long long off = (long long)blockIdx.x * N;
	double mx = -nvib_inf();
	for (int i = threadIdx.x; i < N; i += blockDim.x) {
		long long k = off + i;
		if (use_mask && mask[k] == 0) {
			dlogg[k] = 0;
			continue;
		}
		dlogg[k] = nvib_gamma_log_grad(shape[k], logg[k]);
		if (logg[k] > mx) mx = logg[k];
	}
	mx = nvib_block_max_d(mx, buf);
	double s = 0;
	for (int i = threadIdx.x; i < N; i += blockDim.x)
		if (!use_mask || mask[off + i] != 0) s += exp(logg[off + i] - mx);
	double lse = mx + log(nvib_block_sum_d(s, buf));
	for (int i = threadIdx.x; i < N; i += blockDim.x) {
		long long k = off + i;
		double lp = (!use_mask || mask[k] != 0) ? logg[k] - lse : -nvib_inf();
		logpi[k] = lp;
		pi[k] = (float)exp(lp);
	}
}

// nvib_dir_bwd: nvib.DirichletSample.Backward per example (one block
// each): dalpha [B, N] (set, 0 at unsampled components) from dL/d ln pi
// through the normalisation, the implicit gradient and the guards (the
// proportion floor recomputed as in the forward pass).
KERNEL void nvib_dir_bwd(float *dalpha, const float *dlogpi, const double *logpi, const double *dlogg, const double *shape,
                         const double *total, const float *alpha, const float *mask, int use_mask, int N) {
	__shared__ double buf[256];
	long long off = (long long)blockIdx.x * N;
	double sum = 0;
	for (int i = threadIdx.x; i < N; i += blockDim.x)
		if (!use_mask || mask[off + i] != 0) sum += (double)dlogpi[off + i];
	sum = nvib_block_sum_d(sum, buf);
	double A = total[blockIdx.x];
	double scale = A > 1e8 ? 1e8 : A;
	double sga = 0, sgr = 0;
	for (int i = threadIdx.x; i < N; i += blockDim.x) {
		long long k = off + i;
		if (use_mask && mask[k] == 0) continue;
		double gs = ((double)dlogpi[k] - exp(logpi[k]) * sum) * dlogg[k];
		if (!((double)alpha[k] / A < 1e-23)) sga += gs * (double)alpha[k];
		sgr += gs * shape[k] / scale;
	}
	sga = nvib_block_sum_d(sga, buf);
	sgr = nvib_block_sum_d(sgr, buf);
	double cap_on = A < 1e8 ? 1 : 0;
	for (int i = threadIdx.x; i < N; i += blockDim.x) {
		long long k = off + i;
		if (use_mask && mask[k] == 0) {
			dalpha[k] = 0;
			continue;
		}
		double g = -scale / (A * A) * sga + cap_on * sgr;
		if (!((double)alpha[k] / A < 1e-23)) g += scale * (((double)dlogpi[k] - exp(logpi[k]) * sum) * dlogg[k]) / A;
		dalpha[k] = (float)g;
	}
}
