package dnn

import (
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/nn"
)

// AttentionCache holds what AttentionBackward needs (the twin of
// nn.AttentionCache).
type AttentionCache struct {
	Q, K, V       *Tensor // inputs (not copied)
	KeyBias       *Tensor // [B,Tk] or nil
	Heads         int
	B, Tq, Tk, Dh int
	Probs         *Tensor     // softmax probabilities [B,H,Tq,Tk]
	Mask          cuda.Buffer // attention-dropout keep mask [B,H,Tq,Tk] bytes; zero = no dropout
	DropScale     float32     // 1/(1-p) with a mask
	dropped       *Tensor     // Probs * mask * DropScale (what multiplied V); Probs without a mask
}

// PaddingBias uploads nn.PaddingBias(mask, B, S): the additive key bias
// [B,S], 0 for real tokens (mask 1) and -Inf for padding (mask 0).
func (e *Engine) PaddingBias(mask []float32, B, S int) *Tensor {
	return e.Upload(nn.PaddingBias(mask, B, S))
}

// Attention is the twin of nn.Attention: multi-head scaled dot-product
// attention with an additive per-key bias,
//
//	out[b,t,h] = sum_j softmax_j( q[b,t,h].k[b,j,h]/sqrt(dh) + keyBias[b,j] ) v[b,j,h]
//
// q [B,Tq,H*dh], k and v [B,Tk,H*dh], head h in columns [h*dh, (h+1)*dh)
// (the Hugging Face layout), keyBias [B,Tk] or nil, -Inf masking a key
// (probability 0, gradient 0); out [B,Tq,H*dh]. The products are cuBLAS
// strided-batched GEMMs over the heads of a batch element or the batch
// elements of a head, whichever loop is shorter (the heads' column blocks
// read in place, leading dimension H*dh); the softmax is a kernel with one
// block per query row. A query row whose keys are all masked, a
// programmer error that panics in nn, gives NaN in that row (a device
// kernel cannot panic; the loss turns NaN). Shape mismatches panic as in nn.
func (e *Engine) Attention(q, k, v *Tensor, heads int, keyBias *Tensor) (*Tensor, *AttentionCache) {
	return e.attention(q, k, v, heads, keyBias, 0, nil, nil, false)
}

// AttentionDropout is Attention with dropout of probability p on the
// attention probabilities when train (inverted scaling 1/(1-p)), as
// nn.AttentionDropout: probability i of [B,H,Tq,Tk] (row-major) is kept
// when the float32 u_i >= p, u_i = bits 32..55 of draw g.Pos + i over 2^24
// (what rand.Float32 makes of a Uint64): B*H*Tq*Tk draws, g.Pos advanced by
// as many. No draws when !train or p == 0 (g may be nil then).
func (e *Engine) AttentionDropout(q, k, v *Tensor, heads int, keyBias *Tensor, p float32, g *Philox, train bool) (*Tensor, *AttentionCache) {
	return e.attention(q, k, v, heads, keyBias, p, g, nil, train)
}

// AttentionMasked is AttentionDropout with a keep mask made on the host:
// mask [B,H,Tq,Tk] (1 = kept, scaled by 1/(1-p); 0 = dropped), e.g. the
// non-zero entries of an nn.AttentionCache's DropMask, so that both devices
// train from the same masks. A nil mask is Attention; a mask of another
// length panics.
func (e *Engine) AttentionMasked(q, k, v *Tensor, heads int, keyBias *Tensor, p float32, mask []uint8) (*Tensor, *AttentionCache) {
	if mask == nil {
		return e.attention(q, k, v, heads, keyBias, p, nil, nil, false)
	}
	return e.attention(q, k, v, heads, keyBias, p, nil, mask, true)
}

