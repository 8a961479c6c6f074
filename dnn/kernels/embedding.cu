// Embedding lookups and their gradient (dnn/embedding.go; nn.Embedding, the
// encoders' embeddings).

// embedding_fwd: y[i, :] = w[ids[i], :] for i < n (y [n, D], w [V, D]); one
// thread per element. The ids were checked on the host.
KERNEL void embedding_fwd(float *y, const float *w, const int *ids, int n, int D) {
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)n * D) return;
	long long i = k / D, j = k % D;
	y[k] = w[(long long)ids[i] * D + j];
}

// embedding_sum3_fwd: y[i, :] = (w[ids[i], :] + p[pos[i], :]) + t[typ[i], :]
// for i < n, in that order (the encoders' word + position + token-type sum,
// as nn's gather then two AddInPlace); one thread per element.
KERNEL void embedding_sum3_fwd(float *y, const float *w, const float *p, const float *t, const int *ids, const int *pos, const int *typ, int n, int D) {
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)n * D) return;
	long long i = k / D, j = k % D;
	float v = w[(long long)ids[i] * D + j] + p[(long long)pos[i] * D + j];
	y[k] = v + t[(long long)typ[i] * D + j];
}

// embedding_bwd: the scatter-add of nn.Embedding.Backward without atomics.
// rows [nr] are the distinct ids that receive a gradient, order the
// positions i of dy [n, D] grouped by id (those of rows[r] are
// order[start[r] .. start[r+1]), increasing). Block (r, y) adds, one thread
// per column j < D of its slice of 256 columns, dy[order[k], j] for k in
// that range in turn to gw[rows[r], j] (gw [V, D]): the sums of nn's loop
// over i in the same order, so the result is deterministic.
KERNEL void embedding_bwd(float *gw, const float *dy, const int *rows, const int *start, const int *order, int D) {
	int r = blockIdx.x;
	int j = blockIdx.y * blockDim.x + threadIdx.x;
	if (j >= D) return;
	float *g = gw + (long long)rows[r] * D + j;
	float acc = *g;
	for (int k = start[r]; k < start[r + 1]; k++) acc += dy[(long long)order[k] * D + j];
	*g = acc;
}
