package encoder

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/nvdp-project/nvdp/nn"
)

// Input is a batch of token sequences; every slice is [B, S], row-major. Mask holds 1 for a real
// token and 0 for padding, as Hugging Face's attention_mask; nil means every token is real.
// TypeIDs nil means all zeros, segment A.
type Input struct {
	IDs, TypeIDs []int32
	Mask         []float32
	B, S         int
}

// Encoder is a BERT or RoBERTa encoder: transformers' BertModel or RobertaModel without the
// pooler. The parameters carry Hugging Face names without the "bert." or "roberta." prefix.
type Encoder struct {
	Config Config

	WordEmb, PosEmb, TypeEmb *nn.Embedding
	EmbLN                    *nn.LayerNorm
	Layers                   []*Layer

	// SourceDir is the Hugging Face directory the weights were loaded from, where the tokenizer
	// files such as vocab.txt and tokenizer.json live. It is "" for scratch models.
	SourceDir string
}

// Layer is one post-LN transformer layer, Hugging Face's BertLayer: an [nn.TransformerLayer] with
// self-attention and the attention residual.
type Layer = nn.TransformerLayer

// New returns an encoder with the Hugging Face initialisation of BertPreTrainedModel._init_weights.
// Linear and Embedding weights are drawn from N(0, initializer_range^2), from rng in parameter
// order; biases are 0; LayerNorm weights are 1 and biases 0; and the padding_idx rows are zero:
// row pad_token_id of the word embeddings and, for RoBERTa, row padding_idx of the position
// embeddings. It returns an error for an invalid config.
func New(cfg Config, rng *rand.Rand) (*Encoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := newZero(cfg)
	std := cfg.InitializerRange
	e.WordEmb.InitHF(rng, std)
	e.PosEmb.InitHF(rng, std)
	e.TypeEmb.InitHF(rng, std)
	for _, l := range e.Layers {
		l.InitHF(rng, std)
	}
	zeroRow(e.WordEmb.W.Value, cfg.PadTokenID)
	if cfg.ModelType == "roberta" {
		zeroRow(e.PosEmb.W.Value, cfg.PadTokenID)
	}
	return e, nil
}

// newZero allocates all parameters (LayerNorm weights 1, everything else 0).
func newZero(cfg Config) *Encoder {
	H, I := cfg.HiddenSize, cfg.IntermediateSize
	eps := float32(cfg.LayerNormEps)
	e := &Encoder{
		Config:  cfg,
		WordEmb: nn.NewEmbedding("embeddings.word_embeddings", cfg.VocabSize, H),
		PosEmb:  nn.NewEmbedding("embeddings.position_embeddings", cfg.MaxPositionEmbeddings, H),
		TypeEmb: nn.NewEmbedding("embeddings.token_type_embeddings", cfg.TypeVocabSize, H),
		EmbLN:   nn.NewLayerNorm("embeddings.LayerNorm", H, eps),
	}
	// padding_idx rows get no gradient, as in transformers' embeddings.
	e.WordEmb.PaddingIdx = cfg.PadTokenID
	if cfg.ModelType == "roberta" {
		e.PosEmb.PaddingIdx = cfg.PadTokenID
	}
	for i := 0; i < cfg.NumHiddenLayers; i++ {
		p := "encoder.layer." + strconv.Itoa(i) + "."
		e.Layers = append(e.Layers, nn.NewTransformerLayer(p, H, I, eps))
	}
	return e
}

func zeroRow(t *nn.Tensor, r int) {
	d := t.Dim(-1)
	clear(t.Data[r*d : (r+1)*d])
}

// Hidden returns the hidden size, the width of last_hidden_state.
func (e *Encoder) Hidden() int { return e.Config.HiddenSize }

// Params returns all parameters in Hugging Face state_dict order, named without the "bert." or
// "roberta." prefix, as in "embeddings.word_embeddings.weight" and
// "encoder.layer.0.attention.self.query.weight".
func (e *Encoder) Params() []*nn.Param {
	ps := []*nn.Param{e.WordEmb.W, e.PosEmb.W, e.TypeEmb.W, e.EmbLN.Weight, e.EmbLN.Bias}
	for _, l := range e.Layers {
		ps = append(ps, l.Params()...)
	}
	return ps
}