func (e *Engine) attention(q, k, v *Tensor, heads int, keyBias *Tensor, p float32, g *Philox, hostMask []uint8, train bool) (*Tensor, *AttentionCache) {
	if len(q.Shape) != 3 || len(k.Shape) != 3 || len(v.Shape) != 3 || k.Shape[0] != v.Shape[0] || k.Shape[1] != v.Shape[1] ||
		k.Shape[2] != v.Shape[2] || q.Shape[0] != k.Shape[0] || q.Shape[2] != k.Shape[2] {
		panic(fmt.Sprintf("dnn.Attention: q %v, k %v, v %v", q.Shape, k.Shape, v.Shape))
	}
	B, Tq, Tk, HD := q.Shape[0], q.Shape[1], k.Shape[1], q.Shape[2]
	if heads <= 0 || HD%heads != 0 {
		panic(fmt.Sprintf("dnn.Attention: width %d not divisible by %d heads", HD, heads))
	}
	if keyBias != nil && keyBias.Len() != B*Tk {
		panic(fmt.Sprintf("dnn.Attention: keyBias %v, want [%d,%d]", keyBias.Shape, B, Tk))
	}
	if p < 0 || p >= 1 || p != p {
		panic(fmt.Sprintf("dnn.Attention: dropout p = %v outside [0, 1)", p))
	}
	if B*Tq > 0 && Tk == 0 {
		panic("dnn.Attention: queries without keys")
	}
	H, dh := heads, HD/heads
	TT := Tq * Tk
	n := B * H * TT
	scale := float32(1 / math.Sqrt(float64(dh)))
	c := &AttentionCache{Q: q, K: k, V: v, KeyBias: keyBias, Heads: H, B: B, Tq: Tq, Tk: Tk, Dh: dh}
	c.Probs = e.New(B, H, Tq, Tk)
	c.dropped = c.Probs
	if hostMask != nil {
		if len(hostMask) != n {
			panic(fmt.Sprintf("dnn.AttentionMasked: mask of %d for [%d,%d,%d,%d]", len(hostMask), B, H, Tq, Tk))
		}
		c.Mask = e.uploadBytes(hostMask)
	} else if train && p > 0 && n > 0 {
		pos := g.take(n)
		c.Mask = e.arena.alloc(n)
		k0, k1 := g.keys()
		e.launch1D("dropout_mask_f32", n, c.Mask, n, p, k0, k1, pos)
	}
	if c.Mask.Ptr != 0 {
		c.DropScale = 1 / (1 - p)
		c.dropped = e.New(B, H, Tq, Tk)
	}
	out := e.New(B, Tq, HD)
	if B*Tq == 0 {
		return out, c
	}
	hs := headBatch{B: B, H: H}
	qo, ko := hs.operand(q, HD, Tq*HD, dh), hs.operand(k, HD, Tk*HD, dh)
	vo, oo := hs.operand(v, HD, Tk*HD, dh), hs.operand(out, HD, Tq*HD, dh)
	po, do := hs.operand(c.Probs, Tk, H*TT, TT), hs.operand(c.dropped, Tk, H*TT, TT)
	hs.gemm(e, false, true, Tq, Tk, dh, scale, qo, ko, 0, po) // S_bh = scale Q_bh K_bh^T [Tq,Tk]
	var bias cuda.Buffer
	if keyBias != nil {
		bias = keyBias.Buf
	}
	e.launchRows("attn_softmax_fwd", B*H*Tq, c.Probs.Buf, c.dropped.Buf, bias, c.Mask, c.DropScale, Tk, H*Tq)
	hs.gemm(e, false, false, Tq, dh, Tk, 1, do, vo, 0, oo) // out_bh = P_bh V_bh [Tq,dh]
	return out, c
}

// DropMask downloads the keep mask of the attention dropout [B,H,Tq,Tk]
// (nil without dropout).
func (e *Engine) DropMask(c *AttentionCache) []uint8 {
	if c.Mask.Ptr == 0 {
		return nil
	}
	return e.downloadBytes(c.Mask, c.B*c.Heads*c.Tq*c.Tk)
}

// AttentionBackward is the twin of nn.AttentionBackward: the gradients with
// respect to q, k, v (shapes as the inputs) and keyBias ([B,Tk], summed
// over heads and queries, in nn's order; nil when the forward had no key
// bias) given dout [B,Tq,H*dh]. With S = scale QK^T + bias, P = softmax(S)
// and D the dropout multipliers: dV = (P D)^T dO, dP = dO V^T,
// dS = P (dP D - rowsum(P dP D)), dQ = scale dS K, dK = scale dS^T Q.
func (e *Engine) AttentionBackward(c *AttentionCache, dout *Tensor) (dq, dk, dv, dKeyBias *Tensor) {
	return e.attentionBackward(c, dout, true)
}

