// Element-wise and row/column kernels shared by the layers (dnn/ops.go,
// dnn/linear.go).

// bias_rows: y[r, j] = b[j] for every row r of y [rows, n].
KERNEL void bias_rows(float *y, const float *b, int rows, int n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < (long long)rows * n) y[i] = b[i % n];
}

// col_sum_acc: acc[j] += sum over rows r of x[r, j] (x [rows, n]); one
// thread per column, rows summed in order (deterministic).
KERNEL void col_sum_acc(float *acc, const float *x, int rows, int n) {
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= n) return;
	float s = 0;
	for (int r = 0; r < rows; r++) s += x[(long long)r * n + j];
	acc[j] += s;
}

// add: z = x + y (n elements).
KERNEL void add(float *z, const float *x, const float *y, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) z[i] = x[i] + y[i];
}

// add_inplace: x += y (n elements).
KERNEL void add_inplace(float *x, const float *y, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] += y[i];
}

// scale_inplace: x *= s (n elements).
KERNEL void scale_inplace(float *x, float s, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= s;
}
