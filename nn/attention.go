package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// AttentionCache holds what [AttentionBackward] needs.
type AttentionCache struct {
	Q, K, V       *Tensor // inputs (not copied)
	KeyBias       *Tensor // [B,Tk] or nil
	Heads         int
	B, Tq, Tk, Dh int
	Probs         []float32 // softmax probabilities [B,H,Tq,Tk]
	DropMask      []float32 // attention-probability dropout multipliers [B,H,Tq,Tk] (0 or 1/(1-p)); nil = none
	dropped       []float32 // Probs * DropMask (what multiplied V)
}

// PaddingBias turns a key padding mask [B,S], with 1 for a real token and 0
// for padding, into an additive key bias [B,S]: 0 for real tokens, -Inf for
// padding.
func PaddingBias(mask []float32, B, S int) *Tensor { return PaddingBiasInfer(mask, B, S, nil) }

// PaddingBiasInfer is [PaddingBias] with the bias taken from ws ([Workspace.New]; nil: newly
// allocated).
func PaddingBiasInfer(mask []float32, B, S int, ws *Workspace) *Tensor {
	if len(mask) != B*S {
		panic(fmt.Sprintf("nn.PaddingBias: mask of %d for [%d,%d]", len(mask), B, S))
	}
	t := ws.New(B, S)
	for i, m := range mask {
		if m == 0 {
			t.Data[i] = float32(math.Inf(-1))
		}
	}
	return t
}

// Attention returns multi-head scaled dot-product attention with an
// additive per-key bias, and the cache for [AttentionBackward]:
//
//	out[b,t,h] = sum_j softmax_j( q[b,t,h].k[b,j,h]/sqrt(dh) + keyBias[b,j] ) v[b,j,h]
//
// q is [B,Tq,H*dh]; k and v are [B,Tk,H*dh]; the output is [B,Tq,H*dh].
// Head h occupies columns [h*dh, (h+1)*dh), the Hugging Face layout.
// keyBias is [B,Tk] or nil. Its -Inf entries mask keys, which receive
// probability 0 and gradient 0.
//
// A query row whose keys the bias all masks is a programmer error and
// panics. A row whose scores are not finite, being NaN or from overflowed
// weights, gives NaN, for the caller's finiteness checks.
//
// The products for each batch row and head run as strided BLAS calls; the
// softmax runs in parallel over rows between them.
func Attention(q, k, v *Tensor, heads int, keyBias *Tensor) (*Tensor, *AttentionCache) {
	return AttentionDropout(q, k, v, heads, keyBias, 0, nil, false)
}

// AttentionDropout is [Attention] with dropout of probability p applied to
// the attention probabilities when train is true, as BERT's
// attention_probs_dropout_prob, with inverted scaling 1/(1-p). One
// rng.Float32 is drawn per probability, in row-major order over
// [B,H,Tq,Tk].
func AttentionDropout(q, k, v *Tensor, heads int, keyBias *Tensor, p float32, rng *rand.Rand, train bool) (*Tensor, *AttentionCache) {
	return attention(q, k, v, heads, keyBias, p, rng, train, nil)
}

// AttentionInfer is [Attention] with the output and the probabilities taken from ws
// ([Workspace.New]; nil: newly allocated) and no cache: the same operations in the same order.
func AttentionInfer(q, k, v *Tensor, heads int, keyBias *Tensor, ws *Workspace) *Tensor {
	out, _ := attention(q, k, v, heads, keyBias, 0, nil, false, ws)
	return out
}

