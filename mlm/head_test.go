package mlm

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nn/nntest"
)

// tinyConfig is a 1-layer hidden-8 BERT over a 40-token vocabulary.
func tinyConfig(dropout float64) encoder.Config {
	cfg, _ := encoder.Preset("bert-tiny")
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 40, 8, 1, 2, 16
	cfg.MaxPositionEmbeddings = 16
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = dropout, dropout
	return cfg
}

func TestCrossEntropyValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	logits := nntest.RandTensor(rng, 5, 7)
	nn.Scale(logits, 3)
	labels := []int{0, 6, 3, 3, 1}
	// float64 reference
	var want float64
	wantCorrect := 0
	grad := make([]float64, 35)
	for r, y := range labels {
		row := logits.Data[r*7 : (r+1)*7]
		mx, arg := math.Inf(-1), 0
		for j, v := range row {
			if float64(v) > mx {
				mx, arg = float64(v), j
			}
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		want += math.Log(z) + mx - float64(row[y])
		if arg == y {
			wantCorrect++
		}
		for j, v := range row {
			grad[r*7+j] = math.Exp(float64(v)-mx) / z / 5
		}
		grad[r*7+y] -= 0.2
	}
	want /= 5
	gotNoGrad, _ := crossEntropy(logits.Clone(), labels, false)
	got, correct := crossEntropy(logits, labels, true)
	if math.Abs(got-want) > 1e-5*math.Abs(want) || math.Abs(gotNoGrad-want) > 1e-5*math.Abs(want) {
		t.Errorf("loss %v / %v, want %v", got, gotNoGrad, want)
	}
	if correct != wantCorrect {
		t.Errorf("correct %d, want %d", correct, wantCorrect)
	}
	for i, g := range grad {
		if math.Abs(float64(logits.Data[i])-g) > 1e-6 {
			t.Fatalf("dlogits[%d] = %v, want %v", i, logits.Data[i], g)
		}
	}
}

// TestHeadGradients checks every head gradient, the tied decoder's and the
// input's against central differences.
func TestHeadGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cfg := tinyConfig(0)
	enc, err := encoder.New(cfg, rng)
	if err != nil {
		t.Fatal(err)
	}
	h := initHead(enc, rng)
	// non-trivial LayerNorm and bias
	for _, p := range []*nn.Param{h.LN.Weight, h.LN.Bias, h.Bias} {
		for i := range p.Value.Data {
			p.Value.Data[i] += float32(0.3 * rng.NormFloat64())
		}
	}
	nn.Scale(h.Dense.W.Value, 20) // move GELU off its linear regime
	nn.Scale(enc.WordEmb.W.Value, 20)
	hidden := nntest.RandTensor(rng, 2, 5, cfg.HiddenSize)
	positions := []int{0, 3, 4, 7, 9}
	labels := []int{5, 0, 39, 12, 12}
	f := func() float64 {
		logits, _ := h.Forward(hidden, positions, nil)
		l, _ := crossEntropy(logits, labels, false)
		return l
	}
	for _, p := range append(h.Params(), h.Decoder) {
		p.Grad.Zero()
	}
	logits, c := h.Forward(hidden, positions, nil)
	crossEntropy(logits, labels, true)
	dhidden := h.Backward(c, logits)
	opts := nntest.GradOpts{Eps: 1e-2}
	nntest.CheckGradStrict(t, "hidden", f, hidden.Data, dhidden.Data, opts)
	for _, p := range append(h.Params(), h.Decoder) {
		nntest.CheckGradStrict(t, p.Name, f, p.Value.Data, p.Grad.Data, opts)
	}
	// unmasked rows get no gradient
	for _, r := range []int{1, 2, 5, 6, 8} {
		for j := range cfg.HiddenSize {
			if dhidden.Data[r*cfg.HiddenSize+j] != 0 {
				t.Fatalf("dhidden row %d not zero", r)
			}
		}
	}
}

// TestModelGradients checks the full model: the word-embedding gradient sums
// the input lookup and the tied decoder (the pad row gets the decoder's only).
func TestModelGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cfg := tinyConfig(0)
	cfg.InitializerRange = 0.5 // well-conditioned differences (HF's 0.02 gives ~1e-5 attention gradients)
	enc, err := encoder.New(cfg, rng)
	if err != nil {
		t.Fatal(err)
	}
	m := NewModel(enc, rng)
	b := &Batch{In: encoder.Input{
		IDs:  []int32{1, 7, 3, 9, 7, 2, 1, 11, 3, 2, 0, 0},
		Mask: []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
		B:    2, S: 6,
	}, Positions: []int{2, 4, 8}, Labels: []int{20, 7, 31}}
	f := func() float64 { return m.Evaluate(b).Loss }
	nn.ZeroGrads(m.Params())
	s := m.LossAndGrad(b, rng)
	if math.Abs(s.Loss-f()) > 1e-6 {
		t.Fatalf("training loss %v, inference loss %v (dropout is 0)", s.Loss, f())
	}
	opts := nntest.GradOpts{Eps: 1e-2, MaxChecks: 200}
	for _, p := range m.Params() {
		if strings.HasSuffix(p.Name, "attention.self.key.bias") {
			continue // identically zero (softmax is invariant to it); differences are float32 noise
		}
		nntest.CheckGrad(t, p.Name, f, p.Value.Data, p.Grad.Data, opts)
	}
	W := enc.WordEmb.W
	nntest.CheckGradStrict(t, "word embeddings (tied)", f, W.Value.Data, W.Grad.Data, nntest.GradOpts{Eps: 1e-2})
	H := cfg.HiddenSize
	padNorm := 0.0
	for _, g := range W.Grad.Data[:H] {
		padNorm += float64(g * g)
	}
	if padNorm == 0 {
		t.Error("pad row of the tied decoder got no gradient")
	}
}
