package dnn

import "github.com/nvdp-project/nvdp/cuda"

// SetColChunkRows sets the rows per chunk of the column sums' first stage
// and returns the function that restores it (tests only).
func SetColChunkRows(n int) (restore func()) {
	old := colChunkRows
	colChunkRows = n
	return func() { colChunkRows = old }
}

// ColSumAcc is colSumAcc on tensors: acc += the column sums of x [rows, n]
// (and acc2 += those of x2 when x2 is not nil).
func (e *Engine) ColSumAcc(acc, x, acc2, x2 *Tensor) {
	var a2, b2 cuda.Buffer
	if x2 != nil {
		a2, b2 = acc2.Buf, x2.Buf
	}
	e.colSumAcc(acc.Buf, x.Buf, a2, b2, x.Rows(), x.Dim(-1))
}
