// Package encoder implements BERT and RoBERTa encoders on the nn engine. It parses Hugging Face
// config.json files, holds pinned presets, initialises from scratch as transformers does, loads
// model.safetensors, saves in the layout of Hugging Face's BertModel.save_pretrained, and downloads
// from the hub into a local cache. Loading accepts names with or without the bert. or roberta.
// prefix, legacy gamma and beta names, and F16 or BF16 storage.
//
// The architecture is transformers' BertModel or RobertaModel without the pooler: embeddings, the
// sum of word, position and token type embeddings followed by LayerNorm and dropout; then
// NumHiddenLayers post-LN layers
//
//	a = LayerNorm(x + Dropout(Dense(SelfAttention(x, mask))))
//	y = LayerNorm(a + Dropout(Dense(GELU(Dense(a)))))
//
// Forward returns last_hidden_state [B, S, Hidden].
//
// [Load] builds an encoder from a spec:
//
//	scratch:bert-tiny           a preset with HF initialisation: bert-tiny, bert-mini, bert-base,
//	                            bert-large or roberta-base
//	hf:/path/to/dir             a local HF directory: config.json, model.safetensors, and vocab.txt
//	                            or tokenizer.json
//	hf:bert-base-uncased        a hub model, downloaded from $HF_ENDPOINT, by default
//	hf:FacebookAI/roberta-base  https://huggingface.co, with $HF_TOKEN into $NVDP_HOME/hub, by
//	                            default ~/.cache/nvdp/hub; HF_HUB_OFFLINE=1 uses the cache only
//
// pytorch_model.bin checkpoints, which are pickles, are not supported. [Save] writes the layout of
// Hugging Face's BertModel.save_pretrained, which [LoadDir] and transformers read.
package encoder

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nvdp-project/nvdp/internal/hfmodel"
)

// Config is a BERT or RoBERTa configuration with Hugging Face config.json field names. Fields
// absent from a config.json take the defaults of transformers' BertConfig or RobertaConfig.
type Config struct {
	ModelType                 string  `json:"model_type"` // "bert" or "roberta"
	VocabSize                 int     `json:"vocab_size"`
	HiddenSize                int     `json:"hidden_size"`
	NumHiddenLayers           int     `json:"num_hidden_layers"`
	NumAttentionHeads         int     `json:"num_attention_heads"`
	IntermediateSize          int     `json:"intermediate_size"`
	MaxPositionEmbeddings     int     `json:"max_position_embeddings"`
	TypeVocabSize             int     `json:"type_vocab_size"`
	PadTokenID                int     `json:"pad_token_id"`
	LayerNormEps              float64 `json:"layer_norm_eps"`
	HiddenDropoutProb         float64 `json:"hidden_dropout_prob"`
	AttentionProbsDropoutProb float64 `json:"attention_probs_dropout_prob"`
	HiddenAct                 string  `json:"hidden_act"`
	// InitializerRange is the standard deviation of the normal initialisation of Linear and
	// Embedding weights: Hugging Face's initializer_range, 0.02.
	InitializerRange float64 `json:"initializer_range"`
	// PositionEmbeddingType must be "absolute", the only kind implemented.
	PositionEmbeddingType string `json:"position_embedding_type,omitempty"`
	// Architectures is copied through from config.json, for information.
	Architectures []string `json:"architectures,omitempty"`
}

// defaultConfig returns transformers' defaults for a model type
// (BertConfig / RobertaConfig __init__ defaults).
func defaultConfig(modelType string) Config {
	c := Config{
		ModelType: modelType, VocabSize: 30522, HiddenSize: 768, NumHiddenLayers: 12, NumAttentionHeads: 12,
		IntermediateSize: 3072, MaxPositionEmbeddings: 512, TypeVocabSize: 2, PadTokenID: 0,
		LayerNormEps: 1e-12, HiddenDropoutProb: 0.1, AttentionProbsDropoutProb: 0.1, HiddenAct: "gelu",
		InitializerRange: 0.02, PositionEmbeddingType: "absolute",
	}
	if modelType == "roberta" {
		// RobertaConfig overrides pad_token_id (1); vocab/positions/type vocab
		// are taken from the checkpoint's config.json in practice.
		c.PadTokenID = 1
	}
	return c
}

