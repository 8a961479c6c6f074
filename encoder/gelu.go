package encoder

import (
	"math"

	"github.com/nvdp-project/nvdp/nn"
)

// geluWithGrad returns y = GELU(x) = x Phi(x) (erf form, HF hidden_act
// "gelu") and its derivative dy/dx = Phi(x) + x phi(x) in one pass, so the
// training forward evaluates the exponential once per element and Backward
// only multiplies (nn.GELU + nn.GELUBackward evaluate it twice). Phi uses
// Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7, as nn and PyTorch's
// vectorised CPU kernel); exp is float64 math.Exp.
func geluWithGrad(x *nn.Tensor) (y, dydx *nn.Tensor) {
	y, dydx = nn.New(x.Shape...), nn.New(x.Shape...)
	xs, ys, ds := x.Data, y.Data, dydx.Data
	nn.Parallel(len(xs), 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := xs[i]
			cdf, pdf := phi(v)
			ys[i] = v * cdf
			ds[i] = cdf + v*pdf
		}
	})
	return y, dydx
}

// geluGradMul returns dx = dy * dydx (a new tensor).
func geluGradMul(dy, dydx *nn.Tensor) *nn.Tensor {
	nn.MustSameShape("geluGradMul", dy, dydx)
	dx := nn.New(dy.Shape...)
	a, b, c := dy.Data, dydx.Data[:len(dy.Data)], dx.Data[:len(dy.Data)]
	nn.Parallel(len(a), 2, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			c[i] = a[i] * b[i]
		}
	})
	return dx
}

// phi returns the standard normal CDF Phi(x) (A&S 7.1.26 for erf) and
// density phi(x), sharing one exponential.
func phi(x float32) (cdf, pdf float32) {
	const (
		p  = 0.3275911
		a1 = 0.254829592
		a2 = -0.284496736
		a3 = 1.421413741
		a4 = -1.453152027
		a5 = 1.061405429
	)
	z := x * 0.70710678118654752440
	if z < 0 {
		z = -z
	}
	t := 1 / (1 + p*z)
	e := float32(math.Exp(float64(-z * z)))
	q := 0.5 * t * (a1 + t*(a2+t*(a3+t*(a4+t*a5)))) * e // 0.5 erfc(|x|/sqrt 2)
	if x < 0 {
		cdf = q
	} else {
		cdf = 1 - q
	}
	return cdf, 0.39894228040143267794 * e
}
