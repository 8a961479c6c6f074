package wav2vec2

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/safetensors"
)

// basePrefix is the prefix of the encoder's tensors in task models
// (Wav2Vec2ForSequenceClassification, Wav2Vec2ForCTC, ...).
const basePrefix = "wav2vec2."

// headPrefixes are task-head and pretraining tensors (after basePrefix is
// removed) that are not part of the encoder: Wav2Vec2ForSequenceClassification's
// projector, classifier and layer_weights, Wav2Vec2ForCTC's lm_head,
// Wav2Vec2ForPreTraining's quantizer, project_q and project_hid.
var headPrefixes = []string{"projector.", "classifier.", "layer_weights", "lm_head.", "quantizer.", "project_q.", "project_hid."}

// encoderPrefixes are the prefixes of encoder tensors: an unknown tensor
// under one of them is an error (a checkpoint of another architecture).
var encoderPrefixes = []string{"feature_extractor.", "feature_projection.", "encoder."}

// The weight-norm tensors of torch.nn.utils.parametrizations.weight_norm
// and their torch.nn.utils.weight_norm names (the layout Save writes).
var parametrizationNames = map[string]string{
	".parametrizations.weight.original0": ".weight_g",
	".parametrizations.weight.original1": ".weight_v",
}

// CanonicalName maps a checkpoint tensor name to the model's parameter
// name: the "wav2vec2." prefix is removed and the parametrizations layout
// of weight norm (conv.parametrizations.weight.original0 / original1)
// becomes conv.weight_g / conv.weight_v. ok is false for task-head and
// pretraining tensors, which are ignored.
func CanonicalName(name string) (canon string, ok bool) {
	n := strings.TrimPrefix(name, basePrefix)
	for _, p := range headPrefixes {
		if strings.HasPrefix(n, p) {
			return "", false
		}
	}
	for from, to := range parametrizationNames {
		if s, found := strings.CutSuffix(n, from); found {
			return s + to, true
		}
	}
	return n, true
}

// LoadWeights copies the tensors of a safetensors file of a Wav2Vec2Model
// or Wav2Vec2ForSequenceClassification (names with or without "wav2vec2.";
// either weight-norm layout; F16, BF16 and F64 converted to float32) into
// the model's parameters, and masked_spec_embed, when present, into
// MaskedSpecEmbed. Nothing is modified unless the whole file validates.
// Errors name the file and the tensor: a parameter missing, an unknown
// tensor under feature_extractor., feature_projection. or encoder., two
// tensors mapping to one parameter (both weight-norm layouts), a shape
// mismatch, a non-float dtype, a non-finite value, or a weight-norm
// direction with a zero-norm kernel tap. Unknown tensors elsewhere are
// logged and ignored.
func (m *Model) LoadWeights(path string) error {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return err
	}
	pm, err := nn.ParamMap(m.Params())
	if err != nil {
		return err
	}
	values := make(map[string][]float32, len(pm))
	from := make(map[string]string, len(pm)) // param name -> tensor name
	var spec []float32
	var ignored int
	for _, t := range f.Tensors {
		canon, ok := CanonicalName(t.Name)
		if !ok {
			ignored++
			continue
		}
		want, isSpec := []int{m.Config.HiddenSize}, canon == MaskedSpecEmbedName
		if p, ok := pm[canon]; ok {
			want = p.Value.Shape
		} else if !isSpec {
			if hasAnyPrefix(canon, encoderPrefixes) {
				return fmt.Errorf("%s: tensor %q is not a parameter of this wav2vec2 model (%d conv layers, %d transformer layers, feat_extract_norm %q)",
					path, t.Name, len(m.Config.ConvDim), m.Config.NumHiddenLayers, m.Config.FeatExtractNorm)
			}
			slog.Warn("ignoring non-encoder tensor", "file", path, "tensor", t.Name)
			continue
		}
		if prev, dup := from[canon]; dup {
			return fmt.Errorf("%s: tensors %q and %q both map to parameter %s", path, prev, t.Name, canon)
		}
		if !slices.Equal(t.Shape, want) {
			return fmt.Errorf("%s: tensor %q has shape %v, the config needs %v", path, t.Name, t.Shape, want)
		}
		data, err := t.Float32()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := nn.CheckFinite(t.Name, nn.FromData(data, t.Shape...)); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		from[canon] = t.Name
		if isSpec {
			spec = data
		} else {
			values[canon] = data
		}
	}
	var missing []string
	for name := range pm {
		if values[name] == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		more := ""
		if len(missing) > 5 {
			more = fmt.Sprintf(" and %d more", len(missing)-5)
			missing = missing[:5]
		}
		return fmt.Errorf("%s: missing wav2vec2 tensor(s) %s%s", path, strings.Join(missing, ", "), more)
	}
	v := m.PosConv.Norm.V
	if err := checkDirection(values[v.Name], v.Value.Shape); err != nil {
		return fmt.Errorf("%s: tensor %q: %w", path, from[v.Name], err)
	}
	// Everything validated: apply.
	for name, p := range pm {
		copy(p.Value.Data, values[name])
	}
	if spec != nil {
		m.MaskedSpecEmbed = nn.FromData(spec, len(spec))
	}
	if ignored > 0 {
		slog.Debug("ignored task-head tensors", "file", path, "count", ignored)
	}
	return nil
}

