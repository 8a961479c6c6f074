// Dropout (dnn/dropout.go; nn.Dropout) and the counter-based generator of
// the device's training draws, Philox4x32-10 (dnn/philox.go; Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11; Random123's
// philox4x32_R with R = 10). A file that sorts before this one and needs
// the helpers declares them first, e.g.
//   DEVICE unsigned long long philox_u64(unsigned k0, unsigned k1, unsigned long long m);

// philox4x32_10: the Philox4x32 bijection of 10 rounds applied in place to
// the counter c[4] under the key (k0, k1): per round, with the multipliers
// M0 = 0xD2511F53, M1 = 0xCD9E8D57, c = (hi(M1 c2) ^ c1 ^ k0, lo(M1 c2),
// hi(M0 c0) ^ c3 ^ k1, lo(M0 c0)); the key is bumped by the Weyl constants
// (0x9E3779B9, 0xBB67AE85) before every round but the first.
DEVICE void philox4x32_10(unsigned *c, unsigned k0, unsigned k1) {
	for (int r = 0; r < 10; r++) {
		if (r > 0) {
			k0 += 0x9E3779B9u;
			k1 += 0xBB67AE85u;
		}
		unsigned hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
		unsigned hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
		unsigned n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
		c[0] = n0;
		c[1] = lo1;
		c[2] = n2;
		c[3] = lo0;
	}
}

// philox_u64: 64-bit draw m (0-based) of the stream of key (k0, k1), as
// dnn.Philox.Uint64 on the host: the block of counter (m >> 1 as two 32-bit
// words, low first, then 0, 0) holds draws 2n (words 0, 1) and 2n + 1
// (words 2, 3), the first word of each the low half.
DEVICE unsigned long long philox_u64(unsigned k0, unsigned k1, unsigned long long m) {
	unsigned c[4];
	c[0] = (unsigned)(m >> 1);
	c[1] = (unsigned)(m >> 33);
	c[2] = 0;
	c[3] = 0;
	philox4x32_10(c, k0, k1);
	int h = (int)(m & 1) * 2;
	return (unsigned long long)c[h] | ((unsigned long long)c[h + 1] << 32);
}

// philox_blocks: out[4i..4i+3] = Philox4x32-10 of the counter in[6i..6i+3]
// under the key in[6i+4], in[6i+5], for i < n (the known-answer test of
// dnn/philox_test.go).
KERNEL void philox_blocks(unsigned *out, const unsigned *in, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	unsigned c[4];
	for (int j = 0; j < 4; j++) c[j] = in[6 * i + j];
	philox4x32_10(c, in[6 * i + 4], in[6 * i + 5]);
	for (int j = 0; j < 4; j++) out[4 * i + j] = c[j];
}

// philox_draws: out[2i], out[2i+1] = low and high words of draw pos + i of
// the stream (k0, k1), for i < n (dnn/philox_test.go).
KERNEL void philox_draws(unsigned *out, unsigned k0, unsigned k1, long long pos, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	unsigned long long w = philox_u64(k0, k1, (unsigned long long)pos + (unsigned long long)i);
	out[2 * i] = (unsigned)w;
	out[2 * i + 1] = (unsigned)(w >> 32);
}

// dropout_philox: nn.Dropout.Apply's decisions with draw pos + d of the
// stream (k0, k1) in place of the d-th rng.Uint64: element i = 4d + c is
// kept when the c-th 16-bit chunk (from the low end) of that draw is >= th
// (round(P 65536)); y[i] = x[i] scale if kept, else 0; mask[i] = kept. One
// thread per draw (4 elements), n elements. y may be x.
KERNEL void dropout_philox(float *y, unsigned char *mask, const float *x, int n, unsigned th, float scale, unsigned k0, unsigned k1, long long pos) {
	long long d = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	long long i0 = 4 * d;
	if (i0 >= n) return;
	unsigned long long w = philox_u64(k0, k1, (unsigned long long)pos + (unsigned long long)d);
	for (int c = 0; c < 4 && i0 + c < n; c++) {
		long long i = i0 + c;
		unsigned chunk = (unsigned)(w >> (16 * c)) & 0xffffu;
		if (chunk >= th) {
			mask[i] = 1;
			y[i] = x[i] * scale;
		} else {
			mask[i] = 0;
			y[i] = 0;
		}
	}
}

// dropout_mask_f32: the keep mask of nn.AttentionDropout's decisions with
// draw pos + i in place of the i-th rng.Float32 (bits 32..55 of the draw
// over 2^24, exact in float32): mask[i] = (u >= p), n elements.
KERNEL void dropout_mask_f32(unsigned char *mask, int n, float p, unsigned k0, unsigned k1, long long pos) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	unsigned long long w = philox_u64(k0, k1, (unsigned long long)pos + (unsigned long long)i);
	float u = (float)((unsigned)(w >> 32) & 0xffffffu) / 16777216.0f;
	mask[i] = u >= p ? 1 : 0;
}

// dropout_apply_mask: y[i] = x[i] scale where mask[i] != 0, else 0 (n
// elements): dropout with a given mask (Dropout.ApplyMask), its backward
// and the rebuilding of a dropped tensor. y may be x.
KERNEL void dropout_apply_mask(float *y, const unsigned char *mask, const float *x, float scale, int n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	y[i] = mask[i] ? x[i] * scale : 0.0f;
}
