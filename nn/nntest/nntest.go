// Package nntest holds test helpers shared by packages built on nn:
// a finite-difference gradient checker and seeded random tensors.
package nntest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
)

// GradOpts configures the finite-difference check. Zero fields take the
// defaults.
type GradOpts struct {
	// Eps is the central-difference step applied to each float32 input.
	// The default is 1e-2.
	Eps float64
	// RelTol and AbsTol are the tolerances: element i passes when
	// |num_i - ana_i| <= AbsTol*scale + RelTol*|num_i|, where
	// scale = max_i |num_i|. The defaults are 1e-2 and 2e-3. The global
	// relative error ||num - ana|| / ||num|| must also be below RelTol.
	RelTol, AbsTol float64
	// MaxChecks limits the number of checked indices, chosen with a fixed
	// seed; 0 checks every index.
	MaxChecks int
}

func (o GradOpts) withDefaults() GradOpts {
	if o.Eps == 0 {
		o.Eps = 1e-2
	}
	if o.RelTol == 0 {
		o.RelTol = 1e-2
	}
	if o.AbsTol == 0 {
		o.AbsTol = 2e-3
	}
	return o
}

// NumericGrad returns the central differences
// (f(x+eps e_i) - f(x-eps e_i)) / (2 eps) at the given indices of x, or at
// all indices when idx is nil, and restores x afterwards. f must recompute
// the loss from x, accumulating in float64.
func NumericGrad(f func() float64, x []float32, idx []int, eps float64) []float64 {
	if idx == nil {
		idx = make([]int, len(x))
		for i := range idx {
			idx[i] = i
		}
	}
	out := make([]float64, len(idx))
	for n, i := range idx {
		orig := x[i]
		xp, xm := float32(float64(orig)+eps), float32(float64(orig)-eps)
		x[i] = xp
		fp := f()
		x[i] = xm
		fm := f()
		x[i] = orig
		out[n] = (fp - fm) / (float64(xp) - float64(xm))
	}
	return out
}

// CompareGrad checks analytic against central differences of f with respect
// to x and returns an error describing the worst element when they disagree.
func CompareGrad(f func() float64, x, analytic []float32, opts GradOpts) error {
	if len(x) != len(analytic) {
		return fmt.Errorf("gradient has %d elements, input %d", len(analytic), len(x))
	}
	o := opts.withDefaults()
	var idx []int
	if o.MaxChecks > 0 && o.MaxChecks < len(x) {
		idx = rand.New(rand.NewPCG(7, 7)).Perm(len(x))[:o.MaxChecks]
	} else {
		idx = make([]int, len(x))
		for i := range idx {
			idx[i] = i
		}
	}
	num := NumericGrad(f, x, idx, o.Eps)
	var scale, dn, nn2 float64
	for _, v := range num {
		scale = math.Max(scale, math.Abs(v))
	}
	worst, worstIdx := -1.0, -1
	for n, i := range idx {
		a := float64(analytic[i])
		if math.IsNaN(a) || math.IsInf(a, 0) {
			return fmt.Errorf("analytic gradient[%d] = %v", i, a)
		}
		d := math.Abs(num[n] - a)
		dn += d * d
		nn2 += num[n] * num[n]
		lim := o.AbsTol*scale + o.RelTol*math.Abs(num[n])
		if d > lim && d/lim > worst {
			worst, worstIdx = d/lim, n
		}
	}
	if worstIdx >= 0 {
		i := idx[worstIdx]
		return fmt.Errorf("gradient[%d]: analytic %.6g, numeric %.6g (%.3gx the tolerance; scale %.3g)",
			i, analytic[i], num[worstIdx], worst, scale)
	}
	if nn2 > 0 && math.Sqrt(dn/nn2) > o.RelTol {
		return fmt.Errorf("relative gradient error %.3g > %.3g", math.Sqrt(dn/nn2), o.RelTol)
	}
	return nil
}

// CheckGrad reports through t.Errorf, prefixed with name, when analytic is
// not the gradient of f with respect to x. See [GradOpts] for the
// tolerance.
func CheckGrad(t testing.TB, name string, f func() float64, x, analytic []float32, opts GradOpts) {
	t.Helper()
	if err := CompareGrad(f, x, analytic, opts); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

// CheckGradStrict is [CheckGrad] plus a self-test: it perturbs the largest
// analytic element by 5%, and by at least 5% of the gradient scale, and
// fails the test if the checker still accepts it. This proves the
// tolerance can catch a wrong gradient.
func CheckGradStrict(t testing.TB, name string, f func() float64, x, analytic []float32, opts GradOpts) {
	t.Helper()
	CheckGrad(t, name, f, x, analytic, opts)
	if len(analytic) == 0 {
		return
	}
	bad := append([]float32(nil), analytic...)
	j := 0
	for i, v := range bad {
		if math.Abs(float64(v)) > math.Abs(float64(bad[j])) {
			j = i
		}
	}
	delta := 0.05 * float64(bad[j])
	if delta == 0 {
		delta = 0.05
	}
	bad[j] += float32(delta)
	o := opts
	if o.MaxChecks > 0 { // make sure the perturbed index is checked
		o.MaxChecks = 0
	}
	if err := CompareGrad(f, x, bad, o); err == nil {
		t.Errorf("%s: checker accepted a gradient perturbed by %.3g at index %d", name, delta, j)
	}
}

// RandTensor returns a tensor of the given shape with N(0,1) entries from rng.
func RandTensor(rng *rand.Rand, shape ...int) *nn.Tensor {
	t := nn.New(shape...)
	for i := range t.Data {
		t.Data[i] = float32(rng.NormFloat64())
	}
	return t
}

// Dot returns sum_i w_i y_i in float64: a scalar test loss whose gradient
// with respect to y is w.
func Dot(w, y *nn.Tensor) float64 {
	if len(w.Data) != len(y.Data) {
		panic(fmt.Sprintf("nntest.Dot: %v vs %v", w.Shape, y.Shape))
	}
	var s float64
	for i, v := range y.Data {
		s += float64(w.Data[i]) * float64(v)
	}
	return s
}
