package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Dropout zeroes each element with probability P during training and scales
// the survivors by 1/(1-P), so the expectation is unchanged and inference
// is the identity. This is inverted dropout, as in torch.nn.Dropout.
//
// The keep mask takes one byte per element, since a model keeps one mask
// per dropout site for its backward pass. Each rng.Uint64 draw decides 4
// elements by comparing its 16-bit chunks with round(P * 65536), so the
// drop probability is quantised to 1/65536: P = 0.1 becomes 0.100006.
//
// P must be in [0, 1). Any other P is a wiring error, since configurations
// are validated before, and panics.
type Dropout struct{ P float32 }

// DropoutCache holds the keep mask of one Forward or Apply, with 1 for a
// kept element. A nil Mask means the forward pass was the identity.
type DropoutCache struct {
	Mask  []uint8
	Scale float32 // 1/(1-P)
}

func (d Dropout) check() {
	if d.P < 0 || d.P >= 1 || d.P != d.P {
		panic(fmt.Sprintf("nn.Dropout: P = %v outside [0, 1)", d.P))
	}
}

// Apply applies dropout to x in place, whatever its shape, and returns the
// cache for Backward. When train is false or P == 0 it is the identity: x
// is untouched and the cache has a nil Mask. It is deterministic for a
// seeded rng, drawing in row-major element order.
func (d Dropout) Apply(x *Tensor, rng *rand.Rand, train bool) *DropoutCache {
	d.check()
	if !train || d.P == 0 {
		return &DropoutCache{}
	}
	th := uint64(math.Round(float64(d.P) * 65536))
	scale := 1 / (1 - d.P)
	mask := make([]uint8, len(x.Data))
	xs := x.Data
	var bits uint64
	for i := range xs {
		if i&3 == 0 {
			bits = rng.Uint64()
		}
		if bits&0xffff >= th {
			mask[i] = 1
			xs[i] *= scale
		} else {
			xs[i] = 0
		}
		bits >>= 16
	}
	return &DropoutCache{Mask: mask, Scale: scale}
}

// Forward is [Dropout.Apply] on a copy: it returns a new tensor, or x
// itself when the forward is the identity, that is when train is false or
// P == 0.
func (d Dropout) Forward(x *Tensor, rng *rand.Rand, train bool) (*Tensor, *DropoutCache) {
	d.check()
	if !train || d.P == 0 {
		return x, &DropoutCache{}
	}
	y := x.Clone()
	return y, d.Apply(y, rng, train)
}

// Backward returns dy masked and scaled as a new tensor, or dy itself when
// the forward was the identity.
func (d Dropout) Backward(c *DropoutCache, dy *Tensor) *Tensor {
	if c.Mask == nil {
		return dy
	}
	if len(c.Mask) != len(dy.Data) {
		panic(fmt.Sprintf("nn.Dropout.Backward: dy shape %v for a mask of %d", dy.Shape, len(c.Mask)))
	}
	dx := New(dy.Shape...)
	for i, m := range c.Mask {
		if m != 0 {
			dx.Data[i] = dy.Data[i] * c.Scale
		}
	}
	return dx
}

// reapply multiplies x in place by the mask and scale of c (x of the
// masked tensor's size): the dropped tensor rebuilt from its input, for
// callers that recompute activations instead of keeping them. The identity
// for a nil Mask.
func (c *DropoutCache) reapply(x *Tensor) {
	if c.Mask == nil {
		return
	}
	if len(c.Mask) != len(x.Data) {
		panic(fmt.Sprintf("nn.Dropout: reapplying a mask of %d to %v", len(c.Mask), x.Shape))
	}
	for i, m := range c.Mask {
		if m != 0 {
			x.Data[i] *= c.Scale
		} else {
			x.Data[i] = 0
		}
	}
}
