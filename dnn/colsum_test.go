package dnn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/nn"
)

// colSumRef is the column sum of colSumAcc in its order, in float32: acc
// += the sums of x [rows, n] over chunks of chunk rows (the chunks' sums
// added in order), or over all rows in order when rows <= chunk.
func colSumRef(acc, x []float32, rows, n, chunk int) {
	for j := range n {
		var s float32
		if rows <= chunk {
			for r := range rows {
				s += x[r*n+j]
			}
		} else {
			for r0 := 0; r0 < rows; r0 += chunk {
				var p float32
				for r := r0; r < min(rows, r0+chunk); r++ {
					p += x[r*n+j]
				}
				s += p
			}
		}
		acc[j] += s
	}
}

// TestColSumAcc: the bias and LayerNorm gradients' column sums, one stage
// (rows <= the chunk) and two (more rows, several blocks of 256 columns,
// a last chunk shorter than the others), alone and paired, equal bit for
// bit a float32 sum in the documented order (deterministic: the same
// partition on every run and card), run twice, and agree with the float64
// sum to rounding.
func TestColSumAcc(t *testing.T) {
	onDevice(t, func(e *dnn.Engine) {
		rng := rand.New(rand.NewPCG(8, 8))
		for _, c := range []struct {
			rows, n, chunk int
			pair           bool
		}{
			{1, 7, 32, false},
			{32, 300, 32, true},   // one stage: rows == chunk
			{33, 300, 32, true},   // two stages, a last chunk of 1 row
			{100, 513, 32, false}, // three blocks of columns
			{1000, 5, 7, true},
			{257, 1, 4, false},
		} {
			restore := dnn.SetColChunkRows(c.chunk)
			x, x2 := randn(rng, 1, c.rows, c.n), randn(rng, 1, c.rows, c.n)
			acc0, acc20 := randn(rng, 1, c.n), randn(rng, 1, c.n)
			want, want2 := nn.FromData(append([]float32(nil), acc0.Data...), c.n), nn.FromData(append([]float32(nil), acc20.Data...), c.n)
			for range 2 { // the kernels run twice: acc += 2 sums
				colSumRef(want.Data, x.Data, c.rows, c.n, c.chunk)
				colSumRef(want2.Data, x2.Data, c.rows, c.n, c.chunk)
			}
			acc, acc2, dx, dx2 := e.Upload(acc0), e.Upload(acc20), e.Upload(x), e.Upload(x2)
			for range 2 {
				if c.pair {
					e.ColSumAcc(acc, dx, acc2, dx2)
				} else {
					e.ColSumAcc(acc, dx, nil, nil)
				}
			}
			restore()
			got, got2 := e.Download(acc).Data, e.Download(acc2).Data
			if !c.pair {
				want2 = acc20
			}
			for j := range c.n {
				if math.Float32bits(got[j]) != math.Float32bits(want.Data[j]) || math.Float32bits(got2[j]) != math.Float32bits(want2.Data[j]) {
					t.Errorf("rows %d, n %d, chunk %d: column %d = %v, %v, want %v, %v (bit for bit)", c.rows, c.n, c.chunk, j, got[j], got2[j], want.Data[j], want2.Data[j])
					break
				}
			}
			for j := range c.n { // against the exact sum: 2 rows-term float32 sums
				s := float64(acc0.Data[j])
				for r := range c.rows {
					s += 2 * float64(x.Data[r*c.n+j])
				}
				if d := math.Abs(float64(got[j]) - s); d > 2*float64(c.rows+2)*0x1p-24*(math.Abs(s)+2*math.Sqrt(float64(c.rows))*4) {
					t.Errorf("rows %d, n %d: column %d = %v, exact %v", c.rows, c.n, j, got[j], s)
					break
				}
			}
		}
	})
}
