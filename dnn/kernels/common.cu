// Element-wise and row/column kernels shared by the layers (dnn/ops.go,
// dnn/linear.go).

// bias_rows: y[r, j] = b[j] for every row r of y [rows, n].
KERNEL void bias_rows(float *y, const float *b, int rows, int n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < (long long)rows * n) y[i] = b[i % n];
}

// col_sum_acc: acc[j] += sum over rows r of x[r, j] (x [rows, n]); one
// thread per column, rows summed in order (deterministic). The column sums
// of few rows (at most colChunkRows, dnn/colsum.go); more go through the
// two stages below.
KERNEL void col_sum_acc(float *acc, const float *x, int rows, int n) {
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= n) return;
	float s = 0;
	for (int r = 0; r < rows; r++) s += x[(long long)r * n + j];
	acc[j] += s;
}

// col_sum_partial: the first stage of a deterministic column sum of x1
// (and x2, same shape, when not NULL) [rows, n]: block (bx, c) sums the
// rows [c chunk, min(rows, (c+1) chunk)) of 256 adjacent columns in order,
// one thread per column (coalesced reads), into p1[c, j] (p2[c, j]). The
// partition depends only on rows and chunk: the same bits on every run and
// every card.
KERNEL void col_sum_partial(float *p1, const float *x1, float *p2, const float *x2, int rows, int n, int chunk) {
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= n) return;
	long long c = blockIdx.y;
	int r0 = (int)(c * chunk), r1 = min(rows, r0 + chunk);
	float s = 0;
	for (int r = r0; r < r1; r++) s += x1[(long long)r * n + j];
	p1[c * n + j] = s;
	if (!x2) return;
	s = 0;
	for (int r = r0; r < r1; r++) s += x2[(long long)r * n + j];
	p2[c * n + j] = s;
}

// col_sum_finish: the second stage: acc1[j] += sum over chunks c (in
// order) of p1[c, j], and the same for acc2 and p2 when not NULL; one
// thread per column.
KERNEL void col_sum_finish(float *acc1, const float *p1, float *acc2, const float *p2, int chunks, int n) {
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= n) return;
	float s = 0;
	for (int c = 0; c < chunks; c++) s += p1[(long long)c * n + j];
	acc1[j] += s;
	if (!p2) return;
	s = 0;
	for (int c = 0; c < chunks; c++) s += p2[(long long)c * n + j];
	acc2[j] += s;
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
