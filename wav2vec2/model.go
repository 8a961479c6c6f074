package wav2vec2

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/nvdp-project/nvdp/audio"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
)

// ConvLayer is one layer of the feature encoder: a Conv1d, an optional normalisation over channels,
// and GELU, as transformers' Wav2Vec2{GroupNorm,LayerNorm,NoLayerNorm}ConvLayer. Its parameters are
// named "feature_extractor.conv_layers.<i>.conv.{weight,bias}" and ".layer_norm.{weight,bias}", the
// latter for both norms.
type ConvLayer struct {
	Conv      *nn.Conv1d
	GroupNorm *nn.GroupNorm // first layer of a "group" encoder, else nil
	LayerNorm *nn.LayerNorm // every layer of a "layer" encoder, else nil
}

// Params returns the layer's parameters in state_dict order.
func (l *ConvLayer) Params() []*nn.Param {
	ps := l.Conv.Params()
	if l.GroupNorm != nil {
		ps = append(ps, l.GroupNorm.Params()...)
	}
	if l.LayerNorm != nil {
		ps = append(ps, l.LayerNorm.Params()...)
	}
	return ps
}

// PositionalConv is the convolutional positional embedding, transformers'
// Wav2Vec2PositionalConvEmbedding. For h [B, F, H] it computes
//
//	GELU(Conv1d(h; weight = g v / ||v||, kernel K, groups G, padding K/2 each side)[:, :F])
//
// The weight is normalised over every axis but the kernel axis, as weight_norm(conv, dim=2) with
// g [1, 1, K]. For an even K the last output frame is dropped, as Wav2Vec2SamePadLayer does, so the
// output has F frames. The conv carries the padding as PadLeft = K/2 and PadRight = K/2 - 1 for an
// even K, or K/2 for an odd K.
//
// The parameters are "encoder.pos_conv_embed.conv.bias", ".weight_g" [1, 1, K] and ".weight_v"
// [H, H/G, K].
type PositionalConv struct {
	Conv *nn.Conv1d     // run with the effective weight (ForwardWith); its W.Grad receives dL/dweight; W is no model parameter
	Norm *nn.WeightNorm // g and v
}

func newPositionalConv(prefix string, hidden, kernel, groups int) *PositionalConv {
	c := nn.NewConv1d(prefix, hidden, hidden, kernel, 1, groups, true)
	c.PadLeft, c.PadRight = kernel/2, kernel/2
	if kernel%2 == 0 {
		c.PadRight-- // Wav2Vec2SamePadLayer removes the frame that reads it
	}
	return &PositionalConv{Conv: c, Norm: nn.NewWeightNorm(prefix, 2, c.W.Value.Shape...)}
}

// Params returns the parameters bias, weight_g and weight_v.
func (p *PositionalConv) Params() []*nn.Param {
	return append([]*nn.Param{p.Conv.B}, p.Norm.Params()...)
}

type posConvCache struct {
	wn   *nn.WeightNormCache
	conv *nn.Conv1dCache
	dgel *nn.Tensor // GELU'(conv output)
}

// Forward returns the positional embedding [B, F, H] of h [B, F, H].
func (p *PositionalConv) Forward(h *nn.Tensor, keep bool) (*nn.Tensor, *posConvCache) {
	w, wc := p.Norm.Weight()
	y, cc := p.Conv.ForwardWith(h, w)
	if !keep {
		return nn.GELU(y), nil
	}
	g, dg := nn.GELUWithGrad(y)
	return g, &posConvCache{wn: wc, conv: cc, dgel: dg}
}

// Backward accumulates the gradients of bias, g and v and returns dL/dh.
func (p *PositionalConv) Backward(c *posConvCache, dy *nn.Tensor) *nn.Tensor {
	p.Conv.W.Grad.Zero()
	dx := p.Conv.Backward(c.conv, nn.GELUGradMul(dy, c.dgel))
	p.Norm.Backward(c.wn, p.Conv.W.Grad)
	return dx
}

