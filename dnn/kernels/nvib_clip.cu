// The NVIB layer's kernels (dnn/nvib_layer.go, dnn/nvib_gaussian.go;
// nvib/layer.go, nvib/clip.go, nvib/gaussian.go): the alpha projection's
// quadratic term, the posterior's assembly with the prior component and its
// clipping, and the Gaussian-mechanism release.

// nvib_clip_mu: nvib.ClipMu on the row m [P] in place, by the whole block
// (every thread calls it): the distance n = max(||m - c||, 1e-8) and, when
// n > radius (the stored radius, privacy.StoredRadius(C_mu): the ball the
// certificate uses), the projection onto it followed by nvib's shrink loop
// until the float32 row's distance is within it; rows with ±Inf entries
// are projected along the direction of their signs the same way.
// It returns n when the projection was active, else 0. The two distances
// are summed by thread 0 alone, in the order of the Go loop and with
// unfused operations, and every entry is computed with the same IEEE
// operations as in Go: the stored row is nvib's bit for bit. buf holds 2
// doubles and ibuf 1 int of the block's shared memory.
DEVICE double nvib_clip_mu(float *m, int P, int has_center, float center, double radius, double *buf, int *ibuf) {
	int t = threadIdx.x;
	double c = has_center ? (double)center : 0.0;
	if (t == 0) {
		double s = 0;
		for (int j = 0; j < P; j++) {
			double d = (double)m[j];
			if (has_center) d = nvib_dsub(d, c);
			s = nvib_dadd(s, nvib_dmul(d, d));
		}
		double n = sqrt(s);
		if (n < 1e-8) n = 1e-8; // math.Max(n, 1e-8): NaN stays NaN
		buf[0] = n;
	}
	__syncthreads();
	double n = buf[0];
	__syncthreads();
	if (!(n > radius)) return 0;
	int inf = isinf(n);
	double length = n; // of the offsets: for a row with ±Inf entries, their signs'
	if (inf) {
		if (t == 0) {
			int cnt = 0;
			for (int j = 0; j < P; j++)
				if (isinf(m[j])) cnt++;
			buf[1] = sqrt((double)cnt);
		}
		__syncthreads();
		length = buf[1];
		__syncthreads();
	}
	double r = radius / length;
	for (int try_ = 0;; try_++) {
		double f = try_ == 0 ? r : nvib_dsub(1.0, ldexp(1.0, try_ - 24));
		for (int j = t; j < P; j += blockDim.x) {
			double off;
			if (try_ > 0 || !inf) off = nvib_dsub((double)m[j], c);
			else off = isinf(m[j]) ? (m[j] > 0 ? 1.0 : -1.0) : 0.0;
			m[j] = (float)nvib_dadd(c, nvib_dmul(off, f));
		}
		__syncthreads();
		if (t == 0) {
			double d2 = 0;
			for (int j = 0; j < P; j++) {
				double e = nvib_dsub((double)m[j], c);
				d2 = nvib_dadd(d2, nvib_dmul(e, e));
			}
			ibuf[0] = sqrt(d2) <= radius || try_ == 24;
		}
		__syncthreads();
		int done = ibuf[0];
		__syncthreads();
		if (done) break;
	}
	return n;
}

// nvib_clip_mu_bwd: nvib's clipMuBackward by the whole block: out = (R/n)
// (dy - u (u.dy)), u = (y - c)/R, for a row projected from distance n
// (0: not projected, out = dy; +Inf: out = 0). out may be dy. buf: 256
// doubles of shared memory.
DEVICE void nvib_clip_mu_bwd(float *out, const float *dy, const float *y, int P, int has_center, float center, double radius, double n, double *buf) {
	int t = threadIdx.x;
	if (!(n > 0)) {
		for (int j = t; j < P; j += blockDim.x) out[j] = dy[j];
		return;
	}
	if (isinf(n)) {
		for (int j = t; j < P; j += blockDim.x) out[j] = 0;
		return;
	}
	double c = has_center ? (double)center : 0.0;
	double dot = 0;
	for (int j = t; j < P; j += blockDim.x) dot += ((double)y[j] - c) / radius * (double)dy[j];
	dot = nvib_block_sum_d(dot, buf);
	double r = radius / n;
	for (int j = t; j < P; j += blockDim.x) {
		double u = ((double)y[j] - c) / radius;
		out[j] = (float)(r * ((double)dy[j] - u * dot));
	}
}

// nvib_row_bad: the number of non-finite entries of the row v [P], summed
// over the block (every thread gets it). fbuf: 256 floats of shared memory.
DEVICE int nvib_row_bad(const float *v, int P, float *fbuf) {
	float bad = 0;
	for (int j = threadIdx.x; j < P; j += blockDim.x)
		if (isnan(v[j]) || isinf(v[j])) bad += 1;
	return (int)block_sum256(bad, fbuf);
}