// attention is [AttentionDropout] with the output and the probabilities from ws; it returns no
// cache when ws is not nil (the probabilities are the workspace's).
func attention(q, k, v *Tensor, heads int, keyBias *Tensor, p float32, rng *rand.Rand, train bool, ws *Workspace) (*Tensor, *AttentionCache) {
	if len(q.Shape) != 3 || len(k.Shape) != 3 || !SameShape(k, v) || q.Shape[0] != k.Shape[0] || q.Shape[2] != k.Shape[2] {
		panic(fmt.Sprintf("nn.Attention: q %v, k %v, v %v", q.Shape, k.Shape, v.Shape))
	}
	B, Tq, Tk, HD := q.Shape[0], q.Shape[1], k.Shape[1], q.Shape[2]
	if heads <= 0 || HD%heads != 0 {
		panic(fmt.Sprintf("nn.Attention: width %d not divisible by %d heads", HD, heads))
	}
	if keyBias != nil && keyBias.Len() != B*Tk {
		panic(fmt.Sprintf("nn.Attention: keyBias %v, want [%d,%d]", keyBias.Shape, B, Tk))
	}
	if p < 0 || p >= 1 {
		panic(fmt.Sprintf("nn.Attention: dropout p = %v outside [0, 1)", p))
	}
	H, dh := heads, HD/heads
	scale := float32(1 / math.Sqrt(float64(dh)))
	c := &AttentionCache{Q: q, K: k, V: v, KeyBias: keyBias, Heads: H, B: B, Tq: Tq, Tk: Tk, Dh: dh}
	TT := Tq * Tk
	c.Probs = ws.NewUninit(B * H * TT).Data // every score written by a GEMM with beta 0
	if train && p > 0 {
		// Masks are drawn first, sequentially, so the stream does not
		// depend on the parallel schedule.
		c.DropMask = make([]float32, len(c.Probs))
		c.dropped = make([]float32, len(c.Probs))
		s := 1 / (1 - p)
		for i := range c.DropMask {
			if rng.Float32() >= p {
				c.DropMask[i] = s
			}
		}
	}
	out := ws.NewUninit(B, Tq, HD) // every head's columns written by a GEMM with beta 0
	// One task per (batch, head): scores = scale Q K^T (+ bias), row
	// softmax, optional dropout, out = P V. Tasks run in parallel with
	// single-threaded BLAS.
	runHeads(B*H, func(lo, hi int) {
		{
			for bh := lo; bh < hi; bh++ {
				b, h := bh/H, bh%H
				probs := c.Probs[bh*TT : (bh+1)*TT]
				GemmStrided(false, true, Tq, Tk, dh, scale,
					q.Data[b*Tq*HD+h*dh:], HD, k.Data[b*Tk*HD+h*dh:], HD, 0, probs, Tk)
				var bias []float32
				if keyBias != nil {
					bias = keyBias.Data[b*Tk : (b+1)*Tk]
				}
				for t := 0; t < Tq; t++ {
					softmaxRow(probs[t*Tk:(t+1)*Tk], bias, b, t)
				}
				pv := probs
				if c.DropMask != nil {
					pv = c.dropped[bh*TT : (bh+1)*TT]
					for i, m := range c.DropMask[bh*TT : (bh+1)*TT] {
						pv[i] = probs[i] * m
					}
				}
				GemmStrided(false, false, Tq, dh, Tk, 1, pv, Tk, v.Data[b*Tk*HD+h*dh:], HD,
					0, out.Data[b*Tq*HD+h*dh:], HD)
			}
		}
	})
	if ws != nil {
		return out, nil
	}
	return out, c
}

// softmaxRow replaces s with softmax(s + bias) in place (bias may be nil).
// A row without a finite score whose bias leaves a key unmasked (scores that
// are NaN or overflowed to -Inf: weights a diverged training made huge)
// becomes NaN, as a NaN score makes its row elsewhere, and as the device's
// kernel does (dnn attn_softmax_fwd): the callers' finiteness checks (the
// model's loss and posterior) turn it into an error. A row whose bias masks
// every key is a programmer error and panics.
func softmaxRow(s, bias []float32, b, t int) {
	mx := float32(math.Inf(-1))
	if bias != nil {
		bias = bias[:len(s)]
		for j := range s {
			s[j] += bias[j]
		}
	}
	for _, v := range s {
		if v > mx {
			mx = v
		}
	}
	if math.IsInf(float64(mx), -1) || math.IsNaN(float64(mx)) {
		if len(s) == 0 || allMasked(bias) {
			panic(fmt.Sprintf("nn.Attention: batch %d query %d has no key: every key masked, or none", b, t))
		}
		nan := float32(math.NaN())
		for j := range s {
			s[j] = nan
		}
		return
	}
	expShifted(s, mx)
	var sum float32
	for _, e := range s {
		sum += e
	}
	inv := 1 / sum
	for j := range s {
		s[j] *= inv
	}
}

// allMasked reports whether bias (nil: no mask) masks every key (-Inf).
func allMasked(bias []float32) bool {
	if bias == nil {
		return false
	}
	for _, v := range bias {
		if !math.IsInf(float64(v), -1) {
			return false
		}
	}
	return true
}

