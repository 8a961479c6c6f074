package dnn

// GELU returns y = x Phi(x) = x erfc(-x/sqrt 2)/2, of x's shape: the twin of [nn.GELU], BERT's erf
// form. Phi comes from the float32 erfcf of the device's math library, at most 4 ulp off on CUDA,
// where nn interpolates a table to 1e-8 absolute; the two agree to a few float32 ulps of Phi.
func (e *Engine) GELU(x *Tensor) *Tensor {
	y := e.New(x.Shape...)
	e.launch1D("gelu_fwd", x.Len(), y.Buf, x.Buf, x.Len())
	return y
}

// GELUWithGrad returns y = GELU(x) and dy/dx = Phi(x) + x phi(x) in one pass, where phi is the
// standard normal density, as [nn.GELUWithGrad] does.
func (e *Engine) GELUWithGrad(x *Tensor) (y, dydx *Tensor) {
	y, dydx = e.New(x.Shape...), e.New(x.Shape...)
	e.launch1D("gelu_fwd_grad", x.Len(), y.Buf, dydx.Buf, x.Buf, x.Len())
	return y, dydx
}

// GELUGradMul returns a new tensor dx = dy * dydx, with dydx from [Engine.GELUWithGrad], as
// [nn.GELUGradMul] does. Sizes that differ panic.
func (e *Engine) GELUGradMul(dy, dydx *Tensor) *Tensor {
	sameLen("GELUGradMul", dy, dydx)
	dx := e.New(dy.Shape...)
	e.launch1D("gelu_grad_mul", dy.Len(), dx.Buf, dy.Buf, dydx.Buf, dy.Len())
	return dx
}

// GELUBackward returns dx = dy (Phi(x) + x phi(x)) for the GELU input x, not the output, and the
// output gradient dy, as [nn.GELUBackward] does. Sizes that differ panic.
func (e *Engine) GELUBackward(x, dy *Tensor) *Tensor {
	sameLen("GELUBackward", x, dy)
	dx := e.New(x.Shape...)
	e.launch1D("gelu_bwd", x.Len(), dx.Buf, x.Buf, dy.Buf, x.Len())
	return dx
}

// Tanh returns tanh(x) elementwise, of x's shape, as nn.Tanh does: computed in float64 and
// rounded.
func (e *Engine) Tanh(x *Tensor) *Tensor {
	y := e.New(x.Shape...)
	e.launch1D("tanh_fwd", x.Len(), y.Buf, x.Buf, x.Len())
	return y
}

// TanhBackward returns dx = dy (1 - y^2) given the tanh OUTPUT y, as nn.TanhBackward does. Sizes
// that differ panic.
func (e *Engine) TanhBackward(y, dy *Tensor) *Tensor {
	sameLen("TanhBackward", y, dy)
	dx := e.New(y.Shape...)
	e.launch1D("tanh_bwd", y.Len(), dx.Buf, y.Buf, dy.Buf, y.Len())
	return dx
}
