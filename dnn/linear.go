package dnn

import (
	"fmt"

	"github.com/nvdp-project/nvdp/cuda"

	"github.com/nvdp-project/nvdp/nn"
)

// Linear is the twin of [nn.Linear]: y = x W^T + b, with W [Out, In] and b [Out], nil for a
// bias-free layer. The GEMMs run on cuBLAS; a bf16 device takes BF16 inputs, through Engine.gemm,
// and keeps a bfloat16 copy of W, through Engine.gemmWeight.
type Linear struct {
	In, Out int
	W, B    *Param
}

// NewLinear uploads l's parameters.
func (e *Engine) NewLinear(l *nn.Linear) *Linear {
	d := &Linear{In: l.In, Out: l.Out, W: e.Param(l.W)}
	if l.B != nil {
		d.B = e.Param(l.B)
	}
	return d
}

// Params returns the layer's parameters, in [nn.Linear]'s order.
func (l *Linear) Params() []*Param {
	if l.B == nil {
		return []*Param{l.W}
	}
	return []*Param{l.W, l.B}
}

// Forward maps x [..., In] to y [..., Out]. The cache it returns is x.
func (l *Linear) Forward(e *Engine, x *Tensor) (*Tensor, *Tensor) {
	if x.Dim(-1) != l.In {
		panic(fmt.Sprintf("dnn.Linear(%s): input last dim %d, want %d", l.W.Name, x.Dim(-1), l.In))
	}
	rows := x.Rows()
	shape := append(append([]int(nil), x.Shape[:len(x.Shape)-1]...), l.Out)
	y := e.New(shape...)
	beta := float32(0)
	if l.B != nil {
		e.launch1D("bias_rows", rows*l.Out, y.Buf, l.B.Value.Buf, rows, l.Out)
		beta = 1
	}
	e.gemmWeight(false, true, rows, l.Out, l.In, 1, x.Buf, l.W, beta, y.Buf)
	return y, x
}

// Backward takes the cached x and dy [..., Out], accumulates the gradients of W and b, and returns
// dx [..., In].
func (l *Linear) Backward(e *Engine, x, dy *Tensor) *Tensor {
	rows := x.Rows()
	e.gemm(true, false, l.Out, l.In, rows, 1, dy.Buf, x.Buf, 1, l.W.Grad.Buf)
	if l.B != nil {
		e.colSumAcc(l.B.Grad.Buf, dy.Buf, cuda.Buffer{}, cuda.Buffer{}, rows, l.Out)
	}
	dx := e.New(x.Shape...)
	e.gemmWeight(false, false, rows, l.In, l.Out, 1, dy.Buf, l.W, 0, dx.Buf)
	return dx
}
