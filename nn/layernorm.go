package nn

import (
	"fmt"
	"math"
)

// LayerNorm normalises the last dimension, as torch.nn.LayerNorm does:
//
//	y = (x - mean) / sqrt(var + Eps) * Weight + Bias
//
// with the biased variance. The parameters are named prefix+".weight",
// initialised to 1, and prefix+".bias", initialised to 0; both are excluded
// from weight decay.
type LayerNorm struct {
	Weight, Bias *Param
	Eps          float32
}

// LayerNormCache holds the input and per-row statistics for Backward.
type LayerNormCache struct {
	X    *Tensor   // input [..., D]
	Mean []float32 // [Rows]
	Rstd []float32 // [Rows] 1/sqrt(var+eps)
}

// NewLayerNorm creates a LayerNorm over the last dimension of size dim.
func NewLayerNorm(prefix string, dim int, eps float32) *LayerNorm {
	l := &LayerNorm{Weight: NewParam(prefix+".weight", dim), Bias: NewParam(prefix+".bias", dim), Eps: eps}
	l.Weight.Fill(1)
	l.Weight.NoDecay, l.Bias.NoDecay = true, true
	return l
}

// InitHF resets the parameters to the Hugging Face initialisation: weight
// 1, bias 0.
func (l *LayerNorm) InitHF() {
	l.Weight.Fill(1)
	l.Bias.Value.Zero()
}

// Params returns the layer's parameters.
func (l *LayerNorm) Params() []*Param { return []*Param{l.Weight, l.Bias} }

// Forward normalises x [..., D] and returns y, of the same shape, and the
// cache. Row statistics are accumulated in float64.
func (l *LayerNorm) Forward(x *Tensor) (*Tensor, *LayerNormCache) {
	rows := x.Rows()
	c := &LayerNormCache{X: x, Mean: make([]float32, rows), Rstd: make([]float32, rows)}
	return l.forward(x, nil, c), c
}

// Infer is [LayerNorm.Forward] with y taken from ws ([Workspace.New]; nil: newly allocated) and
// no cache: the same operations in the same order.
func (l *LayerNorm) Infer(x *Tensor, ws *Workspace) *Tensor { return l.forward(x, ws, nil) }

// forward normalises x into a tensor from ws and, when c is not nil, keeps the row statistics
// in c.
func (l *LayerNorm) forward(x *Tensor, ws *Workspace, c *LayerNormCache) *Tensor {
	D := l.Weight.Value.Len()
	if x.Dim(-1) != D {
		panic(fmt.Sprintf("nn.LayerNorm(%s): input last dim %d, want %d", l.Weight.Name, x.Dim(-1), D))
	}
	rows := x.Rows()
	y := ws.NewUninit(x.Shape...) // every row written
	w, b := l.Weight.Value.Data, l.Bias.Value.Data
	eps := float64(l.Eps)
	Parallel(rows, 4*D, func(lo, hi int) {
		r := lo
		for ; r+4 <= hi; r += 4 {
			layerNormRows4(x.Data[r*D:(r+4)*D], y.Data[r*D:(r+4)*D], w, b, D, eps, c, r)
		}
		for ; r < hi; r++ {
			layerNormRow(x.Data[r*D:(r+1)*D], y.Data[r*D:(r+1)*D], w, b, eps, c, r)
		}
	})
	return y
}

// layerNormRow normalises the row xr into yr, keeping its statistics in c (when not nil) at row r:
// the sum of the values, then of their squared deviations from the mean, each in float64 in
// index order.
func layerNormRow(xr, yr, w, b []float32, eps float64, c *LayerNormCache, r int) {
	D := len(xr)
	var s float64
	for _, v := range xr {
		s += float64(v)
	}
	mean := s / float64(D)
	var ss float64
	for _, v := range xr {
		d := float64(v) - mean
		ss += d * d
	}
	layerNormOut(xr, yr, w, b, mean, ss, eps, c, r)
}

