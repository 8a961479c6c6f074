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
