package dnn

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/nvdp-project/nvdp/cuda"
)

// Dropout is the twin of [nn.Dropout]; Dropout(d) converts one. During training each element is
// zeroed with probability P and the survivors are scaled by 1/(1-P), which is inverted dropout.
// It is the identity when train is false or P == 0. The keep mask takes one byte per element on
// the device, with 1 for a kept element.
//
// Apply draws the decisions from a [*Philox] on the device as nn.Dropout draws them from a
// *rand.Rand. Draw d of the call, at Philox position Pos + d, decides elements 4d..4d+3: element
// 4d+c is kept when the c-th 16-bit chunk of the draw, from the low end, is >= round(P 65536). A
// call consumes ceil(n/4) draws. ApplyMask takes a keep mask made on the host instead.
//
// P must be in [0, 1); any other value panics, as in nn.
type Dropout struct{ P float32 }

// DropoutCache holds the keep mask of one Apply for Backward. A zero Mask means the forward pass
// was the identity.
type DropoutCache struct {
	Mask  cuda.Buffer // [N] bytes, 1 = kept
	N     int
	Scale float32 // 1/(1-P)
}

func (d Dropout) check() {
	if d.P < 0 || d.P >= 1 || d.P != d.P {
		panic(fmt.Sprintf("dnn.Dropout: P = %v outside [0, 1)", d.P))
	}
}

// identity reports whether the forward pass is the identity.
func (d Dropout) identity(train bool) bool {
	d.check()
	return !train || d.P == 0
}

// Apply applies dropout to x in place, whatever its shape, with the decisions of g, and returns the
// cache for Backward. It takes ceil(len/4) draws from g.Pos and advances g.Pos past them.
//
// When train is false or P == 0 it is the identity: x is untouched, nothing is drawn, and the cache
// has a zero Mask. g may then be nil; otherwise a nil g panics.
func (d Dropout) Apply(e *Engine, x *Tensor, g *Philox, train bool) *DropoutCache {
	if d.identity(train) {
		return &DropoutCache{}
	}
	n := x.Len()
	th := uint32(math.Round(float64(d.P) * 65536))
	scale := 1 / (1 - d.P)
	draws := (n + 3) / 4
	pos := g.take(draws)
	mask := e.arena.alloc(max(1, n))
	k0, k1 := g.keys()
	e.launch1D("dropout_philox", draws, x.Buf, mask, x.Buf, n, th, scale, k0, k1, pos)
	return &DropoutCache{Mask: mask, N: n, Scale: scale}
}

// Forward is [Dropout.Apply] on a copy: it returns a new tensor, or x itself when the forward is
// the identity.
func (d Dropout) Forward(e *Engine, x *Tensor, g *Philox, train bool) (*Tensor, *DropoutCache) {
	if d.identity(train) {
		return x, &DropoutCache{}
	}
	y := e.New(x.Shape...)
	must(e.Dev.Copy(y.Buf, x.Buf, 4*x.Len()))
	return y, d.Apply(e, y, g, train)
}

// ApplyMask applies dropout to x in place with the host keep mask, one byte per element of x with 1
// for kept: x[i] is scaled by 1/(1-P) where mask[i] != 0 and set to 0 elsewhere. Both devices then
// use the same masks, such as one made by nn.Dropout on the host and read from its
// [nn.DropoutCache]. A nil mask is the identity; a mask of another length panics.
func (d Dropout) ApplyMask(e *Engine, x *Tensor, mask []uint8) *DropoutCache {
	d.check()
	if mask == nil {
		return &DropoutCache{}
	}
	if len(mask) != x.Len() {
		panic(fmt.Sprintf("dnn.Dropout.ApplyMask: mask of %d for %v", len(mask), x.Shape))
	}
	c := &DropoutCache{Mask: e.uploadBytes(mask), N: len(mask), Scale: 1 / (1 - d.P)}
	c.reapply(e, x)
	return c
}

// Backward returns dy masked and scaled as a new tensor, or dy itself when the forward was the
// identity.
func (d Dropout) Backward(e *Engine, c *DropoutCache, dy *Tensor) *Tensor {
	if c.Mask.Ptr == 0 {
		return dy
	}
	if c.N != dy.Len() {
		panic(fmt.Sprintf("dnn.Dropout.Backward: dy shape %v for a mask of %d", dy.Shape, c.N))
	}
	dx := e.New(dy.Shape...)
	e.launch1D("dropout_apply_mask", c.N, dx.Buf, c.Mask, dy.Buf, c.Scale, c.N)
	return dx
}

// reapply multiplies x in place by the mask and scale of c (the dropped
// tensor rebuilt from its input); the identity for a zero Mask.
func (c *DropoutCache) reapply(e *Engine, x *Tensor) {
	if c.Mask.Ptr == 0 {
		return
	}
	if c.N != x.Len() {
		panic(fmt.Sprintf("dnn.Dropout: reapplying a mask of %d to %v", c.N, x.Shape))
	}
	e.launch1D("dropout_apply_mask", c.N, x.Buf, c.Mask, x.Buf, c.Scale, c.N)
}

// KeepMask downloads the keep mask of c. It is nil for the identity.
func (e *Engine) KeepMask(c *DropoutCache) []uint8 {
	if c.Mask.Ptr == 0 {
		return nil
	}
	return e.downloadBytes(c.Mask, c.N)
}

// uploadBytes returns an arena buffer holding b.
func (e *Engine) uploadBytes(b []uint8) cuda.Buffer {
	buf := e.arena.alloc(max(1, len(b)))
	if len(b) == 0 {
		return buf
	}
	w := make([]uint32, (len(b)+3)/4) // the arena rounds to 256 bytes: whole words fit
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w)), b)
	must(cuda.Upload(e.Dev, buf, w))
	return buf
}

// downloadBytes returns the first n bytes of buf (an arena buffer).
func (e *Engine) downloadBytes(buf cuda.Buffer, n int) []uint8 {
	if n == 0 {
		return []uint8{}
	}
	w := make([]uint32, (n+3)/4)
	must(cuda.Download(e.Dev, w, buf))
	return append([]uint8(nil), unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w))[:n]...)
}
