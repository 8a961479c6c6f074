// Helpers of the nvib_* kernels (this file sorts first among them): IEEE
// double operations that the compiler may not fuse, +Inf and NaN, and block
// reductions in double.

// nvib_dmul, nvib_dadd, nvib_dsub: one IEEE double operation each, rounded
// to nearest and never contracted with a neighbour into a fused
// multiply-add (CUDA contracts a*b + c by default; a volatile store forces
// the rounding in C). The mean clipping computes with them alone, so that
// its result is nvib.ClipMu's bit for bit.
DEVICE double nvib_dmul(double a, double b) {
#ifdef NVDP_EMU
	volatile double r = a * b;
	return r;
#else
	return __dmul_rn(a, b);
#endif
}

DEVICE double nvib_dadd(double a, double b) {
#ifdef NVDP_EMU
	volatile double r = a + b;
	return r;
#else
	return __dadd_rn(a, b);
#endif
}

DEVICE double nvib_dsub(double a, double b) {
#ifdef NVDP_EMU
	volatile double r = a - b;
	return r;
#else
	return __dsub_rn(a, b);
#endif
}

// nvib_inf: +Inf as a double.
DEVICE double nvib_inf(void) { return (double)__uint_as_float(0x7f800000u); }

// nvib_nan: a quiet NaN as a double.
DEVICE double nvib_nan(void) { return (double)__uint_as_float(0x7fc00000u); }

// nvib_block_sum_d: the sum of v over the block's 256 threads (every thread
// gets it), in double; buf is the block's shared scratch of 256 doubles.
DEVICE double nvib_block_sum_d(double v, double *buf) {
	int t = threadIdx.x;
	buf[t] = v;
	__syncthreads();
	for (int w = 128; w > 0; w >>= 1) {
		if (t < w) buf[t] += buf[t + w];
		__syncthreads();
	}
	double s = buf[0];
	__syncthreads();
	return s;
}

// nvib_block_max_d: the maximum of v over the block's 256 threads (every
// thread gets it); buf as nvib_block_sum_d.
DEVICE double nvib_block_max_d(double v, double *buf) {
	int t = threadIdx.x;
	buf[t] = v;
	__syncthreads();
	for (int w = 128; w > 0; w >>= 1) {
		if (t < w && buf[t + w] > buf[t]) buf[t] = buf[t + w];
		__syncthreads();
	}
	double s = buf[0];
	__syncthreads();
	return s;
}
