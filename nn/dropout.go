package nn

import (
	"fmt"
	"math/rand/v2"
)

// Dropout zeroes each element with probability P during training and scales
// the survivors by 1/(1-P) (inverted dropout, as torch.nn.Dropout), so the
// expectation is unchanged and inference is the identity.
type Dropout struct{ P float32 }

// DropoutCache holds the per-element multiplier (0 or 1/(1-P)); nil Mask
// means the forward pass was the identity.
type DropoutCache struct{ Mask []float32 }

// Forward applies dropout to x (any shape). It is the identity (returning x
// itself, not a copy) when !train or P == 0. Draws one rng.Float32 per
// element in row-major order (deterministic for a seeded rng). P must be in
// [0, 1); P outside that range panics.
func (d Dropout) Forward(x *Tensor, rng *rand.Rand, train bool) (*Tensor, *DropoutCache) {
	if d.P < 0 || d.P >= 1 {
		panic(fmt.Sprintf("nn.Dropout: P = %v outside [0, 1)", d.P))
	}
	if !train || d.P == 0 {
		return x, &DropoutCache{}
	}
	scale := 1 / (1 - d.P)
	y := New(x.Shape...)
	mask := make([]float32, len(x.Data))
	for i, v := range x.Data {
		if rng.Float32() >= d.P {
			mask[i] = scale
			y.Data[i] = v * scale
		}
	}
	return y, &DropoutCache{Mask: mask}
}

// Backward returns dx = dy * mask (dy itself when the forward was the identity).
func (d Dropout) Backward(c *DropoutCache, dy *Tensor) *Tensor {
	if c.Mask == nil {
		return dy
	}
	if len(c.Mask) != len(dy.Data) {
		panic(fmt.Sprintf("nn.Dropout.Backward: dy shape %v for a mask of %d", dy.Shape, len(c.Mask)))
	}
	dx := New(dy.Shape...)
	for i, m := range c.Mask {
		dx.Data[i] = dy.Data[i] * m
	}
	return dx
}