// AttentionBackward returns the gradients of the loss with respect to q, k
// and v, of the shapes of the inputs, and keyBias, given dout [B,Tq,H*dh].
// dKeyBias is [B,Tk], summed over heads and queries, and nil when the
// forward had no key bias. With S = scale*QK^T + bias and P = softmax(S):
//
//	dV = P^T dO,  dP = dO V^T,  dS = P (dP - rowsum(P dP))
//	dQ = scale dS K,  dK = scale dS^T Q,  dKeyBias[b,j] = sum_{h,t} dS[b,h,t,j]
func AttentionBackward(c *AttentionCache, dout *Tensor) (dq, dk, dv, dKeyBias *Tensor) {
	MustSameShape("AttentionBackward", c.Q, dout)
	B, Tq, Tk, H, dh := c.B, c.Tq, c.Tk, c.Heads, c.Dh
	HD := H * dh
	TT := Tq * Tk
	scale := float32(1 / math.Sqrt(float64(dh)))
	q, k, v := c.Q.Data, c.K.Data, c.V.Data
	pv := c.Probs
	if c.DropMask != nil {
		pv = c.dropped
	}
	dP := make([]float32, len(c.Probs))
	dq = New(c.Q.Shape...)
	dk = New(c.K.Shape...)
	dv = New(c.V.Shape...)
	var dbh []float32 // per-(b,h) key-bias gradients, summed over heads below
	if c.KeyBias != nil {
		dbh = make([]float32, B*H*Tk)
	}
	runHeads(B*H, func(lo, hi int) {
		{
			for bh := lo; bh < hi; bh++ {
				b, h := bh/H, bh%H
				o := b*Tq*HD + h*dh
				kv := b*Tk*HD + h*dh
				ds := dP[bh*TT : (bh+1)*TT]
				// dP = dO V^T [Tq,Tk]; dV = P^T dO [Tk,dh]
				GemmStrided(false, true, Tq, Tk, dh, 1, dout.Data[o:], HD, v[kv:], HD, 0, ds, Tk)
				GemmStrided(true, false, Tk, dh, Tq, 1, pv[bh*TT:], Tk, dout.Data[o:], HD, 0, dv.Data[kv:], HD)
				// dS = P * (dP*mask - rowsum(P * dP*mask)), in place.
				probs := c.Probs[bh*TT : (bh+1)*TT]
				var mask []float32
				if c.DropMask != nil {
					mask = c.DropMask[bh*TT : (bh+1)*TT]
				}
				for t := 0; t < Tq; t++ {
					pr := probs[t*Tk : (t+1)*Tk]
					dr := ds[t*Tk : (t+1)*Tk]
					if mask != nil {
						for j, m := range mask[t*Tk : (t+1)*Tk] {
							dr[j] *= m
						}
					}
					var dot float32
					for j, p := range pr {
						dot += p * dr[j]
					}
					for j, p := range pr {
						dr[j] = p * (dr[j] - dot)
					}
					if dbh != nil {
						acc := dbh[bh*Tk : (bh+1)*Tk]
						for j, g := range dr {
							acc[j] += g
						}
					}
				}
				// dQ = scale dS K [Tq,dh]; dK = scale dS^T Q [Tk,dh]
				GemmStrided(false, false, Tq, dh, Tk, scale, ds, Tk, k[kv:], HD, 0, dq.Data[o:], HD)
				GemmStrided(true, false, Tk, dh, Tq, scale, ds, Tk, q[o:], HD, 0, dk.Data[kv:], HD)
			}
		}
	})
	if dbh != nil {
		dKeyBias = New(c.KeyBias.Shape...)
		for bh := 0; bh < B*H; bh++ {
			b := bh / H
			acc := dKeyBias.Data[b*Tk : (b+1)*Tk]
			for j, g := range dbh[bh*Tk : (bh+1)*Tk] {
				acc[j] += g
			}
		}
	}
	return dq, dk, dv, dKeyBias
}

// attnSerialHeads selects how per-(batch, head) attention tasks run: in
// parallel goroutines with single-threaded BLAS (true) or sequentially with
// BLAS's own threading (false).
var attnSerialHeads = true

func runHeads(n int, fn func(lo, hi int)) {
	if !attnSerialHeads {
		fn(0, n)
		return
	}
	serialBLAS(func() { Parallel(n, 1<<20, fn) })
}