// CheckInput validates a batch against the config: slice lengths B*S, 1 <= S <= MaxSeqLen, token
// ids in [0, vocab_size), type ids in [0, type_vocab_size), mask values 0 or 1, and at least one
// real token per row. Errors name the row and position. Forward panics on what CheckInput rejects,
// so callers feeding user data call it first.
func (e *Encoder) CheckInput(in Input) error {
	c := e.Config
	if in.B <= 0 || in.S <= 0 {
		return fmt.Errorf("encoder input: batch %d x seq %d, both must be > 0", in.B, in.S)
	}
	if in.S > c.MaxSeqLen() {
		return fmt.Errorf("encoder input: sequence length %d exceeds the model's maximum %d", in.S, c.MaxSeqLen())
	}
	n := in.B * in.S
	if len(in.IDs) != n {
		return fmt.Errorf("encoder input: %d ids for batch %d x seq %d", len(in.IDs), in.B, in.S)
	}
	if in.TypeIDs != nil && len(in.TypeIDs) != n {
		return fmt.Errorf("encoder input: %d token type ids for batch %d x seq %d", len(in.TypeIDs), in.B, in.S)
	}
	if in.Mask != nil && len(in.Mask) != n {
		return fmt.Errorf("encoder input: %d mask values for batch %d x seq %d", len(in.Mask), in.B, in.S)
	}
	for i, id := range in.IDs {
		if id < 0 || int(id) >= c.VocabSize {
			return fmt.Errorf("encoder input: row %d position %d: token id %d outside vocabulary [0, %d)", i/in.S, i%in.S, id, c.VocabSize)
		}
	}
	for i, id := range in.TypeIDs {
		if id < 0 || int(id) >= c.TypeVocabSize {
			return fmt.Errorf("encoder input: row %d position %d: token type id %d outside [0, %d)", i/in.S, i%in.S, id, c.TypeVocabSize)
		}
	}
	if in.Mask != nil {
		for b := 0; b < in.B; b++ {
			real := 0
			for s := 0; s < in.S; s++ {
				switch m := in.Mask[b*in.S+s]; m {
				case 1:
					real++
				case 0:
				default:
					return fmt.Errorf("encoder input: row %d position %d: mask value %v, want 0 or 1", b, s, m)
				}
			}
			if real == 0 {
				return fmt.Errorf("encoder input: row %d has no real token (mask all 0)", b)
			}
		}
	}
	return nil
}

// positionIDs returns the position ids [B*S]: 0..S-1 for BERT; for RoBERTa
// transformers' create_position_ids_from_input_ids: padding_idx + cumulative
// count of non-pad tokens for non-pad tokens, padding_idx for pad tokens.
func (e *Encoder) positionIDs(in Input) []int32 {
	pos := make([]int32, in.B*in.S)
	if e.Config.ModelType != "roberta" {
		for i := range pos {
			pos[i] = int32(i % in.S)
		}
		return pos
	}
	pad := int32(e.Config.PadTokenID)
	for b := 0; b < in.B; b++ {
		var cnt int32
		for s := 0; s < in.S; s++ {
			i := b*in.S + s
			if in.IDs[i] != pad {
				cnt++
				pos[i] = pad + cnt
			} else {
				pos[i] = pad
			}
		}
	}
	return pos
}

// RecomputeGELUBytes is the size, in bytes, of all layers' GELU outputs, L*B*S*intermediate*4,
// above which a training Forward does not keep them and Backward recomputes them from the
// pre-activations. At 64 MiB, bert-tiny and bert-mini at batch 32 x 128 keep them, for speed, and
// bert-base recomputes them, for memory: it needs 144 MiB at batch 8 x 128.
var RecomputeGELUBytes = 64 << 20

// Cache holds the activations Backward needs. It is nil in inference mode.
type Cache struct {
	in       Input
	pos, typ []int32
	embLN    *nn.LayerNormCache
	embDrop  *nn.DropoutCache
	layers   []*nn.TransformerCache
	drop     nn.Dropout
}

// Forward runs the encoder and returns last_hidden_state [B, S, Hidden] and, when train is true,
// the cache for Backward. Inference keeps no activations and returns a nil cache.
//
// train enables dropout, drawn from rng, which may be nil when train is false:
// hidden_dropout_prob after the embeddings and after each dense projection, and
// attention_probs_dropout_prob on the attention probabilities. Padding keys get an additive -Inf
// attention bias; Hugging Face uses the dtype minimum, which gives the same result for rows with a
// real token. Invalid input, as [Encoder.CheckInput] defines it, panics.
func (e *Encoder) Forward(in Input, train bool, rng *rand.Rand) (*nn.Tensor, *Cache) {
	return e.forward(in, train, rng, nil)
}

