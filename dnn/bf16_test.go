package dnn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
	"github.com/nvdp-project/nvdp/nn"
)

// BF16 (--precision bf16): the GEMMs' inputs are rounded to bfloat16
// (8-bit significand: unit roundoff u = 2^-8), products are exact and
// summed in FP32. A product a*b of rounded inputs carries a relative error
// of at most 2u + u^2, so an entry c = sum_l a_l b_l of a GEMM with inner
// dimension K is off by at most (2u + u^2 + 2 K 2^-24) sum_l |a_l b_l|
// (the last term: FP32 accumulation here and in nn) <= (2u + u^2 + 2 K
// 2^-24) |a| |b| (Cauchy-Schwarz), whence the bound on relErr (max |device -
// cpu| / max |cpu|) of bf16GemmBound. On random operands |a| |b| is about
// K s_a s_b and max |c| a few sqrt(K) s_a s_b: the bound is about
// 2^-7 sqrt(K), the error itself about u. Layers compose GEMMs through
// softmax, GELU and LayerNorm: tolBF16Attention and tolBF16Layer below.
const u16 = 1.0 / 256 // BF16's unit roundoff, 2^-8

// bf16GemmBound is the a-priori bound on the relErr of a BF16 GEMM of
// inner dimension k, with the largest 2-norms na of op(A)'s rows and nb of
// op(B)'s columns, against nn's FP32 result whose largest magnitude is
// cmax; 2^-23 covers the FP32 roundings after the sum (alpha, beta, the
// bias) on both sides.
func bf16GemmBound(k int, na, nb, cmax float64) float64 {
	return (2*u16+u16*u16+2*float64(k)/(1<<24))*na*nb/cmax + 1.0/(1<<23)
}

// maxRowNorm is the largest 2-norm of the rows of the row-major
// rows x cols matrix v; maxColNorm of its columns.
func maxRowNorm(v []float32, rows, cols int) float64 {
	var m float64
	for r := 0; r < rows; r++ {
		var s float64
		for _, x := range v[r*cols : (r+1)*cols] {
			s += float64(x) * float64(x)
		}
		m = math.Max(m, math.Sqrt(s))
	}
	return m
}

func maxColNorm(v []float32, rows, cols int) float64 {
	var m float64
	for c := 0; c < cols; c++ {
		var s float64
		for r := 0; r < rows; r++ {
			s += float64(v[r*cols+c]) * float64(v[r*cols+c])
		}
		m = math.Max(m, math.Sqrt(s))
	}
	return m
}

// bf16RNE is the reference of the rounding: the bfloat16 nearest to x,
// ties to the even significand, found by comparing x with its two
// bfloat16 neighbours in float64 (exact for float32 values); past the
// largest bfloat16 the upper neighbour is 2^128, which rounds to infinity
// (IEEE's overflow). A NaN gives a NaN with the quiet bit set, sign and
// upper payload kept.
func bf16RNE(x float32) uint16 {
	u := math.Float32bits(x)
	if x != x {
		return uint16(u>>16) | 0x40
	}
	lo := uint16(u >> 16) // the neighbour toward zero
	if u&0xffff == 0 {
		return lo
	}
	hi := lo + 1 // the neighbour away from zero (0x7f7f + 1: infinity)
	mag := func(h uint16) float64 {
		if h&0x7fff == 0x7f80 {
			return math.Ldexp(1, 128)
		}
		return math.Abs(float64(bf16Float(h)))
	}
	ax := math.Abs(float64(x))
	dlo, dhi := ax-mag(lo), mag(hi)-ax
	if dlo < dhi || dlo == dhi && lo&1 == 0 {
		return lo
	}
	return hi
}

