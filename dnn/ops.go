package dnn

import "fmt"

// sameLen panics unless a and b hold as many elements (a wiring error).
func sameLen(op string, a, b *Tensor) {
	if a.Len() != b.Len() {
		panic(fmt.Sprintf("dnn.%s: %v and %v", op, a.Shape, b.Shape))
	}
}

// Add returns x + y for tensors of the same shape, as [nn.Add] does.
func (e *Engine) Add(x, y *Tensor) *Tensor {
	sameLen("Add", x, y)
	z := e.New(x.Shape...)
	e.launch1D("add", x.Len(), z.Buf, x.Buf, y.Buf, x.Len())
	return z
}

// AddInPlace adds src into dst, of the same size, as [nn.AddInPlace] does.
func (e *Engine) AddInPlace(dst, src *Tensor) {
	sameLen("AddInPlace", dst, src)
	e.launch1D("add_inplace", dst.Len(), dst.Buf, src.Buf, dst.Len())
}

// Scale multiplies t by s in place, as [nn.Scale] does.
func (e *Engine) Scale(t *Tensor, s float32) {
	e.launch1D("scale_inplace", t.Len(), t.Buf, s, t.Len())
}
