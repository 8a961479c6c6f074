package dnn_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/nn"
)

// tolAttention: the products are GEMMs (summation order) and the softmax
// uses the device's expf and a tree sum where nn uses a Cephes expf and a
// sequential sum: a few float32 ulps per probability, a few more through
// the backward's row sums, on values of order 1 (relErr).
// Derivation: expf within 2 ulps (CUDA; glibc 1), the 256-thread tree sum log2(256) = 8 ulps, the GEMMs K u (K <= 300 keys: ~sqrt(K) u = 1e-6 on random data): ~1e-6 of values of order 1; FMA contraction merges roundings, no new error.
const tolAttention = 1e-5

// testAttentionTwin: forward and backward (dq, dk, dv, dKeyBias) of the
// device attention equal nn's: self- and cross-attention, GEMMs batched
// over heads (B <= H) and over batch elements (B > H), widths of a head
// below and rows of keys above the block size, no bias, a padding bias
// (-Inf keys), a finite bias and HF's -MaxFloat32 bias; dropout on the
// probabilities drawn from Philox (the same keep mask as nn drawing from a
// copy of the stream, which both advance alike) and given from the host;
// a row with every key masked.
func testAttentionTwin(t *testing.T, e *dnn.Engine) {
	type tcase struct {
		name            string
		B, Tq, Tk, H, D int // D: head width
		bias            string
		drop            string // "", "philox", "host"
	}
	// Small shapes: the CPU stand-in runs a thread per CUDA thread of every
	// softmax row.
	cases := []tcase{
		{"self padding", 2, 4, 4, 2, 4, "pad", ""},
		{"cross finite bias", 2, 2, 5, 2, 3, "finite", ""},
		{"cross maxneg bias", 1, 3, 3, 2, 2, "maxneg", ""},
		{"long rows", 1, 2, 300, 1, 4, "pad", ""},
		{"dropout philox, B > H", 3, 2, 5, 2, 4, "pad", "philox"},
		{"dropout host, no bias", 1, 3, 4, 2, 4, "", "host"},
	}
	rng := rand.New(rand.NewPCG(6, 6))
	for _, c := range cases {
		HD := c.H * c.D
		q := randn(rng, 1, c.B, c.Tq, HD)
		k := randn(rng, 1, c.B, c.Tk, HD)
		v := randn(rng, 1, c.B, c.Tk, HD)
		var bias *nn.Tensor
		switch c.bias {
		case "pad": // the last keys of all but the first row are padding
			mask := make([]float32, c.B*c.Tk)
			for b := 0; b < c.B; b++ {
				for j := 0; j < c.Tk; j++ {
					if b == 0 || j < c.Tk-1-b {
						mask[b*c.Tk+j] = 1
					}
				}
			}
			bias = nn.PaddingBias(mask, c.B, c.Tk)
		case "finite":
			bias = randn(rng, 2, c.B, c.Tk)
		case "maxneg":
			bias = randn(rng, 1, c.B, c.Tk)
			bias.Data[1] = -math.MaxFloat32
		}
		var dbias *dnn.Tensor
		if bias != nil {
			dbias = e.Upload(bias)
		}
		dq, dk, dv := e.Upload(q), e.Upload(k), e.Upload(v)
		var (
			out  *nn.Tensor
			cc   *nn.AttentionCache
			dout *dnn.Tensor
			dc   *dnn.AttentionCache
		)
		const p = 0.3
		switch c.drop {
		case "":
			out, cc = nn.Attention(q, k, v, c.H, bias)
			dout, dc = e.Attention(dq, dk, dv, c.H, dbias)
		case "philox":
			g := &dnn.Philox{Key: 77, Pos: 5}
			host := *g
			out, cc = nn.AttentionDropout(q, k, v, c.H, bias, p, rand.New(&host), true)
			dout, dc = e.AttentionDropout(dq, dk, dv, c.H, dbias, p, g, true)
			if g.Pos != host.Pos {
				t.Errorf("%s: device Pos %d, host %d", c.name, g.Pos, host.Pos)
			}
		case "host":
			out, cc = nn.AttentionDropout(q, k, v, c.H, bias, p, rng, true)
			dout, dc = e.AttentionMasked(dq, dk, dv, c.H, dbias, p, keepMask(cc.DropMask))
		}
		if c.drop != "" {
			if got, want := e.DropMask(dc), keepMask(cc.DropMask); !bytes.Equal(got, want) {
				t.Errorf("%s: device keep mask %v, want %v", c.name, got, want)
			}
		}
		near(t, e, c.name+" out", dout, out, tolAttention)
		near(t, e, c.name+" probs", dc.Probs, nn.FromData(cc.Probs, c.B, c.H, c.Tq, c.Tk), tolAttention)
		g := randn(rng, 1, c.B, c.Tq, HD)
		gq, gk, gv, gb := nn.AttentionBackward(cc, g)
		dgq, dgk, dgv, dgb := e.AttentionBackward(dc, e.Upload(g))
		near(t, e, c.name+" dq", dgq, gq, tolAttention)
		near(t, e, c.name+" dk", dgk, gk, tolAttention)
		near(t, e, c.name+" dv", dgv, gv, tolAttention)
		if (gb == nil) != (dgb == nil) {
			t.Errorf("%s: dKeyBias %v, want %v", c.name, dgb, gb)
			return
		}
		if gb != nil {
			near(t, e, c.name+" dKeyBias", dgb, gb, tolAttention)
		}
	}

	// A query row whose keys are all masked (a panic in nn) gives NaN
	// in its batch element's output, and only there.
	B, T, H := 2, 3, 2
	q := e.Upload(randn(rng, 1, B, T, 4))
	bias := e.PaddingBias([]float32{1, 1, 0, 0, 0, 0}, B, T)
	out, _ := e.Attention(q, q, q, H, bias)
	for i, v := range e.Download(out).Data {
		if nan := math.IsNaN(float64(v)); nan != (i >= T*4) {
			t.Errorf("all keys masked: output %d = %v: want NaN exactly in the masked batch element", i, v)
			return
		}
	}
}

// keepMask is the keep mask (1 = kept) of nn's dropout multipliers.
func keepMask(m []float32) []uint8 {
	if m == nil {
		return nil
	}
	k := make([]uint8, len(m))
	for i, v := range m {
		if v != 0 {
			k[i] = 1
		}
	}
	return k
}