// nvib_alpha_quad: la[r] += float32(sum_j q_j x_rj^2) (the sum in double)
// for each row r of x [rows, H]; one block per row.
KERNEL void nvib_alpha_quad(float *la, const float *x, const float *q, int H) {
	__shared__ double buf[256];
	const float *xr = x + (long long)blockIdx.x * H;
	double s = 0;
	for (int j = threadIdx.x; j < H; j += blockDim.x) s += (double)q[j] * (double)xr[j] * (double)xr[j];
	s = nvib_block_sum_d(s, buf);
	if (threadIdx.x == 0) la[blockIdx.x] = la[blockIdx.x] + (float)s;
}

// nvib_alpha_quad_dx: dx[r, j] += 2 g_r q_j x_rj for rows with g_r != 0
// (dx, x [rows, H], g = dla [rows]); one thread per element.
KERNEL void nvib_alpha_quad_dx(float *dx, const float *dla, const float *x, const float *q, int rows, int H) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= (long long)rows * H) return;
	float g = dla[i / H];
	if (g != 0) dx[i] += 2 * g * q[i % H] * x[i];
}

// nvib_alpha_quad_dq: dq[j] += sum over rows r with g_r != 0 of g_r x_rj^2,
// rows in order; one thread per column.
KERNEL void nvib_alpha_quad_dq(float *dq, const float *dla, const float *x, int rows, int H) {
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= H) return;
	float s = 0;
	for (int r = 0; r < rows; r++) {
		float g = dla[r];
		float v = x[(long long)r * H + j];
		if (g != 0) s += g * v * v;
	}
	dq[j] += s;
}

// nvib_clip_fwd: the posterior of nvib.Layer.Forward, one block per
// component row r of [B, N] (component 0 the prior, i >= 1 the token row
// (b, i-1) of mu_tok, lv_tok [B, S, P] and la_tok [B, S]): mu, lv [B, N, P]
// and alpha [B, N] with nvib's clipPosterior (when clipped: mu by
// nvib_clip_mu, logvar clamped into [lv_floor, lv_cap], alpha = exp(la)
// clamped into [a_min, a_max] in double; unclipped: alpha = exp(la)).
// norm[r] is the pre-projection distance of a projected row, else 0.
// status[r] has bit 0 for a non-finite mu, bit 1 for a non-finite logvar,
// bit 2 for an alpha that is non-finite or, where released[r] != 0 (every
// row when all_released), not > 0 (nvib's checkFinite).
KERNEL void nvib_clip_fwd(float *mu, float *lv, float *alpha, double *norm, int *status,
                          const float *mu_tok, const float *lv_tok, const float *la_tok, const float *released, int all_released,
                          int N, int P, float prior_mu, float prior_lv, float prior_la,
                          int enabled, int clip_prior, int has_center, float center, double c_mu, double radius,
                          float lv_floor, float lv_cap, double a_min, double a_max) {
	__shared__ double buf[2];
	__shared__ int ibuf[1];
	__shared__ float fbuf[256];
	int r = blockIdx.x, b = r / N, i = r % N, S = N - 1;
	int clip = enabled && (clip_prior || i != 0);
	float *m = mu + (long long)r * P, *l = lv + (long long)r * P;
	long long src = ((long long)b * S + i - 1) * P;
	for (int j = threadIdx.x; j < P; j += blockDim.x) {
		m[j] = i ? mu_tok[src + j] : prior_mu;
		float v = i ? lv_tok[src + j] : prior_lv;
		if (clip && v < lv_floor) v = lv_floor;
		else if (clip && v > lv_cap) v = lv_cap;
		l[j] = v;
	}
	__syncthreads();
	double n = 0;
	if (clip) n = nvib_clip_mu(m, P, has_center, center, radius, buf, ibuf);
	int bad_mu = nvib_row_bad(m, P, fbuf), bad_lv = nvib_row_bad(l, P, fbuf);
	if (threadIdx.x == 0) {
		double a = exp((double)(i ? la_tok[(long long)b * S + i - 1] : prior_la));
		if (clip && a < a_min) a = a_min;
		else if (clip && a > a_max) a = a_max;
		float af = (float)a;
		alpha[r] = af;
		norm[r] = n;
		int bad_a = isnan(af) || isinf(af) || (!(af > 0) && (all_released || released[r] != 0));
		status[r] = (bad_mu ? 1 : 0) | (bad_lv ? 2 : 0) | (bad_a ? 4 : 0);
	}
}

