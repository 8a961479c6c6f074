// Package speech is the spoken language identification task of the paper's
// §4.3 and Table 2; docs/speech.md, "Task", describes it. A Wav2Vec2 encoder
// of package wav2vec2 reads 16 kHz waveforms of package audio. The NVIB
// layer runs on its frame representations, with the frames as the
// posterior's components plus the prior component. The NVDP block reads only
// the release, then mean pooling over the frames and a linear head give the
// 45 CommonLanguage languages of package lid. It is trained with
// cross-entropy plus the NVIB losses, and evaluated by accuracy and
// macro-F1, the empirical audit of the dev utterances' posteriors, and the
// certified guarantee of the model's clipping.
//
// The NVIB, NVDP block, head, clipping, calibration and audit are the text
// task's, from packages nvib, model and audit and from train's loop and
// report: only the encoder and the data differ. [Options] carries
// [model.Options] for everything the two share; package task registers the
// task as "lid".
package speech

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvdp-project/nvdp/audio"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/wav2vec2"
)

// TaskName is the task's name, as in `nvdp run --task lid`, written into
// train_options.json, posterior files and report.json.
const TaskName = "lid"

// OptionsFile is the speech options' file inside a model directory, beside
// train_options.json, which holds Options.Train.
const OptionsFile = "speech_options.json"

// The paper's §4.3 settings, for Wav2Vec2-large on CommonLanguage: the
// clipping constants C_mu and C_amax of NVDP-Clipped, the lambda of
// NVDP-Clipped and of NVDP, the peak learning rate of a pretrained encoder,
// and the warm-up fraction. They are the defaults of the Auto options; see
// [Options.Resolve].
const (
	PaperCMu          = 3.0
	PaperCAlphaMax    = 0.7
	PaperLambdaClip   = 1e-6
	PaperLambdaNVDP   = 1e-2
	PaperLRPretrained = 3e-5
	PaperWarmupRatio  = 0.1
)

// DefaultMaxSeconds is the default length every utterance is cropped or
// zero-padded to: 2 s, which is 99 frames of the Wav2Vec2 feature encoder and
// N = 100 components with the prior.
const DefaultMaxSeconds = 2.0

// DefaultEncoder is the encoder of a run that names none: the small Wav2Vec2
// preset from scratch, the only one that trains on a CPU.
const DefaultEncoder = "scratch:small"

// Options are the settings of a speech run: the corpus, the encoder, the
// fixed utterance length and, in Train, every setting the text task shares,
// such as the variant, mode, lambda, clipping constants, privacy target,
// latent width, optimiser, epochs, batch sizes, seed, limits and output
// directory. Start from [DefaultOptions]; [Options.Resolve] derives the Auto
// options and [Options.Validate] checks them.
//
// In Train, Task is [TaskName]. Encoder is the speech encoder spec:
// scratch:PRESET with a wav2vec2 preset, or hf:DIR with a Wav2Vec2
// checkpoint. MaxSeqLen is the number of frames F, set by Resolve from
// MaxSeconds, so that the posteriors have N = F + 1 components. TrainLimit and
// DevLimit count utterances. GlueDir and Vocab are unused.
type Options struct {
	// DataDir is the corpus in CommonLanguage's layout (lid.Load): the
	// synthetic stand-in or the release's common_voice_kpd folder.
	DataDir string `json:"data_dir"`
	// MaxSeconds is the length every utterance is cropped to (its first
	// MaxSeconds) or zero-padded to (> 0): every input has the same
	// samples T = round(MaxSeconds * 16000), hence the same F frames, so that
	// every release has the same N = F + 1 components whatever the
	// utterance's length (docs/speech.md "Task").
	MaxSeconds float64       `json:"max_seconds"`
	Train      model.Options `json:"train"`
}

// DefaultOptions returns [model.DefaultOptions] with the speech task's
// defaults: task lid, encoder [DefaultEncoder], MaxSeconds
// [DefaultMaxSeconds], warm-up [PaperWarmupRatio], and lambda Auto, which
// [Options.Resolve] sets to the paper's by variant.
func DefaultOptions() Options {
	t := model.DefaultOptions()
	t.Task, t.Encoder, t.WarmupRatio, t.Lambda = TaskName, DefaultEncoder, PaperWarmupRatio, option.Auto()
	return Options{MaxSeconds: DefaultMaxSeconds, Train: t}
}