// Model is a Wav2Vec2 encoder, transformers' Wav2Vec2Model. Its parameters carry Hugging Face names
// without the "wav2vec2." prefix.
type Model struct {
	Config Config

	FeatureEncoder []*ConvLayer
	ProjNorm       *nn.LayerNorm // feature_projection.layer_norm
	Proj           *nn.Linear    // feature_projection.projection
	PosConv        *PositionalConv
	EncoderNorm    *nn.LayerNorm // encoder.layer_norm (before the layers post-LN, after them pre-LN)
	// Layers are nn.TransformerLayer with wav2vec2 names:
	// "encoder.layers.<i>.attention.{q,k,v,out}_proj", ".layer_norm",
	// ".feed_forward.{intermediate,output}_dense", ".final_layer_norm".
	Layers []*nn.TransformerLayer

	// MaskedSpecEmbed is SpecAugment's mask vector [hidden_size], named "masked_spec_embed": what
	// time masking puts in the masked frames in training. It is a parameter, the last of Params,
	// when the configuration masks frames. A model has it when its configuration has a masking
	// probability above 0, transformers' rule, in which case New draws it from U[0, 1) as
	// transformers does; or when its checkpoint carries it, in which case it is carried to a saved
	// one.
	MaskedSpecEmbed *nn.Param
}

// MaskedSpecEmbedName is the checkpoint name of [Model].MaskedSpecEmbed.
const MaskedSpecEmbedName = "masked_spec_embed"

// New returns a model with the Hugging Face initialisation of Wav2Vec2PreTrainedModel._init_weights,
// drawn from rng in parameter order. It returns an error for an invalid config.
//
// The feature-encoder convs are Kaiming-normal, by [nn.Conv1d.InitKaiming]. GroupNorm and LayerNorm
// have weight 1 and bias 0. The feature projection's weight and bias are drawn from
// U(-1/sqrt(conv_dim[-1]), +1/sqrt(conv_dim[-1])). The positional conv's effective weight is drawn
// from N(0, (2/sqrt(K*hidden))^2), with g = ||v|| and bias 0. The transformer's Linear weights are
// drawn from N(0, initializer_range^2), with zero biases.
//
// transformers draws the positional weight into conv.weight after weight_norm has split it into g
// and v, which leaves g and v at PyTorch's default init. The normal draw here is the one
// _init_weights states and fairseq applies.
func New(cfg Config, rng *rand.Rand) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := newZero(cfg)
	for _, l := range m.FeatureEncoder {
		l.Conv.InitKaiming(rng)
	}
	k := 1 / math.Sqrt(float64(m.Proj.In))
	for _, p := range m.Proj.Params() {
		for i := range p.Value.Data {
			p.Value.Data[i] = float32((2*rng.Float64() - 1) * k)
		}
	}
	m.PosConv.Norm.InitNormal(rng, 2/math.Sqrt(float64(cfg.NumConvPosEmbeddings*cfg.HiddenSize)))
	for _, l := range m.Layers {
		l.InitHF(rng, cfg.InitializerRange)
	}
	if m.MaskedSpecEmbed != nil { // drawn last: the other draws as without it
		for i := range m.MaskedSpecEmbed.Value.Data {
			m.MaskedSpecEmbed.Value.Data[i] = float32(rng.Float64())
		}
	}
	return m, nil
}

// newZero allocates every parameter (norm weights 1, everything else 0).
func newZero(cfg Config) *Model {
	m := &Model{Config: cfg}
	in := 1
	for i, out := range cfg.ConvDim {
		p := "feature_extractor.conv_layers." + strconv.Itoa(i) + "."
		l := &ConvLayer{Conv: nn.NewConv1d(p+"conv", in, out, cfg.ConvKernel[i], cfg.ConvStride[i], 1, cfg.ConvBias)}
		switch {
		case cfg.FeatExtractNorm == NormLayer:
			l.LayerNorm = nn.NewLayerNorm(p+"layer_norm", out, convNormEps)
		case i == 0: // NormGroup: one group per channel, first layer only
			l.GroupNorm = nn.NewGroupNorm(p+"layer_norm", out, out, convNormEps)
		}
		m.FeatureEncoder = append(m.FeatureEncoder, l)
		in = out
	}
	H, I := cfg.HiddenSize, cfg.IntermediateSize
	eps := float32(cfg.LayerNormEps)
	m.ProjNorm = nn.NewLayerNorm("feature_projection.layer_norm", in, eps)
	m.Proj = nn.NewLinear("feature_projection.projection", in, H, true)
	m.PosConv = newPositionalConv("encoder.pos_conv_embed.conv", H, cfg.NumConvPosEmbeddings, cfg.NumConvPosEmbeddingGroups)
	m.EncoderNorm = nn.NewLayerNorm("encoder.layer_norm", H, eps)
	if cfg.hasSpecEmbed() {
		m.MaskedSpecEmbed = nn.NewParam(MaskedSpecEmbedName, H)
	}
	for i := 0; i < cfg.NumHiddenLayers; i++ {
		p := "encoder.layers." + strconv.Itoa(i) + "."
		m.Layers = append(m.Layers, &nn.TransformerLayer{
			Query:   nn.NewLinear(p+"attention.q_proj", H, H, true),
			Key:     nn.NewLinear(p+"attention.k_proj", H, H, true),
			Value:   nn.NewLinear(p+"attention.v_proj", H, H, true),
			AttnOut: nn.NewLinear(p+"attention.out_proj", H, H, true),
			AttnLN:  nn.NewLayerNorm(p+"layer_norm", H, eps),
			Inter:   nn.NewLinear(p+"feed_forward.intermediate_dense", H, I, true),
			Out:     nn.NewLinear(p+"feed_forward.output_dense", I, H, true),
			OutLN:   nn.NewLayerNorm(p+"final_layer_norm", H, eps),
		})
	}
	return m
}

