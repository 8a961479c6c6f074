package encoder

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/safetensors"
)

// randomEncoder returns a tiny encoder whose every parameter is random
// (including LayerNorm), so loading mistakes show.
func randomEncoder(t *testing.T, mt string, seed uint64) *Encoder {
	t.Helper()
	cfg := tinyConfig(mt)
	cfg.NumHiddenLayers = 2
	e, err := New(cfg, newRng(seed))
	if err != nil {
		t.Fatal(err)
	}
	r := newRng(seed + 100)
	for _, p := range e.Params() {
		for i := range p.Value.Data {
			p.Value.Data[i] = float32(r.NormFloat64())
		}
	}
	return e
}

type tensorFn func(name string, shape []int, data []float32) *safetensors.Tensor

func f16Tensor(name string, shape []int, data []float32) *safetensors.Tensor {
	b := make([]byte, 2*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint16(b[2*i:], safetensors.Float32ToF16(v))
	}
	return &safetensors.Tensor{Name: name, DType: safetensors.F16, Shape: shape, Data: b}
}

func bf16Tensor(name string, shape []int, data []float32) *safetensors.Tensor {
	b := make([]byte, 2*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(v)>>16)) // truncation
	}
	return &safetensors.Tensor{Name: name, DType: safetensors.BF16, Shape: shape, Data: b}
}

// writeCheckpoint writes e's config and weights into dir, renaming tensors
// with rename (skip when it returns "") and adding extra tensors.
func writeCheckpoint(t *testing.T, dir string, e *Encoder, rename func(string) string, conv tensorFn, extra ...*safetensors.Tensor) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	js, err := e.Config.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), js, 0o644); err != nil {
		t.Fatal(err)
	}
	if conv == nil {
		conv = safetensors.FromFloat32
	}
	var ts []*safetensors.Tensor
	for _, p := range e.Params() {
		n := p.Name
		if rename != nil {
			n = rename(n)
		}
		if n == "" {
			continue
		}
		ts = append(ts, conv(n, p.Value.Shape, p.Value.Data))
	}
	ts = append(ts, extra...)
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
}

func legacyLN(n string) string {
	if strings.Contains(n, "LayerNorm.") {
		n = strings.Replace(n, "LayerNorm.weight", "LayerNorm.gamma", 1)
		n = strings.Replace(n, "LayerNorm.bias", "LayerNorm.beta", 1)
	}
	return n
}