// Samples is the input length T in samples at audio.SampleRate.
func (o *Options) Samples() int {
	return int(math.Round(o.MaxSeconds * audio.SampleRate))
}

// Resolve derives the Auto options before [model.Options.Resolve]. Explicit
// values, 0 included, are kept. It sets:
//
//   - lambda: [PaperLambdaClip] for nvdp-clipped, [PaperLambdaNVDP] otherwise;
//   - C_mu and C_amax: [PaperCMu] and [PaperCAlphaMax], C_mu only for
//     gaussian;
//   - the learning rate: [PaperLRPretrained] for a pretrained encoder,
//     [model.DefaultLR] for scratch;
//   - the dropout: the preset's hidden dropout for scratch, 0 for pretrained;
//   - Train.MaxSeqLen: the frames of Samples, when the encoder's
//     configuration can be read.
func (o *Options) Resolve() {
	t := &o.Train
	option.Resolve(&t.Lambda, PaperLambda(t.Variant))
	option.Resolve(&t.CMu, PaperCMu)
	option.Resolve(&t.CAlphaMax, PaperCAlphaMax)
	if cfg, err := o.EncoderConfig(); err == nil {
		if _, scratch := strings.CutPrefix(t.Encoder, model.ScratchPrefix); scratch {
			option.Resolve(&t.Dropout, cfg.HiddenDropout)
		} else {
			option.Resolve(&t.LR, PaperLRPretrained)
			option.Resolve(&t.Dropout, 0)
		}
		if o.MaxSeconds > 0 && o.Samples() >= cfg.ReceptiveField() {
			t.MaxSeqLen = cfg.FrameLength(o.Samples())
		}
	}
	t.Resolve()
}

// PaperLambda returns the paper's lambda, from §4.3, for variant:
// [PaperLambdaClip] for nvdp-clipped and [PaperLambdaNVDP] otherwise.
func PaperLambda(variant string) float64 {
	if variant == nvib.ModelNVDPClipped {
		return PaperLambdaClip
	}
	return PaperLambdaNVDP
}

// hfPrefix marks an encoder spec loaded from a checkpoint directory (hf:DIR).
const hfPrefix = "hf:"

// EncoderConfig returns the Wav2Vec2 configuration of Train.Encoder: a
// preset for scratch:PRESET, or DIR/config.json for hf:DIR. Its errors name
// the option.
func (o *Options) EncoderConfig() (wav2vec2.Config, error) {
	spec := o.Train.Encoder
	if name, ok := strings.CutPrefix(spec, model.ScratchPrefix); ok {
		cfg, err := wav2vec2.Preset(name)
		if err != nil {
			return cfg, option.Errorf("encoder", spec, "%v", err)
		}
		return cfg, nil
	}
	if dir, ok := strings.CutPrefix(spec, hfPrefix); ok && dir != "" {
		cfg, err := wav2vec2.ReadConfig(filepath.Join(dir, encoder.ConfigFile))
		if err != nil {
			return cfg, option.Errorf("encoder", spec, "%v", err)
		}
		return cfg, nil
	}
	return wav2vec2.Config{}, option.Errorf("encoder", spec, "want scratch:PRESET (%s) or hf:DIR (a Wav2Vec2 checkpoint directory)", strings.Join(wav2vec2.PresetNames(), ", "))
}

// Validate checks resolved options: the task, the data directory, the
// encoder, the utterance length, which must be at least one frame, and every
// shared option, see [model.Options.ValidateTraining]. Reference mode is
// refused, since the released code has no speech task. Its errors are
// [*option.Error] naming the option by its JSON key.
func (o *Options) Validate() error {
	cfg, err := o.EncoderConfig()
	if err != nil {
		return err
	}
	return o.validate(cfg)
}