// Hidden returns the hidden size, the width of last_hidden_state.
func (m *Model) Hidden() int { return m.Config.HiddenSize }

// Params returns every trainable parameter in Hugging Face state_dict order, named without the
// "wav2vec2." prefix, then masked_spec_embed when training masks frames, that is when the Config
// has apply_spec_augment and mask_time_prob > 0.
func (m *Model) Params() []*nn.Param {
	ps := m.baseParams()
	if m.MaskedSpecEmbed != nil && m.Config.maskTime() {
		ps = append(ps, m.MaskedSpecEmbed)
	}
	return ps
}

// baseParams are the parameters of every checkpoint: Params without
// masked_spec_embed.
func (m *Model) baseParams() []*nn.Param {
	var ps []*nn.Param
	for _, l := range m.FeatureEncoder {
		ps = append(ps, l.Params()...)
	}
	ps = append(ps, m.ProjNorm.Params()...)
	ps = append(ps, m.Proj.Params()...)
	ps = append(ps, m.PosConv.Params()...)
	ps = append(ps, m.EncoderNorm.Params()...)
	for _, l := range m.Layers {
		ps = append(ps, l.Params()...)
	}
	return ps
}

// CheckInput validates a batch: B and T positive, slice lengths B*T, finite sample values, mask
// values 0 or 1 with the real samples first in each row, and at least one frame per row, that is
// Config.ReceptiveField samples. Errors name the row and sample. Forward panics on what CheckInput
// rejects, so callers feeding user data call it first.
func (m *Model) CheckInput(in audio.Batch) error {
	if in.B <= 0 || in.T <= 0 {
		return fmt.Errorf("wav2vec2 input: batch %d x %d samples, both must be > 0", in.B, in.T)
	}
	if len(in.Values) != in.B*in.T {
		return fmt.Errorf("wav2vec2 input: %d samples for batch %d x %d", len(in.Values), in.B, in.T)
	}
	if in.Mask != nil && len(in.Mask) != in.B*in.T {
		return fmt.Errorf("wav2vec2 input: %d mask values for batch %d x %d", len(in.Mask), in.B, in.T)
	}
	if i := nn.NonFinite(in.Values); i >= 0 {
		return fmt.Errorf("wav2vec2 input: row %d sample %d: non-finite value %v", i/in.T, i%in.T, in.Values[i])
	}
	if in.Mask != nil {
		for b := 0; b < in.B; b++ {
			padded := false
			for t, v := range in.Mask[b*in.T : (b+1)*in.T] {
				switch {
				case v != 0 && v != 1:
					return fmt.Errorf("wav2vec2 input: row %d sample %d: mask value %v, want 0 or 1", b, t, v)
				case v == 0:
					padded = true
				case padded:
					return fmt.Errorf("wav2vec2 input: row %d sample %d: real sample after padding (the mask must be right-padded)", b, t)
				}
			}
		}
	}
	for b, n := range in.SampleLengths() {
		if m.Config.FrameLength(n) < 1 {
			return fmt.Errorf("wav2vec2 input: row %d has %d samples, fewer than the %d of one frame", b, n, m.Config.ReceptiveField())
		}
	}
	return nil
}