// attentionBackward is AttentionBackward, computing dKeyBias when
// biasGrad and the forward had a key bias (else nil).
func (e *Engine) attentionBackward(c *AttentionCache, dout *Tensor, biasGrad bool) (dq, dk, dv, dKeyBias *Tensor) {
	sameLen("AttentionBackward", c.Q, dout)
	B, Tq, Tk, H, dh := c.B, c.Tq, c.Tk, c.Heads, c.Dh
	HD := H * dh
	TT := Tq * Tk
	scale := float32(1 / math.Sqrt(float64(dh)))
	if B*Tq == 0 { // no query: no gradient
		dq, dk, dv = e.New(c.Q.Shape...), e.Zeros(c.K.Shape...), e.Zeros(c.V.Shape...)
		if c.KeyBias != nil && biasGrad {
			dKeyBias = e.Zeros(c.KeyBias.Shape...)
		}
		return dq, dk, dv, dKeyBias
	}
	dq, dk, dv = e.New(c.Q.Shape...), e.New(c.K.Shape...), e.New(c.V.Shape...)
	if c.KeyBias != nil && biasGrad {
		dKeyBias = e.New(c.KeyBias.Shape...)
	}
	ds := e.New(B, H, Tq, Tk)
	hs := headBatch{B: B, H: H}
	qo, ko, vo := hs.operand(c.Q, HD, Tq*HD, dh), hs.operand(c.K, HD, Tk*HD, dh), hs.operand(c.V, HD, Tk*HD, dh)
	gqo, gko, gvo, goo := hs.operand(dq, HD, Tq*HD, dh), hs.operand(dk, HD, Tk*HD, dh), hs.operand(dv, HD, Tk*HD, dh), hs.operand(dout, HD, Tq*HD, dh)
	so, do := hs.operand(ds, Tk, H*TT, TT), hs.operand(c.dropped, Tk, H*TT, TT)
	hs.gemm(e, false, true, Tq, Tk, dh, 1, goo, vo, 0, so)  // dP_bh = dO_bh V_bh^T [Tq,Tk]
	hs.gemm(e, true, false, Tk, dh, Tq, 1, do, goo, 0, gvo) // dV_bh = (P D)_bh^T dO_bh [Tk,dh]
	e.launchRows("attn_softmax_bwd", B*H*Tq, ds.Buf, c.Probs.Buf, c.Mask, c.DropScale, Tk)
	if dKeyBias != nil {
		e.launch1D("attn_bias_grad", B*Tk, dKeyBias.Buf, ds.Buf, B, H, Tq, Tk)
	}
	hs.gemm(e, false, false, Tq, dh, Tk, scale, so, ko, 0, gqo) // dQ_bh = scale dS_bh K_bh [Tq,dh]
	hs.gemm(e, true, false, Tk, dh, Tq, scale, so, qo, 0, gko)  // dK_bh = scale dS_bh^T Q_bh [Tk,dh]
	return dq, dk, dv, dKeyBias
}

// headBatch runs the per-(batch, head) products of attention as cuBLAS
// strided-batched GEMMs: the matrix of pair (b, h) of an operand starts at
// element b*bStride + h*hStride, so one call covers every head of a batch
// element (stride hStride) or every batch element of a head (stride
// bStride), and the loop goes over the smaller of B and H (one call per
// batch element at bert-base's 12 heads and batch 8, one per head at batch
// 32).
type headBatch struct{ B, H int }

// headOperand is one operand of headBatch.gemm: its tensor, leading dimension
// (row stride, floats) and the strides of the batch element and the head.
type headOperand struct {
	t                    *Tensor
	ld, bStride, hStride int
}

func (headBatch) operand(t *Tensor, ld, bStride, hStride int) headOperand {
	return headOperand{t: t, ld: ld, bStride: bStride, hStride: hStride}
}

// gemm computes C_bh = alpha op(A_bh) op(B_bh) + beta C_bh for every pair
// (b, h), as cuda.Device.GemmStridedBatched per matrix. On a bf16 device
// the tensors of A and B are rounded to bfloat16 once, whole, and every
// call reads its matrices from the copies at the same element offsets
// (cuda.Device.GemmBF16).
func (hs headBatch) gemm(e *Engine, transA, transB bool, m, n, k int, alpha float32, a, b headOperand, beta float32, c headOperand) {
	outer, inner := hs.B, hs.H
	at := func(buf cuda.Buffer, size int, o headOperand, i int) (cuda.Buffer, int) {
		return buf.Offset(size * i * o.bStride), o.hStride
	}
	if hs.B > hs.H {
		outer, inner = hs.H, hs.B
		at = func(buf cuda.Buffer, size int, o headOperand, i int) (cuda.Buffer, int) {
			return buf.Offset(size * i * o.hStride), o.bStride
		}
	}
	if e.bf16 {
		ha, hb := e.bf16Operands(a.t.Buf, a.t.Len(), b.t.Buf, b.t.Len())
		for i := 0; i < outer; i++ {
			ab, as := at(ha, bf16Bytes, a, i)
			bb, bs := at(hb, bf16Bytes, b, i)
			cb, cs := at(c.t.Buf, 4, c, i)
			must(e.Dev.GemmBF16(transA, transB, m, n, k, alpha, ab, a.ld, as, bb, b.ld, bs, beta, cb, c.ld, cs, inner))
		}
		return
	}
	for i := 0; i < outer; i++ {
		ab, as := at(a.t.Buf, 4, a, i)
		bb, bs := at(b.t.Buf, 4, b, i)
		cb, cs := at(c.t.Buf, 4, c, i)
		must(e.Dev.GemmStridedBatched(transA, transB, m, n, k, alpha, ab, a.ld, as, bb, b.ld, bs, beta, cb, c.ld, cs, inner))
	}
}
