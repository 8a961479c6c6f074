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
		for r := lo; r < hi; r++ {
			xr := x.Data[r*D : (r+1)*D]
			yr := y.Data[r*D : (r+1)*D]
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
			rstd := 1 / math.Sqrt(ss/float64(D)+eps)
			m32, r32 := float32(mean), float32(rstd)
			for i, v := range xr {
				yr[i] = (v-m32)*r32*w[i] + b[i]
			}
			if c != nil {
				c.Mean[r], c.Rstd[r] = m32, r32
			}
		}
	})
	return y
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
