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

const invSqrt2 = 0.70710678118654752440
const invSqrt2Pi = 0.39894228040143267794

// GELU is the exact (erf) Gaussian error linear unit used by BERT
// (HF hidden_act "gelu"): y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)).
// x has any shape; the output has the same shape. erf is evaluated with
// Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7, as PyTorch's
// vectorised CPU kernel) in float32, in parallel over elements.
func GELU(x *Tensor) *Tensor {
	y := New(x.Shape...)
	xs, ys := x.Data, y.Data
	Parallel(len(xs), 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := xs[i]
			cdf, _ := geluParts(v)
			ys[i] = v * cdf
		}
	})
	return y
}

// GELUBackward returns dx = dy * (Phi(x) + x phi(x)) for the GELU input x
// (not the output) and the output gradient dy; phi is the standard normal density.
func GELUBackward(x, dy *Tensor) *Tensor {
	MustSameShape("GELUBackward", x, dy)
	dx := New(x.Shape...)
	xs, gs, ds := x.Data, dy.Data[:len(x.Data)], dx.Data[:len(x.Data)]
	Parallel(len(xs), 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := xs[i]
			cdf, pdf := geluParts(v)
			ds[i] = gs[i] * (cdf + v*pdf)
		}
	})
	return dx
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
