package dnn

import "github.com/nvdp-project/nvdp/cuda"

// colChunkRows is the number of rows each block of the first stage of a
// column sum adds (colSumAcc). A variable for the tests, which lower it to
// reach both stages with small tensors.
var colChunkRows = 32

// maxGridY is the largest grid dimension y of a launch (CUDA's limit).
const maxGridY = 65535

// colSumAcc adds the column sums of x [rows, n] into acc [n] (acc[j] +=
// sum_r x[r, j]), and with x2 non-nil those of x2 [rows, n] into acc2:
// the bias and LayerNorm gradients. Deterministic, without atomics: up to
// colChunkRows rows one thread per column sums them in order (col_sum_acc,
// one launch per pair); more rows are cut into chunks of colChunkRows
// (more when the chunks would pass the grid's 65,535), each chunk's columns
// summed by one thread of a block of 256 columns (col_sum_partial: n/256 x
// chunks blocks, e.g. 3 x 128 for bert-base's 768 columns of 4,096 rows,
// where one thread per column gave 3 blocks on a card of 132 SMs), then
// each column's chunks in order (col_sum_finish): two launches for both
// pairs, the same bits on every run. The order of summation differs from
// nn's loop over rows: the sums agree to rounding (docs/engine.md).
func (e *Engine) colSumAcc(acc, x cuda.Buffer, acc2, x2 cuda.Buffer, rows, n int) {
	if n == 0 {
		return
	}
	if rows <= colChunkRows {
		e.launch1D("col_sum_acc", n, acc, x, rows, n)
		if x2.Ptr != 0 {
			e.launch1D("col_sum_acc", n, acc2, x2, rows, n)
		}
		return
	}
	chunk := max(colChunkRows, (rows+maxGridY-1)/maxGridY)
	chunks := (rows + chunk - 1) / chunk
	p1 := e.arena.alloc(4 * chunks * n)
	var p2 cuda.Buffer
	if x2.Ptr != 0 {
		p2 = e.arena.alloc(4 * chunks * n)
	}
	e.launch("col_sum_partial", cuda.Dim3{X: (n + threads - 1) / threads, Y: chunks, Z: 1}, cuda.Threads(threads), 0, p1, x, p2, x2, rows, n, chunk)
	e.launch1D("col_sum_finish", n, acc, p1, acc2, p2, chunks, n)
}