// layerNormRows4 is layerNormRow of the four rows of x [4*D] at once: each row's sums take the
// same operations in the same order, so the same bits, but the four chains of additions overlap
// where one row's chain waits on each addition's latency (TestLayerNormRows4, BenchmarkLayerNormInfer).
func layerNormRows4(x, y, w, b []float32, D int, eps float64, c *LayerNormCache, r int) {
	x0, x1, x2, x3 := x[:D], x[D:2*D:2*D], x[2*D:3*D:3*D], x[3*D:4*D:4*D]
	x1, x2, x3 = x1[:len(x0)], x2[:len(x0)], x3[:len(x0)] // no bounds checks in the loops
	var s0, s1, s2, s3 float64
	for i := range x0 {
		s0 += float64(x0[i])
		s1 += float64(x1[i])
		s2 += float64(x2[i])
		s3 += float64(x3[i])
	}
	n := float64(D)
	m0, m1, m2, m3 := s0/n, s1/n, s2/n, s3/n
	var q0, q1, q2, q3 float64
	for i := range x0 {
		d0 := float64(x0[i]) - m0
		d1 := float64(x1[i]) - m1
		d2 := float64(x2[i]) - m2
		d3 := float64(x3[i]) - m3
		q0 += d0 * d0
		q1 += d1 * d1
		q2 += d2 * d2
		q3 += d3 * d3
	}
	layerNormOut(x0, y[:D], w, b, m0, q0, eps, c, r)
	layerNormOut(x1, y[D:2*D], w, b, m1, q1, eps, c, r+1)
	layerNormOut(x2, y[2*D:3*D], w, b, m2, q2, eps, c, r+2)
	layerNormOut(x3, y[3*D:], w, b, m3, q3, eps, c, r+3)
}

// layerNormOut writes the normalised row xr into yr from its mean and its sum of squared
// deviations ss, and keeps the row's statistics in c (when not nil) at row r.
func layerNormOut(xr, yr, w, b []float32, mean, ss, eps float64, c *LayerNormCache, r int) {
	rstd := 1 / math.Sqrt(ss/float64(len(xr))+eps)
	m32, r32 := float32(mean), float32(rstd)
	yr, w, b = yr[:len(xr)], w[:len(xr)], b[:len(xr)] // no bounds checks in the loop
	for i, v := range xr {
		yr[i] = (v-m32)*r32*w[i] + b[i]
	}
	if c != nil {
		c.Mean[r], c.Rstd[r] = m32, r32
	}
}

// Backward accumulates the gradients of Weight and Bias and returns dx:
//
//	dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//
// with g = dy * weight and xhat = (x - mean) * rstd.
func (l *LayerNorm) Backward(c *LayerNormCache, dy *Tensor) *Tensor {
	MustSameShape("LayerNorm.Backward", c.X, dy)
	D := l.Weight.Value.Len()
	rows := c.X.Rows()
	dx := New(c.X.Shape...)
	w := l.Weight.Value.Data
	// Input gradients in parallel over fixed blocks of rows; parameter
	// gradients are reduced per block and the block partials summed in
	// order, so the result does not depend on the number of goroutines.
	const blk = 32
	nb := (rows + blk - 1) / blk
	part := make([]float32, nb*2*D)
	Parallel(nb, blk*8*D, func(blo, bhi int) {
		for bi := blo; bi < bhi; bi++ {
			dw := part[bi*2*D : bi*2*D+D]
			db := part[bi*2*D+D : (bi+1)*2*D]
			for r := bi * blk; r < min((bi+1)*blk, rows); r++ {
				xr := c.X.Data[r*D : (r+1)*D]
				gr := dy.Data[r*D : (r+1)*D]
				dr := dx.Data[r*D : (r+1)*D]
				m, rs := c.Mean[r], c.Rstd[r]
				var sg, sgx float32
				for i, v := range xr {
					xhat := (v - m) * rs
					g := gr[i] * w[i]
					sg += g
					sgx += g * xhat
					dw[i] += gr[i] * xhat
					db[i] += gr[i]
				}
				sg /= float32(D)
				sgx /= float32(D)
				for i, v := range xr {
					xhat := (v - m) * rs
					dr[i] = rs * (gr[i]*w[i] - sg - xhat*sgx)
				}
			}
		}
	})
	gw, gb := l.Weight.Grad.Data, l.Bias.Grad.Data
	for bi := 0; bi < nb; bi++ {
		dw := part[bi*2*D : bi*2*D+D]
		db := part[bi*2*D+D : (bi+1)*2*D]
		for i := range gw {
			gw[i] += dw[i]
			gb[i] += db[i]
		}
	}
	return dx
}
