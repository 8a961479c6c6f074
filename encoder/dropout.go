package encoder

import (
	"math"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/nn"
)

// hiddenDropout is inverted dropout (as torch.nn.Dropout) with a 1-byte keep
// mask instead of nn.Dropout's float32 multipliers: the encoder keeps one
// mask per layer and dense output, so this saves 3 bytes per activation.
// Each rng.Uint64 draw decides 4 elements by comparing 16-bit chunks with
// round(p * 65536): the keep probability is quantised to 1/65536 (p = 0.1
// becomes 0.100006).
type hiddenDropout struct{ p float32 }

// threshold returns round(p*65536): an element is dropped when its 16-bit
// uniform chunk is below it.
func (d hiddenDropout) threshold() uint64 { return uint64(math.Round(float64(d.p) * 65536)) }

// forward applies dropout to x in place and returns the keep mask (nil when
// the forward is the identity: !train or p == 0).
func (d hiddenDropout) forward(x *nn.Tensor, rng *rand.Rand, train bool) []uint8 {
	if !train || d.p == 0 {
		return nil
	}
	th := d.threshold()
	scale := 1 / (1 - d.p)
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
	return mask
}

// backward returns dy masked and scaled (a new tensor), or dy itself when
// mask is nil.
func (d hiddenDropout) backward(mask []uint8, dy *nn.Tensor) *nn.Tensor {
	if mask == nil {
		return dy
	}
	scale := 1 / (1 - d.p)
	dx := nn.New(dy.Shape...)
	for i, m := range mask {
		if m != 0 {
			dx.Data[i] = dy.Data[i] * scale
		}
	}
	return dx
}
