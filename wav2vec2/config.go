// Package wav2vec2 implements the Wav2Vec2 speech encoder of Baevski et al., 2020, "wav2vec 2.0",
// on the nn engine, as transformers' Wav2Vec2Model. It parses Hugging Face config.json files,
// holds presets, initialises from scratch, reads safetensors checkpoints of Wav2Vec2Model and
// Wav2Vec2ForSequenceClassification in both weight-norm layouts, saves in the Wav2Vec2Model
// layout, and runs forward and backward over a batch of raw waveforms.
//
// The architecture, described in docs/speech.md, takes waveforms x [B, T] at 16 kHz:
//
//	feature encoder    len(conv_dim) Conv1d layers, of kernel conv_kernel[i] and stride conv_stride[i],
//	                   each followed by GELU. feat_extract_norm "group" puts a GroupNorm with one group
//	                   per channel after the first conv only, as wav2vec2-base; "layer" puts a LayerNorm
//	                   over channels after every conv, as wav2vec2-large.
//	feature projection LayerNorm(conv_dim[-1]), Linear(conv_dim[-1], hidden_size),
//	                   Dropout(feat_proj_dropout); padded frames are then set to 0.
//	positional conv    h + GELU(Conv1d_wn(h)), grouped by num_conv_pos_embedding_groups, of kernel
//	                   num_conv_pos_embeddings, with "same" padding and the last frame dropped for an
//	                   even kernel; the weight is normalised over every axis but the kernel axis, as
//	                   weight_norm(conv, dim=2).
//	encoder            with do_stable_layer_norm false, post-LN: LayerNorm, Dropout and
//	                   num_hidden_layers post-LN layers; with true, pre-LN: Dropout, pre-LN layers
//	                   and a final LayerNorm.
//
// Forward returns last_hidden_state [B, F, hidden_size] with the frame mask [B, F], 1 for a real
// frame, derived from the sample mask as transformers' _get_feat_extract_output_lengths. In
// training, SpecAugment, set by apply_spec_augment, mask_time_* and mask_feature_*, masks the
// feature projection's output before the encoder as transformers' _mask_hidden_states does; see
// specaugment.go.
package wav2vec2

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/nvdp-project/nvdp/internal/hfmodel"
)

// ModelType is config.json's model_type of a Wav2Vec2 model.
const ModelType = "wav2vec2"

// Feature-encoder normalisations, the values of config.json's feat_extract_norm.
const (
	NormGroup = "group" // GroupNorm after the first conv (wav2vec2-base)
	NormLayer = "layer" // LayerNorm after every conv (wav2vec2-large)
)

// convNormEps is the eps of the feature encoder's GroupNorm / LayerNorm
// (torch's default 1e-5: transformers does not pass layer_norm_eps to them).
const convNormEps = 1e-5

