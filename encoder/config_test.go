package encoder

import (
	"reflect"
	"strings"
	"testing"
)

const bertMiniConfigPath = "../../shared/models/bert-base-uncased-vocab/bert-mini-config.json"

func TestPresetBertMiniMatchesSharedFile(t *testing.T) {
	got, err := ReadConfig(bertMiniConfigPath)
	if err != nil {
		t.Skipf("shared bert-mini config not readable: %v", err)
	}
	want, err := Preset("bert-mini")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("bert-mini preset differs from %s:\n got  %+v\n want %+v", bertMiniConfigPath, got, want)
	}
}

func TestPresets(t *testing.T) {
	tests := []struct {
		name                          string
		layers, hidden, heads, inter  int
		vocab, maxPos, typeVocab, pad int
		eps                           float64
		modelType                     string
		params                        int // encoder without pooler
	}{
		{"bert-tiny", 2, 128, 2, 512, 30522, 512, 2, 0, 1e-12, "bert", 4385920 - 16512},
		{"bert-mini", 4, 256, 4, 1024, 30522, 512, 2, 0, 1e-12, "bert", 11170560 - 65792},
		// HF BertModel bert-base-uncased: 109,482,240 parameters with the
		// 590,592-parameter pooler.
		{"bert-base", 12, 768, 12, 3072, 30522, 512, 2, 0, 1e-12, "bert", 109482240 - 590592},
		{"bert-large", 24, 1024, 16, 4096, 30522, 512, 2, 0, 1e-12, "bert", 335141888 - 1049600},
		// HF RobertaModel roberta-base: 124,645,632 with pooler.
		{"roberta-base", 12, 768, 12, 3072, 50265, 514, 1, 1, 1e-5, "roberta", 124645632 - 590592},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Preset(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			got := []int{c.NumHiddenLayers, c.HiddenSize, c.NumAttentionHeads, c.IntermediateSize, c.VocabSize, c.MaxPositionEmbeddings, c.TypeVocabSize, c.PadTokenID}
			want := []int{tc.layers, tc.hidden, tc.heads, tc.inter, tc.vocab, tc.maxPos, tc.typeVocab, tc.pad}
			if !reflect.DeepEqual(got, want) || c.LayerNormEps != tc.eps || c.ModelType != tc.modelType || c.HiddenAct != "gelu" {
				t.Fatalf("preset %s = %+v", tc.name, c)
			}
			if c.NumParams() != tc.params {
				t.Fatalf("NumParams = %d, want %d", c.NumParams(), tc.params)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if c, _ := Preset("roberta-base"); c.MaxSeqLen() != 512 {
		t.Fatalf("roberta-base MaxSeqLen = %d, want 512", c.MaxSeqLen())
	}
	if _, err := Preset("bert-huge"); err == nil || !strings.Contains(err.Error(), "bert-tiny") {
		t.Fatalf("unknown preset error = %v", err)
	}
}

func TestParseConfigRoberta(t *testing.T) {
	// FacebookAI/roberta-base config.json.
	data := `{
  "architectures": ["RobertaForMaskedLM"],
  "attention_probs_dropout_prob": 0.1, "bos_token_id": 0, "eos_token_id": 2,
  "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
  "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-05,
  "max_position_embeddings": 514, "model_type": "roberta", "num_attention_heads": 12,
  "num_hidden_layers": 12, "pad_token_id": 1, "type_vocab_size": 1, "vocab_size": 50265
}`
	c, err := ParseConfig([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Preset("roberta-base")
	want.Architectures = []string{"RobertaForMaskedLM"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
	// Round trip through JSON.
	js, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ParseConfig(js)
	if err != nil || !reflect.DeepEqual(c, c2) {
		t.Fatalf("JSON round trip: %v\n%+v\n%+v", err, c, c2)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	// Absent fields take BertConfig / RobertaConfig defaults.
	c, err := ParseConfig([]byte(`{"model_type": "roberta", "num_hidden_layers": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.PadTokenID != 1 || c.HiddenSize != 768 || c.NumHiddenLayers != 2 || c.LayerNormEps != 1e-12 {
		t.Fatalf("roberta defaults: %+v", c)
	}
	c, err = ParseConfig([]byte(`{}`))
	if err != nil || c.ModelType != "bert" || c.PadTokenID != 0 {
		t.Fatalf("empty config: %+v %v", c, err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct{ json, want string }{
		{`{"model_type": "gpt2"}`, `model_type "gpt2"`},
		{`{"hidden_size": 100, "num_attention_heads": 12}`, "not divisible"},
		{`{"hidden_act": "gelu_new"}`, `hidden_act "gelu_new"`},
		{`{"position_embedding_type": "relative_key"}`, "relative_key"},
		{`{"hidden_dropout_prob": 1.5}`, "hidden_dropout_prob"},
		{`{"vocab_size": 0}`, "vocab_size = 0"},
		{`{"layer_norm_eps": 0}`, "layer_norm_eps"},
		{`{"pad_token_id": 40000}`, "pad_token_id"},
		{`{"hidden_size": "big"}`, "config"},
		{`{`, "config"},
	}
	for _, tc := range tests {
		_, err := ParseConfig([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%s) error = %v, want it to mention %q", tc.json, err, tc.want)
		}
	}
	if _, err := ReadConfig("/nonexistent/config.json"); err == nil || !strings.Contains(err.Error(), "/nonexistent/config.json") {
		t.Errorf("ReadConfig missing file: %v", err)
	}
}