// checkDirection rejects a weight-norm direction v [Out, In/G, K] with a
// kernel tap of zero norm (the weight would be 0/0).
func checkDirection(v []float32, shape []int) error {
	K := shape[2]
	norm := make([]float64, K)
	for i, x := range v {
		norm[i%K] += float64(x) * float64(x)
	}
	for k, n := range norm {
		if n == 0 {
			return fmt.Errorf("kernel tap %d has zero norm (weight g*v/||v|| undefined)", k)
		}
	}
	return nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// LoadDir loads a Hugging Face model directory: config.json (model_type
// wav2vec2) and model.safetensors. Pickle checkpoints (pytorch_model.bin)
// are not read.
func LoadDir(dir string) (*Model, error) {
	cfg, err := ReadConfig(filepath.Join(dir, encoder.ConfigFile))
	if err != nil {
		return nil, err
	}
	wpath := filepath.Join(dir, encoder.WeightsFile)
	if _, err := os.Stat(wpath); err != nil {
		return nil, fmt.Errorf("%s: no %s (pickle checkpoints such as %s are not supported)", dir, encoder.WeightsFile, encoder.PyTorchBinFile)
	}
	m := newZero(cfg)
	if err := m.LoadWeights(wpath); err != nil {
		return nil, err
	}
	return m, nil
}

// Save writes a Hugging Face Wav2Vec2Model directory as save_pretrained
// does: config.json and model.safetensors (F32, metadata {"format": "pt"},
// names without the "wav2vec2." prefix, weight norm as weight_g / weight_v,
// which every transformers version reads, and masked_spec_embed when the
// model has one). The directory is created if needed; each file is replaced
// atomically.
func Save(dir string, m *Model) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save wav2vec2: %w", err)
	}
	cfgJSON, err := m.Config.JSON()
	if err != nil {
		return fmt.Errorf("save wav2vec2: config: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, encoder.ConfigFile), func(w io.Writer) error {
		_, err := w.Write(append(cfgJSON, '\n'))
		return err
	}); err != nil {
		return fmt.Errorf("save wav2vec2: %w", err)
	}
	var ts []*safetensors.Tensor
	if m.MaskedSpecEmbed != nil {
		ts = append(ts, safetensors.FromFloat32(MaskedSpecEmbedName, m.MaskedSpecEmbed.Shape, m.MaskedSpecEmbed.Data))
	}
	for _, p := range m.Params() {
		ts = append(ts, safetensors.FromFloat32(p.Name, p.Value.Shape, p.Value.Data))
	}
	if err := safetensors.WriteFile(filepath.Join(dir, encoder.WeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("save wav2vec2: %w", err)
	}
	return nil
}
