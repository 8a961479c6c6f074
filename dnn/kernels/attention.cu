// Multi-head attention's row kernels (dnn/attention.go; nn.Attention): the
// softmax over keys with the additive key bias and the dropout of the
// probabilities, its backward, and the key-bias gradient. The products are
// cuBLAS GEMMs.

// block_sum256 is defined in layernorm.cu, which sorts after this file.
DEVICE float block_sum256(float v, float *buf);

// attn_block_max256: the maximum of v over the block's 256 threads (every
// thread gets it); -Inf when every v is -Inf. buf is the block's shared
// scratch of 256 floats.
DEVICE float attn_block_max256(float v, float *buf) {
	int t = threadIdx.x;
	buf[t] = v;
	__syncthreads();
	for (int w = 128; w > 0; w >>= 1) {
		if (t < w) buf[t] = fmaxf(buf[t], buf[t + w]);
		__syncthreads();
	}
	float m = buf[0];
	__syncthreads();
	return m;
}

// attn_softmax_fwd: one block per row of the scores s [rows, Tk] (row =
// (b H + h) Tq + t, so that b = row / HTq with HTq = H Tq): in place,
// s = softmax(s + bias[b]) (bias [B, Tk] or NULL; -Inf masks a key:
// probability 0), the row maximum subtracted first. A row with no finite
// score (every key masked) becomes NaN: nn.Attention panics there, a device
// cannot, so the loss turns NaN. With a keep mask (NULL: no dropout),
// sd = s * dscale where mask != 0, else 0 (the probabilities that multiply
// V); sd is unused without it.
KERNEL void attn_softmax_fwd(float *s, float *sd, const float *bias, const unsigned char *mask, float dscale, int Tk, int HTq) {
	__shared__ float buf[256];
	long long row = blockIdx.x;
	float *r = s + row * Tk;
	const float *br = 0;
	if (bias) br = bias + (row / HTq) * Tk;
	float mx = __uint_as_float(0xff800000u); // -Inf
	for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
		float v = r[j];
		if (br) {
			v += br[j];
			r[j] = v;
		}
		mx = fmaxf(mx, v);
	}
	mx = attn_block_max256(mx, buf);
	if (mx == __uint_as_float(0xff800000u)) {
		for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
			r[j] = __uint_as_float(0x7fc00000u); // NaN
			if (mask) sd[row * Tk + j] = r[j];
		}
		return;
	}
	float sum = 0;
	for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
		float e = expf(r[j] - mx);
		r[j] = e;
		sum += e;
	}
	float inv = 1.0f / block_sum256(sum, buf);
	for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
		float p = r[j] * inv;
		r[j] = p;
		if (mask) sd[row * Tk + j] = mask[row * Tk + j] ? p * dscale : 0.0f;
	}
}

// attn_softmax_bwd: one block per row of dp [rows, Tk] (dL/d(probabilities
// after dropout)), in place: g = dp * dscale where mask != 0 else 0 (g = dp
// without a mask), then ds = p (g - sum_j p g), the gradient of the scores.
KERNEL void attn_softmax_bwd(float *dp, const float *p, const unsigned char *mask, float dscale, int Tk) {
	__shared__ float buf[256];
	long long off = (long long)blockIdx.x * Tk;
	float dot = 0;
	for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
		float g = dp[off + j];
		if (mask) {
			g = mask[off + j] ? g * dscale : 0.0f;
			dp[off + j] = g;
		}
		dot += p[off + j] * g;
	}
	dot = block_sum256(dot, buf);
	for (int j = threadIdx.x; j < Tk; j += blockDim.x) dp[off + j] = p[off + j] * (dp[off + j] - dot);
}

// attn_bias_grad: db[b, j] = sum over heads h (outer) of the sum over
// queries t (inner) of ds[b, h, t, j], in nn.AttentionBackward's order (one
// thread per (b, j), deterministic); ds [B, H, Tq, Tk], db [B, Tk].
KERNEL void attn_bias_grad(float *db, const float *ds, int B, int H, int Tq, int Tk) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= (long long)B * Tk) return;
	long long b = i / Tk, j = i % Tk;
	float total = 0;
	for (int h = 0; h < H; h++) {
		const float *d = ds + ((b * H + h) * Tq) * Tk + j;
		float acc = 0;
		for (int t = 0; t < Tq; t++) acc += d[(long long)t * Tk];
		total += acc;
	}
	db[i] = total;
}

// attn_split_heads: the head-major copies of attention's operands, so that
// one strided-batched GEMM covers every (batch, head) pair: for each
// non-NULL pair (d, s), d[b, h, t, :] = s[b, t, h dh : (h+1) dh], s [B, T, H
// dh] (Hugging Face's layout), d [B, H, T, dh]; a with T = Ta, b and c with
// T = Tb (queries, then keys and values). One thread per element of the
// longer; exact copies.
KERNEL void attn_split_heads(float *da, const float *sa, float *db, const float *sb, float *dc, const float *sc, int B, int Ta, int Tb, int H, int dh) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	long long HD = (long long)H * dh;
	long long d = i % dh, h = (i / dh) % H, bt = i / HD; // i indexes s: (b t) H dh
	if (da && i < (long long)B * Ta * HD) {
		long long b = bt / Ta, t = bt % Ta;
		da[((b * H + h) * Ta + t) * dh + d] = sa[i];
	}
	if (i < (long long)B * Tb * HD) {
		long long b = bt / Tb, t = bt % Tb;
		long long o = ((b * H + h) * Tb + t) * dh + d;
		if (db) db[o] = sb[i];
		if (dc) dc[o] = sc[i];
	}
}

// attn_merge_heads: the inverse of attn_split_heads, for each non-NULL
// pair (d, s): d[b, t, h dh + j] = s[b, h, t, j].
KERNEL void attn_merge_heads(float *da, const float *sa, float *db, const float *sb, float *dc, const float *sc, int B, int Ta, int Tb, int H, int dh) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	long long HD = (long long)H * dh;
	long long d = i % dh, h = (i / dh) % H, bt = i / HD; // i indexes d: (b t) H dh
	if (da && i < (long long)B * Ta * HD) {
		long long b = bt / Ta, t = bt % Ta;
		da[i] = sa[((b * H + h) * Ta + t) * dh + d];
	}
	if (i < (long long)B * Tb * HD) {
		long long b = bt / Tb, t = bt % Tb;
		long long o = ((b * H + h) * Tb + t) * dh + d;
		if (db) db[i] = sb[o];
		if (dc) dc[i] = sc[o];
	}
}
