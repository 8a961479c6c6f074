package wav2vec2

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/audio"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/safetensors"
)

// The PyTorch reference (docs/speech.md, "Reference test"):
//
//	NVDP_W2V2_REF_OUT=/tmp/w2v2ref go test ./wav2vec2 -run TestWriteReferenceCheckpoints
//	/usr/bin/python3 scripts/w2v2ref/w2v2_ref.py /tmp/w2v2ref wav2vec2/testdata/reference.safetensors
//
// writes a random checkpoint and input per case (refCases) and has the
// independent implementation in scripts/w2v2ref compute last_hidden_state;
// TestPyTorchReference rebuilds the same checkpoints and inputs from their
// seeds, loads them through LoadDir and compares.

// refCase is one reference checkpoint: a config, the seed of its random
// weights and input, and how it is stored.
type refCase struct {
	name             string
	cfg              Config
	seed             uint64
	prefix           string // "wav2vec2." for a Wav2Vec2ForSequenceClassification layout
	parametrizations bool   // weight norm as parametrizations.weight.original0/1
}

var refCases = []refCase{
	// wav2vec2-base layout: GroupNorm, post-LN; a Wav2Vec2Model file with weight_g / weight_v.
	{name: "group", cfg: tinyConfig(NormGroup), seed: 11},
	// wav2vec2-large layout: LayerNorm, conv bias, pre-LN; a
	// Wav2Vec2ForSequenceClassification file (prefix, head tensors) with
	// the parametrizations layout.
	{name: "layer", cfg: tinyConfig(NormLayer), seed: 12, prefix: basePrefix, parametrizations: true},
}