// Config is a Wav2Vec2 configuration with Hugging Face config.json field names, as transformers'
// Wav2Vec2Config. Fields absent from a config.json take Wav2Vec2Config's defaults. Fields of task
// heads, pretraining and CTC are not read.
type Config struct {
	ModelType string `json:"model_type"`
	// Feature encoder: per conv layer its output channels, kernel and stride.
	ConvDim               []int  `json:"conv_dim"`
	ConvKernel            []int  `json:"conv_kernel"`
	ConvStride            []int  `json:"conv_stride"`
	ConvBias              bool   `json:"conv_bias"`
	FeatExtractNorm       string `json:"feat_extract_norm"`       // NormGroup or NormLayer
	FeatExtractActivation string `json:"feat_extract_activation"` // "gelu"

	HiddenSize        int    `json:"hidden_size"`
	NumHiddenLayers   int    `json:"num_hidden_layers"`
	NumAttentionHeads int    `json:"num_attention_heads"`
	IntermediateSize  int    `json:"intermediate_size"`
	HiddenAct         string `json:"hidden_act"` // "gelu" (erf form)
	// Positional convolution: kernel, in frames, and groups.
	NumConvPosEmbeddings      int `json:"num_conv_pos_embeddings"`
	NumConvPosEmbeddingGroups int `json:"num_conv_pos_embedding_groups"`
	// DoStableLayerNorm selects the pre-LN encoder, as in wav2vec2-large.
	DoStableLayerNorm bool    `json:"do_stable_layer_norm"`
	LayerNormEps      float64 `json:"layer_norm_eps"`

	// Dropout probabilities: after dense projections and the encoder's input, hidden; on attention
	// probabilities; after the feed-forward GELU, activation; after the feature projection; and
	// the probability of skipping a whole layer while training, LayerDrop.
	HiddenDropout     float64 `json:"hidden_dropout"`
	AttentionDropout  float64 `json:"attention_dropout"`
	ActivationDropout float64 `json:"activation_dropout"`
	FeatProjDropout   float64 `json:"feat_proj_dropout"`
	LayerDrop         float64 `json:"layerdrop"`
	// InitializerRange is the standard deviation of the normal initialisation of the
	// transformer's Linear weights, 0.02.
	InitializerRange float64 `json:"initializer_range"`

	// SpecAugment, in training only; see specaugment.go. Time masking replaces spans of
	// MaskTimeLength frames by masked_spec_embed, covering about MaskTimeProb of the frames with at
	// least MaskTimeMinMasks spans per row. Feature masking sets spans of MaskFeatureLength
	// channels to 0 across all frames, with MaskFeatureProb and MaskFeatureMinMasks.
	// ApplySpecAugment false turns both off.
	ApplySpecAugment    bool    `json:"apply_spec_augment"`
	MaskTimeProb        float64 `json:"mask_time_prob"`
	MaskTimeLength      int     `json:"mask_time_length"`
	MaskTimeMinMasks    int     `json:"mask_time_min_masks"`
	MaskFeatureProb     float64 `json:"mask_feature_prob"`
	MaskFeatureLength   int     `json:"mask_feature_length"`
	MaskFeatureMinMasks int     `json:"mask_feature_min_masks"`

	// Architectures is copied through from config.json, for information.
	Architectures []string `json:"architectures,omitempty"`
}

// defaultConfig returns transformers' Wav2Vec2Config() defaults (the
// wav2vec2-base layout).
func defaultConfig() Config {
	return Config{
		ModelType:  ModelType,
		ConvDim:    []int{512, 512, 512, 512, 512, 512, 512},
		ConvKernel: []int{10, 3, 3, 3, 3, 2, 2},
		ConvStride: []int{5, 2, 2, 2, 2, 2, 2},
		ConvBias:   false, FeatExtractNorm: NormGroup, FeatExtractActivation: "gelu",
		HiddenSize: 768, NumHiddenLayers: 12, NumAttentionHeads: 12, IntermediateSize: 3072, HiddenAct: "gelu",
		NumConvPosEmbeddings: 128, NumConvPosEmbeddingGroups: 16,
		DoStableLayerNorm: false, LayerNormEps: 1e-5,
		HiddenDropout: 0.1, AttentionDropout: 0.1, ActivationDropout: 0.1, FeatProjDropout: 0, LayerDrop: 0.1,
		InitializerRange: 0.02,
		ApplySpecAugment: true, MaskTimeProb: 0.05, MaskTimeLength: 10, MaskTimeMinMasks: 2,
		MaskFeatureProb: 0, MaskFeatureLength: 10, MaskFeatureMinMasks: 0,
	}
}

// unsupported lists config.json fields that would change the architecture
// away from Wav2Vec2Model and the value that is supported.
var unsupported = []struct {
	key string
	ok  func(json.RawMessage) bool
	say string
}{
	{"add_adapter", isJSON("false"), "false (the adapter after the encoder is not implemented)"},
	{"adapter_attn_dim", isJSON("null"), "null (attention adapters are not implemented)"},
	{"use_weighted_layer_sum", isJSON("false"), "false (the weighted layer sum of the classification head is not implemented)"},
}

func isJSON(want string) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool { return strings.TrimSpace(string(v)) == want }
}

