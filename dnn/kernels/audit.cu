// The all-pairs audit on the device (dnn/audit.go): paper Eq. rdp, principled
// mode, for every unordered pair a < b of M posteriors in both directions, in
// double, with the arithmetic of the CPU engine (audit/engine.go,
// privacy/bound.go):
//
//   D(q||q') = sum over components i kept in both of
//                [ lnG(lam a_i - (lam-1) a'_i)/(lam-1) + lnG(a'_i) - lam/(lam-1) lnG(a_i) ]
//              + Gaussian: lam/2 sum_j d_j^2/r_j - 1/(2(lam-1)) sum_j ln r_j
//                          + lam/(lam-1) ls(q) - ls(q')    (paper direction; standard:
//                          q and q' exchanged in the Gaussian part)
//            - [ lnG(lam A - (lam-1) A')/(lam-1) + lnG(A') - lam/(lam-1) lnG(A) ]
//   r_j = (1-lam) s2'_j + lam s2_j,  ls = 0.5 sum_j logvar_j,  A = sum of the kept alphas,
//
// +Inf where the bound is undefined: a radicand r_j <= 0, an alpha <= 0, a
// Gamma argument <= 0, or a value that is not finite (the CPU engine's
// finish). The products of the radicands are carried as a mantissa in [1, 2)
// and a binary exponent (one logarithm per component, order and direction),
// a radicand outside [2^-1000, 2^1000) through its own logarithm.
//
// The validity decisions (r_j > 0, the Gamma arguments > 0) must be the
// CPU's: their products and sums are rounded on their own (nvib_dmul,
// nvib_dadd: __dmul_rn and __dadd_rn on the GPU, where the compiler would
// otherwise fuse them into an FMA).

#ifdef NVDP_EMU
static inline long long audit_bits(double x) {
	long long b;
	memcpy(&b, &x, 8);
	return b;
}
static inline double audit_from_bits(long long b) {
	double x;
	memcpy(&x, &b, 8);
	return x;
}
#else
#define audit_bits(x) __double_as_longlong(x)
#define audit_from_bits(b) __longlong_as_double(b)
#endif

// One IEEE double operation each, never contracted into a fused
// multiply-add: nvib_dmul and nvib_dadd of nvib_base.cu (later in the
// module), declared here.
DEVICE double nvib_dmul(double a, double b);
DEVICE double nvib_dadd(double a, double b);

// audit_inf: +Inf as a double.
DEVICE double audit_inf(void) { return (double)__uint_as_float(0x7f800000u); }

#define AUDIT_MANT 0x000fffffffffffffLL
#define AUDIT_ONE 0x3ff0000000000000LL
#define AUDIT_LN2 0.69314718055994530942

// audit_prep_dims: the transposed copies of the examples' dimensions, for
// reads coalesced over the second example b: muT[r M + x] = mu[x, r] (float)
// and s2T[r M + x] = exp(logvar[x, r]) (double), r = i P + j; one thread per
// value of [M, N P].
KERNEL void audit_prep_dims(float *muT, double *s2T, const float *mu, const float *lv, int M, int NP) {
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)M * NP) return;
	long long x = k / NP, r = k % NP;
	muT[r * M + x] = mu[k];
	s2T[r * M + x] = exp((double)lv[k]);
}

// audit_prep_comps: per component c = x N + i (one thread each), transposed
// to [N, M]: alpha (double), lnGamma(alpha), ls = 0.5 sum_j logvar (summed
// in dimension order, as the CPU engine) and whether the component is kept
// (use_mask and a mask: mask[c] == 1; else always).
KERNEL void audit_prep_comps(double *alphaT, double *lgAT, double *lsT, int *keepT, const float *alpha, const float *lv,
                             const int *mask, int use_mask, int M, int N, int P) {
	long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= (long long)M * N) return;
	long long x = c / N, i = c % N;
	double s = 0;
	for (int j = 0; j < P; j++) s += (double)lv[c * P + j];
	double a = (double)alpha[c];
	alphaT[i * M + x] = a;
	lgAT[i * M + x] = lgamma(a);
	lsT[i * M + x] = 0.5 * s;
	keepT[i * M + x] = !use_mask || mask[c] == 1;
}

// audit_prep_totals: per example x (one thread each) the total A of its kept
// alphas, in component order, and lnGamma(A).
KERNEL void audit_prep_totals(double *tot, double *lgT, const double *alphaT, const int *keepT, int M, int N) {
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	if (x >= M) return;
	double t = 0;
	for (int i = 0; i < N; i++)
		if (keepT[(long long)i * M + x]) t += alphaT[(long long)i * M + x];
	tot[x] = t;
	lgT[x] = lgamma(t);
}

// audit_radicand adds the radicand r of one dimension to the sums of a
// direction: q += d2 / r and the product of the radicands (m 2^e, m in
// [1, 2); lsafe: the logarithms of those outside [2^-1000, 2^1000)); r <= 0
// (or NaN) marks the direction undefined.
DEVICE void audit_radicand(double r, double d2, double *q, double *m, long long *e, double *lsafe, int *bad) {
	if (!(r > 0)) {
		*bad = 1;
		return;
	}
	*q += d2 / r;
	if (r >= 0x1p-1000 && r < 0x1p1000) {
		long long b = audit_bits(*m * r);
		*e += (b >> 52) - 1023;
		*m = audit_from_bits((b & AUDIT_MANT) | AUDIT_ONE);
	} else {
		*lsafe += log(r);
	}
}

