// BF16 GEMM inputs (--precision bf16; dnn/bf16.go): the FP32 operands of a
// GEMM rounded to bfloat16 before cuBLAS multiplies them with FP32
// accumulation. Names start with bf16_ (one module for every kernel).

// bf16_rne: the bfloat16 nearest to x, ties to even, as its 16 bits (the
// upper half of a float32's): x's upper half rounded on its lower half by
// integer arithmetic, so that the GPU and the CPU stand-in give the same
// bits. Subnormals round like normals (bfloat16 has float32's exponent
// field); values past the largest bfloat16 (0x7f7f, 3.3895e38) by half an
// ulp or more round to infinity, as IEEE round-to-nearest does (FP32's
// largest value included); infinities stay; a NaN stays a NaN (the quiet
// bit set, sign and upper payload kept: a truncated signalling NaN could
// otherwise become an infinity).
DEVICE unsigned short bf16_rne(float x) {
	unsigned int u = __float_as_uint(x);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
	return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// bf16_from_f32: out[i] = bf16_rne(in[i]) for the n elements of in.
KERNEL void bf16_from_f32(unsigned short *out, const float *in, long long n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = bf16_rne(in[i]);
}
