package nn

import (
	"fmt"
	"math"
)

// Add returns a + b elementwise (same shapes; a mismatch is a wiring error and panics).
func Add(a, b *Tensor) *Tensor {
	MustSameShape("Add", a, b)
	out := New(a.Shape...)
	o, x, y := out.Data, a.Data, b.Data[:len(a.Data)]
	for i := range o {
		o[i] = x[i] + y[i]
	}
	return out
}

// AddInPlace computes dst += src elementwise (same number of elements).
func AddInPlace(dst, src *Tensor) {
	if len(dst.Data) != len(src.Data) {
		panic(fmt.Sprintf("nn.AddInPlace: shape %v vs %v", dst.Shape, src.Shape))
	}
	d, s := dst.Data, src.Data[:len(dst.Data)]
	for i := range d {
		d[i] += s[i]
	}
}

// Scale multiplies every element of t by s in place.
func Scale(t *Tensor, s float32) {
	for i := range t.Data {
		t.Data[i] *= s
	}
}

// Tanh returns tanh(x) elementwise (same shape).
func Tanh(x *Tensor) *Tensor {
	y := New(x.Shape...)
	xs, ys := x.Data, y.Data
	Parallel(len(xs), 20, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ys[i] = float32(math.Tanh(float64(xs[i])))
		}
	})
	return y
}

// TanhBackward returns dx = dy * (1 - y^2) given the tanh OUTPUT y.
func TanhBackward(y, dy *Tensor) *Tensor {
	MustSameShape("TanhBackward", y, dy)
	dx := New(y.Shape...)
	for i, v := range y.Data {
		dx.Data[i] = dy.Data[i] * (1 - v*v)
	}
	return dx
}
