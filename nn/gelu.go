package nn

import (
	"math"

	"github.com/nvdp-project/nvdp/nn/internal/avx2"
)

// GELU returns the exact Gaussian error linear unit of x, in its erf form,
// as BERT uses it under Hugging Face's hidden_act "gelu":
//
//	y = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
//
// x may have any shape; y has the same. Phi comes from a table of cubic
// Hermite interpolants to within 1e-8 absolute. That is more accurate than
// PyTorch's vectorised CPU erf, Abramowitz and Stegun 7.1.26 with 1.5e-7,
// and several times cheaper than an exp per element. GELU runs in parallel
// over the elements.
func GELU(x *Tensor) *Tensor { return GELUInfer(x, nil) }

// GELUInfer is [GELU] with y taken from ws ([Workspace.New]; nil: newly allocated): the same
// operations in the same order.
func GELUInfer(x *Tensor, ws *Workspace) *Tensor {
	y := ws.NewUninit(x.Shape...) // every value written
	xs, ys := x.Data, y.Data
	Parallel(len(xs), 8, func(lo, hi int) { geluInto(xs[lo:hi], ys[lo:hi]) })
	return y
}

// geluInto sets ys[k] = xs[k] Phi(xs[k]), the GELU of inference, with the AVX2 kernel
// ([avx2.GELU]) where the CPU has it and [normalCDF] elsewhere: the same bits either way.
func geluInto(xs, ys []float32) {
	ys = ys[:len(xs)]
	for i := 0; i < len(xs); {
		if n := (len(xs) - i) &^ 3; avx2.Available && n > 0 {
			i += avx2.GELU(&xs[i], &ys[i], n, &phiCDFTab[0])
		}
		for end := min(i+4, len(xs)); i < end; i++ { // the group the kernel left, or the tail
			ys[i] = xs[i] * normalCDF(xs[i])
		}
	}
}

// GELUWithGrad returns y = GELU(x) and its derivative dy/dx = Phi(x) + x
// phi(x) in one pass, where phi is the standard normal density, so that a
// backward pass only multiplies with [GELUGradMul]. Both have the shape of
// x.
func GELUWithGrad(x *Tensor) (y, dydx *Tensor) {
	y, dydx = New(x.Shape...), New(x.Shape...)
	xs, ys, ds := x.Data, y.Data, dydx.Data
	Parallel(len(xs), 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := xs[i]
			cdf, pdf := normalCDFPDF(v)
			ys[i] = v * cdf
			ds[i] = cdf + v*pdf
		}
	})
	return y, dydx
}

// GELUGradMul returns a new tensor dx = dy * dydx, with dydx from
// [GELUWithGrad].
func GELUGradMul(dy, dydx *Tensor) *Tensor {
	MustSameShape("GELUGradMul", dy, dydx)
	dx := New(dy.Shape...)
	a, b, c := dy.Data, dydx.Data[:len(dy.Data)], dx.Data[:len(dy.Data)]
	Parallel(len(a), 2, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			c[i] = a[i] * b[i]
		}
	})
	return dx
}

// GELUBackward returns dx = dy * (Phi(x) + x phi(x)) for the GELU input x,
// not the output, and the output gradient dy of the same shape. It
// recomputes the derivative that [GELUWithGrad] returns.
func GELUBackward(x, dy *Tensor) *Tensor {
	MustSameShape("GELUBackward", x, dy)
	dx := New(x.Shape...)
	xs, gs, ds := x.Data, dy.Data[:len(x.Data)], dx.Data[:len(x.Data)]
	Parallel(len(xs), 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := xs[i]
			cdf, pdf := normalCDFPDF(v)
			ds[i] = gs[i] * (cdf + v*pdf)
		}
	})
	return dx
}

// Phi and phi come from a table of cubic Hermite interpolants on [-phiRange,
// phiRange) with step 1/phiSteps (per interval: Phi from Phi and phi at the
// ends, phi from phi and phi' = -x phi), evaluated in float64: absolute
// error below 1e-8 for both (Hermite bound h^4/384 max|f””|), several
// times cheaper than an exp per element. Outside the range Phi is 0 or 1 and
// phi is 0 (phi(10) = 7.7e-23).
const (
	phiRange = 10
	phiSteps = 32
	phiN     = 2 * phiRange * phiSteps
)

// phiTab holds per interval the cubic coefficients c0..c3 (in t = position
// within the interval, [0, 1)) of Phi, then of phi.
var phiTab = func() []float64 {
	tab := make([]float64, 8*phiN)
	const h = 1.0 / phiSteps
	for i := 0; i < phiN; i++ {
		x0 := -phiRange + float64(i)*h
		x1 := x0 + h
		P0, P1 := 0.5*math.Erfc(-x0/math.Sqrt2), 0.5*math.Erfc(-x1/math.Sqrt2)
		p0 := math.Exp(-x0*x0/2) / math.Sqrt(2*math.Pi)
		p1 := math.Exp(-x1*x1/2) / math.Sqrt(2*math.Pi)
		d0, d1 := -x0*p0, -x1*p1
		hermite(tab[8*i:8*i+4], P0, P1, h*p0, h*p1)
		hermite(tab[8*i+4:8*i+8], p0, p1, h*d0, h*d1)
	}
	return tab
}()

// hermite writes the power-basis coefficients of the cubic with values f0,
// f1 and (interval-scaled) slopes m0, m1 at t = 0, 1.
func hermite(c []float64, f0, f1, m0, m1 float64) {
	c[0] = f0
	c[1] = m0
	c[2] = 3*(f1-f0) - 2*m0 - m1
	c[3] = 2*(f0-f1) + m0 + m1
}

// phiCDFTab holds Phi's coefficients of phiTab alone, 4 per interval: the 20 KiB inference reads
// ([normalCDF]) stay within a core's first-level cache, where phiTab's 40 KiB do not.
var phiCDFTab = func() []float64 {
	tab := make([]float64, 4*phiN)
	for i := range phiN {
		copy(tab[4*i:4*i+4], phiTab[8*i:8*i+4])
	}
	return tab
}()

// normalCDF returns Phi(x) of [normalCDFPDF] from the same coefficients by the same operations, so
// bit for bit the same, without the density.
func normalCDF(x float32) float32 {
	xf := float64(x)
	if !(xf > -phiRange) { // also NaN
		if xf != xf {
			return x
		}
		return 0
	}
	if xf >= phiRange {
		return 1
	}
	u := (xf + phiRange) * phiSteps
	i := int(u)
	t := u - float64(i)
	return float32(cubic(phiCDFTab[4*i:4*i+4:4*i+4], t))
}

// cubic evaluates c[0] + c[1] t + c[2] t^2 + c[3] t^3 by Horner's rule: the one expression of both
// Phi's readers.
func cubic(c []float64, t float64) float64 { return ((c[3]*t+c[2])*t+c[1])*t + c[0] }

// normalCDFPDF returns the standard normal CDF Phi(x) and density phi(x) (NaN for NaN).
func normalCDFPDF(x float32) (cdf, pdf float32) {
	xf := float64(x)
	if !(xf > -phiRange) { // also NaN
		if xf != xf {
			return x, x
		}
		return 0, 0
	}
	if xf >= phiRange {
		return 1, 0
	}
	u := (xf + phiRange) * phiSteps
	i := int(u)
	t := u - float64(i)
	c := phiTab[8*i : 8*i+8 : 8*i+8]
	return float32(cubic(c[:4], t)), float32(cubic(c[4:], t))
}
