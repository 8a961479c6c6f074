package wav2vec2

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/hfmodel"
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

// CanonicalName maps a checkpoint tensor name to the model's parameter name: the "wav2vec2." prefix
// is removed, and the parametrizations layout of weight norm, conv.parametrizations.weight.original0
// and original1, becomes conv.weight_g and conv.weight_v. ok is false for task-head and pretraining
// tensors, which are ignored.
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

// LoadWeights copies the tensors of a safetensors file of a Wav2Vec2Model or
// Wav2Vec2ForSequenceClassification into the model's parameters. Names may carry "wav2vec2." or
// not, weight norm may be in either layout, and F16, BF16 and F64 are converted to float32.
//
// masked_spec_embed, when present, goes into MaskedSpecEmbed. A file without it leaves
// MaskedSpecEmbed as it is: 0 in a LoadDir model whose configuration has it, where transformers
// would keep its random draw.
//
// Nothing is modified unless the whole file validates. Errors name the file and the tensor: a
// parameter missing, an unknown tensor under feature_extractor., feature_projection. or encoder.,
// two tensors mapping to one parameter from both weight-norm layouts, a shape mismatch, a
// non-float dtype, a non-finite value, or a weight-norm direction with a zero-norm kernel tap.
// Unknown tensors elsewhere are logged and ignored.
func (m *Model) LoadWeights(path string) error {
	values, optional, err := hfmodel.ReadWeights(path, m.baseParams(), hfmodel.Names{
		Canonical: CanonicalName,
		Strict:    encoderPrefixes,
		Optional:  map[string][]int{MaskedSpecEmbedName: {m.Config.HiddenSize}},
		Model: fmt.Sprintf("wav2vec2 model (%d conv layers, %d transformer layers, feat_extract_norm %q)",
			len(m.Config.ConvDim), m.Config.NumHiddenLayers, m.Config.FeatExtractNorm),
		Kind: "wav2vec2",
	})
	if err != nil {
		return err
	}
	v := m.PosConv.Norm.V
	if err := checkDirection(values[v.Name], v.Value.Shape); err != nil {
		return fmt.Errorf("%s: tensor %s: %w", path, v.Name, err)
	}
	// Everything validated: apply.
	for _, p := range m.baseParams() {
		copy(p.Value.Data, values[p.Name])
	}
	if spec := optional[MaskedSpecEmbedName]; spec != nil {
		if m.MaskedSpecEmbed == nil {
			m.MaskedSpecEmbed = nn.NewParam(MaskedSpecEmbedName, len(spec))
		}
		copy(m.MaskedSpecEmbed.Value.Data, spec)
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

// LoadDir loads a Hugging Face model directory holding config.json, of model_type wav2vec2, and
// model.safetensors. Pickle checkpoints, pytorch_model.bin, are not read.
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

// Save writes a Hugging Face Wav2Vec2Model directory as save_pretrained does: config.json and
// model.safetensors, in F32 with metadata {"format": "pt"} and names without the "wav2vec2."
// prefix. Weight norm is written as weight_g and weight_v, which every transformers version reads,
// and masked_spec_embed is written when the model has one. The directory is created if needed,
// and each file is replaced atomically.
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
	if e := m.MaskedSpecEmbed; e != nil {
		ts = append(ts, safetensors.FromFloat32(MaskedSpecEmbedName, e.Value.Shape, e.Value.Data))
	}
	for _, p := range m.baseParams() {
		ts = append(ts, safetensors.FromFloat32(p.Name, p.Value.Shape, p.Value.Data))
	}
	if err := safetensors.WriteFile(filepath.Join(dir, encoder.WeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("save wav2vec2: %w", err)
	}
	return nil
}
