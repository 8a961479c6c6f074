// Package nn is nvdp's compact training engine in the style of llm.c:
// float32 row-major tensors, layers with explicit forward and backward
// passes, named parameters, AdamW, schedules and safetensors checkpoints,
// on gonum's blas32 interface (OpenBLAS with the `openblas` build tag).
//
// Layer convention: Forward returns the output and a cache holding what the
// backward pass needs; Backward takes the cache and the output gradient,
// accumulates parameter gradients (+=) and returns the input gradient.
// Inference calls Forward and drops the cache, or a layer's Infer: the same
// operations without a cache, the output taken from a [Workspace] that the
// next call reuses.
package nn

import (
	"fmt"
	"math"
)

// Tensor is a dense float32 array in row-major order.
type Tensor struct {
	Data  []float32
	Shape []int
}

// New returns a zero tensor of the given shape.
func New(shape ...int) *Tensor {
	return &Tensor{Data: make([]float32, numel(shape)), Shape: append([]int(nil), shape...)}
}

// FromData wraps data (not copied) with a shape; it panics if the sizes differ.
func FromData(data []float32, shape ...int) *Tensor {
	if numel(shape) != len(data) {
		panic(fmt.Sprintf("nn.FromData: %d values for shape %v", len(data), shape))
	}
	return &Tensor{Data: data, Shape: append([]int(nil), shape...)}
}

func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		if s < 0 {
			panic(fmt.Sprintf("nn: negative dimension in shape %v", shape))
		}
		n *= s
	}
	return n
}

// Len is the number of elements.
func (t *Tensor) Len() int { return len(t.Data) }

// Dim returns the size of dimension i (negative i counts from the end).
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += len(t.Shape)
	}
	return t.Shape[i]
}

// Rows is the product of all dimensions but the last: the number of row
// vectors when the tensor is viewed as a matrix [Rows, Dim(-1)].
func (t *Tensor) Rows() int {
	if len(t.Shape) == 0 {
		return 1
	}
	return len(t.Data) / t.Shape[len(t.Shape)-1]
}

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	return &Tensor{Data: append([]float32(nil), t.Data...), Shape: append([]int(nil), t.Shape...)}
}

// Reshape returns a view with a new shape of the same size (data shared).
func (t *Tensor) Reshape(shape ...int) *Tensor {
	if numel(shape) != len(t.Data) {
		panic(fmt.Sprintf("nn.Reshape: %v to %v", t.Shape, shape))
	}
	return &Tensor{Data: t.Data, Shape: append([]int(nil), shape...)}
}

// Zero sets every element to 0.
func (t *Tensor) Zero() { clear(t.Data) }

// SameShape reports whether two tensors have identical shapes.
func SameShape(a, b *Tensor) bool {
	if len(a.Shape) != len(b.Shape) {
		return false
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			return false
		}
	}
	return true
}

// MustSameShape panics when the shapes differ (a wiring error).
func MustSameShape(op string, a, b *Tensor) {
	if !SameShape(a, b) {
		panic(fmt.Sprintf("nn.%s: shape %v vs %v", op, a.Shape, b.Shape))
	}
}

// CheckFinite returns an error naming the tensor and the first index holding
// NaN or ±Inf.
func CheckFinite(name string, t *Tensor) error {
	if i := NonFinite(t.Data); i >= 0 {
		return fmt.Errorf("tensor %s: non-finite value %v at flat index %d (shape %v)", name, t.Data[i], i, t.Shape)
	}
	return nil
}

// NonFinite returns the index of the first NaN or ±Inf in xs, -1 when every
// value is finite. A float32 is NaN or ±Inf when its bits without the sign
// are at least those of +Inf (IEEE 754 binary32); NonFinite takes the
// largest of eight values' such bits without a branch, then compares once,
// several times as fast as math.IsNaN and math.IsInf (BenchmarkNonFinite).
func NonFinite(xs []float32) int {
	const abs, inf = 0x7fffffff, 0x7f800000
	i := 0
	for ; i+8 <= len(xs); i += 8 {
		x := xs[i : i+8 : i+8]
		m := max(math.Float32bits(x[0])&abs, math.Float32bits(x[1])&abs, math.Float32bits(x[2])&abs, math.Float32bits(x[3])&abs,
			math.Float32bits(x[4])&abs, math.Float32bits(x[5])&abs, math.Float32bits(x[6])&abs, math.Float32bits(x[7])&abs)
		if m >= inf {
			break
		}
	}
	for ; i < len(xs); i++ {
		if math.Float32bits(xs[i])&abs >= inf {
			return i
		}
	}
	return -1
}