// ParseConfig parses a Hugging Face config.json of model_type "wav2vec2". It returns an error for
// another model type; for an architecture option that is not implemented, namely add_adapter,
// adapter_attn_dim and use_weighted_layer_sum; for a num_feat_extract_layers that differs from
// len(conv_dim); and for a configuration [Config.Validate] rejects.
func ParseConfig(data []byte) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	var mt string
	if v, ok := raw["model_type"]; ok {
		if err := json.Unmarshal(v, &mt); err != nil {
			return Config{}, fmt.Errorf("config: model_type: %w", err)
		}
	}
	if mt != ModelType {
		return Config{}, fmt.Errorf("config: model_type %q, want %q", mt, ModelType)
	}
	for _, u := range unsupported {
		if v, ok := raw[u.key]; ok && !u.ok(v) {
			return Config{}, fmt.Errorf("config: %s = %s not supported: want %s", u.key, v, u.say)
		}
	}
	c := defaultConfig()
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if v, ok := raw["num_feat_extract_layers"]; ok {
		var n int
		if err := json.Unmarshal(v, &n); err != nil {
			return Config{}, fmt.Errorf("config: num_feat_extract_layers: %w", err)
		}
		if n != len(c.ConvDim) {
			return Config{}, fmt.Errorf("config: num_feat_extract_layers = %d but conv_dim has %d entries", n, len(c.ConvDim))
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// ReadConfig reads and parses a config.json file. Errors name the file.
func ReadConfig(path string) (Config, error) { return hfmodel.ReadConfig(path, ParseConfig) }

// Validate checks sizes, probabilities and supported options. The error lists every problem,
// naming the config.json field.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.ModelType != ModelType {
		bad("model_type %q, want %q", c.ModelType, ModelType)
	}
	c.checkFeatureEncoder(bad)
	c.checkActivations(bad)
	c.checkTransformer(bad)
	c.checkRegularization(bad)
	c.checkMasking(bad)
	if len(errs) > 0 {
		return fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return nil
}

// checkFeatureEncoder reports to bad the problems of the conv layers
// (their number, then each size, kernel and stride) and of feat_extract_norm.
func (c Config) checkFeatureEncoder(bad func(format string, a ...any)) {
	n := len(c.ConvDim)
	if n == 0 {
		bad("conv_dim is empty: the feature encoder needs at least one conv layer")
	}
	if len(c.ConvKernel) != n || len(c.ConvStride) != n {
		bad("conv_dim, conv_kernel, conv_stride have %d, %d, %d entries, want equal lengths", n, len(c.ConvKernel), len(c.ConvStride))
	}
	for i := range c.ConvDim {
		if c.ConvDim[i] <= 0 {
			bad("conv_dim[%d] = %d, must be > 0", i, c.ConvDim[i])
		}
	}
	for i := range c.ConvKernel {
		if c.ConvKernel[i] <= 0 {
			bad("conv_kernel[%d] = %d, must be > 0", i, c.ConvKernel[i])
		}
	}
	for i := range c.ConvStride {
		if c.ConvStride[i] <= 0 {
			bad("conv_stride[%d] = %d, must be > 0", i, c.ConvStride[i])
		}
	}
	if c.FeatExtractNorm != NormGroup && c.FeatExtractNorm != NormLayer {
		bad("feat_extract_norm %q, want %q or %q", c.FeatExtractNorm, NormGroup, NormLayer)
	}
}

// checkActivations reports to bad an activation other than "gelu".
func (c Config) checkActivations(bad func(format string, a ...any)) {
	for _, a := range []struct{ key, v string }{{"feat_extract_activation", c.FeatExtractActivation}, {"hidden_act", c.HiddenAct}} {
		if a.v != "gelu" {
			bad("%s %q not supported (only the erf form \"gelu\")", a.key, a.v)
		}
	}
}

// checkTransformer reports to bad the problems of the transformer's sizes
// (each positive, the hidden size divisible by the heads and the
// positional conv's groups) and of layer_norm_eps.
func (c Config) checkTransformer(bad func(format string, a ...any)) {
	for _, p := range []struct {
		key string
		v   int
	}{{"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"intermediate_size", c.IntermediateSize}, {"num_conv_pos_embeddings", c.NumConvPosEmbeddings},
		{"num_conv_pos_embedding_groups", c.NumConvPosEmbeddingGroups}} {
		if p.v <= 0 {
			bad("%s = %d, must be > 0", p.key, p.v)
		}
	}
	if c.NumAttentionHeads > 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		bad("hidden_size %d not divisible by num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	}
	if c.NumConvPosEmbeddingGroups > 0 && c.HiddenSize%c.NumConvPosEmbeddingGroups != 0 {
		bad("hidden_size %d not divisible by num_conv_pos_embedding_groups %d", c.HiddenSize, c.NumConvPosEmbeddingGroups)
	}
	if !(c.LayerNormEps > 0) {
		bad("layer_norm_eps = %g, must be > 0", c.LayerNormEps)
	}
}

// checkRegularization reports to bad a dropout outside [0, 1) and a
// non-positive initializer_range.
func (c Config) checkRegularization(bad func(format string, a ...any)) {
	for _, p := range []struct {
		key string
		v   float64
	}{{"hidden_dropout", c.HiddenDropout}, {"attention_dropout", c.AttentionDropout}, {"activation_dropout", c.ActivationDropout},
		{"feat_proj_dropout", c.FeatProjDropout}, {"layerdrop", c.LayerDrop}} {
		if !(p.v >= 0 && p.v < 1) {
			bad("%s = %g, must be in [0, 1)", p.key, p.v)
		}
	}
	if !(c.InitializerRange > 0) {
		bad("initializer_range = %g, must be > 0", c.InitializerRange)
	}
}

// checkMasking reports to bad the problems of the time and feature masks
// (probability, span length, fewest masks) and a feature span longer than
// the hidden size.
func (c Config) checkMasking(bad func(format string, a ...any)) {
	for _, p := range []struct {
		key              string
		prob             float64
		lenKey, minKey   string
		length, minMasks int
	}{{"mask_time_prob", c.MaskTimeProb, "mask_time_length", "mask_time_min_masks", c.MaskTimeLength, c.MaskTimeMinMasks},
		{"mask_feature_prob", c.MaskFeatureProb, "mask_feature_length", "mask_feature_min_masks", c.MaskFeatureLength, c.MaskFeatureMinMasks}} {
		if !(p.prob >= 0 && p.prob <= 1) {
			bad("%s = %g, must be in [0, 1]", p.key, p.prob)
		}
		if p.length < 1 {
			bad("%s = %d, must be >= 1", p.lenKey, p.length)
		}
		if p.minMasks < 0 {
			bad("%s = %d, must be >= 0", p.minKey, p.minMasks)
		}
	}
	if c.maskFeatures() && c.MaskFeatureLength > c.HiddenSize {
		bad("mask_feature_length = %d longer than hidden_size %d", c.MaskFeatureLength, c.HiddenSize)
	}
}

// JSON returns the config as an indented Hugging Face config.json, with num_feat_extract_layers,
// and "architectures" defaulting to Wav2Vec2Model.
func (c Config) JSON() ([]byte, error) {
	if len(c.Architectures) == 0 {
		c.Architectures = []string{"Wav2Vec2Model"}
	}
	return json.MarshalIndent(struct {
		Config
		NumFeatExtractLayers int `json:"num_feat_extract_layers"`
	}{c, len(c.ConvDim)}, "", "  ")
}

// Stride returns the number of samples per frame, the product of conv_stride, which transformers
// calls inputs_to_logits_ratio. It is 320 for every preset: 20 ms at 16 kHz, 50 frames per second.
func (c Config) Stride() int {
	s := 1
	for _, v := range c.ConvStride {
		s *= v
	}
	return s
}

// ReceptiveField returns the number of samples one frame sees: 400, or 25 ms, for every preset.
func (c Config) ReceptiveField() int {
	r := 1
	for i := len(c.ConvKernel) - 1; i >= 0; i-- {
		r = (r-1)*c.ConvStride[i] + c.ConvKernel[i]
	}
	return r
}

// FrameLength returns the number of frames of n samples, as transformers'
// _get_feat_extract_output_lengths: n <- floor((n - kernel) / stride) + 1 per conv layer. It is 0
// when n is shorter than the receptive field.
func (c Config) FrameLength(n int) int {
	for i, k := range c.ConvKernel {
		if n < k {
			return 0
		}
		n = (n-k)/c.ConvStride[i] + 1
	}
	return n
}

// NumParams returns the number of parameters of every checkpoint of the model: Model.Params without
// masked_spec_embed, which is a parameter only when training masks frames. It is 94,370,944 for
// base, where transformers reports 94,371,712 for Wav2Vec2Model with masked_spec_embed's 768
// included; 315,437,696 for large, or 315,438,720 with masked_spec_embed; and 1,336,128 for small.
func (c Config) NumParams() int {
	n, in := 0, 1
	for i, out := range c.ConvDim {
		n += out * in * c.ConvKernel[i]
		if c.ConvBias {
			n += out
		}
		if c.FeatExtractNorm == NormLayer || i == 0 {
			n += 2 * out
		}
		in = out
	}
	H, I, K := c.HiddenSize, c.IntermediateSize, c.NumConvPosEmbeddings
	n += 2*in + in*H + H                             // feature projection
	n += K + H*(H/c.NumConvPosEmbeddingGroups)*K + H // positional conv: g, v, bias
	n += 2 * H                                       // encoder.layer_norm
	layer := 4*(H*H+H) + 2*H + (H*I + I) + (I*H + H) + 2*H
	return n + c.NumHiddenLayers*layer
}

// presets are the pinned configurations (PresetNames).
var presets = map[string]Config{
	// facebook/wav2vec2-base: Wav2Vec2Config's defaults (95M parameters).
	"base": defaultConfig(),
	// facebook/wav2vec2-large-lv60 layout: conv biases, LayerNorm feature
	// encoder, pre-LN encoder of 24 layers of width 1024 (315M parameters).
	"large": func() Config {
		c := defaultConfig()
		c.ConvBias, c.FeatExtractNorm, c.DoStableLayerNorm = true, NormLayer, true
		c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 1024, 24, 16, 4096
		return c
	}(),
	// small: trains from scratch on a 2-core CPU. The conv stack of base
	// with 128 channels (same kernels and strides: 50 frames per second,
	// 25 ms receptive field), 4 post-LN layers of width 128 (4 heads,
	// intermediate 512), a positional convolution over 64 frames (1.28 s)
	// in 4 groups; no LayerDrop (4 layers) and no activation dropout;
	// 1.3M parameters. No SpecAugment (mask_time_prob 0), as the measured
	// runs (docs/results.md).
	"small": func() Config {
		c := defaultConfig()
		c.ConvDim = []int{128, 128, 128, 128, 128, 128, 128}
		c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 128, 4, 4, 512
		c.NumConvPosEmbeddings, c.NumConvPosEmbeddingGroups = 64, 4
		c.LayerDrop, c.ActivationDropout, c.FeatProjDropout = 0, 0, 0.1
		c.MaskTimeProb = 0 // no SpecAugment: frames of 1-2 s utterances, trained from scratch
		return c
	}(),
	// small-ln: small in the large layout (conv biases, a LayerNorm over
	// channels after every conv, pre-LN encoder): the -large code path at
	// a size that trains on a CPU. 1.3M parameters.
	"small-ln": func() Config {
		c := defaultConfig()
		c.ConvBias, c.FeatExtractNorm, c.DoStableLayerNorm = true, NormLayer, true
		c.ConvDim = []int{128, 128, 128, 128, 128, 128, 128}
		c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 128, 4, 4, 512
		c.NumConvPosEmbeddings, c.NumConvPosEmbeddingGroups = 64, 4
		c.LayerDrop, c.ActivationDropout, c.FeatProjDropout = 0, 0, 0.1
		c.MaskTimeProb = 0 // no SpecAugment: frames of 1-2 s utterances, trained from scratch
		return c
	}(),
}

// Preset returns a pinned configuration by name: base, large or small; see [PresetNames]. The
// slices are copies.
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("unknown wav2vec2 preset %q (have %s)", name, strings.Join(PresetNames(), ", "))
	}
	c.ConvDim, c.ConvKernel, c.ConvStride = slices.Clone(c.ConvDim), slices.Clone(c.ConvKernel), slices.Clone(c.ConvStride)
	return c, nil
}

// PresetNames lists the preset names in lexical order.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
