package dnn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/dnn"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
)

// Tolerances. Embedding: the lookup copies and the scatter-add sums the
// same float32 values in nn's order, so the device equals nn exactly.
// Encoder: its layers' tolerance (tolTransformer), the embeddings' sums
// being exact.
const (
	// Derivation: copies and nn's float32 additions in nn's order, no multiply-add to contract: 0 ulps under --fmad=true as under false.
	tolEmbedding = 0
	tolEncoder   = tolTransformer
)

// testEmbeddingTwin: the device lookup and scatter-add equal nn.Embedding's
// bit for bit (repeated ids accumulating in order, the padding row left
// alone, a gradient accumulated onto an earlier one), for widths below and
// above the block size.
func testEmbeddingTwin(t *testing.T, e *dnn.Engine) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, D := range []int{5, 300} {
		l := nn.NewEmbedding("embeddings.word_embeddings", 7, D)
		l.InitHF(rng, 1)
		l.PaddingIdx = 2
		dl := e.NewEmbedding(l)
		ids := []int32{3, 0, 2, 3, 6, 3, 2, 0}
		near(t, e, "embedding y", dl.Forward(e, ids, 2, 4), l.Forward(ids, 2, 4), tolEmbedding)
		for pass := 0; pass < 2; pass++ {
			dy := randn(rng, 1, 2, 4, D)
			l.Backward(ids, dy)
			dl.Backward(e, ids, e.Upload(dy))
			nearParam(t, e, dl.W, l.W, tolEmbedding)
		}
		e.FreeParams(dl.Params())
	}
}

// tinyEncoder is an encoder of the given type and number of layers (hidden
// 16, 2 heads) with every parameter random (LayerNorm weights around 1)
// and the given dropout. It panics on an error (of the test's own config),
// not t.Fatal: it may run on the device goroutine, where withEngine
// reports the panic.
func tinyEncoder(t *testing.T, rng *rand.Rand, modelType string, layers int, dropout float64) *encoder.Encoder {
	t.Helper()
	cfg, err := encoder.ParseConfig([]byte(`{"model_type": "` + modelType + `", "vocab_size": 11, "hidden_size": 16,
		"num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 24, "max_position_embeddings": 12,
		"type_vocab_size": 2, "layer_norm_eps": 1e-12}`))
	if err != nil {
		panic(err)
	}
	cfg.NumHiddenLayers = layers
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = dropout, dropout
	m, err := encoder.New(cfg, rng)
	if err != nil {
		panic(err)
	}
	for _, p := range m.Params() {
		p.InitNormal(rng, 0.3)
		if len(p.Value.Shape) == 1 && len(p.Name) > 16 && p.Name[len(p.Name)-16:] == "LayerNorm.weight" {
			for i := range p.Value.Data {
				p.Value.Data[i] += 1
			}
		}
	}
	return m
}

// testEncoderTwin: forward (last_hidden_state) and backward (every
// parameter's gradient) of the device encoder equal encoder.Encoder's on a
// batch with padding: RoBERTa (padding_idx position offsets, the padding
// rows of the word and position embeddings without gradient) with 2 layers
// and dropout off; BERT with token types and every dropout on, drawn by
// both from one Philox stream (encoder through rand.New of a copy), and its
// inference forward.
func testEncoderTwin(t *testing.T, e *dnn.Engine) {
	cases := []struct {
		model     string
		layers    int
		dropout   float64
		types     bool
		inference bool
	}{
		{"roberta", 2, 0, false, false},
		{"bert", 1, 0.2, true, true},
	}
	rng := rand.New(rand.NewPCG(10, 10))
	for _, c := range cases {
		m := tinyEncoder(t, rng, c.model, c.layers, c.dropout)
		dm := e.NewEncoder(m)
		pad := int32(m.Config.PadTokenID)
		B, S := 2, 3 // small: the CPU stand-in runs a thread per CUDA thread
		in := encoder.Input{IDs: []int32{0, 5, 5, 0, 7, pad}, Mask: []float32{1, 1, 1, 1, 1, 0}, B: B, S: S}
		if c.types {
			in.TypeIDs = []int32{0, 1, 1, 0, 1, 0}
		}
		g := &dnn.Philox{Key: rng.Uint64()}
		host := *g
		y, cache := m.Forward(in, true, rand.New(&host))
		dy, dcache := dm.Forward(e, in, true, g)
		if g.Pos != host.Pos {
			t.Errorf("%s: device Pos %d, host %d", c.model, g.Pos, host.Pos)
		}
		near(t, e, c.model+" last_hidden_state", dy, y, tolEncoder)
		gy := randn(rng, 1, B, S, m.Hidden())
		m.Backward(cache, gy)
		dm.Backward(e, dcache, e.Upload(gy))
		nearLayerParams(t, e, c.model, dm.Params(), m.Params(), tolEncoder)
		if !c.inference {
			e.FreeParams(dm.Params())
			continue
		}
		yi, ci := m.Forward(in, false, nil)
		dyi, dci := dm.Forward(e, in, false, nil)
		if ci != nil || dci != nil {
			t.Errorf("%s: inference cache %v (encoder %v)", c.model, dci, ci)
		}
		near(t, e, c.model+" inference", dyi, yi, tolEncoder)
		e.FreeParams(dm.Params())
	}
}
