package dnn

import "github.com/nvdp-project/nvdp/cuda"

// RoundBF16 rounds the floats of x to bfloat16 with the kernel of the BF16
// GEMMs (bf16_from_f32) and returns their bits (tests only).
func (e *Engine) RoundBF16(x *Tensor) []uint16 {
	n := x.Len()
	b := e.arena.alloc(bf16Bytes * max(n, 1))
	e.bf16Round(b, x.Buf, n)
	out := make([]uint16, n)
	must(cuda.Download(e.Dev, out, b))
	return out
}

// WeightBF16 downloads p's bfloat16 copy (nil when it has none: tests
// only).
func (e *Engine) WeightBF16(p *Param) []uint16 {
	if p.bf16.Ptr == 0 {
		return nil
	}
	out := make([]uint16, p.Value.Len())
	must(cuda.Download(e.Dev, out, p.bf16))
	return out
}