// bf16Float is the float32 of the bfloat16 bits h.
func bf16Float(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// roundTensor is x with every value rounded to bfloat16 (bf16RNE).
func roundTensor(x *nn.Tensor) *nn.Tensor {
	y := nn.New(x.Shape...)
	for i, v := range x.Data {
		y.Data[i] = bf16Float(bf16RNE(v))
	}
	return y
}

// onBF16Device runs fn with an Engine on a bf16 device (the stand-in, or
// the GPU with NVDP_CUDA_REAL=1).
func onBF16Device(t *testing.T, fn func(e *dnn.Engine)) {
	t.Helper()
	withEngine(t, cudaemu.OpenDevicePrecision(t, cuda.PrecisionBF16), func(_ *testing.T, e *dnn.Engine) { fn(e) })
}

// TestBF16Rounding: the kernel that rounds the GEMMs' inputs
// (bf16_from_f32) is round-to-nearest-even bit for bit against bf16RNE:
// zeros, ties (to even, both ways), a bit either side of a tie, subnormals
// (ties, rounding up into the smallest normal), the largest bfloat16 and
// the ties and values past it (to infinity, FP32's largest value
// included), infinities, NaNs (quiet and signalling, either sign: NaN
// stays NaN), then 2^16 random bit patterns.
func TestBF16Rounding(t *testing.T) {
	bits := []uint32{
		0x00000000, 0x80000000, 0x3f800000, 0xbf800000,
		0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0xbf818000, 0xbf808000,
		0x00000001, 0x00008000, 0x00018000, 0x00008001, 0x00007fff, 0x007fffff, 0x007f8000, 0x807fffff, 0x80018000,
		0x00800000, 0x00800001, 0x0080ffff,
		0x7f7f0000, 0x7f7f7fff, 0x7f7f8000, 0x7f7fffff, 0xff7f8000, 0xff7fffff, 0x7f7e8000,
		0x7f800000, 0xff800000,
		0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff, 0x7f810000, 0x7fbfffff,
	}
	rng := rand.New(rand.NewPCG(29, 16))
	for range 1 << 16 {
		bits = append(bits, rng.Uint32())
	}
	x := nn.New(len(bits))
	for i, b := range bits {
		x.Data[i] = math.Float32frombits(b)
	}
	onBF16Device(t, func(e *dnn.Engine) {
		got := e.RoundBF16(e.Upload(x))
		bad := 0
		for i, b := range bits {
			want := bf16RNE(x.Data[i])
			nanIn, nanOut := x.Data[i] != x.Data[i], got[i]&0x7f80 == 0x7f80 && got[i]&0x7f != 0
			if got[i] != want || nanIn != nanOut {
				if bad++; bad <= 10 {
					t.Errorf("round %#08x (%g): %#04x, want %#04x", b, x.Data[i], got[i], want)
				}
			}
		}
		// The reference itself on the named cases.
		for b, want := range map[uint32]uint16{0x3f808000: 0x3f80, 0x3f818000: 0x3f82, 0x00008000: 0, 0x00018000: 2, 0x007fffff: 0x80,
			0x7f7fffff: 0x7f80, 0x7f7f8000: 0x7f80, 0x7f7e8000: 0x7f7e, 0x7f800001: 0x7fc0, 0xff800001: 0xffc0, 0x7fffffff: 0x7fff} {
			if r := bf16RNE(math.Float32frombits(b)); r != want {
				t.Errorf("bf16RNE(%#08x) = %#04x, want %#04x", b, r, want)
			}
		}
	})
}

// TestLinearBF16: the Linear twin on a bf16 device, against nn.Linear:
// forward y, dx and dW within bf16GemmBound of their GEMMs (K = In, Out,
// rows) and NOT within the FP32 tolerance tolLinear (BF16 ran); y within
// tolLinear of nn's FP32 Linear on the same inputs and weights rounded to
// bfloat16 (the device's error is the rounding of the inputs, nothing
// else); the bias gradient, a column sum in FP32, within tolLinear.
func TestLinearBF16(t *testing.T) {
	onBF16Device(t, func(e *dnn.Engine) {
		rng := rand.New(rand.NewPCG(1, 1))
		const rows, in, out = 14, 24, 10
		for _, bias := range []bool{true, false} {
			l := nn.NewLinear("dense", in, out, bias)
			l.InitHF(rng, 0.5)
			if bias {
				l.B.InitNormal(rng, 0.3)
			}
			dl := e.NewLinear(l)
			x := randn(rng, 1, 2, 7, in)
			y, cx := l.Forward(x)
			dy, dcx := dl.Forward(e, e.Upload(x))
			W := l.W.Value.Data
			check := func(what string, got *dnn.Tensor, want *nn.Tensor, bound float64) {
				r := relErr(e.Download(got).Data, want.Data)
				t.Logf("bias %v: %s relErr %.3g (bound %.3g, FP32 tolerance %g)", bias, what, r, bound, tolLinear)
				if !(r <= bound) {
					t.Errorf("bias %v: %s: relErr %.3g > bound %.3g", bias, what, r, bound)
				}
				if r <= tolLinear {
					t.Errorf("bias %v: %s: relErr %.3g within the FP32 tolerance %g: did BF16 run?", bias, what, r, tolLinear)
				}
			}
			check("y", dy, y, bf16GemmBound(in, maxRowNorm(x.Data, rows, in), maxRowNorm(W, out, in), maxAbs(y.Data)))

			// nn on the rounded inputs: the device within FP32 tolerance.
			lr := nn.NewLinear("dense", in, out, bias)
			copy(lr.W.Value.Data, roundTensor(l.W.Value).Data)
			if bias {
				copy(lr.B.Value.Data, l.B.Value.Data) // added in FP32
			}
			yr, _ := lr.Forward(roundTensor(x))
			r := relErr(e.Download(dy).Data, yr.Data)
			t.Logf("bias %v: y against nn on inputs rounded to BF16: relErr %.3g", bias, r)
			if !(r <= tolLinear) {
				t.Errorf("bias %v: y against nn on inputs rounded to BF16: relErr %.3g > %g", bias, r, tolLinear)
			}

			g := randn(rng, 1, 2, 7, out)
			dx := l.Backward(cx, g)
			ddx := dl.Backward(e, dcx, e.Upload(g))
			check("dx", ddx, dx, bf16GemmBound(out, maxRowNorm(g.Data, rows, out), maxColNorm(W, out, in), maxAbs(dx.Data)))
			check("dW", dl.W.Grad, l.W.Grad, bf16GemmBound(rows, maxColNorm(g.Data, rows, out), maxColNorm(x.Data, rows, in), maxAbs(l.W.Grad.Data)))
			if bias {
				nearParam(t, e, dl.B, l.B, tolLinear)
			}
			e.FreeParams(dl.Params())
		}
	})
}

// bf16Errors records the relErr of each output of a BF16 layer test and
// fails those above tol.
type bf16Errors struct {
	t   *testing.T
	e   *dnn.Engine
	tol float64
	max float64 // the largest relErr seen
}

func (b *bf16Errors) near(what string, got *dnn.Tensor, want *nn.Tensor) {
	b.t.Helper()
	r := relErr(b.e.Download(got).Data, want.Data)
	b.max = math.Max(b.max, r)
	b.t.Logf("%s relErr %.3g", what, r)
	if !(r <= b.tol) {
		b.t.Errorf("%s: relErr %.3g > %g", what, r, b.tol)
	}
}

// TestAttentionBF16: attention on a bf16 device (its four products in
// BF16: scores, P V, dP, dV, dQ, dK) against nn's FP32 attention, forward
// and backward, with the GEMMs batched over heads (B <= H) and over batch
// elements (B > H, the operands' bfloat16 copies read at head offsets),
// a padding bias and Philox dropout: within tolBF16Attention, and not
// within the FP32 tolerance.
func TestAttentionBF16(t *testing.T) {
	onBF16Device(t, func(e *dnn.Engine) {
		rng := rand.New(rand.NewPCG(6, 29))
		for _, c := range []struct {
			name            string
			B, Tq, Tk, H, D int
		}{{"B <= H", 2, 4, 6, 2, 8}, {"B > H, dropout", 3, 5, 5, 2, 8}} {
			HD := c.H * c.D
			q, k, v := randn(rng, 1, c.B, c.Tq, HD), randn(rng, 1, c.B, c.Tk, HD), randn(rng, 1, c.B, c.Tk, HD)
			mask := make([]float32, c.B*c.Tk)
			for i := range mask {
				if i%c.Tk < c.Tk-i/c.Tk { // row b has b padding keys at its end
					mask[i] = 1
				}
			}
			bias := nn.PaddingBias(mask, c.B, c.Tk)
			g := &dnn.Philox{Key: 29, Pos: 3}
			host := *g
			const p = 0.2
			out, cc := nn.AttentionDropout(q, k, v, c.H, bias, p, rand.New(&host), c.B > c.H)
			dout, dc := e.AttentionDropout(e.Upload(q), e.Upload(k), e.Upload(v), c.H, e.Upload(bias), p, g, c.B > c.H)
			b := &bf16Errors{t: t, e: e, tol: tolBF16Attention}
			b.near(c.name+" out", dout, out)
			b.near(c.name+" probs", dc.Probs, nn.FromData(cc.Probs, c.B, c.H, c.Tq, c.Tk))
			gy := randn(rng, 1, c.B, c.Tq, HD)
			gq, gk, gv, gb := nn.AttentionBackward(cc, gy)
			dgq, dgk, dgv, dgb := e.AttentionBackward(dc, e.Upload(gy))
			b.near(c.name+" dq", dgq, gq)
			b.near(c.name+" dk", dgk, gk)
			b.near(c.name+" dv", dgv, gv)
			b.near(c.name+" dKeyBias", dgb, gb)
			if b.max <= tolAttention {
				t.Errorf("%s: largest relErr %.3g within the FP32 tolerance %g: did BF16 run?", c.name, b.max, tolAttention)
			}
		}
	})
}

// TestTransformerLayerBF16: the Transformer layer on a bf16 device (every
// Linear and attention product in BF16; LayerNorm, softmax, GELU, dropout
// in FP32) against nn's FP32 layer, forward and backward, every dropout
// active (the same Philox draws): BERT's post-LN self-attention with a
// padding bias, and the NVDP block's cross-attention with a finite bias.
// y, dxq, dxkv, dKeyBias and every parameter's gradient within
// tolBF16Layer (the key bias's gradient, zero in exact arithmetic,
// against the key weight's gradient's scale as in the FP32 test); the
// largest error above the FP32 tolerance.
func TestTransformerLayerBF16(t *testing.T) {
	onBF16Device(t, func(e *dnn.Engine) {
		drop := nn.Dropout{P: 0.1}
		const H, I = 16, 32
		rng := rand.New(rand.NewPCG(8, 29))
		for _, c := range []struct {
			name      string
			B, Tq, Tk int
			o         nn.LayerOptions
			cross     bool
		}{
			{"bert", 2, 6, 6, nn.LayerOptions{Heads: 2, HiddenDropout: drop, AttnDropout: 0.1, AttnResidual: true}, false},
			{"nvdp block", 2, 4, 6, nn.LayerOptions{Heads: 2, HiddenDropout: drop, RecomputeGELU: true}, true},
		} {
			l := randTransformer(rng, H, I)
			dl := e.NewTransformerLayer(l)
			xq := randn(rng, 1, c.B, c.Tq, H)
			xkv := xq
			var bias *nn.Tensor
			if c.cross {
				xkv = randn(rng, 1, c.B, c.Tk, H)
				bias = randn(rng, 1, c.B, c.Tk)
			} else {
				mask := make([]float32, c.B*c.Tk)
				for i := range mask {
					if i%c.Tk < c.Tk-i/c.Tk {
						mask[i] = 1
					}
				}
				bias = nn.PaddingBias(mask, c.B, c.Tk)
			}
			dxq := e.Upload(xq)
			dxkv := dxq
			if c.cross {
				dxkv = e.Upload(xkv)
			}
			g := &dnn.Philox{Key: rng.Uint64(), Pos: 1}
			host := *g
			y, cache := l.Forward(xq, xkv, bias, c.o, true, rand.New(&host))
			dy, dcache := dl.Forward(e, dxq, dxkv, e.Upload(bias), c.o, true, g)
			b := &bf16Errors{t: t, e: e, tol: tolBF16Layer}
			b.near(c.name+" y", dy, y)
			gy := randn(rng, 1, c.B, c.Tq, H)
			gq, gkv, gb := l.Backward(cache, gy)
			dgq, dgkv, dgb := dl.Backward(e, dcache, e.Upload(gy))
			b.near(c.name+" dxq", dgq, gq)
			if gkv != nil {
				b.near(c.name+" dxkv", dgkv, gkv)
			}
			b.near(c.name+" dKeyBias", dgb, gb)
			ps := l.Params()
			for i, dp := range dl.Params() {
				p := ps[i]
				if i > 0 && p.Name == "encoder.layer.0.attention.self.key.bias" {
					d := maxAbsDiff(e.Download(dp.Grad).Data, p.Grad.Data) / maxAbs(ps[i-1].Grad.Data)
					b.max = math.Max(b.max, d)
					t.Logf("%s %s grad error / key weight grad scale %.3g", c.name, p.Name, d)
					if !(d <= tolBF16Layer) {
						t.Errorf("%s %s grad: error %.3g > %g of the key weight's gradient", c.name, p.Name, d, tolBF16Layer)
					}
					continue
				}
				b.near(c.name+" "+p.Name+" grad", dp.Grad, p.Grad)
			}
			if b.max <= tolTransformer {
				t.Errorf("%s: largest relErr %.3g within the FP32 tolerance %g: did BF16 run?", c.name, b.max, tolTransformer)
			}
			e.FreeParams(dl.Params())
		}
	})
}

// Tolerances of the layers in BF16 (relErr against nn's FP32 layer). Each
// BF16 GEMM on the path from the inputs to an output rounds its operands,
// which carry the errors of the GEMMs before it, and adds a relative
// error of order u (bf16GemmBound: at most 2^-7 sqrt(K) norm-wise, about u
// on random data, the Linear's measured 0.4u to 0.7u). The tolerance
// allows 2u per GEMM on the longest such path: 3 for attention (scores,
// then dP, then dQ or dK; out and dV take 2), 12 for a Transformer layer
// (Q/K/V, scores, P V, the attention output, the intermediate and output
// dense layers forward; their three dx, dP, dQ and the query weight's
// gradient back), LayerNorm, softmax and GELU in between in FP32.
// Measured on the stand-in (TestAttentionBF16, TestTransformerLayerBF16):
// at most 1.3u for attention, 4.1u for the layer (the query weight's
// gradient).
const (
	// Derivation: each BF16 GEMM errs by 2u16 + u16^2 + K 2^-24 per product (u16 = 2^-8: rounding both inputs); attention chains 3 products forward: 2 * 3 * u16 with 2x margin; FMA irrelevant (FP32 accumulation is cuBLAS's).
	tolBF16Attention = 2 * 3 * u16 // 0.023
	// Derivation: a layer chains ~12 BF16 GEMM roundings of 2 u16 (u16 = 2^-8) through LayerNorm (gain ~1): 2 * 12 * u16; FMA irrelevant at that scale.
	tolBF16Layer = 2 * 12 * u16 // 0.094
)

// TestWeightBF16Copy: on a bf16 device a Linear's weight keeps a bfloat16
// copy equal to the rounding of its FP32 value at every moment a GEMM may
// read it: made by the first forward (not before: a parameter no GEMM
// reads has none; the bias never), unchanged and not rounded again by
// later GEMMs (a forward is one rounding launch, of x, and one GEMM),
// rounded again by AdamW's update (in the update's kernel: one launch per
// parameter) and by PushParam (a checkpoint loaded); after each, the
// forward equals that of a fresh Linear built from the new FP32 weights.
func TestWeightBF16Copy(t *testing.T) {
	onBF16Device(t, func(e *dnn.Engine) {
		rng := rand.New(rand.NewPCG(9, 9))
		l := nn.NewLinear("dense", 24, 10, true)
		l.InitHF(rng, 0.5)
		l.B.InitNormal(rng, 0.3)
		dl := e.NewLinear(l)
		defer e.FreeParams(dl.Params())
		x := e.Upload(randn(rng, 1, 6, 24))
		host := nn.New(10, 24)
		want := func(stage string) { // the copy is the rounding of the value, and the forward a fresh layer's
			t.Helper()
			v := e.Download(dl.W.Value)
			got := e.WeightBF16(dl.W)
			if len(got) != len(v.Data) {
				t.Errorf("%s: %d bfloat16 values for %d weights", stage, len(got), len(v.Data))
				return
			}
			for i, f := range v.Data {
				if got[i] != bf16RNE(f) {
					t.Errorf("%s: weight %d: copy %#04x, rounding of %v is %#04x", stage, i, got[i], f, bf16RNE(f))
					return
				}
			}
			copy(host.Data, v.Data)
			fresh := nn.NewLinear("dense", 24, 10, true)
			copy(fresh.W.Value.Data, v.Data)
			copy(fresh.B.Value.Data, e.Download(dl.B.Value).Data)
			fl := e.NewLinear(fresh)
			defer e.FreeParams(fl.Params())
			y, _ := dl.Forward(e, x)
			fy, _ := fl.Forward(e, x)
			near(t, e, stage+": forward against a fresh layer", y, e.Download(fy), 0)
		}
		if e.WeightBF16(dl.W) != nil || e.WeightBF16(dl.B) != nil {
			t.Errorf("a bfloat16 copy before any GEMM")
		}
		before := e.Dev.Counts()
		dl.Forward(e, x)
		if c := e.Dev.Counts().Sub(before); c.Launches != 3 || c.BLASCalls != 1 { // bias_rows, x and W rounded, the GEMM
			t.Errorf("first forward: %+v, want 3 launches, 1 cuBLAS call", c)
		}
		want("first forward")
		before = e.Dev.Counts()
		_, cx := dl.Forward(e, x)
		if c := e.Dev.Counts().Sub(before); c.Launches != 2 || c.BLASCalls != 1 { // bias_rows, x rounded, the GEMM
			t.Errorf("second forward: %+v, want 2 launches, 1 cuBLAS call (W not rounded again)", c)
		}
		if e.WeightBF16(dl.B) != nil {
			t.Errorf("the bias has a bfloat16 copy")
		}
		dl.Backward(e, cx, e.Upload(randn(rng, 1, 6, 10)))
		want("backward (no change)")
		old := e.WeightBF16(dl.W)
		opt := dnn.NewAdamW(0.05, 0.9, 0.999, 1e-8, 0.01)
		before = e.Dev.Counts()
		opt.Update(e, dl.Params(), opt.LR)
		if c := e.Dev.Counts().Sub(before); c.Launches != 2 { // adamw_step of W and of b, W's copy in W's
			t.Errorf("AdamW update: %+v, want 2 launches", c)
		}
		changed := 0
		for i, h := range e.WeightBF16(dl.W) {
			if h != old[i] {
				changed++
			}
		}
		if changed == 0 {
			t.Errorf("AdamW's update left every bfloat16 weight as it was")
		}
		want("AdamW update")
		for i := range host.Data { // a checkpoint's weights
			host.Data[i] = float32(rng.NormFloat64())
		}
		p := &nn.Param{Name: "dense.weight", Value: host}
		e.PushParam(p, dl.W)
		want("PushParam")
		if got := e.WeightBF16(dl.W); got[0] != bf16RNE(host.Data[0]) {
			t.Errorf("after PushParam: copy %#04x, want %#04x", got[0], bf16RNE(host.Data[0]))
		}
	})
}