// writeCase writes the case's config.json and model.safetensors into dir
// (created) and returns the model and its input.
func writeCase(t testing.TB, rc refCase, dir string) (*Model, audio.Batch) {
	t.Helper()
	m := tinyModel(t, rc.cfg, rc.seed)
	if rc.prefix != "" {
		m.Config.Architectures = []string{"Wav2Vec2ForSequenceClassification"}
	}
	if err := Save(dir, m); err != nil {
		t.Fatal(err)
	}
	var ts []*safetensors.Tensor
	for _, p := range m.Params() {
		name := p.Name
		if rc.parametrizations {
			for to, from := range parametrizationNames {
				if s, ok := strings.CutSuffix(name, from); ok {
					name = s + to
				}
			}
		}
		ts = append(ts, safetensors.FromFloat32(rc.prefix+name, p.Value.Shape, p.Value.Data))
	}
	if rc.prefix != "" { // the classification head, ignored by the loader
		H := rc.cfg.HiddenSize
		ts = append(ts, safetensors.FromFloat32("projector.weight", []int{4, H}, make([]float32, 4*H)),
			safetensors.FromFloat32("projector.bias", []int{4}, make([]float32, 4)),
			safetensors.FromFloat32("classifier.weight", []int{3, 4}, make([]float32, 12)),
			safetensors.FromFloat32("classifier.bias", []int{3}, make([]float32, 3)))
	}
	if err := safetensors.WriteFile(filepath.Join(dir, encoder.WeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	return m, tinyInput(rc.seed+100, true)
}

// checksum is the float64 sum of |v| (the fixture records it for the
// inputs and weights the reference saw).
func checksum(vs ...[]float32) float64 {
	var s float64
	for _, d := range vs {
		for _, v := range d {
			s += math.Abs(float64(v))
		}
	}
	return s
}

func paramChecksum(m *Model) float64 {
	var s float64
	for _, p := range m.Params() {
		s += checksum(p.Value.Data)
	}
	return s
}

// TestWriteReferenceCheckpoints writes the reference inputs for
// scripts/w2v2ref/w2v2_ref.py into $NVDP_W2V2_REF_OUT/<case>/ (skipped
// without it).
func TestWriteReferenceCheckpoints(t *testing.T) {
	out := os.Getenv("NVDP_W2V2_REF_OUT")
	if out == "" {
		t.Skip("set NVDP_W2V2_REF_OUT to write the reference checkpoints")
	}
	for _, rc := range refCases {
		dir := filepath.Join(out, rc.name)
		_, in := writeCase(t, rc, dir)
		mask := make([]int64, len(in.Mask))
		for i, v := range in.Mask {
			mask[i] = int64(v)
		}
		if err := safetensors.WriteFile(filepath.Join(dir, "input.safetensors"), []*safetensors.Tensor{
			safetensors.FromFloat32("input_values", []int{in.B, in.T}, in.Values),
			safetensors.FromInt64("attention_mask", []int{in.B, in.T}, mask),
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPyTorchReference compares last_hidden_state and the frame lengths
// with the independent PyTorch implementation (float64) on both layouts,
// loading the checkpoints through LoadDir. Tolerance: 2e-5 absolute (the
// outputs are LayerNorm-ed, O(1); float32 arithmetic gives about 1e-6).
func TestPyTorchReference(t *testing.T) {
	ref, err := safetensors.ReadFile(filepath.Join("testdata", "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range refCases {
		t.Run(rc.name, func(t *testing.T) {
			dir := t.TempDir()
			want, in := writeCase(t, rc, dir)
			m, err := LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			inSum, err := strconv.ParseFloat(ref.Metadata[rc.name+".input_abs_sum"], 64)
			if err != nil {
				t.Fatalf("fixture metadata %s.input_abs_sum: %v", rc.name, err)
			}
			wSum, err := strconv.ParseFloat(ref.Metadata[rc.name+".param_abs_sum"], 64)
			if err != nil {
				t.Fatalf("fixture metadata %s.param_abs_sum: %v", rc.name, err)
			}
			// The weights and input must be the ones the reference saw.
			if got := checksum(in.Values); math.Abs(got-inSum) > 1e-6*inSum {
				t.Fatalf("input checksum %v, fixture %v: the seeded input changed, regenerate the fixture", got, inSum)
			}
			if got := paramChecksum(m); math.Abs(got-wSum) > 1e-6*wSum || got != paramChecksum(want) {
				t.Fatalf("weight checksum %v (written %v), fixture %v: regenerate the fixture", got, paramChecksum(want), wSum)
			}
			tensor := func(n string) *safetensors.Tensor {
				tt, ok := ref.Get(rc.name + "." + n)
				if !ok {
					t.Fatalf("fixture lacks %s.%s", rc.name, n)
				}
				return tt
			}
			lens, err := tensor("frame_lengths").Int64()
			if err != nil {
				t.Fatal(err)
			}
			wantY, err := tensor("last_hidden_state").Float32()
			if err != nil {
				t.Fatal(err)
			}
			y, mask, _ := m.Forward(in, false, nil)
			F := len(mask) / in.B
			for b, n := range lens {
				got := 0
				for _, v := range mask[b*F : (b+1)*F] {
					got += int(v)
				}
				if int64(got) != n {
					t.Errorf("row %d: %d frames, reference %d", b, got, n)
				}
			}
			if len(y.Data) != len(wantY) {
				t.Fatalf("output %v, reference %d values", y.Shape, len(wantY))
			}
			var worst float64
			for i, w := range wantY {
				worst = math.Max(worst, math.Abs(float64(y.Data[i]-w)))
			}
			if worst > 2e-5 {
				t.Fatalf("max |ours - pytorch| = %.3g", worst)
			}
			t.Logf("max |ours - pytorch| = %.3g over %v", worst, y.Shape)
		})
	}
}

// TestLoadErrors: every malformed checkpoint is refused with the tensor named.
func TestLoadErrors(t *testing.T) {
	base := refCases[0]
	for _, tc := range []struct {
		name string
		edit func(map[string]*safetensors.Tensor)
		want string
	}{
		{"missing", func(ts map[string]*safetensors.Tensor) { delete(ts, "encoder.layers.1.final_layer_norm.bias") },
			"missing wav2vec2 tensor(s) encoder.layers.1.final_layer_norm.bias"},
		{"shape", func(ts map[string]*safetensors.Tensor) {
			ts["encoder.pos_conv_embed.conv.weight_g"] = safetensors.FromFloat32("encoder.pos_conv_embed.conv.weight_g", []int{1, 1, 3}, []float32{1, 1, 1})
		}, `tensor "encoder.pos_conv_embed.conv.weight_g" has shape [1 1 3], the config needs [1 1 4]`},
		{"both layouts", func(ts map[string]*safetensors.Tensor) {
			n := "encoder.pos_conv_embed.conv.parametrizations.weight.original0"
			ts[n] = safetensors.FromFloat32(n, []int{1, 1, 4}, []float32{1, 1, 1, 1})
		}, "both map to parameter encoder.pos_conv_embed.conv.weight_g"},
		{"unknown encoder tensor", func(ts map[string]*safetensors.Tensor) {
			n := "encoder.layers.2.final_layer_norm.bias"
			ts[n] = safetensors.FromFloat32(n, []int{16}, make([]float32, 16))
		}, `tensor "encoder.layers.2.final_layer_norm.bias" is not a parameter of this wav2vec2 model`},
		{"non-finite", func(ts map[string]*safetensors.Tensor) {
			n := "feature_projection.projection.bias"
			v := make([]float32, 16)
			v[3] = float32(math.Inf(1))
			ts[n] = safetensors.FromFloat32(n, []int{16}, v)
		}, "tensor feature_projection.projection.bias: non-finite value +Inf at flat index 3"},
		{"zero direction", func(ts map[string]*safetensors.Tensor) {
			n := "encoder.pos_conv_embed.conv.weight_v"
			v, _ := ts[n].Float32()
			v = append([]float32(nil), v...)
			for i := 1; i < len(v); i += 4 {
				v[i] = 0 // kernel tap 1
			}
			ts[n] = safetensors.FromFloat32(n, ts[n].Shape, v)
		}, "tensor encoder.pos_conv_embed.conv.weight_v: kernel tap 1 has zero norm"},
		{"masked_spec_embed shape", func(ts map[string]*safetensors.Tensor) {
			ts[MaskedSpecEmbedName] = safetensors.FromFloat32(MaskedSpecEmbedName, []int{15}, make([]float32, 15))
		}, `tensor "masked_spec_embed" has shape [15], the config needs [16]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeCase(t, base, dir)
			path := filepath.Join(dir, encoder.WeightsFile)
			f, err := safetensors.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ts := map[string]*safetensors.Tensor{}
			for _, x := range f.Tensors {
				ts[x.Name] = x
			}
			tc.edit(ts)
			var list []*safetensors.Tensor
			for _, x := range ts {
				list = append(list, x)
			}
			if err := safetensors.WriteFile(path, list, nil); err != nil {
				t.Fatal(err)
			}
			m := newZero(base.cfg)
			before := paramChecksum(m)
			err = m.LoadWeights(path)
			if err == nil || !containsAll(err.Error(), path, tc.want) {
				t.Fatalf("error %v, want it to name %s and contain %q", err, path, tc.want)
			}
			if paramChecksum(m) != before {
				t.Error("a failed load modified the parameters")
			}
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// TestSaveLoadRoundTrip: Save then LoadDir gives the same config, the same
// parameters bit for bit, masked_spec_embed carried through, and the saved
// names are the Wav2Vec2Model layout (weight_g / weight_v, no prefix).
func TestSaveLoadRoundTrip(t *testing.T) {
	for _, norm := range []string{NormGroup, NormLayer} {
		t.Run(norm, func(t *testing.T) {
			m := tinyModel(t, tinyConfig(norm), 21)
			m.MaskedSpecEmbed = nn.NewParam(MaskedSpecEmbedName, 16)
			m.MaskedSpecEmbed.Value.Data[2] = 0.25
			dir := t.TempDir()
			if err := Save(dir, m); err != nil {
				t.Fatal(err)
			}
			got, err := LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := m.Config.JSON()
			b, _ := got.Config.JSON()
			if string(a) != string(b) {
				t.Errorf("config after round trip:\n%s\nwant\n%s", b, a)
			}
			for i, p := range got.Params() {
				if !slices.Equal(p.Value.Data, m.Params()[i].Value.Data) {
					t.Errorf("%s differs after the round trip", p.Name)
				}
			}
			if got.MaskedSpecEmbed == nil || got.MaskedSpecEmbed.Value.Data[2] != 0.25 {
				t.Error("masked_spec_embed not carried through")
			}
			f, err := safetensors.ReadFile(filepath.Join(dir, encoder.WeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"encoder.pos_conv_embed.conv.weight_g", "encoder.pos_conv_embed.conv.weight_v",
				"feature_extractor.conv_layers.0.layer_norm.weight", MaskedSpecEmbedName} {
				if _, ok := f.Get(n); !ok {
					t.Errorf("saved file lacks %s", n)
				}
			}
			if len(f.Tensors) != len(m.Params())+1 {
				t.Errorf("saved %d tensors, want %d", len(f.Tensors), len(m.Params())+1)
			}
		})
	}
}

func ExampleConfig_FrameLength() {
	c, _ := Preset("base")
	fmt.Println(c.Stride(), c.ReceptiveField(), c.FrameLength(16000), c.FrameLength(399), c.FrameLength(400))
	// Output: 320 400 49 0 1
}
