package nn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
)

// gradCase is one finite-difference check: loss() recomputes a scalar loss
// from the current contents of the inputs; grads() runs forward and backward
// once and returns the analytic gradient of each named input.
type gradCase struct {
	name   string
	inputs map[string][]float32
	loss   func() float64
	grads  func() map[string][]float32
	opts   nntest.GradOpts
}

func runGradCases(t *testing.T, cases []gradCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.grads()
			if len(g) != len(tc.inputs) {
				t.Fatalf("%d gradients for %d inputs", len(g), len(tc.inputs))
			}
			for name, x := range tc.inputs {
				if g[name] == nil {
					t.Fatalf("no gradient for %s", name)
				}
				nntest.CheckGradStrict(t, name, tc.loss, x, g[name], tc.opts)
			}
		})
	}
}

func rngFor(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 99)) }

func linearCase(bias bool) gradCase {
	rng := rngFor(1)
	l := nn.NewLinear("fc", 5, 4, bias)
	l.W.InitNormal(rng, 0.5)
	if bias {
		l.B.InitNormal(rng, 0.5)
	}
	x := nntest.RandTensor(rng, 2, 3, 5)
	w := nntest.RandTensor(rng, 2, 3, 4)
	in := map[string][]float32{"x": x.Data, "W": l.W.Value.Data}
	if bias {
		in["b"] = l.B.Value.Data
	}
	return gradCase{
		name: map[bool]string{true: "Linear/bias", false: "Linear/nobias"}[bias], inputs: in,
		loss: func() float64 { y, _ := l.Forward(x); return nntest.Dot(w, y) },
		grads: func() map[string][]float32 {
			nn.ZeroGrads(l.Params())
			_, c := l.Forward(x)
			dx := l.Backward(c, w)
			g := map[string][]float32{"x": dx.Data, "W": l.W.Grad.Data}
			if bias {
				g["b"] = l.B.Grad.Data
			}
			return g
		},
	}
}

func TestLayerGradients(t *testing.T) {
	rng := rngFor(2)
	// Embedding with a repeated id (scatter-add must accumulate).
	emb := nn.NewEmbedding("emb", 6, 3)
	emb.InitHF(rng, 1)
	ids := []int32{1, 4, 1, 0, 5, 1}
	wEmb := nntest.RandTensor(rng, 2, 3, 3)
	// LayerNorm with non-trivial affine parameters.
	ln := nn.NewLayerNorm("ln", 8, 1e-5)
	ln.Weight.InitNormal(rng, 1)
	ln.Bias.InitNormal(rng, 1)
	xLN := nntest.RandTensor(rng, 3, 2, 8)
	Scale(xLN, 3)
	wLN := nntest.RandTensor(rng, 3, 2, 8)
	xG := nntest.RandTensor(rng, 4, 7)
	Scale(xG, 2)
	wG := nntest.RandTensor(rng, 4, 7)
	xT := nntest.RandTensor(rng, 3, 5)
	wT := nntest.RandTensor(rng, 3, 5)

	cases := []gradCase{
		linearCase(true), linearCase(false),
		{
			name: "Embedding", inputs: map[string][]float32{"W": emb.W.Value.Data},
			loss: func() float64 { return nntest.Dot(wEmb, emb.Forward(ids, 2, 3)) },
			grads: func() map[string][]float32 {
				nn.ZeroGrads(emb.Params())
				emb.Backward(ids, wEmb)
				return map[string][]float32{"W": emb.W.Grad.Data}
			},
		},
		{
			name: "LayerNorm", inputs: map[string][]float32{"x": xLN.Data, "weight": ln.Weight.Value.Data, "bias": ln.Bias.Value.Data},
			loss: func() float64 { y, _ := ln.Forward(xLN); return nntest.Dot(wLN, y) },
			grads: func() map[string][]float32 {
				nn.ZeroGrads(ln.Params())
				_, c := ln.Forward(xLN)
				dx := ln.Backward(c, wLN)
				return map[string][]float32{"x": dx.Data, "weight": ln.Weight.Grad.Data, "bias": ln.Bias.Grad.Data}
			},
		},
		{
			name: "GELU", inputs: map[string][]float32{"x": xG.Data},
			loss: func() float64 { return nntest.Dot(wG, nn.GELU(xG)) },
			grads: func() map[string][]float32 {
				return map[string][]float32{"x": nn.GELUBackward(xG, wG).Data}
			},
			opts: nntest.GradOpts{Eps: 1e-3},
		},
		{
			name: "Tanh", inputs: map[string][]float32{"x": xT.Data},
			loss: func() float64 { return nntest.Dot(wT, nn.Tanh(xT)) },
			grads: func() map[string][]float32 {
				return map[string][]float32{"x": nn.TanhBackward(nn.Tanh(xT), wT).Data}
			},
			opts: nntest.GradOpts{Eps: 1e-3},
		},
	}
	runGradCases(t, cases)
}

// Scale multiplies in place (local helper to keep the tests readable).
func Scale(t *nn.Tensor, s float32) { nn.Scale(t, s) }

