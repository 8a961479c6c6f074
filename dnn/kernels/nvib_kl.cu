// The NVIB regularisers L_G and L_D and their gradients (dnn/nvib_kl.go;
// nvib/kl.go), in double as nvib computes them. A component counts when
// !mask_pads or mask[r] != 0 (nvib.KLConfig.MaskPads).

// nvib_kl_comp: comp[r] = 0.5/P sum_j [exp(lv)/vp + (mu-mp)^2/vp - 1 -
// (lv - ln vp)] for each component row r of [B, N] that counts (else 0);
// one block per row.
KERNEL void nvib_kl_comp(double *comp, const float *mu, const float *lv, const float *mask, int mask_pads, int P,
                         double vp, double mp, double log_vp) {
	__shared__ double buf[256];
	long long r = blockIdx.x;
	if (mask_pads && mask[r] == 0) {
		if (threadIdx.x == 0) comp[r] = 0;
		return;
	}
	double s = 0;
	for (int j = threadIdx.x; j < P; j += blockDim.x) {
		double l = (double)lv[r * P + j];
		double d = (double)mu[r * P + j] - mp;
		s += exp(l) / vp + d * d / vp - 1 - (l - log_vp);
	}
	s = nvib_block_sum_d(s, buf);
	if (threadIdx.x == 0) comp[r] = 0.5 * s / P;
}

// nvib_kl_example: per example b (one thread each), over the components
// that count, in order: alpha0 = sum alpha_i, n their number,
// L_G = sum_i alpha_i/alpha0 comp_i, alpha0_p = prior_alpha + delta (n-1),
// L_D (nvib.KL) and dL_D/dalpha0 (nvib.KLBackward).
KERNEL void nvib_kl_example(double *lg, double *ld, double *dld, double *a0_out, const double *comp, const float *alpha,
                            const float *mask, int mask_pads, int B, int N, double prior_alpha, double delta) {
	int b = blockIdx.x * blockDim.x + threadIdx.x;
	if (b >= B) return;
	double a0 = 0, n = 0, g = 0;
	for (int i = 0; i < N; i++) {
		long long r = (long long)b * N + i;
		if (!mask_pads || mask[r] != 0) {
			a0 += (double)alpha[r];
			n++;
		}
	}
	for (int i = 0; i < N; i++) {
		long long r = (long long)b * N + i;
		if (!mask_pads || mask[r] != 0) g += (double)alpha[r] / a0 * comp[r];
	}
	double a0p = prior_alpha + delta * (n - 1);
	double d = (lgamma(a0) - lgamma(a0p) + (a0 - a0p) * (nvib_digamma(a0 / n) - nvib_digamma(a0)) + n * (lgamma(a0p / n) - lgamma(a0 / n))) / n;
	lg[b] = g;
	ld[b] = d;
	dld[b] = (a0 - a0p) * (nvib_trigamma(a0 / n) / n - nvib_trigamma(a0)) / n;
	a0_out[b] = a0;
}

// nvib_kl_mean: out[0] = sum_b lg[b]/B, out[1] = sum_b ld[b]/B, in order
// (nvib.KLResult's MeanLG, MeanLD); one thread.
KERNEL void nvib_kl_mean(double *out, const double *lg, const double *ld, int B) {
	if (blockIdx.x * blockDim.x + threadIdx.x != 0) return;
	double mg = 0, md = 0;
	for (int b = 0; b < B; b++) {
		mg += lg[b] / B;
		md += ld[b] / B;
	}
	out[0] = mg;
	out[1] = md;
}

// nvib_kl_bwd: accumulates the gradient of wG sum_b L_G + wD sum_b L_D (the
// weights already divided by B) into dmu, dlv [B, N, P] and dalpha [B, N];
// one block per component row r.
KERNEL void nvib_kl_bwd(float *dmu, float *dlv, float *dalpha, const double *comp, const double *lg, const double *dld,
                        const double *a0, const float *mu, const float *lv, const float *alpha, const float *mask, int mask_pads,
                        int N, int P, double vp, double mp, double wg, double wd) {
	long long r = blockIdx.x;
	int b = (int)(r / N);
	if (mask_pads && mask[r] == 0) return;
	double pibar = (double)alpha[r] / a0[b];
	if (threadIdx.x == 0) dalpha[r] += (float)(wg * (comp[r] - lg[b]) / a0[b] + wd * dld[b]);
	double c = wg * 0.5 * pibar / P;
	for (int j = threadIdx.x; j < P; j += blockDim.x) {
		long long k = r * P + j;
		dmu[k] += (float)(c * 2 * ((double)mu[k] - mp) / vp);
		dlv[k] += (float)(c * (exp((double)lv[k]) / vp - 1));
	}
}
