package wav2vec2

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/audio"
)

func TestParseConfig(t *testing.T) {
	// A config.json as transformers writes it for a small model.
	c, err := ParseConfig([]byte(`{"model_type": "wav2vec2", "conv_dim": [32, 32], "conv_kernel": [10, 3],
		"conv_stride": [5, 2], "num_feat_extract_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
		"hidden_dropout": 0, "layerdrop": 0.0, "feat_extract_norm": "layer", "do_stable_layer_norm": true,
		"add_adapter": false, "adapter_attn_dim": null, "mask_time_prob": 0.05, "architectures": ["Wav2Vec2ForSequenceClassification"]}`))
	if err != nil {
		t.Fatal(err)
	}
	// Explicit zeros stay zero; absent fields take Wav2Vec2Config's defaults.
	if c.HiddenDropout != 0 || c.LayerDrop != 0 || c.AttentionDropout != 0.1 || c.ActivationDropout != 0.1 ||
		c.NumHiddenLayers != 12 || c.NumConvPosEmbeddings != 128 || c.LayerNormEps != 1e-5 || !c.DoStableLayerNorm {
		t.Errorf("parsed %+v", c)
	}
	if c.Stride() != 10 || c.ReceptiveField() != 20 || c.FrameLength(20) != 1 || c.FrameLength(19) != 0 {
		t.Errorf("stride %d, receptive field %d", c.Stride(), c.ReceptiveField())
	}
	for _, tc := range []struct{ json, want string }{
		{`{"model_type": "bert"}`, `model_type "bert", want "wav2vec2"`},
		{`{}`, `model_type "", want "wav2vec2"`},
		{`{"model_type": "wav2vec2", "add_adapter": true}`, "add_adapter = true not supported"},
		{`{"model_type": "wav2vec2", "adapter_attn_dim": 16}`, "adapter_attn_dim = 16 not supported"},
		{`{"model_type": "wav2vec2", "use_weighted_layer_sum": true}`, "use_weighted_layer_sum = true not supported"},
		{`{"model_type": "wav2vec2", "num_feat_extract_layers": 6}`, "num_feat_extract_layers = 6 but conv_dim has 7 entries"},
		{`{"model_type": "wav2vec2", "conv_kernel": [10, 3]}`, "have 7, 2, 7 entries"},
		{`{"model_type": "wav2vec2", "conv_dim": []}`, "conv_dim is empty"},
		{`{"model_type": "wav2vec2", "conv_stride": [5, 2, 2, 0, 2, 2, 2]}`, "conv_stride[3] = 0"},
		{`{"model_type": "wav2vec2", "feat_extract_norm": "batch"}`, `feat_extract_norm "batch"`},
		{`{"model_type": "wav2vec2", "hidden_act": "relu"}`, `hidden_act "relu" not supported`},
		{`{"model_type": "wav2vec2", "feat_extract_activation": "gelu_new"}`, `feat_extract_activation "gelu_new"`},
		{`{"model_type": "wav2vec2", "num_attention_heads": 5}`, "not divisible by num_attention_heads 5"},
		{`{"model_type": "wav2vec2", "num_conv_pos_embedding_groups": 7}`, "not divisible by num_conv_pos_embedding_groups 7"},
		{`{"model_type": "wav2vec2", "layerdrop": 1}`, "layerdrop = 1, must be in [0, 1)"},
		{`{"model_type": "wav2vec2", "attention_dropout": -0.1}`, "attention_dropout = -0.1"},
		{`{"model_type": "wav2vec2", "layer_norm_eps": 0}`, "layer_norm_eps = 0"},
		{`{"model_type": "wav2vec2", "num_conv_pos_embeddings": 0}`, "num_conv_pos_embeddings = 0"},
		{`{"model_type": "wav2vec2", "hidden_size": "x"}`, "cannot unmarshal"},
		{`{"model_type": `, "unexpected end"},
	} {
		_, err := ParseConfig([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.json, err, tc.want)
		}
	}
}

