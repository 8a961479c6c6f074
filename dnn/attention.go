package dnn

import (
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/nn"
)

// AttentionCache holds what [Engine.AttentionBackward] needs; it is the twin of
// [nn.AttentionCache].
type AttentionCache struct {
	Q, K, V       *Tensor // inputs (not copied)
	KeyBias       *Tensor // [B,Tk] or nil
	Heads         int
	B, Tq, Tk, Dh int
	Probs         *Tensor     // softmax probabilities [B,H,Tq,Tk]
	Mask          cuda.Buffer // attention-dropout keep mask [B,H,Tq,Tk] bytes; zero = no dropout
	DropScale     float32     // 1/(1-p) with a mask
	dropped       *Tensor     // Probs * mask * DropScale (what multiplied V); Probs without a mask
	qh, kh, vh    *Tensor     // Q, K, V head-major [B,H,T,dh] (attn_split_heads)
}

// PaddingBias uploads [nn.PaddingBias](mask, B, S): the additive key bias [B,S], 0 for real
// tokens, where the mask is 1, and -Inf for padding, where it is 0.
func (e *Engine) PaddingBias(mask []float32, B, S int) *Tensor {
	return e.Upload(nn.PaddingBias(mask, B, S))
}

// Attention is the twin of [nn.Attention]: multi-head scaled dot-product attention with an
// additive per-key bias,
//
//	out[b,t,h] = sum_j softmax_j( q[b,t,h].k[b,j,h]/sqrt(dh) + keyBias[b,j] ) v[b,j,h]
//
// q is [B,Tq,H*dh], k and v are [B,Tk,H*dh], and out is [B,Tq,H*dh]. Head h occupies columns
// [h*dh, (h+1)*dh), the Hugging Face layout. keyBias is [B,Tk] or nil; -Inf masks a key, giving
// it probability 0 and gradient 0.
//
// q, k and v are copied head-major, to [B,H,T,dh], by one attn_split_heads launch, so that each
// product is one cuBLAS strided-batched GEMM over the B*H pairs: two forward and four backward,
// whatever B and H. The output is copied back by attn_merge_heads. The softmax is a kernel with
// one block per query row.
//
// A query row whose keys are all masked is a programmer error that panics in nn; here it gives
// NaN in that row, since a device kernel cannot panic, and the loss turns NaN. Shape mismatches
// panic as in nn.
func (e *Engine) Attention(q, k, v *Tensor, heads int, keyBias *Tensor) (*Tensor, *AttentionCache) {
	return e.attention(q, k, v, heads, keyBias, 0, nil, nil, false)
}

// AttentionDropout is [Engine.Attention] with dropout of probability p on the attention
// probabilities when train is set, with inverted scaling 1/(1-p), as [nn.AttentionDropout].
//
// Probability i of [B,H,Tq,Tk], in row-major order, is kept when the float32 u_i >= p, where u_i
// is bits 32..55 of draw g.Pos + i over 2^24: what rand.Float32 makes of a Uint64. That takes
// B*H*Tq*Tk draws, and g.Pos advances by as many. Nothing is drawn when train is false or p == 0,
// and g may then be nil.
func (e *Engine) AttentionDropout(q, k, v *Tensor, heads int, keyBias *Tensor, p float32, g *Philox, train bool) (*Tensor, *AttentionCache) {
	return e.attention(q, k, v, heads, keyBias, p, g, nil, train)
}

// AttentionMasked is [Engine.AttentionDropout] with a keep mask made on the host. mask [B,H,Tq,Tk]
// holds 1 for a kept probability, scaled by 1/(1-p), and 0 for a dropped one. It may be the
// non-zero entries of an nn.AttentionCache's DropMask, so that both devices train from the same
// masks. A nil mask gives [Engine.Attention]; a mask of another length panics.
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
	BH := B * H
	c.qh, c.kh, c.vh = e.New(B, H, Tq, dh), e.New(B, H, Tk, dh), e.New(B, H, Tk, dh)
	e.splitHeads(c.qh, q, c.kh, k, c.vh, v, B, Tq, Tk, H, dh)
	e.gemmBatched(false, true, Tq, Tk, dh, scale, c.qh.Buf, Tq*dh, c.kh.Buf, Tk*dh, 0, c.Probs.Buf, TT, BH) // S_i = scale Q_i K_i^T [Tq,Tk]
	var bias cuda.Buffer
	if keyBias != nil {
		bias = keyBias.Buf
	}
	e.launchRows("attn_softmax_fwd", BH*Tq, c.Probs.Buf, c.dropped.Buf, bias, c.Mask, c.DropScale, Tk, H*Tq)
	oh := e.New(B, H, Tq, dh)
	e.gemmBatched(false, false, Tq, dh, Tk, 1, c.dropped.Buf, TT, c.vh.Buf, Tk*dh, 0, oh.Buf, Tq*dh, BH) // out_i = P_i V_i [Tq,dh]
	e.mergeHeads(out, oh, nil, nil, nil, nil, B, Tq, 0, H, dh)
	return out, c
}

// DropMask downloads the keep mask [B,H,Tq,Tk] of the attention dropout. It is nil without
// dropout.
func (e *Engine) DropMask(c *AttentionCache) []uint8 {
	if c.Mask.Ptr == 0 {
		return nil
	}
	return e.downloadBytes(c.Mask, c.B*c.Heads*c.Tq*c.Tk)
}