// FrameMask returns the frame-level attention_mask [B, F] of a checked input, and F, as
// transformers' _get_feature_vector_attention_mask does. The mask is 1 for the first
// FrameLength(real samples) frames of each row.
func (m *Model) FrameMask(in audio.Batch) ([]float32, int) {
	F := m.Config.FrameLength(in.T)
	mask := make([]float32, in.B*F)
	for b, n := range in.SampleLengths() {
		for f := 0; f < m.Config.FrameLength(n); f++ {
			mask[b*F+f] = 1
		}
	}
	return mask, F
}

// Cache holds the activations Backward needs. It is nil in inference mode.
type Cache struct {
	b, t, f   int
	frameMask []float32
	padded    bool // some frame is padding
	convs     []convCache
	projLN    *nn.LayerNormCache
	projIn    *nn.Tensor
	projDrop  *nn.DropoutCache
	pos       *posConvCache
	encLN     *nn.LayerNormCache
	encDrop   *nn.DropoutCache
	layers    []*nn.TransformerCache // nil for a layer skipped by LayerDrop
	hidden    nn.Dropout
	featDrop  nn.Dropout
	spec      *specCache // nil: nothing masked
}

type convCache struct {
	conv *nn.Conv1dCache
	gn   *nn.GroupNormCache
	ln   *nn.LayerNormCache
	dgel *nn.Tensor
}

// Forward runs the model on a batch and returns last_hidden_state [B, F, hidden_size], the frame
// mask [B, F] and, when train is true, the cache for Backward; otherwise the cache is nil. The
// frame mask holds 1 for a real frame, and all ones without an input mask.
//
// train enables the dropouts and LayerDrop, drawn from rng in the order: feature projection,
// encoder input, then per layer the LayerDrop draw, when layerdrop > 0, and the layer's dropouts.
// rng may be nil when train is false. In training SpecAugment masks the feature projection's
// output, with its draws from rng; see specaugment.go.
//
// As in transformers, padded frames are set to 0 before the positional convolution and masked as
// attention keys. The mask is an additive -Inf bias where transformers adds the dtype's minimum,
// which gives the same probabilities. A "group" feature encoder normalises over the padded
// waveform, so its outputs depend on the padding, which is transformers' reason to call
// wav2vec2-base without an attention mask.
//
// Invalid input, as [Model.CheckInput] defines it, panics, and so does training with time masking
// on fewer than Config.MinTrainFrames frames.
func (m *Model) Forward(in audio.Batch, train bool, rng *rand.Rand) (*nn.Tensor, []float32, *Cache) {
	if err := m.CheckInput(in); err != nil {
		panic(err.Error())
	}
	cfg := m.Config
	hidden, featDrop := nn.Dropout{P: float32(cfg.HiddenDropout)}, nn.Dropout{P: float32(cfg.FeatProjDropout)}
	if train && rng == nil && (hidden.P > 0 || featDrop.P > 0 || cfg.AttentionDropout > 0 || cfg.ActivationDropout > 0 || cfg.LayerDrop > 0) {
		panic("wav2vec2.Forward: train with dropout needs an rng")
	}
	frameMask, F := m.FrameMask(in)
	c := &Cache{b: in.B, t: in.T, f: F, frameMask: frameMask, hidden: hidden, featDrop: featDrop,
		convs: make([]convCache, len(m.FeatureEncoder)), layers: make([]*nn.TransformerCache, len(m.Layers))}
	for _, v := range frameMask {
		c.padded = c.padded || v == 0
	}

	x := nn.FromData(in.Values, in.B, in.T, 1)
	for i, l := range m.FeatureEncoder {
		var cc convCache // kept only when training: inference frees each layer's input
		x, cc.conv = l.Conv.Forward(x)
		if l.GroupNorm != nil {
			x, cc.gn = l.GroupNorm.Forward(x)
		}
		if l.LayerNorm != nil {
			x, cc.ln = l.LayerNorm.Forward(x)
		}
		if train {
			x, cc.dgel = nn.GELUWithGrad(x)
			c.convs[i] = cc
		} else {
			x = nn.GELU(x)
		}
	}
	c.projIn, c.projLN = m.ProjNorm.Forward(x)
	h, _ := m.Proj.Forward(c.projIn)
	c.projDrop = featDrop.Apply(h, rng, train)
	if train {
		c.spec = m.specAugment(h, frameMask, in.B, F, rng)
	}
	if c.padded {
		zeroPadded(h, frameMask)
	}
	pos, pc := m.PosConv.Forward(h, train)
	c.pos = pc
	h = nn.Add(h, pos)
	if !cfg.DoStableLayerNorm {
		h, c.encLN = m.EncoderNorm.Forward(h)
	}
	c.encDrop = hidden.Apply(h, rng, train)

	var bias *nn.Tensor
	if c.padded {
		bias = nn.PaddingBias(frameMask, in.B, F)
	}
	opts := nn.LayerOptions{Heads: cfg.NumAttentionHeads, HiddenDropout: hidden, AttnDropout: float32(cfg.AttentionDropout),
		ActDropout: nn.Dropout{P: float32(cfg.ActivationDropout)}, AttnResidual: true, PreLN: cfg.DoStableLayerNorm,
		NoGrad: !train, RecomputeGELU: len(m.Layers)*in.B*F*cfg.IntermediateSize*4 > encoder.RecomputeGELUBytes}
	for i, l := range m.Layers {
		if train && cfg.LayerDrop > 0 && rng.Float64() < cfg.LayerDrop {
			continue // LayerDrop: the layer is the identity for this batch
		}
		h, c.layers[i] = l.Forward(h, h, bias, opts, train, rng)
	}
	if cfg.DoStableLayerNorm {
		h, c.encLN = m.EncoderNorm.Forward(h)
	}
	if !train {
		c = nil
	}
	return h, frameMask, c
}