// audit_finish is the CPU engine's finish: the Dirichlet total term of the
// direction (q, q') with totals A = aq, A' = aqp subtracted from the
// component sums s; +Inf when undefined or not finite.
DEVICE double audit_finish(double s, int bad, double lam, double aq, double aqp, double lgq, double lgqp) {
	double lm1 = lam - 1;
	double g = nvib_dadd(nvib_dmul(lam, aq), -nvib_dmul(lm1, aqp));
	if (bad || !(aq > 0) || !(aqp > 0) || !(g > 0) || isinf(s)) return audit_inf();
	s -= lgamma(g) / lm1 + lgqp - lam / lm1 * lgq;
	if (isnan(s) || isinf(s)) return audit_inf();
	return s;
}

// audit_pairs: one thread per unordered pair (a, b), a = a0 + blockIdx.y (a
// row of the block), b = a0 + 1 + blockIdx.x * blockDim.x + threadIdx.x > a, and
// Renyi order orders[k], k = blockIdx.z: out[((a - a0) M + b) 2K + 2k] =
// D(a||b), + 1: D(b||a) (+Inf where undefined). standard: the Gaussian part in
// the bound's own direction (DirectionStandard), else as printed (paper).
// The sums run in component and dimension order in one thread: the values do
// not depend on the launch.
KERNEL void audit_pairs(double *out, const float *muT, const double *s2T, const double *alphaT, const double *lgAT,
                        const double *lsT, const int *keepT, const double *tot, const double *lgT, const double *orders,
                        int M, int N, int P, int K, int a0, int standard) {
	int a = a0 + blockIdx.y;
	int b = a0 + 1 + blockIdx.x * blockDim.x + threadIdx.x;
	int k = blockIdx.z;
	if (b <= a || b >= M) return;
	double lam = orders[k];
	double oml = 1 - lam, lm1 = lam - 1;
	double inv = 1 / lm1, c = lam / lm1, half = lam / 2;
	double v1 = 0, v2 = 0;
	int bad1 = 0, bad2 = 0; // D(a||b), D(b||a) undefined
	for (int i = 0; i < N && !(bad1 && bad2); i++) { // both +Inf: nothing more to add
		long long ca = (long long)i * M + a, cb = (long long)i * M + b;
		if (!keepT[ca] || !keepT[cb]) continue;
		double al = alphaT[ca], bl = alphaT[cb];
		double dab = 0, dba = 0;
		if (al > 0 && bl > 0) {
			double g1 = nvib_dadd(nvib_dmul(lam, al), -nvib_dmul(lm1, bl));
			double g2 = nvib_dadd(nvib_dmul(lam, bl), -nvib_dmul(lm1, al));
			if (g1 > 0) dab = lgamma(g1) * inv;
			else bad1 = 1;
			if (g2 > 0) dba = lgamma(g2) * inv;
			else bad2 = 1;
		} else {
			bad1 = bad2 = 1;
		}
		double tab = lgAT[cb] - c * lgAT[ca];
		double tba = lgAT[ca] - c * lgAT[cb];
		if (standard) {
			tab += c * lsT[cb] - lsT[ca];
			tba += c * lsT[ca] - lsT[cb];
		} else {
			tab += c * lsT[ca] - lsT[cb];
			tba += c * lsT[cb] - lsT[ca];
		}
		double q1 = 0, q2 = 0, m1 = 1, m2 = 1, l1 = 0, l2 = 0;
		long long e1 = 0, e2 = 0;
		int rb1 = 0, rb2 = 0;
		const float *mu = muT + (long long)i * P * M;
		const double *s2 = s2T + (long long)i * P * M;
		for (int j = 0; j < P; j++) {
			long long r = (long long)j * M;
			double x = s2[r + a], y = s2[r + b];
			double d = (double)mu[r + a] - (double)mu[r + b];
			double d2 = d * d;
			// r1 = (1-lam) s2_b + lam s2_a (q = a), r2 = (1-lam) s2_a + lam s2_b (q = b)
			double r1 = nvib_dadd(nvib_dmul(oml, y), nvib_dmul(lam, x));
			double r2 = nvib_dadd(nvib_dmul(oml, x), nvib_dmul(lam, y));
			audit_radicand(r1, d2, &q1, &m1, &e1, &l1, &rb1);
			audit_radicand(r2, d2, &q2, &m2, &e2, &l2, &rb2);
		}
		// r1's sums are the Gaussian part of D(a||b) in the paper
		// direction, of D(b||a) in the standard one (and r2's the other).
		if (standard) {
			bad1 |= rb2;
			bad2 |= rb1;
		} else {
			bad1 |= rb1;
			bad2 |= rb2;
		}
		double gab = half * q1 - 0.5 * inv * (log(m1) + (double)e1 * AUDIT_LN2 + l1);
		double gba = half * q2 - 0.5 * inv * (log(m2) + (double)e2 * AUDIT_LN2 + l2);
		if (standard) {
			double t = gab;
			gab = gba;
			gba = t;
		}
		v1 += dab + gab + tab;
		v2 += dba + gba + tba;
	}
	long long o = ((long long)blockIdx.y * M + b) * 2 * K + 2 * k;
	out[o] = audit_finish(v1, bad1, lam, tot[a], tot[b], lgT[a], lgT[b]);
	out[o + 1] = audit_finish(v2, bad2, lam, tot[b], tot[a], lgT[b], lgT[a]);
}
