package speech

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"

	"github.com/nvdp-project/nvdp/audio"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/internal/hfmodel"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/lid"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/wav2vec2"
)

// Model is the language identifier: the Wav2Vec2 encoder and, on its frame
// representations, the NVIB layer, NVDP block and head of an [nvib.Model]
// without a backbone, whose features come from Encoder. Parameter names are
// the encoder's, Hugging Face Wav2Vec2Model names, and nvib's: "nvib.*",
// "nvdp.*" and "classifier.*".
type Model struct {
	Encoder *wav2vec2.Model
	NVDP    *nvib.Model
	// Calibration is the calibration Build made for a privacy target (nil:
	// none made; written to model.CertificateFile with the model directory).
	Calibration *model.Calibration
}

// NumLabels is the head's width: every CommonLanguage language, see
// [lid.Languages], whichever the corpus has, so that a model's labels are
// the dataset's.
var NumLabels = len(lid.Languages())

// Params returns the encoder's parameters then the NVIB model's.
func (m *Model) Params() []*nn.Param {
	return append(append([]*nn.Param(nil), m.Encoder.Params()...), m.NVDP.Params()...)
}

// Cache is what Backward needs of a forward pass.
type Cache struct {
	enc  *wav2vec2.Cache
	nvdp *nvib.Cache
}

// Forward runs the model on a batch of waveforms of shape [B, T], every row
// real, as the fixed-length inputs of [Dataset.Batch] with in.Mask nil. The
// encoder gives frames of shape [B, F, H], and [nvib.Model.ForwardFeatures]
// runs on them with every frame a component, so that N = F + 1 with the
// prior. labels are language indices, or nil for none.
//
// It returns an error for an invalid input, and the NVIB model's errors.
func (m *Model) Forward(in audio.Batch, labels []int, opt nvib.ForwardOptions) (*nvib.Output, *Cache, error) {
	if in.Mask != nil {
		return nil, nil, fmt.Errorf("speech model: input has a mask: every row must be %d real samples (cropped or zero-padded)", in.T)
	}
	if err := m.Encoder.CheckInput(in); err != nil {
		return nil, nil, err
	}
	x, _, ec := m.Encoder.Forward(in, opt.Train, opt.Rng)
	var lab *nvib.Labels
	if labels != nil {
		lab = &nvib.Labels{Class: labels}
	}
	out, nc, err := m.NVDP.ForwardFeatures(x, nil, lab, opt)
	if err != nil {
		return nil, nil, err
	}
	return out, &Cache{enc: ec, nvdp: nc}, nil
}

// Backward accumulates the gradient of the loss of a forward pass with
// labels into every parameter. Errors: nvib.ErrNoLabels.
func (m *Model) Backward(c *Cache) error {
	dx, err := m.NVDP.BackwardFeatures(c.nvdp)
	if err != nil {
		return err
	}
	m.Encoder.Backward(c.enc, dx)
	return nil
}

// Build creates the model of a fresh run of resolved, validated options o,
// initialised from the seed's rngstream.TrainInit stream.
//
// The encoder is a preset from scratch, with o.Train.Dropout as its hidden,
// attention and feature-projection dropout, or an hf:DIR checkpoint. The NVIB
// model is configured by [model.PrepareModelConfig] for the encoder's shape,
// which calibrates to a privacy target, with its certificate in
// Model.Calibration, and then gives the configuration.
func Build(o *Options) (*Model, error) {
	initRng := rngstream.TrainInit.Rand(o.Train.Seed, 0)
	var enc *wav2vec2.Model
	var err error
	if dir, ok := strings.CutPrefix(o.Train.Encoder, hfPrefix); ok {
		if enc, err = wav2vec2.LoadDir(dir); err != nil {
			return nil, fmt.Errorf("encoder %s: %w", o.Train.Encoder, err)
		}
		applyDropout(&enc.Config, o.Train.Dropout)
	} else {
		cfg, err := o.EncoderConfig()
		if err != nil {
			return nil, err
		}
		applyDropout(&cfg, o.Train.Dropout)
		if enc, err = wav2vec2.New(cfg, initRng); err != nil {
			return nil, fmt.Errorf("encoder %s: %w", o.Train.Encoder, err)
		}
	}
	return newModel(o, enc, initRng)
}

