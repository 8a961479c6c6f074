// GELU (erf form) and tanh, element-wise (dnn/gelu.go; nn.GELU, nn.Tanh).

// gelu_cdf: Phi(x) = erfc(-x / sqrt 2) / 2, the standard normal CDF
// (erfc keeps the relative accuracy of the left tail).
DEVICE float gelu_cdf(float x) { return 0.5f * erfcf(-0.70710678118654752f * x); }

// gelu_pdf: phi(x) = exp(-x^2 / 2) / sqrt(2 pi), the standard normal density.
DEVICE float gelu_pdf(float x) { return 0.39894228040143268f * expf(-0.5f * x * x); }

// gelu_fwd: y = x Phi(x) (n elements).
KERNEL void gelu_fwd(float *y, const float *x, int n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float v = x[i];
	y[i] = v * gelu_cdf(v);
}

// gelu_fwd_grad: y = x Phi(x) and dydx = Phi(x) + x phi(x) (n elements).
KERNEL void gelu_fwd_grad(float *y, float *dydx, const float *x, int n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float v = x[i];
	float cdf = gelu_cdf(v);
	y[i] = v * cdf;
	dydx[i] = cdf + v * gelu_pdf(v);
}

// gelu_grad_mul: dx = dy dydx (n elements).
KERNEL void gelu_grad_mul(float *dx, const float *dy, const float *dydx, int n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) dx[i] = dy[i] * dydx[i];
}

// gelu_bwd: dx = dy (Phi(x) + x phi(x)) for the GELU input x (n elements).
KERNEL void gelu_bwd(float *dx, const float *x, const float *dy, int n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float v = x[i];
	dx[i] = dy[i] * (gelu_cdf(v) + v * gelu_pdf(v));
}

// tanh_fwd: y = tanh(x) (n elements), in double as nn.Tanh.
KERNEL void tanh_fwd(float *y, const float *x, int n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = (float)tanh((double)x[i]);
}

// tanh_bwd: dx = dy (1 - y^2) for the tanh output y (n elements).
KERNEL void tanh_bwd(float *dx, const float *y, const float *dy, int n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float v = y[i];
	dx[i] = dy[i] * (1.0f - v * v);
}