// zeroPadded sets the padded frames of h [B, F, D] to 0 (mask [B, F]).
func zeroPadded(h *nn.Tensor, mask []float32) {
	D := h.Dim(-1)
	for i, v := range mask {
		if v == 0 {
			clear(h.Data[i*D : (i+1)*D])
		}
	}
}

// Backward takes the cache of a training Forward and dL/d last_hidden_state [B, F, hidden_size],
// adds the gradients of every parameter to their Grad, and returns dL/d input values [B, T].
func (m *Model) Backward(c *Cache, dy *nn.Tensor) *nn.Tensor {
	if c == nil {
		panic("wav2vec2.Backward: nil cache (Forward was called with train=false)")
	}
	if dy.Len() != c.b*c.f*m.Config.HiddenSize {
		panic(fmt.Sprintf("wav2vec2.Backward: gradient shape %v for batch %d x %d frames x hidden %d", dy.Shape, c.b, c.f, m.Config.HiddenSize))
	}
	if m.Config.DoStableLayerNorm {
		dy = m.EncoderNorm.Backward(c.encLN, dy)
	}
	for i := len(m.Layers) - 1; i >= 0; i-- {
		if c.layers[i] == nil {
			continue // skipped by LayerDrop
		}
		dy, _, _ = m.Layers[i].Backward(c.layers[i], dy)
		c.layers[i] = nil // release activations as we go
	}
	dy = c.hidden.Backward(c.encDrop, dy)
	if !m.Config.DoStableLayerNorm {
		dy = m.EncoderNorm.Backward(c.encLN, dy)
	}
	dh := m.PosConv.Backward(c.pos, dy)
	nn.AddInPlace(dh, dy)
	if c.padded {
		zeroPadded(dh, c.frameMask)
	}
	if c.spec != nil {
		m.specAugmentBackward(c.spec, dh, c.b, c.f)
	}
	dh = c.featDrop.Backward(c.projDrop, dh)
	dx := m.ProjNorm.Backward(c.projLN, m.Proj.Backward(c.projIn, dh))
	for i := len(m.FeatureEncoder) - 1; i >= 0; i-- {
		l, cc := m.FeatureEncoder[i], &c.convs[i]
		dx = nn.GELUGradMul(dx, cc.dgel)
		if l.LayerNorm != nil {
			dx = l.LayerNorm.Backward(cc.ln, dx)
		}
		if l.GroupNorm != nil {
			dx = l.GroupNorm.Backward(cc.gn, dx)
		}
		dx = l.Conv.Backward(cc.conv, dx)
		c.convs[i] = convCache{}
	}
	return dx.Reshape(c.b, c.t)
}
