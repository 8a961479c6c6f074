package dnn

import (
	"github.com/nvdp-project/nvdp/cuda"
)

// BF16 GEMMs, selected by --precision bf16, that is [cuda.PrecisionBF16].
//
// On a bf16 device the GEMMs of the layers, in Linear and attention's products and so in every
// layer built on them, round their two FP32 operands to bfloat16 with bf16_from_f32, to nearest
// even, into the engine's scratch buffer. cuBLAS's BF16 GEMMs, [cuda.Device.GemmBF16], multiply
// them, accumulating in FP32 and writing an FP32 result. A weight's rounding is kept beside its
// FP32 value in Param.bf16, made by its first GEMM, and refreshed only when the value changes, by
// AdamW's update in the same kernel or by PushParam, not before every GEMM.
//
// Nothing else changes. Activations and gradients between layers, parameters, their gradients,
// AdamW's moments and update stay FP32. LayerNorm, softmax, GELU, the losses and the NVIB layer
// compute in FP32 or float64 as on an fp32 device; that includes the clip of mu, sigma and alpha,
// which runs on the FP32 outputs of its projections, in float64 where it did. See "BF16" in
// docs/engine.md.

// bf16Bytes is the size of a bfloat16.
const bf16Bytes = 2

// bf16Scratch returns the engine's scratch buffer with at least bytes
// (grown as needed: the old buffer freed after the work queued on it).
func (e *Engine) bf16Scratch(bytes int) cuda.Buffer {
	if bytes > e.scratch.Bytes {
		if e.scratch.Ptr != 0 {
			must(e.Dev.Sync()) // the GEMMs queued may still read it
			must(e.Dev.Free(e.scratch))
			e.scratch = cuda.Buffer{}
		}
		b, err := e.Dev.Alloc((bytes + 1<<20 - 1) &^ (1<<20 - 1))
		must(err)
		e.scratch = b
	}
	return e.scratch
}

// bf16Round writes the n floats of x rounded to bfloat16 into dst (2n
// bytes).
func (e *Engine) bf16Round(dst, x cuda.Buffer, n int) {
	e.launch1D("bf16_from_f32", n, dst, x, int64(n))
}

// bf16Operands rounds the first na floats of a and nb floats of b to
// bfloat16 into the scratch buffer and returns the two copies. Kernels and
// GEMMs run in order on the device's stream, so the next GEMM's operands
// may overwrite this one's.
func (e *Engine) bf16Operands(a cuda.Buffer, na int, b cuda.Buffer, nb int) (cuda.Buffer, cuda.Buffer) {
	offB := (bf16Bytes*na + 255) &^ 255
	s := e.bf16Scratch(offB + bf16Bytes*max(nb, 1))
	ha, hb := cuda.Buffer{Ptr: s.Ptr, Bytes: offB}, s.Offset(offB)
	e.bf16Round(ha, a, na)
	e.bf16Round(hb, b, nb)
	return ha, hb
}

// gemm is cuda.Device.Gemm (dense row-major operands, as nn.Gemm) at the
// device's precision: the FP32 GEMM (TF32 on a tf32 device), or on a bf16
// device the BF16 GEMM of a and b rounded to bfloat16.
func (e *Engine) gemm(transA, transB bool, m, n, k int, alpha float32, a, b cuda.Buffer, beta float32, c cuda.Buffer) {
	if !e.bf16 {
		must(e.Dev.Gemm(transA, transB, m, n, k, alpha, a, b, beta, c))
		return
	}
	lda, ldb := leadingDims(transA, transB, m, n, k)
	ha, hb := e.bf16Operands(a, m*k, b, k*n)
	must(e.Dev.GemmBF16(transA, transB, m, n, k, alpha, ha, lda, 0, hb, ldb, 0, beta, c, n, 0, 1))
}

// weightBF16 is the bfloat16 copy of the weight w: allocated and rounded
// on first use, then kept equal to the rounding of w.Value by its writers
// (AdamW.Update, PushParam, RefreshBF16). On a bf16 engine.
func (e *Engine) weightBF16(w *Param) cuda.Buffer {
	if w.bf16.Ptr == 0 {
		n := w.Value.Len()
		b, err := e.Dev.Alloc(bf16Bytes * max(1, n))
		must(err)
		w.bf16 = b
		e.bf16Round(b, w.Value.Buf, n)
	}
	return w.bf16
}

// RefreshBF16 rounds p's value again into its bfloat16 copy, where it has one: a weight a GEMM
// read on a bf16 device. A writer of p.Value other than [AdamW.Update] and [Engine.PushParam] must
// call it afterwards.
func (e *Engine) RefreshBF16(p *Param) {
	if p.bf16.Ptr != 0 {
		e.bf16Round(p.bf16, p.Value.Buf, p.Value.Len())
	}
}

// gemmWeight is gemm with the weight w's value as operand b (dense, k x n,
// n x k when transB): on a bf16 device its bfloat16 copy (weightBF16),
// only a rounded before the GEMM.
func (e *Engine) gemmWeight(transA, transB bool, m, n, k int, alpha float32, a cuda.Buffer, w *Param, beta float32, c cuda.Buffer) {
	if !e.bf16 {
		must(e.Dev.Gemm(transA, transB, m, n, k, alpha, a, w.Value.Buf, beta, c))
		return
	}
	lda, ldb := leadingDims(transA, transB, m, n, k)
	hb := e.weightBF16(w)
	ha := e.bf16Scratch(bf16Bytes * max(1, m*k))
	e.bf16Round(ha, a, m*k)
	must(e.Dev.GemmBF16(transA, transB, m, n, k, alpha, ha, lda, 0, hb, ldb, 0, beta, c, n, 0, 1))
}

// leadingDims is the leading dimensions of a GEMM's dense row-major operands
// a (m x k, or k x m transposed) and b (k x n, or n x k transposed).
func leadingDims(transA, transB bool, m, n, k int) (lda, ldb int) {
	lda, ldb = k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	return lda, ldb
}
