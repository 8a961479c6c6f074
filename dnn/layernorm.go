package dnn

import (
	"fmt"

	"github.com/nvdp-project/nvdp/nn"
)

// LayerNorm is the twin of [nn.LayerNorm] over the last dimension. Row statistics accumulate in
// float32 in two passes, where nn accumulates in float64; the outputs agree to about 1e-6
// relative.
type LayerNorm struct {
	Weight, Bias *Param
	Eps          float32
}

// LayerNormCache holds the input and the per-row statistics for Backward.
type LayerNormCache struct {
	X          *Tensor
	Mean, Rstd *Tensor // [rows]
}

// NewLayerNorm uploads l's parameters.
func (e *Engine) NewLayerNorm(l *nn.LayerNorm) *LayerNorm {
	return &LayerNorm{Weight: e.Param(l.Weight), Bias: e.Param(l.Bias), Eps: l.Eps}
}

// Params returns the layer's parameters, in [nn.LayerNorm]'s order.
func (l *LayerNorm) Params() []*Param { return []*Param{l.Weight, l.Bias} }

// Forward normalises x [..., D] and returns the result and the cache for Backward.
func (l *LayerNorm) Forward(e *Engine, x *Tensor) (*Tensor, *LayerNormCache) {
	D := l.Weight.Value.Len()
	if x.Dim(-1) != D {
		panic(fmt.Sprintf("dnn.LayerNorm(%s): input last dim %d, want %d", l.Weight.Name, x.Dim(-1), D))
	}
	rows := x.Rows()
	y := e.New(x.Shape...)
	c := &LayerNormCache{X: x, Mean: e.New(rows), Rstd: e.New(rows)}
	e.launchRows("layernorm_fwd", rows, y.Buf, c.Mean.Buf, c.Rstd.Buf, x.Buf, l.Weight.Value.Buf, l.Bias.Value.Buf, D, l.Eps)
	return y, c
}

// Backward accumulates the gradients of Weight and Bias and returns dx.
func (l *LayerNorm) Backward(e *Engine, c *LayerNormCache, dy *Tensor) *Tensor {
	sameLen("LayerNorm.Backward", c.X, dy)
	D := l.Weight.Value.Len()
	rows := c.X.Rows()
	dx := e.New(c.X.Shape...)
	dyxhat := e.New(c.X.Shape...)
	e.launchRows("layernorm_bwd", rows, dx.Buf, dyxhat.Buf, dy.Buf, c.X.Buf, c.Mean.Buf, c.Rstd.Buf, l.Weight.Value.Buf, D)
	e.colSumAcc(l.Weight.Grad.Buf, dyxhat.Buf, l.Bias.Grad.Buf, dy.Buf, rows, D)
	return dx
}
