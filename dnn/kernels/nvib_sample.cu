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
		double s = p < 1e-23 ? 1e-23 * scale : (A <= 1e8 ? (double)alpha[k] : p * scale); // nvib's sampleDirichlet
		shape[k] = (!use_mask || mask[k] != 0) ? s : 0;
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

// The draws of NVIBDrawDevice, from the Philox stream (k0, k1) of
// dnn/philox.go (philox_u64 of kernels/dropout.cu) from position pos.

// nvib_uniform_open0: a uniform of (0, 1] from the top 53 bits of w.
DEVICE double nvib_uniform_open0(unsigned long long w) { return (double)((w >> 11) + 1) * 1.1102230246251565404e-16; }

// nvib_uniform: a uniform of [0, 1) from the top 53 bits of w.
DEVICE double nvib_uniform(unsigned long long w) { return (double)(w >> 11) * 1.1102230246251565404e-16; }

// nvib_normal: a standard normal from draws m and m+1 (Box-Muller, the
// cosine branch).
DEVICE double nvib_normal(unsigned k0, unsigned k1, unsigned long long m) {
	double u1 = nvib_uniform_open0(philox_u64(k0, k1, m));
	double u2 = nvib_uniform(philox_u64(k0, k1, m + 1));
	return sqrt(-2 * log(u1)) * cos(6.283185307179586476925286766559 * u2);
}

// nvib_philox_normals: eps[i] = float32 normal of draws pos + 2i, pos + 2i
// + 1 (n elements; 2n draws).
KERNEL void nvib_philox_normals(float *eps, int n, unsigned k0, unsigned k1, long long pos) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) eps[i] = (float)nvib_normal(k0, k1, (unsigned long long)pos + 2 * (unsigned long long)i);
}

// NVIB_GAMMA_TRIES is the number of Marsaglia-Tsang proposals a component
// may use; each takes 3 draws (a normal, a uniform) and one more draw serves
// the U^(1/a) factor of a shape below 1: NVIB_GAMMA_DRAWS per component.
// A proposal is accepted with probability above 0.95 for a >= 1, so all 32
// are refused with probability below 1e-41; the last proposal is then
// taken.
#define NVIB_GAMMA_TRIES 32
#define NVIB_GAMMA_DRAWS (1 + 3 * NVIB_GAMMA_TRIES)

// nvib_philox_log_gamma: logg[k] = ln g, g ~ Gamma(shape[k], 1), by nvib's
// SampleLogGamma (Marsaglia-Tsang 2000; for a < 1 the draw at a + 1 times
// U^(1/a), in log space) with the draws pos + k NVIB_GAMMA_DRAWS + j of the
// stream; -Inf where the sampler masks (n components, one thread each).
KERNEL void nvib_philox_log_gamma(double *logg, const double *shape, const float *mask, int use_mask, int n, unsigned k0,
                                  unsigned k1, long long pos) {
	int k = blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= n) return;
	if (use_mask && mask[k] == 0) {
		logg[k] = -nvib_inf();
		return;
	}
	unsigned long long m = (unsigned long long)pos + (unsigned long long)k * NVIB_GAMMA_DRAWS;
	double a = shape[k], extra = 0;
	if (a < 1) {
		extra = log(nvib_uniform_open0(philox_u64(k0, k1, m))) / a;
		a += 1;
	}
	m++;
	double d = a - 1.0 / 3, c = 1 / sqrt(9 * d), v = 1;
	for (int t = 0; t < NVIB_GAMMA_TRIES; t++, m += 3) {
		double x = nvib_normal(k0, k1, m);
		double w = 1 + c * x;
		if (w <= 0) continue;
		v = w * w * w;
		double u = nvib_uniform(philox_u64(k0, k1, m + 2));
		double x2 = x * x;
		if (u < 1 - 0.0331 * x2 * x2) break;
		if (u > 0 && log(u) < 0.5 * x2 + d * (1 - v + log(v))) break;
	}
	logg[k] = log(d) + log(v) + extra;
}
