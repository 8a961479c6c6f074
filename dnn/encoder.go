package dnn

import (
	"fmt"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
)

// Encoder is the twin of [encoder.Encoder], transformers' BertModel or RobertaModel without the
// pooler: word, position and token-type embeddings, LayerNorm and dropout, then the post-LN
// layers. Forward returns last_hidden_state [B, S, Hidden]. The parameters, names and order are
// those of the encoder it is built from by [Engine.NewEncoder], so that weights and checkpoints
// move between the two with PullParam and PushParam over Params.
type Encoder struct {
	Config                   encoder.Config
	WordEmb, PosEmb, TypeEmb *Embedding
	EmbLN                    *LayerNorm
	Layers                   []*TransformerLayer
}

// encoderRecomputeGELUBytes is the size, in bytes, of all layers' GELU outputs,
// L*B*S*intermediate*4, above which a training Forward keeps only the GELU pre-activations and
// Backward recomputes the rest, as [nn.LayerOptions].RecomputeGELU. At 4 GiB, bert-large at batch
// 32 x 512, which needs 3 GiB, keeps them in a GPU's memory. The results do not depend on it.
var encoderRecomputeGELUBytes = 4 << 30

// NewEncoder uploads the parameters of m.
func (e *Engine) NewEncoder(m *encoder.Encoder) *Encoder {
	d := &Encoder{Config: m.Config, WordEmb: e.NewEmbedding(m.WordEmb), PosEmb: e.NewEmbedding(m.PosEmb),
		TypeEmb: e.NewEmbedding(m.TypeEmb), EmbLN: e.NewLayerNorm(m.EmbLN)}
	for _, l := range m.Layers {
		d.Layers = append(d.Layers, e.NewTransformerLayer(l))
	}
	return d
}

// Hidden returns the hidden size, the width of last_hidden_state.
func (m *Encoder) Hidden() int { return m.Config.HiddenSize }

// Params returns all parameters in the order of [encoder.Encoder.Params]: Hugging Face state_dict
// order, without the "bert." or "roberta." prefix.
func (m *Encoder) Params() []*Param {
	ps := []*Param{m.WordEmb.W, m.PosEmb.W, m.TypeEmb.W, m.EmbLN.Weight, m.EmbLN.Bias}
	for _, l := range m.Layers {
		ps = append(ps, l.Params()...)
	}
	return ps
}

// EncoderCache holds the activations Backward needs. It is nil after an inference Forward.
type EncoderCache struct {
	in       encoder.Input
	pos, typ []int32
	embLN    *LayerNormCache
	embDrop  *DropoutCache
	layers   []*TransformerCache
	drop     Dropout
	// Bias is the attention key bias [B,S] of the padding: 0 for real tokens and -Inf for
	// padding. It is nil without a mask.
	Bias *Tensor
}

// Forward runs the encoder as [encoder.Encoder.Forward] does and returns last_hidden_state
// [B, S, Hidden] and, when train is true, the cache for Backward; otherwise the cache is nil.
//
// The token ids, type ids and mask of in are checked on the host by [encoder.Encoder.CheckInput]
// and uploaded; invalid input panics, as in encoder. nil type ids mean all 0, and a nil mask means
// every token is real. The position ids are encoder's: 0..S-1 for BERT, offset by padding_idx for
// RoBERTa.
//
// train enables dropout: hidden_dropout_prob after the embeddings and after each dense projection,
// and attention_probs_dropout_prob on the attention probabilities. It is drawn from g in encoder's
// order, each site as [Dropout.Apply] and [Engine.AttentionDropout] state, so that
// encoder.Encoder.Forward given rand.New of a copy of g drops the same elements. g may be nil when
// train is false or every dropout probability is 0.
func (m *Encoder) Forward(e *Engine, in encoder.Input, train bool, g *Philox) (*Tensor, *EncoderCache) {
	host := &encoder.Encoder{Config: m.Config} // CheckInput and PositionIDs read only the config
	if err := host.CheckInput(in); err != nil {
		panic(err.Error())
	}
	cfg := m.Config
	B, S := in.B, in.S
	n := B * S
	typ := in.TypeIDs
	if typ == nil {
		typ = make([]int32, n)
	}
	pos := host.PositionIDs(in)
	drop := Dropout{P: float32(cfg.HiddenDropoutProb)}
	if train && g == nil && (drop.P > 0 || cfg.AttentionProbsDropoutProb > 0) {
		panic("dnn.Encoder.Forward: train with dropout needs a *Philox")
	}
	H := cfg.HiddenSize
	ids := make([]int32, 0, 3*n)
	ids = append(append(append(ids, in.IDs...), pos...), typ...)
	dev := e.UploadInts(ids)
	x := e.New(B, S, H)
	e.launch1D("embedding_sum3_fwd", n*H, x.Buf, m.WordEmb.W.Value.Buf, m.PosEmb.W.Value.Buf, m.TypeEmb.W.Value.Buf,
		dev, dev.Offset(4*n), dev.Offset(8*n), n, H)
	x, lnc := m.EmbLN.Forward(e, x)
	dc := drop.Apply(e, x, g, train)
	opts := nn.LayerOptions{Heads: cfg.NumAttentionHeads, HiddenDropout: nn.Dropout(drop),
		AttnDropout: float32(cfg.AttentionProbsDropoutProb), AttnResidual: true, NoGrad: !train,
		RecomputeGELU: len(m.Layers)*n*cfg.IntermediateSize*4 > encoderRecomputeGELUBytes}
	var bias *Tensor
	if in.Mask != nil {
		bias = e.PaddingBias(in.Mask, B, S)
	}
	var c *EncoderCache
	if train {
		c = &EncoderCache{in: in, pos: pos, typ: typ, embLN: lnc, embDrop: dc, drop: drop,
			layers: make([]*TransformerCache, len(m.Layers)), Bias: bias}
	}
	for i, l := range m.Layers {
		var lc *TransformerCache
		x, lc = l.Forward(e, x, x, bias, opts, train, g)
		if train {
			c.layers[i] = lc
		}
	}
	return x, c
}

// Backward takes the cache of a training Forward and dL/d last_hidden_state [B, S, Hidden] and adds
// the gradients of every parameter to their Grad, as [encoder.Encoder.Backward] does: the
// padding_idx row of the word embeddings, and of RoBERTa's position embeddings, receives no
// gradient. A nil cache or a gradient of another shape panics.
func (m *Encoder) Backward(e *Engine, c *EncoderCache, dx *Tensor) {
	if c == nil {
		panic("dnn.Encoder.Backward: nil cache (Forward was called with train=false)")
	}
	in := c.in
	if dx.Len() != in.B*in.S*m.Config.HiddenSize {
		panic(fmt.Sprintf("dnn.Encoder.Backward: gradient shape %v for batch %d x seq %d x hidden %d", dx.Shape, in.B, in.S, m.Config.HiddenSize))
	}
	for i := len(m.Layers) - 1; i >= 0; i-- {
		dx, _ = m.Layers[i].BackwardInputs(e, c.layers[i], dx) // the padding bias is a constant: no key-bias gradient
		c.layers[i] = nil
	}
	dx = c.drop.Backward(e, c.embDrop, dx)
	dx = m.EmbLN.Backward(e, c.embLN, dx)
	m.WordEmb.Backward(e, in.IDs, dx)
	m.PosEmb.Backward(e, c.pos, dx)
	m.TypeEmb.Backward(e, c.typ, dx)
}
