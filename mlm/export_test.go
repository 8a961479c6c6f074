package mlm

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/safetensors"
)

// hubLayout is the tensor list of transformers' BertForMaskedLM.save_pretrained
// (safetensors) — the layout of the hub's bert-base-uncased model.safetensors
// with current names (LayerNorm weight/bias), the tied
// cls.predictions.decoder.{weight,bias} omitted and no pooler (BertForMaskedLM
// is built with add_pooling_layer=False). Shapes are in terms of the config:
// V vocab_size, H hidden_size, I intermediate_size, P max_position_embeddings,
// T type_vocab_size. For bert-base-uncased: V=30522, H=768, I=3072, P=512, T=2,
// 12 layers, e.g. bert.embeddings.word_embeddings.weight [30522, 768],
// bert.encoder.layer.11.intermediate.dense.weight [3072, 768], cls.predictions.bias [30522].
func hubLayout(cfg encoder.Config) map[string][]int {
	V, H, I, P, T := cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.MaxPositionEmbeddings, cfg.TypeVocabSize
	m := map[string][]int{
		"bert.embeddings.word_embeddings.weight":       {V, H},
		"bert.embeddings.position_embeddings.weight":   {P, H},
		"bert.embeddings.token_type_embeddings.weight": {T, H},
		"bert.embeddings.LayerNorm.weight":             {H},
		"bert.embeddings.LayerNorm.bias":               {H},
		"cls.predictions.bias":                         {V},
		"cls.predictions.transform.dense.weight":       {H, H},
		"cls.predictions.transform.dense.bias":         {H},
		"cls.predictions.transform.LayerNorm.weight":   {H},
		"cls.predictions.transform.LayerNorm.bias":     {H},
	}
	for l := range cfg.NumHiddenLayers {
		p := fmt.Sprintf("bert.encoder.layer.%d.", l)
		for _, s := range []string{"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"} {
			m[p+s+".weight"] = []int{H, H}
			m[p+s+".bias"] = []int{H}
		}
		m[p+"attention.output.LayerNorm.weight"] = []int{H}
		m[p+"attention.output.LayerNorm.bias"] = []int{H}
		m[p+"intermediate.dense.weight"] = []int{I, H}
		m[p+"intermediate.dense.bias"] = []int{I}
		m[p+"output.dense.weight"] = []int{H, I}
		m[p+"output.dense.bias"] = []int{H}
		m[p+"output.LayerNorm.weight"] = []int{H}
		m[p+"output.LayerNorm.bias"] = []int{H}
	}
	return m
}

func TestHubLayoutBertBase(t *testing.T) {
	cfg, _ := encoder.Preset("bert-base")
	m := hubLayout(cfg)
	// 5 embedding tensors + 16 per layer + 5 head tensors
	if len(m) != 5+12*16+5 {
		t.Fatalf("%d tensors", len(m))
	}
	// the layout's parameter count is BertForMaskedLM's without the tied decoder:
	// bert-base-uncased's BertModel has 109,482,240 parameters, of which the pooler
	// (absent here) is 768*768 + 768; plus the head's 768*768 + 768 + 2*768 + 30522.
	n := 0
	for _, s := range m {
		k := 1
		for _, d := range s {
			k *= d
		}
		n += k
	}
	if want := 109482240 - (768*768 + 768) + 768*768 + 768 + 2*768 + 30522; n != want {
		t.Errorf("bert-base layout has %d parameters, want %d", n, want)
	}
}

// TestSaveLayoutAndLoad exports a small model and checks the names, shapes,
// config and tokenizer file against the hub layout, that encoder.Load("hf:DIR")
// reads identical encoder weights and LoadHF the identical head.
func TestSaveLayoutAndLoad(t *testing.T) {
	cfg, _ := encoder.Preset("bert-tiny")
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 50, 16, 2, 2, 24
	rng := rand.New(rand.NewPCG(1, 1))
	enc, err := encoder.New(cfg, rng)
	if err != nil {
		t.Fatal(err)
	}
	m := NewModel(enc, rng)
	for i := range m.Head.Bias.Value.Data {
		m.Head.Bias.Value.Data[i] = float32(i) / 7
	}
	dir := filepath.Join(t.TempDir(), "model")
	vocab := filepath.Join(t.TempDir(), "vocab.txt")
	writeFile(t, vocab, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
	if err := Save(dir, m, vocab); err != nil {
		t.Fatal(err)
	}
	want := hubLayout(cfg)
	f, err := safetensors.ReadFile(filepath.Join(dir, encoder.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int{}
	for _, ts := range f.Tensors {
		got[ts.Name] = ts.Shape
		if ts.DType != safetensors.F32 {
			t.Errorf("%s: dtype %s", ts.Name, ts.DType)
		}
	}
	for name, shape := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("missing %s", name)
		} else if fmt.Sprint(g) != fmt.Sprint(shape) {
			t.Errorf("%s: shape %v, want %v", name, g, shape)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected tensor %s", name)
		}
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata %v, want format pt (transformers requires it)", f.Metadata)
	}
	cfgText, _ := os.ReadFile(filepath.Join(dir, encoder.ConfigFile))
	for _, s := range []string{`"BertForMaskedLM"`, `"model_type": "bert"`, `"vocab_size": 50`} {
		if !strings.Contains(string(cfgText), s) {
			t.Errorf("config.json lacks %s:\n%s", s, cfgText)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "vocab.txt")); err != nil {
		t.Error("vocab.txt not copied")
	}

	loaded, err := encoder.Load("hf:"+dir, encoder.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range loaded.Params() {
		q := enc.Params()[i]
		if p.Name != q.Name || fmt.Sprint(p.Value.Data) != fmt.Sprint(q.Value.Data) {
			t.Fatalf("encoder.Load: parameter %s differs", p.Name)
		}
	}
	back, err := LoadHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range back.Head.Params() {
		if fmt.Sprint(p.Value.Data) != fmt.Sprint(m.Head.Params()[i].Value.Data) {
			t.Fatalf("LoadHF: head parameter %s differs", p.Name)
		}
	}
	if back.Head.Decoder != back.Enc.WordEmb.W {
		t.Error("LoadHF: decoder not tied to the word embeddings")
	}
	// a BertModel checkpoint has no MLM head
	if _, err := LoadHF("../encoder/testdata/tiny-bert"); err == nil || !strings.Contains(err.Error(), "cls.predictions") {
		t.Errorf("LoadHF of a checkpoint without head: %v", err)
	}
}
