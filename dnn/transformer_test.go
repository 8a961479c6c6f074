package dnn_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/nn"
)

// tolTransformer: a layer composes the GEMM, attention and LayerNorm twins
// (each within 1e-5); LayerNorm's float32 statistics and the softmax's
// expf differ from nn by a few ulps, which the layer carries through two
// normalisations forward and back (relErr).
// Derivation: the sum of the Linear, attention and LayerNorm errors (each ~1e-6, bounds above) through two normalisations (gain ~1): a few 1e-6; FMA contraction only merges roundings.
const tolTransformer = 1e-5

// randTransformer is an nn layer of width H and intermediate size I with
// every parameter random (LayerNorm weights around 1).
func randTransformer(rng *rand.Rand, H, I int) *nn.TransformerLayer {
	l := nn.NewTransformerLayer("encoder.layer.0.", H, I, 1e-12)
	for _, p := range l.Params() {
		p.InitNormal(rng, 0.3)
		if p == l.AttnLN.Weight || p == l.OutLN.Weight {
			for i := range p.Value.Data {
				p.Value.Data[i] += 1
			}
		}
	}
	return l
}

// testTransformerLayerTwin: forward and backward of the device layer equal
// nn's (y, dxq, dxkv, dKeyBias, every parameter's gradient) on the same
// inputs and parameters, with every dropout active and drawn by both from
// the same Philox stream (nn through rand.New of a copy): BERT's post-LN
// self-attention with a padding bias, the NVDP block's cross-attention
// without residual (finite key bias, GELU recomputed), wav2vec2's pre-LN
// order with activation dropout (GELU recomputed: the mask reapplied).
// (TestEncoderTwin runs the layer's inference forward.)
func testTransformerLayerTwin(t *testing.T, e *dnn.Engine) {
	type tcase struct {
		name      string
		B, Tq, Tk int
		o         nn.LayerOptions
		cross     bool
		bias      string
		train     bool
	}
	drop := nn.Dropout{P: 0.2}
	cases := []tcase{
		{"bert", 2, 4, 4, nn.LayerOptions{Heads: 2, HiddenDropout: drop, AttnDropout: 0.2, AttnResidual: true}, false, "pad", true},
		{"nvdp block", 2, 3, 4, nn.LayerOptions{Heads: 2, HiddenDropout: drop, RecomputeGELU: true}, true, "finite", true},
		{"pre-LN", 1, 4, 4, nn.LayerOptions{Heads: 2, HiddenDropout: drop, ActDropout: nn.Dropout{P: 0.3}, AttnResidual: true, PreLN: true, RecomputeGELU: true}, false, "", true},
	}
	const H, I = 12, 20
	rng := rand.New(rand.NewPCG(8, 8))
	for _, c := range cases {
		l := randTransformer(rng, H, I)
		dl := e.NewTransformerLayer(l)
		xq := randn(rng, 1, c.B, c.Tq, H)
		xkv := xq
		if c.cross {
			xkv = randn(rng, 1, c.B, c.Tk, H)
		}
		var bias *nn.Tensor
		switch c.bias {
		case "pad":
			mask := make([]float32, c.B*c.Tk)
			for i := range mask {
				if i%c.Tk < c.Tk-i/c.Tk { // row b has b padding keys at its end
					mask[i] = 1
				}
			}
			bias = nn.PaddingBias(mask, c.B, c.Tk)
		case "finite":
			bias = randn(rng, 1, c.B, c.Tk)
		}
		dxq := e.Upload(xq)
		dxkv := dxq
		if c.cross {
			dxkv = e.Upload(xkv)
		}
		var dbias *dnn.Tensor
		if bias != nil {
			dbias = e.Upload(bias)
		}
		g := &dnn.Philox{Key: rng.Uint64(), Pos: 1}
		host := *g
		y, cache := l.Forward(xq, xkv, bias, c.o, c.train, rand.New(&host))
		dy, dcache := dl.Forward(e, dxq, dxkv, dbias, c.o, c.train, g)
		if g.Pos != host.Pos {
			t.Errorf("%s: device Pos %d, host %d", c.name, g.Pos, host.Pos)
		}
		near(t, e, c.name+" y", dy, y, tolTransformer)
		if !c.train {
			if dcache != nil || cache != nil {
				t.Errorf("%s: inference cache %v (nn %v)", c.name, dcache, cache)
			}
			e.FreeParams(dl.Params())
			continue
		}
		gy := randn(rng, 1, c.B, c.Tq, H)
		gq, gkv, gb := l.Backward(cache, gy)
		dgq, dgkv, dgb := dl.Backward(e, dcache, e.Upload(gy))
		near(t, e, c.name+" dxq", dgq, gq, tolTransformer)
		if (gkv == nil) != (dgkv == nil) || (gb == nil) != (dgb == nil) {
			t.Errorf("%s: dxkv %v dKeyBias %v, want %v %v", c.name, dgkv, dgb, gkv, gb)
			return
		}
		if gkv != nil {
			near(t, e, c.name+" dxkv", dgkv, gkv, tolTransformer)
		}
		if gb != nil {
			near(t, e, c.name+" dKeyBias", dgb, gb, tolTransformer)
		}
		nearLayerParams(t, e, c.name, dl.Params(), l.Params(), tolTransformer)
		// BackwardInputs (the encoder's) skips the key-bias gradient only:
		// the same input gradients, bit for bit.
		iq, ikv := dl.BackwardInputs(e, dcache, e.Upload(gy))
		if (ikv == nil) != (dgkv == nil) {
			t.Errorf("%s: BackwardInputs dxkv %v, Backward's %v", c.name, ikv, dgkv)
		} else {
			near(t, e, c.name+" BackwardInputs dxq", iq, e.Download(dgq), 0)
			if ikv != nil {
				near(t, e, c.name+" BackwardInputs dxkv", ikv, e.Download(dgkv), 0)
			}
		}
		e.FreeParams(dl.Params())
	}
}

// nearLayerParams compares the gradients of a device layer's parameters
// dps with those of its nn twin ps (same names, same order). A key bias's
// gradient is zero in exact arithmetic (softmax is invariant to the
// constant q.b_k/sqrt(dh) it adds to a query's scores), so both devices
// hold rounding noise there: it is compared with the scale of the key
// weight's gradient instead of its own.
func nearLayerParams(t *testing.T, e *dnn.Engine, what string, dps []*dnn.Param, ps []*nn.Param, tol float64) {
	t.Helper()
	if len(dps) != len(ps) {
		t.Errorf("%s: %d parameters, want %d", what, len(dps), len(ps))
		return
	}
	for i, p := range ps {
		if dps[i].Name != p.Name {
			t.Errorf("%s: parameter %d is %s, want %s", what, i, dps[i].Name, p.Name)
			return
		}
		if strings.HasSuffix(p.Name, "attention.self.key.bias") && i > 0 && ps[i-1].Name == strings.TrimSuffix(p.Name, "bias")+"weight" {
			got := e.Download(dps[i].Grad).Data
			scale := maxAbs(ps[i-1].Grad.Data)
			if d := maxAbsDiff(got, p.Grad.Data); !(d <= tol*scale) {
				t.Errorf("%s %s grad: error %.3g > %g x %.3g (the key weight's gradient)", what, p.Name, d, tol, scale)
			}
			continue
		}
		nearParam(t, e, dps[i], p, tol)
	}
}

func maxAbs(v []float32) float64 {
	var m float64
	for _, x := range v {
		m = math.Max(m, math.Abs(float64(x)))
	}
	return m
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d != d {
			return d
		}
		m = math.Max(m, d)
	}
	return m
}