func TestLoadCheckpointVariants(t *testing.T) {
	H := 8
	extraTask := []*safetensors.Tensor{
		safetensors.FromFloat32("cls.predictions.bias", []int{13}, make([]float32, 13)),
		safetensors.FromFloat32("cls.predictions.transform.dense.weight", []int{H, H}, make([]float32, H*H)),
		safetensors.FromFloat32("bert.pooler.dense.weight", []int{H, H}, make([]float32, H*H)),
		safetensors.FromFloat32("bert.pooler.dense.bias", []int{H}, make([]float32, H)),
		safetensors.FromInt64("bert.embeddings.position_ids", []int{1, 10}, make([]int64, 10)),
		safetensors.FromFloat32("classifier.weight", []int{2, H}, make([]float32, 2*H)),
	}
	robertaExtra := []*safetensors.Tensor{
		safetensors.FromFloat32("lm_head.dense.weight", []int{H, H}, make([]float32, H*H)),
		safetensors.FromFloat32("lm_head.bias", []int{13}, make([]float32, 13)),
		safetensors.FromInt64("roberta.embeddings.position_ids", []int{1, 10}, make([]int64, 10)),
	}
	tests := []struct {
		name   string
		mt     string
		rename func(string) string
		conv   tensorFn
		extra  []*safetensors.Tensor
		tol    float64 // relative tolerance from storage precision
	}{
		{"base names", "bert", nil, nil, nil, 0},
		{"bert. prefix + task heads", "bert", func(n string) string { return "bert." + n }, nil, extraTask, 0},
		{"legacy gamma/beta", "bert", func(n string) string { return "bert." + legacyLN(n) }, nil, nil, 0},
		{"float16 storage", "bert", nil, f16Tensor, nil, 1.0 / 1024},
		{"bfloat16 storage", "bert", func(n string) string { return "bert." + n }, bf16Tensor, nil, 1.0 / 128},
		{"roberta. prefix + lm_head", "roberta", func(n string) string { return "roberta." + n }, nil, robertaExtra, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := randomEncoder(t, tc.mt, 11)
			dir := t.TempDir()
			writeCheckpoint(t, dir, src, tc.rename, tc.conv, tc.extra...)
			got, err := LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.SourceDir != dir || got.Config.ModelType != tc.mt {
				t.Fatalf("SourceDir %q, model type %q", got.SourceDir, got.Config.ModelType)
			}
			gp := got.Params()
			for i, p := range src.Params() {
				q := gp[i]
				if q.Name != p.Name {
					t.Fatalf("param %d: %s vs %s", i, q.Name, p.Name)
				}
				for j, v := range p.Value.Data {
					w := q.Value.Data[j]
					if math.Abs(float64(v-w)) > tc.tol*math.Abs(float64(v))+1e-30 {
						t.Fatalf("%s[%d] = %v, want %v (tol %g)", p.Name, j, w, v, tc.tol)
					}
				}
			}
		})
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	for _, mt := range []string{"bert", "roberta"} {
		t.Run(mt, func(t *testing.T) {
			src := randomEncoder(t, mt, 21)
			vocabDir := t.TempDir()
			vocab := filepath.Join(vocabDir, "vocab.txt")
			if err := os.WriteFile(vocab, []byte("[PAD]\n[UNK]\nhello\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "out")
			if err := Save(dir, src, TokenizerFiles(vocabDir)...); err != nil {
				t.Fatal(err)
			}
			// Base-model names without prefix, as BertModel.save_pretrained.
			f, err := safetensors.ReadFile(filepath.Join(dir, WeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := f.Get("encoder.layer.1.output.LayerNorm.weight"); !ok || f.Metadata["format"] != "pt" || len(f.Tensors) != len(src.Params()) {
				t.Fatalf("saved tensors: %d, metadata %v", len(f.Tensors), f.Metadata)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "vocab.txt")); err != nil || string(b) != "[PAD]\n[UNK]\nhello\n" {
				t.Fatalf("vocab copy: %q %v", b, err)
			}
			got, err := LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.Config.ModelType != src.Config.ModelType || got.Config.PadTokenID != src.Config.PadTokenID || got.Config.LayerNormEps != src.Config.LayerNormEps {
				t.Fatalf("config %+v vs %+v", got.Config, src.Config)
			}
			in := tinyInput(src.Config)
			y1, _ := src.Forward(in, false, nil)
			y2, _ := got.Forward(in, false, nil)
			for i := range y1.Data {
				if y1.Data[i] != y2.Data[i] {
					t.Fatalf("output %d differs after round trip: %v vs %v", i, y1.Data[i], y2.Data[i])
				}
			}
			// Saving onto the source directory (tokenizer files in place) works.
			if err := Save(dir, got, TokenizerFiles(dir)...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLoadCheckpointErrors(t *testing.T) {
	drop := func(target string) func(string) string {
		return func(n string) string {
			if n == target {
				return ""
			}
			return n
		}
	}
	tests := []struct {
		name   string
		rename func(string) string
		extra  []*safetensors.Tensor
		mutate func(dir string)
		want   []string
	}{
		{name: "missing tensor", rename: drop("encoder.layer.1.intermediate.dense.bias"),
			want: []string{"missing encoder tensor", "encoder.layer.1.intermediate.dense.bias", WeightsFile}},
		{name: "unknown encoder tensor",
			extra: []*safetensors.Tensor{safetensors.FromFloat32("bert.encoder.layer.2.output.dense.bias", []int{8}, make([]float32, 8))},
			want:  []string{`"bert.encoder.layer.2.output.dense.bias"`, "not a parameter"}},
		{name: "duplicate via prefix",
			extra: []*safetensors.Tensor{safetensors.FromFloat32("bert.embeddings.LayerNorm.bias", []int{8}, make([]float32, 8))},
			want:  []string{"both map to parameter embeddings.LayerNorm.bias"}},
		{name: "shape mismatch", rename: drop("embeddings.word_embeddings.weight"),
			extra: []*safetensors.Tensor{safetensors.FromFloat32("embeddings.word_embeddings.weight", []int{12, 8}, make([]float32, 96))},
			want:  []string{`"embeddings.word_embeddings.weight" has shape [12 8]`, "[13 8]"}},
		{name: "integer dtype", rename: drop("embeddings.LayerNorm.bias"),
			extra: []*safetensors.Tensor{safetensors.FromInt64("embeddings.LayerNorm.bias", []int{8}, make([]int64, 8))},
			want:  []string{"embeddings.LayerNorm.bias", "I64"}},
		{name: "non-finite", rename: drop("embeddings.LayerNorm.bias"),
			extra: []*safetensors.Tensor{safetensors.FromFloat32("embeddings.LayerNorm.bias", []int{8}, []float32{0, 0, float32(math.NaN()), 0, 0, 0, 0, 0})},
			want:  []string{"embeddings.LayerNorm.bias", "non-finite"}},
		{name: "pytorch_model.bin only", mutate: func(dir string) {
			os.Remove(filepath.Join(dir, WeightsFile))
			os.WriteFile(filepath.Join(dir, PyTorchBinFile), []byte("pickle"), 0o644)
		}, want: []string{"only pytorch_model.bin", "not supported"}},
		{name: "no weights", mutate: func(dir string) { os.Remove(filepath.Join(dir, WeightsFile)) },
			want: []string{"no model.safetensors"}},
		{name: "no config", mutate: func(dir string) { os.Remove(filepath.Join(dir, ConfigFile)) },
			want: []string{ConfigFile}},
		{name: "truncated weights", mutate: func(dir string) {
			p := filepath.Join(dir, WeightsFile)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-10], 0o644)
		}, want: []string{WeightsFile}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := randomEncoder(t, "bert", 31)
			dir := t.TempDir()
			writeCheckpoint(t, dir, src, tc.rename, nil, tc.extra...)
			if tc.mutate != nil {
				tc.mutate(dir)
			}
			_, err := LoadDir(dir)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestCanonicalName(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"bert.encoder.layer.3.attention.output.LayerNorm.gamma", "encoder.layer.3.attention.output.LayerNorm.weight", true},
		{"roberta.embeddings.LayerNorm.beta", "embeddings.LayerNorm.bias", true},
		{"embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight", true},
		{"bert.pooler.dense.weight", "", false},
		{"cls.predictions.decoder.weight", "", false},
		{"lm_head.layer_norm.weight", "", false},
		{"embeddings.position_ids", "", false},
		{"bert.embeddings.token_type_ids", "", false},
		{"classifier.out_proj.weight", "", false},
	}
	for _, tc := range tests {
		got, ok := CanonicalName(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("CanonicalName(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// Loaded models train: params are usable by nn (gradients allocated).
func TestLoadedModelHasGrads(t *testing.T) {
	src := randomEncoder(t, "bert", 41)
	dir := t.TempDir()
	writeCheckpoint(t, dir, src, nil, nil)
	e, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	in := tinyInput(e.Config)
	y, c := e.Forward(in, true, newRng(1))
	g := nn.New(y.Shape...)
	g.Data[0] = 1
	e.Backward(c, g)
	if nn.GradNorm(e.Params()) == 0 {
		t.Fatal("no gradient after backward")
	}
}

// TestLoadWeightsAtomic: a file that fails validation changes no parameter
// (LoadWeights used to copy every tensor before the bad one).
func TestLoadWeightsAtomic(t *testing.T) {
	e := randomEncoder(t, "bert", 41)
	before := map[string][]float32{}
	for _, p := range e.Params() {
		before[p.Name] = append([]float32(nil), p.Value.Data...)
	}
	other := randomEncoder(t, "bert", 42)
	dir := t.TempDir()
	last := "encoder.layer.1.output.LayerNorm.weight" // after every embeddings.* tensor
	bad := make([]float32, 8)
	bad[5] = float32(math.Inf(1))
	writeCheckpoint(t, dir, other, func(n string) string {
		if n == last {
			return ""
		}
		return n
	}, nil, safetensors.FromFloat32(last, []int{8}, bad))
	err := e.LoadWeights(filepath.Join(dir, WeightsFile))
	if err == nil || !strings.Contains(err.Error(), last) {
		t.Fatalf("error %v, want one naming %s", err, last)
	}
	for _, p := range e.Params() {
		for i, v := range p.Value.Data {
			if v != before[p.Name][i] {
				t.Fatalf("%s[%d] changed by a failed load (%v -> %v)", p.Name, i, before[p.Name][i], v)
			}
		}
	}
}