// newModel puts the NVIB model of o on encoder enc.
func newModel(o *Options, enc *wav2vec2.Model, rng *rand.Rand) (*Model, error) {
	cfg, cert, err := o.modelConfig(enc.Config, NumLabels)
	if err != nil {
		return nil, err
	}
	head, err := nvib.NewModel(cfg, nil, rng)
	if err != nil {
		return nil, err
	}
	return &Model{Encoder: enc, NVDP: head, Calibration: cert}, nil
}

// applyDropout sets the encoder's hidden, attention and feature-projection
// dropout to p (the text task's dropout option; LayerDrop and the
// activation dropout keep the configuration's values).
func applyDropout(c *wav2vec2.Config, p float64) {
	c.HiddenDropout, c.AttentionDropout, c.FeatProjDropout = p, p, p
}

// modelEncoderConfig reads the encoder configuration a model directory
// saved (dir/config.json). A file without mask_time_prob was written before
// SpecAugment was implemented, by a training that masked nothing: it reads
// with both masking probabilities 0 (config.json's absent fields otherwise
// take Wav2Vec2Config's defaults, which mask frames), so the model has the
// parameters it was saved with.
func modelEncoderConfig(dir string) (wav2vec2.Config, error) {
	return hfmodel.ReadConfig(filepath.Join(dir, encoder.ConfigFile), func(b []byte) (wav2vec2.Config, error) {
		cfg, err := wav2vec2.ParseConfig(b)
		if err != nil {
			return cfg, err
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(b, &keys); err != nil {
			return cfg, err
		}
		if _, ok := keys["mask_time_prob"]; !ok {
			cfg.MaskTimeProb, cfg.MaskFeatureProb = 0, 0
		}
		return cfg, nil
	})
}

// saveModelFiles writes the static files of a model directory: the
// encoder's config.json, nvdp_config.json and speech_options.json.
func saveModelFiles(dir string, o *Options, m *Model) error {
	cj, err := m.Encoder.Config.JSON()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, encoder.ConfigFile), cj); err != nil {
		return err
	}
	if err := nvib.SaveConfig(dir, m.NVDP.Cfg); err != nil {
		return err
	}
	return saveOptions(dir, o)
}

// weightsFile is the file of the best model's parameters inside a model
// directory, named as for the text task.
const weightsFile = encoder.WeightsFile

// LoadModel loads a model directory written by [Run]: speech_options.json,
// config.json for the encoder, nvdp_config.json and model.safetensors.
func LoadModel(dir string) (*Model, *Options, error) {
	o, err := LoadOptions(dir)
	if err != nil {
		return nil, nil, err
	}
	ecfg, err := modelEncoderConfig(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("speech model %s: %w", dir, err)
	}
	initRng := rngstream.TrainInit.Rand(o.Train.Seed, 0)
	enc, err := wav2vec2.New(ecfg, initRng)
	if err != nil {
		return nil, nil, fmt.Errorf("speech model %s: %w", dir, err)
	}
	cfg, err := nvib.LoadConfig(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("speech model %s: %w", dir, err)
	}
	head, err := nvib.NewModel(cfg, nil, initRng)
	if err != nil {
		return nil, nil, fmt.Errorf("speech model %s: %w", dir, err)
	}
	m := &Model{Encoder: enc, NVDP: head}
	wpath := filepath.Join(dir, weightsFile)
	if !fsutil.IsFile(wpath) {
		return nil, nil, fmt.Errorf("speech model %s: no %s (training has not finished an epoch yet?)", dir, weightsFile)
	}
	if _, err := nn.LoadCheckpoint(wpath, m.Params(), nil); err != nil {
		return nil, nil, fmt.Errorf("speech model %s: %w", dir, err)
	}
	return m, o, nil
}