// nvib_clip_bwd: nvib.Layer.Backward's clipping step for the token rows
// (one block per row rt = (b, t) of [B, S]; component r = (b, t+1)): the
// gradients w.r.t. the clipped dmu, dlv [B, N, P] and dalpha [B, N] mapped
// to those w.r.t. the token outputs dmu_tok, dlv_tok [B, S, P] and the
// pre-exp ln alpha dla_tok [B, S]: the ball projection's Jacobian, zero
// where logvar or alpha was clamped (recomputed from lv_tok, la_tok),
// d alpha/d ln alpha = alpha.
KERNEL void nvib_clip_bwd(float *dmu_tok, float *dlv_tok, float *dla_tok,
                          const float *dmu, const float *dlv, const float *dalpha,
                          const float *mu_out, const float *alpha_out, const double *norm, const float *lv_tok, const float *la_tok,
                          int S, int P, int enabled, int has_center, float center, double radius,
                          float lv_floor, float lv_cap, double a_min, double a_max) {
	__shared__ double buf[256];
	long long rt = blockIdx.x;
	long long r = rt / S * (S + 1) + rt % S + 1;
	nvib_clip_mu_bwd(dmu_tok + rt * P, dmu + r * P, mu_out + r * P, P, has_center, center, radius, norm[r], buf);
	for (int j = threadIdx.x; j < P; j += blockDim.x) {
		float v = lv_tok[rt * P + j];
		int pass = !enabled || !(v < lv_floor || v > lv_cap);
		dlv_tok[rt * P + j] = pass ? dlv[r * P + j] : 0;
	}
	if (threadIdx.x == 0) {
		double a = exp((double)la_tok[rt]);
		int pass = !enabled || !(a < a_min || a > a_max);
		dla_tok[rt] = pass ? dalpha[r] * alpha_out[r] : 0;
	}
}

// nvib_first_bad: for each of the 3 status bits, the first row of status
// [rows] that has it, or -1 (out [3]); one block.
KERNEL void nvib_first_bad(int *out, const int *status, int rows) {
	__shared__ int first[3][256];
	int t = threadIdx.x;
	for (int k = 0; k < 3; k++) first[k][t] = -1;
	for (int r = t; r < rows; r += blockDim.x)
		for (int k = 0; k < 3; k++)
			if (((status[r] >> k) & 1) && first[k][t] < 0) first[k][t] = r;
	__syncthreads();
	for (int w = 128; w > 0; w >>= 1) {
		if (t < w)
			for (int k = 0; k < 3; k++) {
				int o = first[k][t + w];
				if (o >= 0 && (first[k][t] < 0 || o < first[k][t])) first[k][t] = o;
			}
		__syncthreads();
	}
	if (t < 3) out[t] = first[t][0];
}

// nvib_gauss_fwd: nvib.GaussianRelease.Forward's posterior, one block per
// component row r of [B, N] (N = L+1): logvar lvv, alpha 1 everywhere; mu
// the ball-clipped input row u [B, S, P] at a real token (i = 1..S, mask
// != 0 or no mask: nvib_clip_mu around 0), else 0. norm[r] as
// nvib_clip_fwd; status[r] = 1 for a non-finite clipped mean.
KERNEL void nvib_gauss_fwd(float *mu, float *lv, float *alpha, double *norm, int *status,
                           const float *u, const float *mask, int use_mask, int S, int N, int P,
                           float lvv, double c_mu, double radius) {
	__shared__ double buf[2];
	__shared__ int ibuf[1];
	__shared__ float fbuf[256];
	int r = blockIdx.x, b = r / N, i = r % N;
	float *m = mu + (long long)r * P;
	int real = i >= 1 && i <= S && (!use_mask || mask[(long long)b * S + i - 1] != 0);
	long long src = ((long long)b * S + i - 1) * P;
	for (int j = threadIdx.x; j < P; j += blockDim.x) {
		m[j] = real ? u[src + j] : 0;
		lv[(long long)r * P + j] = lvv;
	}
	__syncthreads();
	double n = 0;
	if (real) n = nvib_clip_mu(m, P, 0, 0, radius, buf, ibuf);
	int bad = nvib_row_bad(m, P, fbuf);
	if (threadIdx.x == 0) {
		alpha[r] = 1;
		norm[r] = n;
		status[r] = bad ? 1 : 0;
	}
}

// nvib_gauss_bwd: nvib.GaussianRelease.Backward before the projection, one
// block per token row rt = (b, t) of [B, S]: du = the projection's Jacobian
// applied to dmu's row (b, t+1) at a real token, else 0.
KERNEL void nvib_gauss_bwd(float *du, const float *dmu, const float *mu, const double *norm, const float *mask, int use_mask,
                           int S, int N, int P, double radius) {
	__shared__ double buf[256];
	long long rt = blockIdx.x;
	long long r = rt / S * N + rt % S + 1;
	if (use_mask && mask[rt] == 0) {
		for (int j = threadIdx.x; j < P; j += blockDim.x) du[rt * P + j] = 0;
		return;
	}
	nvib_clip_mu_bwd(du + rt * P, dmu + r * P, mu + r * P, P, 0, 0, radius, norm[r], buf);
}