// TestGELUValues pins GELU to erf-form reference values (torch.nn.functional.gelu).
func TestGELUValues(t *testing.T) {
	for _, tc := range []struct{ x, want float64 }{
		{0, 0}, {1, 0.8413447460685429}, {-1, -0.15865525393145707}, {2.5, 2.4844758},
		{-3, -0.0040496}, {0.5, 0.34573123063700656},
	} {
		got := nn.GELU(nn.FromData([]float32{float32(tc.x)}, 1)).Data[0]
		if math.Abs(float64(got)-tc.want) > 1e-6 {
			t.Errorf("GELU(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
}

func TestLayerNormNormalises(t *testing.T) {
	ln := nn.NewLayerNorm("ln", 4, 1e-12)
	y, _ := ln.Forward(nn.FromData([]float32{1, 2, 3, 4, 10, 10, 10, 14}, 2, 4))
	// row 1: mean 2.5, var 1.25 -> (x-2.5)/sqrt(1.25)
	want := []float64{-1.3416408, -0.4472136, 0.4472136, 1.3416408, -0.57735027, -0.57735027, -0.57735027, 1.7320508}
	for i, w := range want {
		if math.Abs(float64(y.Data[i])-w) > 1e-5 {
			t.Errorf("y[%d] = %v, want %v", i, y.Data[i], w)
		}
	}
}

func TestEmbeddingForwardPanicsOnBadID(t *testing.T) {
	emb := nn.NewEmbedding("emb", 3, 2)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for id 3 in a vocabulary of 3")
		}
	}()
	emb.Forward([]int32{0, 3})
}

func TestGradientAccumulation(t *testing.T) {
	rng := rngFor(3)
	l := nn.NewLinear("fc", 3, 2, true)
	l.InitHF(rng, 1)
	x := nntest.RandTensor(rng, 4, 3)
	dy := nntest.RandTensor(rng, 4, 2)
	_, c := l.Forward(x)
	l.Backward(c, dy)
	once := l.W.Grad.Clone()
	onceB := l.B.Grad.Clone()
	l.Backward(c, dy)
	for i, g := range l.W.Grad.Data {
		if math.Abs(float64(g-2*once.Data[i])) > 1e-5 {
			t.Fatalf("W.Grad[%d] after two backward passes = %v, want 2*%v", i, g, once.Data[i])
		}
	}
	for i, g := range l.B.Grad.Data {
		if math.Abs(float64(g-2*onceB.Data[i])) > 1e-5 {
			t.Fatalf("B.Grad[%d] = %v, want %v", i, g, 2*onceB.Data[i])
		}
	}
	nn.ZeroGrads(l.Params())
	if nn.GradNorm(l.Params()) != 0 {
		t.Fatal("ZeroGrads left a non-zero gradient")
	}
}

// layerNormByRow is LayerNorm's forward pass as first written, one row at a
// time: the reference of TestLayerNormRows4.
func layerNormByRow(x, w, b []float32, D int, eps float64) (y, mean, rstd []float32) {
	rows := len(x) / D
	y, mean, rstd = make([]float32, len(x)), make([]float32, rows), make([]float32, rows)
	for r := range rows {
		xr, yr := x[r*D:(r+1)*D], y[r*D:(r+1)*D]
		var s float64
		for _, v := range xr {
			s += float64(v)
		}
		m := s / float64(D)
		var ss float64
		for _, v := range xr {
			d := float64(v) - m
			ss += d * d
		}
		rs := 1 / math.Sqrt(ss/float64(D)+eps)
		m32, r32 := float32(m), float32(rs)
		for i, v := range xr {
			yr[i] = (v-m32)*r32*w[i] + b[i]
		}
		mean[r], rstd[r] = m32, r32
	}
	return y, mean, rstd
}

// TestLayerNormRows4: Forward and Infer, which normalise four rows at a time,
// give the one-row-at-a-time loop's bits, for row counts that leave every
// remainder, on rows of large offsets where the order of the sums shows.
func TestLayerNormRows4(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, D := range []int{128, 7, 1} {
		for rows := 1; rows <= 11; rows++ {
			ln := nn.NewLayerNorm("ln", D, 1e-12)
			for i := range D {
				ln.Weight.Value.Data[i] = float32(rng.NormFloat64())
				ln.Bias.Value.Data[i] = float32(rng.NormFloat64())
			}
			x := nn.New(rows, D)
			for i := range x.Data {
				x.Data[i] = float32(rng.NormFloat64()*3 + 1e4*float64(i%5))
			}
			wantY, wantM, wantR := layerNormByRow(x.Data, ln.Weight.Value.Data, ln.Bias.Value.Data, D, float64(ln.Eps))
			y, c := ln.Forward(x)
			yi := ln.Infer(x, new(nn.Workspace))
			for i := range wantY {
				if math.Float32bits(y.Data[i]) != math.Float32bits(wantY[i]) || math.Float32bits(yi.Data[i]) != math.Float32bits(wantY[i]) {
					t.Fatalf("D %d, %d rows, value %d: Forward %v, Infer %v, want %v", D, rows, i, y.Data[i], yi.Data[i], wantY[i])
				}
			}
			for r := range rows {
				if c.Mean[r] != wantM[r] || c.Rstd[r] != wantR[r] {
					t.Fatalf("D %d, %d rows, row %d: mean %v rstd %v, want %v %v", D, rows, r, c.Mean[r], c.Rstd[r], wantM[r], wantR[r])
				}
			}
		}
	}
}

// BenchmarkLayerNormInfer: a batch of 8 texts of 64 tokens, 128 features (the
// main job's BERT-Mini at the release length).
func BenchmarkLayerNormInfer(b *testing.B) {
	ln := nn.NewLayerNorm("ln", 128, 1e-12)
	x := nn.New(8*64, 128)
	for i := range x.Data {
		x.Data[i] = float32(i%97) * 0.01
	}
	ws := new(nn.Workspace)
	for b.Loop() {
		ws.Reset()
		ln.Infer(x, ws)
	}
}
