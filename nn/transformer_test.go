package nn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
)

// randLayer is a TransformerLayer of width 8 (2 heads), intermediate 12,
// with every parameter random (LayerNorm weights around 1).
func randLayer(seed uint64) *nn.TransformerLayer {
	rng := rngFor(seed)
	l := nn.NewTransformerLayer("layer.", 8, 12, 1e-5)
	for _, p := range l.Params() {
		p.InitNormal(rng, 0.4)
		if p == l.AttnLN.Weight || p == l.OutLN.Weight {
			for i := range p.Value.Data {
				p.Value.Data[i] += 1
			}
		}
	}
	return l
}

// TestTransformerLayerGradients checks both LayerNorm orders with every
// dropout active (masks fixed by reseeding), with and without GELU
// recomputation, on the input, the padding bias and two parameters.
func TestTransformerLayerGradients(t *testing.T) {
	var cases []gradCase
	for _, preLN := range []bool{false, true} {
		for _, recompute := range []bool{false, true} {
			l := randLayer(90)
			rng := rngFor(91)
			x := nntest.RandTensor(rng, 2, 5, 8)
			w := nntest.RandTensor(rng, 2, 5, 8)
			bias := nn.PaddingBias([]float32{1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 2, 5)
			o := nn.LayerOptions{Heads: 2, HiddenDropout: nn.Dropout{P: 0.2}, AttnDropout: 0.1, ActDropout: nn.Dropout{P: 0.3},
				AttnResidual: true, PreLN: preLN, RecomputeGELU: recompute}
			fwd := func() (*nn.Tensor, *nn.TransformerCache) {
				return l.Forward(x, x, bias, o, true, rand.New(rand.NewPCG(5, 5)))
			}
			cases = append(cases, gradCase{
				name:   fmt.Sprintf("preLN=%v/recompute=%v", preLN, recompute),
				inputs: map[string][]float32{"x": x.Data, "W_1": l.Inter.W.Value.Data, "LN_1.weight": l.AttnLN.Weight.Value.Data},
				loss:   func() float64 { y, _ := fwd(); return nntest.Dot(w, y) },
				grads: func() map[string][]float32 {
					nn.ZeroGrads(l.Params())
					_, c := fwd()
					dx, _, _ := l.Backward(c, w)
					return map[string][]float32{"x": dx.Data, "W_1": l.Inter.W.Grad.Data, "LN_1.weight": l.AttnLN.Weight.Grad.Data}
				},
				opts: nntest.GradOpts{Eps: 1e-2, MaxChecks: 40},
			})
		}
	}
	runGradCases(t, cases)
}

// TestPreLNEquations composes the pre-LN layer from its parts,
//
//	a = x + W_o Attention(LN_1 x) + b_o,  y = a + W_2 GELU(W_1 LN_2(a) + b_1) + b_2,
//
// and compares with Forward (inference, no dropout); the post-LN order must
// give a different output, so the option is not ignored.
func TestPreLNEquations(t *testing.T) {
	l := randLayer(92)
	x := nntest.RandTensor(rngFor(93), 2, 4, 8)
	o := nn.LayerOptions{Heads: 2, AttnResidual: true, PreLN: true, NoGrad: true}
	y, c := l.Forward(x, x, nil, o, false, nil)
	if c != nil {
		t.Fatal("NoGrad inference kept a cache")
	}
	n1, _ := l.AttnLN.Forward(x)
	q, _ := l.Query.Forward(n1)
	k, _ := l.Key.Forward(n1)
	v, _ := l.Value.Forward(n1)
	ctx, _ := nn.Attention(q, k, v, 2, nil)
	a, _ := l.AttnOut.Forward(ctx)
	nn.AddInPlace(a, x)
	n2, _ := l.OutLN.Forward(a)
	h, _ := l.Inter.Forward(n2)
	want, _ := l.Out.Forward(nn.GELU(h))
	nn.AddInPlace(want, a)
	for i, v := range want.Data {
		if math.Abs(float64(y.Data[i]-v)) > 1e-5 {
			t.Fatalf("y[%d] = %v, want %v", i, y.Data[i], v)
		}
	}
	o.PreLN = false
	post, _ := l.Forward(x, x, nil, o, false, nil)
	if math.Abs(float64(post.Data[0]-y.Data[0])) < 1e-4 {
		t.Errorf("post-LN and pre-LN outputs agree (%v): PreLN ignored?", y.Data[0])
	}
}

// TestPreLNNeedsSelfAttention: PreLN with cross-attention is a wiring error.
func TestPreLNNeedsSelfAttention(t *testing.T) {
	l := randLayer(94)
	xq, xkv := nntest.RandTensor(rngFor(95), 1, 2, 8), nntest.RandTensor(rngFor(96), 1, 3, 8)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for PreLN with cross-attention")
		}
	}()
	l.Forward(xq, xkv, nil, nn.LayerOptions{Heads: 2, AttnResidual: true, PreLN: true}, false, nil)
}
