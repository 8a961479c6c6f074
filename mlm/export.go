package mlm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/safetensors"
)

// architectureName is the config.json "architectures" entry of an exported model.
const architectureName = "BertForMaskedLM"

// basePrefix is the base-model prefix of BertForMaskedLM's state dict.
const basePrefix = "bert."

// exportTensors returns the model's tensors in the safetensors layout of
// transformers' BertForMaskedLM.save_pretrained, as in the hub's
// bert-base-uncased model.safetensors. The encoder comes first under "bert.",
// as bert.embeddings.* and bert.encoder.layer.N.*, without a pooler, which
// BertForMaskedLM has not. Then comes the head: cls.predictions.bias and
// cls.predictions.transform.{dense,LayerNorm}.{weight,bias}.
//
// The tied cls.predictions.decoder.weight and .bias are not stored:
// safetensors cannot hold shared tensors, and transformers re-ties them on
// load. The tensors' data alias the parameters.
func exportTensors(m *Model) []*safetensors.Tensor {
	var ts []*safetensors.Tensor
	for _, p := range m.Enc.Params() {
		ts = append(ts, safetensors.FromFloat32(basePrefix+p.Name, p.Value.Shape, p.Value.Data))
	}
	h := m.Head
	for _, p := range []*nn.Param{h.Bias, h.Dense.W, h.Dense.B, h.LN.Weight, h.LN.Bias} {
		ts = append(ts, safetensors.FromFloat32(p.Name, p.Value.Shape, p.Value.Data))
	}
	return ts
}

// Save writes a Hugging Face model directory, replacing each file
// atomically. It holds config.json, the encoder's config with architectures
// ["BertForMaskedLM"]; model.safetensors, in F32 with metadata
// {"format": "pt"} and the exportTensors layout; and copies of the given
// tokenizer files, such as vocab.txt.
//
// [encoder.Load]("hf:DIR") reads it, stripping the "bert." prefix and
// ignoring cls.*, as do transformers' AutoModel and AutoModelForMaskedLM.
func Save(dir string, m *Model, tokenizerFiles ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	cfg := m.Enc.Config
	cfg.Architectures = []string{architectureName}
	js, err := cfg.JSON()
	if err != nil {
		return fmt.Errorf("save model: config: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, encoder.ConfigFile), append(js, '\n')); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, encoder.WeightsFile), exportTensors(m), map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	if err := atomicfile.CopyInto(dir, tokenizerFiles); err != nil {
		return fmt.Errorf("save model: tokenizer file: %w", err)
	}
	return nil
}

// ErrNoMLMHead is wrapped by [LoadHF]'s error when the checkpoint has no MLM
// head, as a BertModel has none.
var ErrNoMLMHead = errors.New("no MLM head")

// LoadHF loads an encoder and its MLM head from a Hugging Face directory
// written by [Save] or by transformers' BertForMaskedLM. Legacy LayerNorm
// gamma/beta names are accepted.
//
// Its errors name the file and tensor: a missing head tensor, as in a
// BertModel checkpoint, which has no cls.predictions.*; a shape mismatch; or
// a non-finite value.
func LoadHF(dir string) (*Model, error) {
	enc, err := encoder.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	head, err := loadHead(enc, dir)
	if err != nil {
		return nil, err
	}
	return &Model{Enc: enc, Head: head}, nil
}

// loadHead reads the MLM head tied to enc from dir's weights file; a
// checkpoint without one gives an error wrapping ErrNoMLMHead.
func loadHead(enc *encoder.Encoder, dir string) (*Head, error) {
	path := filepath.Join(dir, encoder.WeightsFile)
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h := newHead(enc)
	for _, p := range h.Params() {
		t, ok := f.Get(p.Name)
		if !ok && strings.Contains(p.Name, "LayerNorm.") {
			legacy := strings.TrimSuffix(strings.TrimSuffix(p.Name, "weight"), "bias")
			if strings.HasSuffix(p.Name, ".weight") {
				legacy += "gamma"
			} else {
				legacy += "beta"
			}
			t, ok = f.Get(legacy)
		}
		if !ok {
			return nil, fmt.Errorf("%s: %w: no tensor %s (not a BertForMaskedLM checkpoint?)", path, ErrNoMLMHead, p.Name)
		}
		if !slices.Equal(t.Shape, p.Value.Shape) {
			return nil, fmt.Errorf("%s: tensor %s has shape %v, the config needs %v", path, t.Name, t.Shape, p.Value.Shape)
		}
		data, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		copy(p.Value.Data, data)
		if err := nn.CheckFinite(t.Name, p.Value); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return h, nil
}