// AttentionBackward is the twin of [nn.AttentionBackward]. Given dout [B,Tq,H*dh], it returns the
// gradients with respect to q, k and v, of the shapes of the inputs, and keyBias. dKeyBias is
// [B,Tk], summed over heads and queries in nn's order, and nil when the forward had no key bias.
// With S = scale QK^T + bias, P = softmax(S) and D the dropout multipliers:
//
//	dV = (P D)^T dO,  dP = dO V^T,  dS = P (dP D - rowsum(P dP D))
//	dQ = scale dS K,  dK = scale dS^T Q
func (e *Engine) AttentionBackward(c *AttentionCache, dout *Tensor) (dq, dk, dv, dKeyBias *Tensor) {
	return e.attentionBackward(c, dout, true)
}

// attentionBackward is AttentionBackward, computing dKeyBias when
// biasGrad and the forward had a key bias (else nil).
func (e *Engine) attentionBackward(c *AttentionCache, dout *Tensor, biasGrad bool) (dq, dk, dv, dKeyBias *Tensor) {
	sameLen("AttentionBackward", c.Q, dout)
	B, Tq, Tk, H, dh := c.B, c.Tq, c.Tk, c.Heads, c.Dh
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
	BH := B * H
	goh := e.New(B, H, Tq, dh)
	e.splitHeads(goh, dout, nil, nil, nil, nil, B, Tq, 0, H, dh)
	gqh, gkh, gvh := e.New(B, H, Tq, dh), e.New(B, H, Tk, dh), e.New(B, H, Tk, dh)
	e.gemmBatched(false, true, Tq, Tk, dh, 1, goh.Buf, Tq*dh, c.vh.Buf, Tk*dh, 0, ds.Buf, TT, BH)       // dP_i = dO_i V_i^T [Tq,Tk]
	e.gemmBatched(true, false, Tk, dh, Tq, 1, c.dropped.Buf, TT, goh.Buf, Tq*dh, 0, gvh.Buf, Tk*dh, BH) // dV_i = (P D)_i^T dO_i [Tk,dh]
	e.launchRows("attn_softmax_bwd", BH*Tq, ds.Buf, c.Probs.Buf, c.Mask, c.DropScale, Tk)
	if dKeyBias != nil {
		e.launch1D("attn_bias_grad", B*Tk, dKeyBias.Buf, ds.Buf, B, H, Tq, Tk)
	}
	e.gemmBatched(false, false, Tq, dh, Tk, scale, ds.Buf, TT, c.kh.Buf, Tk*dh, 0, gqh.Buf, Tq*dh, BH) // dQ_i = scale dS_i K_i [Tq,dh]
	e.gemmBatched(true, false, Tk, dh, Tq, scale, ds.Buf, TT, c.qh.Buf, Tq*dh, 0, gkh.Buf, Tk*dh, BH)  // dK_i = scale dS_i^T Q_i [Tk,dh]
	e.mergeHeads(dq, gqh, dk, gkh, dv, gvh, B, Tq, Tk, H, dh)
	return dq, dk, dv, dKeyBias
}

// splitHeads copies each non-nil source of [B,T,H*dh] (a with T = Ta, b
// and c with T = Tb) head-major into its destination [B,H,T,dh]: one
// attn_split_heads launch.
func (e *Engine) splitHeads(da, sa, db, sb, dc, sc *Tensor, B, Ta, Tb, H, dh int) {
	e.launch1D("attn_split_heads", B*max(Ta, Tb)*H*dh, buf(da), buf(sa), buf(db), buf(sb), buf(dc), buf(sc), B, Ta, Tb, H, dh)
}

// mergeHeads is the inverse of splitHeads: each non-nil head-major source
// [B,H,T,dh] copied into its destination [B,T,H*dh] (attn_merge_heads).
func (e *Engine) mergeHeads(da, sa, db, sb, dc, sc *Tensor, B, Ta, Tb, H, dh int) {
	e.launch1D("attn_merge_heads", B*max(Ta, Tb)*H*dh, buf(da), buf(sa), buf(db), buf(sb), buf(dc), buf(sc), B, Ta, Tb, H, dh)
}

// buf is t's buffer, the zero Buffer (NULL in a kernel) for nil.
func buf(t *Tensor) cuda.Buffer {
	if t == nil {
		return cuda.Buffer{}
	}
	return t.Buf
}

// gemmBatched computes C_i = alpha op(A_i) op(B_i) + beta C_i for i <
// batch, each matrix dense and row-major (as Engine.gemm), A_i at element
// i*sa of a, B_i at i*sb of b, C_i at i*sc of c: one cuBLAS
// strided-batched call (cuda.Device.GemmStridedBatched), on a bf16 device
// one BF16 call on a and b rounded whole to bfloat16
// (cuda.Device.GemmBF16).
func (e *Engine) gemmBatched(transA, transB bool, m, n, k int, alpha float32, a cuda.Buffer, sa int, b cuda.Buffer, sb int, beta float32, c cuda.Buffer, sc int, batch int) {
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	if !e.bf16 {
		must(e.Dev.GemmStridedBatched(transA, transB, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, n, sc, batch))
		return
	}
	ha, hb := e.bf16Operands(a, batch*sa, b, batch*sb)
	must(e.Dev.GemmBF16(transA, transB, m, n, k, alpha, ha, lda, sa, hb, ldb, sb, beta, c, n, sc, batch))
}