// Infer is [Encoder.Forward] in inference mode with every activation, last_hidden_state included,
// taken from ws ([nn.Workspace.New]; nil: newly allocated): the same operations in the same order,
// so the same bits. The output is valid until ws's next Reset; a caller that serialises its calls
// resets ws before each and so allocates no activations once ws has grown to its largest batch.
func (e *Encoder) Infer(in Input, ws *nn.Workspace) *nn.Tensor {
	x, _ := e.forward(in, false, nil, ws)
	return x
}

// forward is Forward with the activations of inference taken from ws.
func (e *Encoder) forward(in Input, train bool, rng *rand.Rand, ws *nn.Workspace) (*nn.Tensor, *Cache) {
	if err := e.CheckInput(in); err != nil {
		panic(err.Error())
	}
	if train {
		ws = nil // the cache keeps the activations
	}
	cfg := e.Config
	B, S := in.B, in.S
	typ := in.TypeIDs
	if typ == nil {
		typ = make([]int32, B*S)
	}
	pos := e.positionIDs(in)
	drop := nn.Dropout{P: float32(cfg.HiddenDropoutProb)}
	if train && rng == nil && (drop.P > 0 || cfg.AttentionProbsDropoutProb > 0) {
		panic("encoder.Forward: train with dropout needs an rng")
	}

	x := e.WordEmb.Infer(in.IDs, ws, B, S)
	nn.AddInPlace(x, e.PosEmb.Infer(pos, ws, B, S))
	nn.AddInPlace(x, e.TypeEmb.Infer(typ, ws, B, S))
	var lnc *nn.LayerNormCache
	if train {
		x, lnc = e.EmbLN.Forward(x)
	} else {
		x = e.EmbLN.Infer(x, ws)
	}
	dc := drop.Apply(x, rng, train)
	opts := nn.LayerOptions{Heads: cfg.NumAttentionHeads, HiddenDropout: drop,
		AttnDropout: float32(cfg.AttentionProbsDropoutProb), AttnResidual: true, NoGrad: !train,
		// Keep GELU outputs for backward only while they are small; else
		// recompute them from the pre-activations (saves L*B*S*I floats).
		RecomputeGELU: len(e.Layers)*B*S*cfg.IntermediateSize*4 > RecomputeGELUBytes}

	var bias *nn.Tensor
	if in.Mask != nil {
		bias = nn.PaddingBiasInfer(in.Mask, B, S, ws)
	}
	if !train {
		for _, l := range e.Layers {
			x = l.Infer(x, x, bias, opts, ws)
		}
		return x, nil
	}
	c := &Cache{in: in, pos: pos, typ: typ, embLN: lnc, embDrop: dc, drop: drop,
		layers: make([]*nn.TransformerCache, len(e.Layers))}
	for i, l := range e.Layers {
		x, c.layers[i] = l.Forward(x, x, bias, opts, train, rng)
	}
	return x, c
}

// Backward takes the cache of a training Forward and dL/d last_hidden_state [B, S, Hidden], and
// adds the gradients of every parameter to their Grad. As with PyTorch's
// nn.Embedding(padding_idx=...), the padding_idx row of the word embeddings, and of RoBERTa's
// position embeddings, receives no gradient.
func (e *Encoder) Backward(c *Cache, dx *nn.Tensor) {
	if c == nil {
		panic("encoder.Backward: nil cache (Forward was called with train=false)")
	}
	in := c.in
	if dx.Len() != in.B*in.S*e.Config.HiddenSize {
		panic(fmt.Sprintf("encoder.Backward: gradient shape %v for batch %d x seq %d x hidden %d", dx.Shape, in.B, in.S, e.Config.HiddenSize))
	}
	for i := len(e.Layers) - 1; i >= 0; i-- {
		dx, _, _ = e.Layers[i].Backward(c.layers[i], dx)
		c.layers[i] = nil // release activations as we go
	}
	dx = c.drop.Backward(c.embDrop, dx)
	dx = e.EmbLN.Backward(c.embLN, dx)
	e.WordEmb.Backward(in.IDs, dx)
	e.PosEmb.Backward(c.pos, dx)
	e.TypeEmb.Backward(c.typ, dx)
}