// validate is Validate with the encoder's configuration cfg.
func (o *Options) validate(cfg wav2vec2.Config) error {
	t := &o.Train
	if t.Task != TaskName {
		return option.Errorf("task", t.Task, "the speech task is %q", TaskName)
	}
	if o.DataDir == "" {
		return option.Errorf("data_dir", nil, "required: the corpus in CommonLanguage's layout (<Language>/<split>.csv and audio)")
	}
	if t.Mode.IsReference() {
		return option.Errorf("mode", t.Mode, "the speech task is principled only: the released code has no speech task to reproduce")
	}
	if !(o.MaxSeconds > 0) || math.IsInf(o.MaxSeconds, 0) {
		return option.Errorf("max_seconds", o.MaxSeconds, "must be a finite number > 0")
	}
	if o.Samples() < cfg.ReceptiveField() {
		return option.Errorf("max_seconds", o.MaxSeconds, "%d samples make no frame (the encoder's receptive field is %d samples)", o.Samples(), cfg.ReceptiveField())
	}
	if f := cfg.FrameLength(o.Samples()); t.MaxSeqLen != f {
		return option.Errorf("max_seq_len", t.MaxSeqLen, "the speech task has F = %d frames (max_seconds %g): Resolve sets it", f, o.MaxSeconds)
	}
	if f, need := cfg.FrameLength(o.Samples()), cfg.MinTrainFrames(); f < need {
		return option.Errorf("max_seconds", o.MaxSeconds, "%d frames, fewer than the %d that the encoder's SpecAugment masks at once (mask_time_length)", f, need)
	}
	return t.ValidateTraining()
}

// Check resolves o and checks it before any work with [Options.Validate],
// then [Options.CheckFiles]. Its errors are [*option.Error], not wrapped.
func (o *Options) Check() error {
	o.Resolve()
	if err := o.Validate(); err != nil {
		return err
	}
	return o.CheckFiles()
}

// CheckFiles checks that DataDir is a directory. The splits are read and
// checked by [LoadSplit] before any work.
func (o *Options) CheckFiles() error {
	if st, err := os.Stat(o.DataDir); err != nil || !st.IsDir() {
		return option.Errorf("data_dir", o.DataDir, "not a directory (the corpus in CommonLanguage's layout)")
	}
	return nil
}

// backboneShape is the shape of a Wav2Vec2 encoder in the form
// model.Options.ModelConfig reads (hidden size, heads, FFN width, layer
// norm eps): the NVDP block keeps the encoder's heads and FFN ratio.
func backboneShape(c wav2vec2.Config) encoder.Config {
	return encoder.Config{ModelType: "wav2vec2", HiddenSize: c.HiddenSize, NumAttentionHeads: c.NumAttentionHeads,
		IntermediateSize: c.IntermediateSize, LayerNormEps: c.LayerNormEps}
}

// modelConfig is the NVIB model configuration of the run for an encoder of
// configuration enc over numLabels languages, and the certificate of its
// calibration to a privacy target (model.PrepareModelConfig, for N = F + 1;
// nil: none made).
func (o *Options) modelConfig(enc wav2vec2.Config, numLabels int) (nvib.Config, *model.Calibration, error) {
	return model.PrepareModelConfig(&o.Train, backboneShape(enc), numLabels)
}

// saveOptions validates o and writes dir/speech_options.json: DataDir,
// MaxSeconds, and Train in train_options.json's form, with options_version
// [model.OptionsVersion]. A speech model directory has this file instead of
// train_options.json.
func saveOptions(dir string, o *Options) error {
	path := filepath.Join(dir, OptionsFile)
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c := *o
	c.Train.Version = model.OptionsVersion
	c.Train.RunTime = model.RunTime{} // the run's choices are no part of the model
	return atomicfile.WriteJSON(path, &c)
}

// LoadOptions reads dir/speech_options.json, in which unknown fields are an
// error, and validates it. When the model directory saved an encoder
// configuration, dir/config.json, it validates against that, so that a model
// trained from an hf:DIR checkpoint loads without DIR, as when DIR was moved,
// deleted or is on another machine. Its errors name the file.
func LoadOptions(dir string) (*Options, error) {
	path := filepath.Join(dir, OptionsFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("speech model %s: %w", dir, err)
	}
	var o Options
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Speech models were first written at version 2 (where a target of 0
	// meant none), then at version 3 (a clipped variant without a target
	// trained with its hand-set constants): Upgrade reads them as they were
	// written.
	if v := o.Train.Version; v != 2 && v != 3 && v != model.OptionsVersion {
		return nil, fmt.Errorf("%s: options_version %d: this program reads versions 2, 3 and %d", path, v, model.OptionsVersion)
	}
	if err := o.Train.Upgrade(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	o.Train.RunTime = model.RunTime{Out: dir} // as model.LoadOptions
	o.Resolve()
	cfg, err := modelEncoderConfig(dir)
	if errors.Is(err, fs.ErrNotExist) {
		cfg, err = o.EncoderConfig()
	}
	if err == nil {
		err = o.validate(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &o, nil
}