// ParseConfig parses a Hugging Face config.json. A missing model_type means "bert", since old BERT
// configs such as Google's bert-mini omit it. Unsupported model types, activations or position
// embedding types are errors, and the result is validated by [Config.Validate].
func ParseConfig(data []byte) (Config, error) {
	var probe struct {
		ModelType string `json:"model_type"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	mt := probe.ModelType
	if mt == "" {
		mt = "bert"
	}
	if mt != "bert" && mt != "roberta" {
		return Config{}, fmt.Errorf("config: model_type %q not supported (want bert or roberta)", mt)
	}
	c := defaultConfig(mt)
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c.ModelType = mt
	if c.PositionEmbeddingType == "" {
		c.PositionEmbeddingType = "absolute"
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// ReadConfig reads and parses a config.json file. Errors name the file.
func ReadConfig(path string) (Config, error) { return hfmodel.ReadConfig(path, ParseConfig) }

// Validate checks sizes and supported options.
func (c Config) Validate() error {
	var errs []error
	pos := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s = %d, must be > 0", name, v))
		}
	}
	pos("vocab_size", c.VocabSize)
	pos("hidden_size", c.HiddenSize)
	pos("num_hidden_layers", c.NumHiddenLayers)
	pos("num_attention_heads", c.NumAttentionHeads)
	pos("intermediate_size", c.IntermediateSize)
	pos("max_position_embeddings", c.MaxPositionEmbeddings)
	pos("type_vocab_size", c.TypeVocabSize)
	if c.NumAttentionHeads > 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		errs = append(errs, fmt.Errorf("hidden_size %d not divisible by num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads))
	}
	if c.ModelType != "bert" && c.ModelType != "roberta" {
		errs = append(errs, fmt.Errorf("model_type %q not supported (want bert or roberta)", c.ModelType))
	}
	if c.HiddenAct != "gelu" {
		errs = append(errs, fmt.Errorf("hidden_act %q not supported (only the erf form \"gelu\")", c.HiddenAct))
	}
	if c.PositionEmbeddingType != "" && c.PositionEmbeddingType != "absolute" {
		errs = append(errs, fmt.Errorf("position_embedding_type %q not supported (only \"absolute\")", c.PositionEmbeddingType))
	}
	if !(c.LayerNormEps > 0) {
		errs = append(errs, fmt.Errorf("layer_norm_eps = %g, must be > 0", c.LayerNormEps))
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"hidden_dropout_prob", c.HiddenDropoutProb}, {"attention_probs_dropout_prob", c.AttentionProbsDropoutProb}} {
		if !(p.v >= 0 && p.v < 1) {
			errs = append(errs, fmt.Errorf("%s = %g, must be in [0, 1)", p.name, p.v))
		}
	}
	if !(c.InitializerRange > 0) {
		errs = append(errs, fmt.Errorf("initializer_range = %g, must be > 0", c.InitializerRange))
	}
	if c.PadTokenID < 0 || (c.VocabSize > 0 && c.PadTokenID >= c.VocabSize) {
		errs = append(errs, fmt.Errorf("pad_token_id %d outside vocabulary of %d", c.PadTokenID, c.VocabSize))
	}
	if c.ModelType == "roberta" && c.MaxPositionEmbeddings <= c.PadTokenID+1 {
		errs = append(errs, fmt.Errorf("roberta: max_position_embeddings %d leaves no positions after padding_idx %d", c.MaxPositionEmbeddings, c.PadTokenID))
	}
	if len(errs) > 0 {
		return fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return nil
}

// MaxSeqLen returns the longest sequence the position table allows: max_position_embeddings for
// BERT, and max_position_embeddings - padding_idx - 1 for RoBERTa, whose positions start at
// padding_idx + 1; that is 512 for roberta-base.
func (c Config) MaxSeqLen() int {
	if c.ModelType == "roberta" {
		return c.MaxPositionEmbeddings - c.PadTokenID - 1
	}
	return c.MaxPositionEmbeddings
}

// HeadDim returns HiddenSize / NumAttentionHeads.
func (c Config) HeadDim() int { return c.HiddenSize / c.NumAttentionHeads }

// JSON returns the config as an indented Hugging Face config.json, with "architectures" defaulting
// to BertModel or RobertaModel.
func (c Config) JSON() ([]byte, error) {
	if len(c.Architectures) == 0 {
		if c.ModelType == "roberta" {
			c.Architectures = []string{"RobertaModel"}
		} else {
			c.Architectures = []string{"BertModel"}
		}
	}
	if c.PositionEmbeddingType == "" {
		c.PositionEmbeddingType = "absolute"
	}
	return json.MarshalIndent(c, "", "  ")
}

// NumParams returns the number of encoder parameters, without the pooler.
func (c Config) NumParams() int {
	H, I, L := c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers
	emb := (c.VocabSize+c.MaxPositionEmbeddings+c.TypeVocabSize)*H + 2*H
	layer := 4*(H*H+H) + 2*H + (H*I + I) + (I*H + H) + 2*H
	return emb + L*layer
}

// presets are the pinned configurations. bert-tiny and bert-mini are Google's
// compact BERTs (Turc et al. 2019, "Well-Read Students Learn Better"); the
// bert-mini values equal ../shared/models/bert-base-uncased-vocab/bert-mini-config.json.
var presets = map[string]Config{
	"bert-tiny": withBert(func(c *Config) {
		c.NumHiddenLayers, c.HiddenSize, c.NumAttentionHeads, c.IntermediateSize = 2, 128, 2, 512
	}),
	"bert-mini": withBert(func(c *Config) {
		c.NumHiddenLayers, c.HiddenSize, c.NumAttentionHeads, c.IntermediateSize = 4, 256, 4, 1024
	}),
	"bert-base": withBert(func(c *Config) {}),
	"bert-large": withBert(func(c *Config) {
		c.NumHiddenLayers, c.HiddenSize, c.NumAttentionHeads, c.IntermediateSize = 24, 1024, 16, 4096
	}),
	// roberta-base as in FacebookAI/roberta-base config.json.
	"roberta-base": func() Config {
		c := defaultConfig("roberta")
		c.VocabSize, c.MaxPositionEmbeddings, c.TypeVocabSize, c.LayerNormEps = 50265, 514, 1, 1e-5
		c.PadTokenID = 1
		return c
	}(),
}

func withBert(f func(*Config)) Config {
	c := defaultConfig("bert")
	f(&c)
	return c
}

// Preset returns a pinned configuration by name: bert-tiny, bert-mini, bert-base, bert-large or
// roberta-base.
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("unknown preset %q (have %s)", name, strings.Join(PresetNames(), ", "))
	}
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