func TestPresets(t *testing.T) {
	for _, tc := range []struct {
		name           string
		params, frames int // parameters; frames of 1 s
	}{{"base", 94370944, 49}, {"large", 315437696, 49}, {"small", 1336128, 49}, {"small-ln", 1338560, 49}} {
		c, err := Preset(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if c.NumParams() != tc.params || c.FrameLength(audio.SampleRate) != tc.frames || c.Stride() != 320 || c.ReceptiveField() != 400 {
			t.Errorf("%s: %d params, %d frames per second, stride %d, field %d", tc.name, c.NumParams(), c.FrameLength(audio.SampleRate), c.Stride(), c.ReceptiveField())
		}
		data, err := c.JSON()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseConfig(data)
		if err != nil {
			t.Fatalf("%s: own JSON: %v", tc.name, err)
		}
		if b2, _ := back.JSON(); string(b2) != string(data) {
			t.Errorf("%s: JSON round trip differs:\n%s\n%s", tc.name, data, b2)
		}
		c.ConvDim[0] = 1 // Preset returns copies
	}
	if c, _ := Preset("base"); c.ConvDim[0] != 512 {
		t.Error("Preset shares its slices")
	}
	if _, err := Preset("tiny"); err == nil || !strings.Contains(err.Error(), "base, large, small") {
		t.Errorf("unknown preset: %v", err)
	}
	// NumParams counts what newZero allocates.
	for _, norm := range []string{NormGroup, NormLayer} {
		cfg := tinyConfig(norm)
		n := 0
		for _, p := range newZero(cfg).Params() {
			n += p.Value.Len()
		}
		if n != cfg.NumParams() {
			t.Errorf("%s: NumParams %d, model has %d", norm, cfg.NumParams(), n)
		}
	}
	var large map[string]any
	data, _ := presets["large"].JSON()
	if err := json.Unmarshal(data, &large); err != nil || large["num_feat_extract_layers"] != 7.0 || large["feat_extract_norm"] != NormLayer {
		t.Errorf("large JSON %s", data)
	}
}

func TestFrameLength(t *testing.T) {
	c, _ := Preset("base")
	for _, tc := range []struct{ n, want int }{
		{0, 0}, {399, 0}, {400, 1}, {719, 1}, {720, 2}, {16000, 49}, {16320, 50}, {48000, 149},
	} {
		if got := c.FrameLength(tc.n); got != tc.want {
			t.Errorf("FrameLength(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	// Against the conv layers themselves.
	m := newZero(tinyConfig(NormGroup))
	for n := 25; n < 120; n++ {
		got := n
		for _, l := range m.FeatureEncoder {
			got = l.Conv.OutLen(got)
		}
		if want := m.Config.FrameLength(n); got != want {
			t.Fatalf("%d samples: convs give %d frames, FrameLength %d", n, got, want)
		}
	}
}

// FuzzParseConfig: ParseConfig never panics, and what it accepts is valid
// and survives its own JSON.
func FuzzParseConfig(f *testing.F) {
	for _, n := range PresetNames() {
		data, _ := presets[n].JSON()
		f.Add(data)
	}
	f.Add([]byte(`{"model_type": "wav2vec2", "conv_dim": [1], "conv_kernel": [1], "conv_stride": [1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted an invalid config: %v", err)
		}
		out, err := c.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseConfig(out); err != nil {
			t.Fatalf("own JSON rejected: %v\n%s", err, out)
		}
	})
}

// TestSpecAugmentConfig: config.json's SpecAugment fields are read (absent:
// Wav2Vec2Config's defaults, apply_spec_augment true, mask_time_prob 0.05,
// mask_time_length 10, mask_time_min_masks 2, mask_feature_prob 0), written
// back, and invalid values are errors naming the field.
func TestSpecAugmentConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type": "wav2vec2"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.ApplySpecAugment || c.MaskTimeProb != 0.05 || c.MaskTimeLength != 10 || c.MaskTimeMinMasks != 2 || c.MaskFeatureProb != 0 ||
		c.MaskFeatureLength != 10 || c.MaskFeatureMinMasks != 0 {
		t.Fatalf("defaults %+v", c)
	}
	c, err = ParseConfig([]byte(`{"model_type": "wav2vec2", "apply_spec_augment": false, "mask_time_prob": 0.1, "mask_time_length": 4,
		"mask_feature_prob": 0.2, "mask_feature_length": 8, "mask_feature_min_masks": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.ApplySpecAugment || c.MaskTimeProb != 0.1 || c.MaskTimeLength != 4 || c.MaskFeatureProb != 0.2 || c.MaskFeatureLength != 8 ||
		c.MaskFeatureMinMasks != 1 || c.maskTime() || !c.hasSpecEmbed() {
		t.Fatalf("parsed %+v", c)
	}
	b, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(b)
	if err != nil || back.ApplySpecAugment || back.MaskTimeLength != 4 || back.MaskFeatureMinMasks != 1 {
		t.Fatalf("round trip %+v %v", back, err)
	}
	for _, bad := range []struct{ json, want string }{
		{`"mask_time_prob": 1.5`, "mask_time_prob = 1.5"},
		{`"mask_time_length": 0`, "mask_time_length = 0"},
		{`"mask_time_min_masks": -1`, "mask_time_min_masks = -1"},
		{`"mask_feature_prob": 0.1, "mask_feature_length": 9999`, "mask_feature_length = 9999 longer than hidden_size"},
	} {
		_, err := ParseConfig([]byte(`{"model_type": "wav2vec2", ` + bad.json + `}`))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want %q", bad.json, err, bad.want)
		}
	}
}
