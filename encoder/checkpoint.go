package encoder

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/hfmodel"
	"github.com/nvdp-project/nvdp/safetensors"
)

// File names of a Hugging Face model directory.
const (
	ConfigFile      = "config.json"
	WeightsFile     = "model.safetensors"
	PyTorchBinFile  = "pytorch_model.bin"
	ShardIndexFile  = "model.safetensors.index.json"
	legacyTFWeights = "tf_model.h5"
)

// TokenizerFileNames are the tokenizer files a model directory may hold. [Save] copies, and the hub
// download fetches, whichever exist.
var TokenizerFileNames = []string{
	"vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
}

// ignoredPrefixes are heads and buffers of task models that are not part of
// the encoder (after the bert./roberta. prefix is removed).
var ignoredPrefixes = []string{"cls.", "pooler.", "lm_head.", "classifier.", "qa_outputs."}

// ignoredBuffers are persistent buffers some checkpoints store.
var ignoredBuffers = map[string]bool{"embeddings.position_ids": true, "embeddings.token_type_ids": true}

// CanonicalName maps a checkpoint tensor name to the encoder's parameter name: the "bert." or
// "roberta." prefix is removed, and legacy LayerNorm "gamma" and "beta" become "weight" and "bias".
// ok is false for tensors that are not encoder parameters and are ignored: cls.*, pooler.*,
// lm_head.*, classifier.*, qa_outputs.* and the embeddings.position_ids and token_type_ids buffers.
func CanonicalName(name string) (canon string, ok bool) {
	n := name
	for _, p := range []string{"bert.", "roberta."} {
		if strings.HasPrefix(n, p) {
			n = n[len(p):]
			break
		}
	}
	for _, p := range ignoredPrefixes {
		if strings.HasPrefix(n, p) {
			return "", false
		}
	}
	if ignoredBuffers[n] {
		return "", false
	}
	if strings.Contains(n, "LayerNorm.") {
		if strings.HasSuffix(n, ".gamma") {
			n = strings.TrimSuffix(n, "gamma") + "weight"
		} else if strings.HasSuffix(n, ".beta") {
			n = strings.TrimSuffix(n, "beta") + "bias"
		}
	}
	return n, true
}

// LoadWeights copies the tensors of a model.safetensors file into the encoder's parameters;
// [CanonicalName] gives the accepted names. F16, BF16 and F64 storage are converted to float32.
// Unknown tensors outside the encoder, such as a custom task head, are logged and ignored.
//
// No parameter is changed unless the whole file validates, as in hfmodel.LoadWeights. Errors name
// the file and the tensor: a required parameter missing, an unknown tensor under embeddings. or
// encoder., two tensors mapping to one parameter, a shape mismatch, a non-float dtype or a
// non-finite value.
func (e *Encoder) LoadWeights(path string) error {
	_, err := hfmodel.LoadWeights(path, e.Params(), hfmodel.Names{
		Canonical: CanonicalName,
		Strict:    []string{"embeddings.", "encoder."},
		Model:     fmt.Sprintf("%s encoder (%d layers)", e.Config.ModelType, e.Config.NumHiddenLayers),
		Kind:      "encoder",
	})
	return err
}

// LoadDir loads a Hugging Face model directory holding config.json, for bert or roberta, and
// model.safetensors. A directory holding only pytorch_model.bin, a sharded checkpoint or only
// TensorFlow weights is an error saying so.
func LoadDir(dir string) (*Encoder, error) {
	cfg, err := ReadConfig(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	wpath := filepath.Join(dir, WeightsFile)
	if _, err := os.Stat(wpath); err != nil {
		return nil, missingWeightsError(dir, func(name string) bool {
			_, err := os.Stat(filepath.Join(dir, name))
			return err == nil
		})
	}
	e := newZero(cfg)
	if err := e.LoadWeights(wpath); err != nil {
		return nil, err
	}
	e.SourceDir = dir
	return e, nil
}

func missingWeightsError(where string, exists func(string) bool) error {
	switch {
	case exists(ShardIndexFile):
		return fmt.Errorf("%s: sharded checkpoints (%s) are not supported; save the model as a single %s", where, ShardIndexFile, WeightsFile)
	case exists(PyTorchBinFile):
		return fmt.Errorf("%s: only %s found; pickle checkpoints are not supported (they execute code when loaded). "+
			"Convert it once with Python: AutoModel.from_pretrained(dir).save_pretrained(dir, safe_serialization=True)", where, PyTorchBinFile)
	case exists(legacyTFWeights):
		return fmt.Errorf("%s: only TensorFlow weights (%s) found; %s is required", where, legacyTFWeights, WeightsFile)
	}
	return fmt.Errorf("%s: no %s", where, WeightsFile)
}

// Save writes a Hugging Face model directory as BertModel.save_pretrained and
// RobertaModel.save_pretrained do: config.json and model.safetensors, in F32 with metadata
// {"format": "pt"} and base-model names without the bert. or roberta. prefix. It also copies the
// given tokenizer files by base name, such as the SourceDir's vocab.txt. The directory is created
// if needed, and each file is replaced atomically.
func Save(dir string, e *Encoder, tokenizerFiles ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save encoder: %w", err)
	}
	cfgJSON, err := e.Config.JSON()
	if err != nil {
		return fmt.Errorf("save encoder: config: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, ConfigFile), func(w io.Writer) error {
		_, err := w.Write(append(cfgJSON, '\n'))
		return err
	}); err != nil {
		return fmt.Errorf("save encoder: %w", err)
	}
	var ts []*safetensors.Tensor
	for _, p := range e.Params() {
		ts = append(ts, safetensors.FromFloat32(p.Name, p.Value.Shape, p.Value.Data))
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("save encoder: %w", err)
	}
	if err := atomicfile.CopyInto(dir, tokenizerFiles); err != nil {
		return fmt.Errorf("save encoder: tokenizer file: %w", err)
	}
	return nil
}

// TokenizerFiles lists the tokenizer files of [TokenizerFileNames] present in dir.
func TokenizerFiles(dir string) []string {
	var out []string
	for _, n := range TokenizerFileNames {
		p := filepath.Join(dir, n)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			out = append(out, p)
		}
	}
	return out
}

var errNotFound = errors.New("not found")
