// Package train runs the GLUE experiments end to end: fine-tuning a baseline,
// NVDP, NVDP-Clipped or gaussian-mechanism model (package nvib) on a task (package glue), per-epoch
// dev evaluation with early stopping, resumable checkpoints, evaluation with
// GLUE submission files and posterior export, and the train + eval + audit
// pipeline behind `nvdp run` (docs/training.md).
//
// The loop follows the released code (ref §8): AdamW (weight decay 0),
// linear warm-up then linear decay of the learning rate over all optimizer
// steps, the KL schedule s(t) of nvib.Config.KLScale, gradient clipping by
// global norm 1.0, shuffled training batches with drop_last, dev evaluation
// every epoch on the task's selection metric, early stopping with patience 3,
// best checkpoint kept. Unlike the reference, batches are padded dynamically
// to their longest sequence (the reference pads to max_length always); the
// posterior file for the audit is padded to the fixed length max-seq-len so
// that every posterior has N = max-seq-len + 1 aligned components.
package train

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
)

// File names inside a training output / model directory.
const (
	OptionsFile    = "train_options.json"
	MetricsFile    = "metrics.jsonl"
	StepsFile      = "steps.jsonl"       // Options.LogSteps: StepLoss lines
	WeightsFile    = encoder.WeightsFile // every parameter of the best model (safetensors)
	CheckpointFile = "checkpoint-last.safetensors"
	StateFile      = "train_state.json"
)

// Options are the settings of one training run. Start from DefaultOptions:
// every field holds the value it says, an explicit 0 included (a zero value
// is never replaced by a default). The fields whose default depends on other
// options (CMu, CAlphaMax, CAlphaMin, LogvarMargin, LR, Dropout) hold Auto
// until Resolve derives them; LatentDim, whose default is the encoder's
// hidden size, is nil until ModelConfig reads it from the encoder. Validate
// checks the result. Errors name the option by its JSON key (OptionError),
// as train_options.json stores it.
type Options struct {
	// Version is the train_options.json format (OptionsVersion; 0 in files
	// written before the explicit defaults, which LoadOptions upgrades).
	Version int    `json:"options_version"`
	Task    string `json:"task"`     // sst2, mrpc, rte, stsb, qnli
	GlueDir string `json:"glue_dir"` // directory with <TASK>/{train,dev,test}.tsv
	// Encoder is scratch:PRESET (bert-tiny, bert-mini, ...), hf:DIR or hf:owner/name.
	Encoder string `json:"encoder"`
	// Vocab is the tokenizer (vocab.txt, tokenizer.json, vocab.json+merges.txt or a directory);
	// "": the encoder directory's tokenizer files (required for scratch encoders).
	Vocab   string       `json:"vocab"`
	Variant string       `json:"variant"` // baseline | nvdp | nvdp-clipped | gaussian
	Mode    privacy.Mode `json:"mode"`    // principled | reference
	// Lambda is lambda_G = lambda_D, the weight of the KL regularisers (>= 0;
	// 0 trains without them; ignored by baseline and gaussian).
	Lambda float64 `json:"lambda"`
	// CMu is the radius C_mu of the mean ball, CAlphaMax / CAlphaMin the
	// pseudo-count bounds C_amax / C_amin (nvdp-clipped; nvdp records them).
	// For gaussian, CMu is the radius C of the L2 ball each token embedding is
	// clipped to (nvib.GaussianRelease); the pseudo-count bounds do not apply.
	// Auto: C_mu and C_amax from the task (glue.Task.PaperClip); C_amin principled
	// nvib.PrincipledAlphaMin(ClipOrder, C_amax), reference 0 (gaussian 0).
	CMu       float64 `json:"c_mu"`
	CAlphaMax float64 `json:"c_alpha_max"`
	CAlphaMin float64 `json:"c_alpha_min"`
	// LogvarMargin (nats of variance, >= 0) raises the logvar floor above
	// ln((lambda-1)/lambda prior_var). The worst-case Gaussian radicand of Eq.
	// rdp is (lambda-1) prior_var (e^margin - 1), so a larger margin tightens
	// the bound (docs/privacy.md). Auto: principled nvib.DefaultLogvarMargin,
	// reference 0 (gaussian 0: its noise is fixed).
	LogvarMargin float64 `json:"logvar_margin"`
	// KLSchedule is s(t): linear-decay (reference), constant, warmup, warmup-decay; KLWarmup its fraction.
	KLSchedule string  `json:"kl_schedule"`
	KLWarmup   float64 `json:"kl_warmup"`
	// NVIBInit is the NVIB projections' initialisation: hf (released code), nvib (intended) or
	// clip (inside the clipping region); "": the mode's (nvib.DefaultInit), set by Resolve.
	NVIBInit string `json:"nvib_init"`
	// LatentDim is P, the width of the release (nvib.Config.LatentDim: the
	// NVIB posterior's mu and logvar, the gaussian release, the NVDP block and
	// the head; docs/model.md "Latent width P"). nil: the encoder's hidden
	// size H, as the released code (ModelConfig takes it from the encoder; the
	// key is then absent from train_options.json). Given: >= 1 (0 is an
	// error, never "the default"), divisible by the encoder's attention heads
	// (the NVDP block keeps the encoder's head count, so d_h = P/heads), H
	// itself in reference mode. Ignored by the baseline, which has no release.
	LatentDim *int `json:"latent_dim,omitempty"`
	// HeadReads is what the head pools (nvib.Config.HeadReads): "" (the
	// NVDP block's output, as every run before the option) or
	// nvib.HeadReadsRelease (the mean of the released token atoms, no
	// block; a variant with a release, principled mode; a mean head).
	HeadReads string `json:"head_reads,omitempty"`
	// RadiusSchedule, when set, trains a clipped variant (nvdp-clipped,
	// gaussian) with a larger radius early on, shrinking to C_mu
	// (RadiusSchedule.Radius); evaluation, the saved model and its
	// certificate use C_mu. nil: C_mu from the first step.
	RadiusSchedule *RadiusSchedule `json:"radius_schedule,omitempty"`

	Epochs        int `json:"epochs"`          // >= 1
	BatchSize     int `json:"batch_size"`      // >= 1; the last partial batch is dropped
	EvalBatchSize int `json:"eval_batch_size"` // >= 1
	// LR is the peak learning rate (> 0). Auto: DefaultLR* by backbone and,
	// for scratch encoders, by whether the variant releases (DefaultLR).
	LR          float64 `json:"lr"`
	WarmupRatio float64 `json:"warmup_ratio"` // linear warm-up fraction of all steps, in [0, 1)
	WeightDecay float64 `json:"weight_decay"` // AdamW decoupled weight decay, >= 0
	GradClip    float64 `json:"grad_clip"`    // global L2 norm, >= 0; 0: no clipping
	MaxSeqLen   int     `json:"max_seq_len"`  // >= 3; posterior files have MaxSeqLen + 1 components
	Seed        uint64  `json:"seed"`
	TrainLimit  int     `json:"train_limit"` // first K training rows (0: all)
	DevLimit    int     `json:"dev_limit"`   // first K dev rows (0: all)
	// Patience stops training after this many epochs without a dev
	// improvement (>= 0; 0: no early stopping).
	Patience int `json:"patience"`
	// CheckpointEach also checkpoints every K optimizer steps (>= 0; 0: at
	// epoch ends only, where a checkpoint is always written).
	CheckpointEach int `json:"checkpoint_every"`
	// Dropout is the encoder's hidden and attention dropout, in [0, 1). Auto:
	// the preset's (0.1) for scratch encoders, 0 for pretrained ones (ref §8:
	// dropout 0 everywhere).
	Dropout     float64 `json:"dropout"`
	SkipBadRows bool    `json:"skip_bad_rows"`
	Out         string  `json:"out"`
	Resume      bool    `json:"resume"`

	// ClipOrder is the Renyi order lambda the logvar floor ln((lambda-1)/lambda
	// prior_var) + LogvarMargin and the principled default C_amin are derived
	// for (nvib.ClipConfig.Order; finite, > 1).
	ClipOrder float64 `json:"clip_order"`

	// Privacy target (nvdp-clipped and gaussian, principled mode;
	// docs/training.md "Calibration"; for gaussian only C = CMu is
	// calibrated, the noise is fixed). TargetEpsilon and TargetRD are
	// NoTarget (NaN, JSON null or a missing key) when not given, which
	// Resolve keeps: a target has no derived default. A given one is finite
	// and > 0 (0 is an error, never "no target"), and at most one is given.
	// With TargetEpsilon (at TargetDelta) or TargetRD (at TargetOrder)
	// given (HasTarget), the clipping constants that are not fixed (FixCMu,
	// FixLogvarMargin, FixCAlphaMin) are chosen by the calibration step of a
	// fresh run (Calibrate, in PrepareModelConfig), so that the certified guarantee of
	// Releases releases of one text meets the target; VarianceShare and
	// DirichletShare split the budget (privacy.Split; both 0: fixed noise,
	// C_mu carries it). The chosen constants are written into CMu,
	// LogvarMargin and CAlphaMin with Calibrated set (Certificate.Apply),
	// and the calibration into CertificateFile. TargetDelta, TargetOrder and Releases are read
	// only with a target.
	TargetEpsilon  float64 `json:"target_epsilon"` // NoTarget or finite > 0
	TargetDelta    float64 `json:"target_delta"`   // in (0, 1)
	TargetRD       float64 `json:"target_rd"`      // nats; NoTarget or finite > 0
	TargetOrder    float64 `json:"target_order"`   // Renyi order of TargetRD, finite, > 1
	Releases       int     `json:"releases"`       // >= 1
	VarianceShare  float64 `json:"variance_share,omitempty"`
	DirichletShare float64 `json:"dirichlet_share,omitempty"`
	// FixCMu, FixLogvarMargin and FixCAlphaMin keep CMu, LogvarMargin and
	// CAlphaMin as given (or resolved) instead of calibrating them (the CLI
	// sets them for the flags given on the command line).
	FixCMu          bool `json:"fix_c_mu,omitempty"`
	FixLogvarMargin bool `json:"fix_logvar_margin,omitempty"`
	FixCAlphaMin    bool `json:"fix_c_alpha_min,omitempty"`
	// Calibrated records that CMu, LogvarMargin and CAlphaMin hold calibrated
	// constants: ModelConfig uses them as they are (a resumed run does not
	// calibrate again).
	Calibrated bool `json:"calibrated,omitempty"`
	// HandSetClipping trains a clipped variant (nvdp-clipped, gaussian)
	// with its clipping constants as given or resolved (the paper's per-task
	// constants, glue.Task.PaperClip) and no privacy target: its certified epsilon is
	// whatever they give (the paper's give thousands). Without it a clipped
	// variant in principled mode needs a target (TargetEpsilon or
	// TargetRD), so that no run trains a vacuous guarantee by accident
	// (docs/privacy.md, "A guarantee by default"). Reference mode, which
	// reproduces the released code and certifies nothing finite, needs
	// neither. Options files of version 3 and before without a target read
	// with it set: they were trained so.
	HandSetClipping bool `json:"hand_set_clipping,omitempty"`
	// ScratchConfig, when set, replaces the preset of a scratch: encoder (library use, tests).
	ScratchConfig *encoder.Config `json:"scratch_config,omitempty"`
	// StopAfterSteps stops the run after this many optimizer steps in total, with a
	// checkpoint (0: off); for tests of resumption and for time-boxed runs.
	StopAfterSteps int `json:"-"`
	// Device, when set, trains and evaluates on this GPU (package dnn; the
	// parameters, gradients and AdamW moments live there); nil: the CPU
	// engine. A run-time choice, not part of the model or its options file:
	// a model trained on either device loads and runs on the other; a run
	// resumes on the device it started on (its checkpoint holds that
	// device's random state).
	Device *cuda.Device `json:"-"`
	// HostNoise draws a training step's dropout and NVDP noise on the host
	// from the device's Philox stream (rngstream.TrainSampleDevice), on
	// either device: a CPU run and a GPU run of one seed then see the same
	// noise, for the comparison of the two (scripts/gpu-check.sh). On the GPU
	// it costs an upload of the noise per step. Run-time, as Device.
	HostNoise bool `json:"-"`
	// LogSteps appends each optimizer step's training loss to StepsFile
	// in Out (StepLoss lines; a resumed run goes on appending), for
	// comparisons step by step (the CPU and the GPU engine:
	// scripts/gpu-check.sh). Run-time, as Device.
	LogSteps bool `json:"-"`
}

// StepLoss is one line of StepsFile: the optimizer step (1-based) and its
// loss (nats; the batch mean of task + s(t) lambda KL terms) and s(t).
type StepLoss struct {
	Step    int     `json:"step"`
	Loss    float64 `json:"loss"`
	KLScale float64 `json:"kl_scale"`
}

// OptionsVersion is the format of train_options.json that SaveOptions
// writes: every option explicit, and no target written as null in
// target_epsilon and target_rd, where 0 is an error. Version 2 files left
// target_epsilon and target_rd out for no target, where 0 also meant none;
// version 0 files used 0 for "default" in c_alpha_min, logvar_margin,
// clip_order, target_delta, target_order and releases, -1 for "off" in
// patience and grad_clip, and left dropout out for "the preset's". Version
// 3 trained a clipped variant without a target with its hand-set constants;
// version 4 says so (hand_set_clipping) and refuses it otherwise. All are
// read as they were written (Upgrade).
const OptionsVersion = 4

// Auto is the value of the options whose default depends on other options
// (CMu, CAlphaMax, CAlphaMin, LogvarMargin, LR, Dropout) until Resolve
// derives them: option.Auto (NaN), the "not set" marker nvdp's options
// types share. It is the only "not set" marker of Options' float options;
// IsAuto tests for it. (The one integer option with a derived default,
// LatentDim, is a pointer: nil when not set.)
func Auto() float64 { return option.Auto() }

// IsAuto reports whether v is Auto (option.IsAuto).
func IsAuto(v float64) bool { return option.IsAuto(v) }

// NoTarget is the value of TargetEpsilon and TargetRD when no target is
// given: NaN, the project's "not set" marker (option.Auto), written as JSON
// null. Unlike Auto it is no placeholder for a derived default: Resolve
// keeps it and Validate accepts it. An explicit 0 is a value, and an error.
func NoTarget() float64 { return option.Auto() }

// IsNoTarget reports whether the target option v (TargetEpsilon, TargetRD)
// is NoTarget.
func IsNoTarget(v float64) bool { return option.IsAuto(v) }

// Default learning rates: the paper's BERT-base 7e-5 and RoBERTa-base 2e-5
// for pretrained backbones; for from-scratch encoders (a randomly initialised
// encoder learns nothing useful in a few epochs at 7e-5) 1e-3 without a
// release (the non-private baseline) and 5e-4 through one (nvdp,
// nvdp-clipped, gaussian): at 1e-3 a from-scratch encoder trained through a
// calibrated release sits on a loss plateau of seed-dependent length and at
// 2e-3 it collapses, while at 5e-4 every seed and both BLAS backends
// measured learn (docs/training.md, "Robustness").
const (
	DefaultLRPretrained     = 7e-5
	DefaultLRRoberta        = 2e-5
	DefaultLRScratch        = 1e-3
	DefaultLRScratchPrivate = 5e-4
)

// DefaultEncoder is the encoder of a run that names none: BERT-Tiny from
// scratch (the only kind that trains on a CPU in minutes).
const DefaultEncoder = "scratch:bert-tiny"

// DefaultOptions returns the defaults of every option (ref §8 and the
// paper's table): variant nvdp-clipped, mode principled, lambda 1e-2, KL
// schedule linear-decay, NVIB init of the mode, 10 epochs, batch size 32 /
// eval 16, warm-up 0.06, weight decay 0, grad clip 1.0, max-seq-len 128,
// seed 1, patience 3, a checkpoint every 500 steps, clip order
// privacy.DefaultOrder, no target (NoTarget) with delta
// privacy.DefaultDelta and order privacy.DefaultOrder for 1 release when one
// is given; CMu, CAlphaMax, CAlphaMin, LogvarMargin,
// LR and Dropout Auto (Resolve), the encoder DefaultEncoder, HandSetClipping
// off. Task, GlueDir, Vocab and Out are empty: the caller gives them, and a
// target or HandSetClipping too, without which Validate refuses the default
// variant (a guarantee by default: validateTarget).
func DefaultOptions() Options {
	return Options{Version: OptionsVersion, Encoder: DefaultEncoder, Variant: nvib.ModelNVDPClipped, Mode: privacy.ModePrincipled, Lambda: 1e-2,
		CMu: Auto(), CAlphaMax: Auto(), CAlphaMin: Auto(), LogvarMargin: Auto(), KLSchedule: nvib.ScheduleLinearDecay,
		Epochs: 10, BatchSize: 32, EvalBatchSize: 16, LR: Auto(), WarmupRatio: 0.06, GradClip: 1, MaxSeqLen: 128, Seed: 1,
		Patience: 3, CheckpointEach: 500, Dropout: Auto(), ClipOrder: privacy.DefaultOrder,
		TargetEpsilon: NoTarget(), TargetDelta: privacy.DefaultDelta, TargetRD: NoTarget(), TargetOrder: privacy.DefaultOrder, Releases: 1}
}

// DefaultLR is the learning rate of a run without an explicit one: by
// backbone (DefaultLRPretrained, DefaultLRRoberta for an encoder spec naming
// roberta) and, for scratch encoders, by whether the variant releases
// (DefaultLRScratchPrivate) or not (DefaultLRScratch, the baseline).
func DefaultLR(encoderSpec, variant string) float64 {
	scratch := strings.HasPrefix(encoderSpec, ScratchPrefix)
	switch {
	case scratch && variant != nvib.ModelBaseline:
		return DefaultLRScratchPrivate
	case scratch:
		return DefaultLRScratch
	case strings.Contains(strings.ToLower(encoderSpec), "roberta"):
		return DefaultLRRoberta
	}
	return DefaultLRPretrained
}

// ScratchPrefix marks an encoder spec built from a preset (scratch:PRESET;
// package speech reads its Wav2Vec2 specs with it too).
const ScratchPrefix = "scratch:"

// Resolve replaces each Auto option by the default it depends on: CMu and
// CAlphaMax by the task's (glue.Task.PaperClip), CAlphaMin and LogvarMargin by the
// mode's (gaussian: 0), LR by DefaultLR, Dropout by the preset's hidden
// dropout (scratch encoders; ScratchConfig's when set) or 0 (pretrained),
// and an empty NVIBInit by the mode's. Options given explicitly, 0
// included, are kept; an Auto that cannot be derived (an unknown task or
// preset) stays Auto for Validate to report. A target stays as it is
// (NoTarget: none). Resolve is idempotent.
func (o *Options) Resolve() {
	if t, err := glue.LookupTask(o.Task); err == nil {
		option.Resolve(&o.CMu, t.PaperClip.CMu)
		option.Resolve(&o.CAlphaMax, t.PaperClip.CAlphaMax)
	}
	switch {
	case o.Variant == nvib.ModelGaussian || o.Mode.IsReference(): // gaussian: fixed noise, no Dirichlet weights
		option.Resolve(&o.CAlphaMin, 0)
		option.Resolve(&o.LogvarMargin, 0)
	default:
		if !IsAuto(o.CAlphaMax) && o.ClipOrder > 1 && !math.IsInf(o.ClipOrder, 0) {
			option.Resolve(&o.CAlphaMin, nvib.PrincipledAlphaMin(o.ClipOrder, o.CAlphaMax))
		}
		option.Resolve(&o.LogvarMargin, nvib.DefaultLogvarMargin)
	}
	option.Resolve(&o.LR, DefaultLR(o.Encoder, o.Variant))
	if cfg, ok := o.scratchEncoder(); ok {
		option.Resolve(&o.Dropout, cfg.HiddenDropoutProb)
	} else if !strings.HasPrefix(o.Encoder, ScratchPrefix) {
		option.Resolve(&o.Dropout, 0)
	}
	if o.NVIBInit == "" && o.Mode.Valid() {
		o.NVIBInit = nvib.DefaultInit(o.Mode)
	}
}

// scratchEncoder returns the configuration of a scratch encoder before it
// is built (ScratchConfig, else the preset o.Encoder names); ok is false for
// a pretrained encoder or an unknown preset.
func (o *Options) scratchEncoder() (cfg encoder.Config, ok bool) {
	name, scratch := strings.CutPrefix(o.Encoder, ScratchPrefix)
	switch {
	case !scratch:
		return cfg, false
	case o.ScratchConfig != nil:
		return *o.ScratchConfig, true
	}
	cfg, err := encoder.Preset(name)
	return cfg, err == nil
}

// HasTarget reports whether o asks for calibrated clipping: TargetEpsilon
// or TargetRD is given (not NoTarget; Validate checks the value, an
// explicit 0 included).
func (o *Options) HasTarget() bool { return !IsNoTarget(o.TargetEpsilon) || !IsNoTarget(o.TargetRD) }

// OptionError is an invalid option: option.Error, the type every options
// type of nvdp returns (Option is the JSON key as train_options.json spells
// it, e.g. "c_mu"). Programs map Option to their own names (the CLI to its
// flags).
type OptionError = option.Error

func optionError(name string, value any, format string, args ...any) error {
	return option.Errorf(name, value, format, args...)
}

// Validate checks resolved options (Resolve first): every option in its
// range, every float option finite, the constants of the variant, the
// privacy target (a clipped variant in principled mode needs a target or
// HandSetClipping, not both: docs/privacy.md, "A guarantee by default").
// It reads no file (CheckFiles does). Errors are *OptionError.
func (o *Options) Validate() error {
	if _, err := glue.LookupTask(o.Task); err != nil {
		return optionError("task", o.Task, "%v", err)
	}
	if o.GlueDir == "" {
		return optionError("glue_dir", nil, "required: the directory with <TASK>/{train,dev,test}.tsv")
	}
	if err := o.validateEncoder(); err != nil {
		return err
	}
	return o.ValidateTraining()
}

// ValidateTraining checks every resolved option but the text task's data
// and encoder (task, glue_dir, encoder, vocab): the variant, mode, clipping,
// privacy target, latent width, schedule and optimiser options that a
// trainer of another modality shares (package speech, whose encoder and
// data are its own). Validate calls it. Errors are *OptionError.
func (o *Options) ValidateTraining() error {
	if err := oneOf("variant", o.Variant, nvib.ModelBaseline, nvib.ModelNVDP, nvib.ModelNVDPClipped, nvib.ModelGaussian); err != nil {
		return err
	}
	if err := oneOf("mode", string(o.Mode), string(privacy.ModePrincipled), string(privacy.ModeReference)); err != nil {
		return err
	}
	if !(o.ClipOrder > 1) || math.IsInf(o.ClipOrder, 0) { // before the floats: C_amin is derived from it
		return optionError("clip_order", o.ClipOrder, "the Renyi order must be a finite number > 1")
	}
	if err := o.validateFloats(); err != nil {
		return err
	}
	if o.Lambda < 0 {
		return optionError("lambda", o.Lambda, "must be >= 0")
	}
	if err := o.validateClip(); err != nil {
		return err
	}
	if err := o.validateTarget(); err != nil {
		return err
	}
	if err := o.validateLatent(); err != nil {
		return err
	}
	if err := o.validateHeadReads(); err != nil {
		return err
	}
	if err := o.validateRadiusSchedule(); err != nil {
		return err
	}
	if err := oneOf("kl_schedule", o.KLSchedule, nvib.ScheduleLinearDecay, nvib.ScheduleConstant, nvib.ScheduleWarmup, nvib.ScheduleWarmupDecay); err != nil {
		return err
	}
	if err := oneOf("nvib_init", o.NVIBInit, nvib.InitHF, nvib.InitNVIB, nvib.InitClip); err != nil {
		return err
	}
	for _, c := range []struct {
		option string
		v, lo  int
	}{{"epochs", o.Epochs, 1}, {"batch_size", o.BatchSize, 1}, {"eval_batch_size", o.EvalBatchSize, 1},
		{"max_seq_len", o.MaxSeqLen, 3}, {"train_limit", o.TrainLimit, 0}, {"dev_limit", o.DevLimit, 0},
		{"patience", o.Patience, 0}, {"checkpoint_every", o.CheckpointEach, 0}} {
		if c.v < c.lo {
			return optionError(c.option, c.v, "must be >= %d%s", c.lo, zeroMeans[c.option])
		}
	}
	switch {
	case !(o.LR > 0):
		return optionError("lr", o.LR, "must be > 0")
	case o.WarmupRatio < 0 || o.WarmupRatio >= 1:
		return optionError("warmup_ratio", o.WarmupRatio, "must be in [0, 1)")
	case o.WeightDecay < 0:
		return optionError("weight_decay", o.WeightDecay, "must be >= 0")
	case o.GradClip < 0:
		return optionError("grad_clip", o.GradClip, "must be >= 0 (0: no clipping)")
	case o.Dropout < 0 || o.Dropout >= 1:
		return optionError("dropout", o.Dropout, "must be in [0, 1)")
	case o.KLWarmup < 0 || o.KLWarmup >= 1:
		return optionError("kl_warmup", o.KLWarmup, "must be in [0, 1)")
	case o.Out == "":
		return optionError("out", nil, "required: the output / model directory")
	}
	return nil
}

// targetKeys are the JSON keys of the target options, whose NaN is
// NoTarget (a value Validate accepts), not Auto.
var targetKeys = map[string]bool{"target_epsilon": true, "target_rd": true}

// autoOptions are the JSON keys of the options that may hold Auto before
// Resolve: the pointer fields of optionsJSON, the one list of them, but
// the target options.
var autoOptions = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[optionsJSON]()
	for i := range t.NumField() {
		if f := t.Field(i); !f.Anonymous && !targetKeys[f.Tag.Get("json")] {
			m[f.Tag.Get("json")] = true
		}
	}
	return m
}()

// oneOf checks that the string option is one of allowed.
// validateHeadReads checks HeadReads: "" or nvib.HeadReadsBlock, or
// nvib.HeadReadsRelease for a variant with a release in principled mode.
func (o *Options) validateHeadReads() error {
	if err := oneOf("head_reads", o.HeadReads, "", nvib.HeadReadsBlock, nvib.HeadReadsRelease); err != nil {
		return err
	}
	if o.HeadReads != nvib.HeadReadsRelease {
		return nil
	}
	switch {
	case o.Variant == nvib.ModelBaseline:
		return optionError("head_reads", o.HeadReads, "the baseline has no release to read")
	case o.Mode.IsReference():
		return optionError("head_reads", o.HeadReads, "principled mode only (the released code's head reads the NVDP block)")
	}
	return nil
}

// RadiusSchedule is a schedule of the clip radius during training
// (Options.RadiusSchedule; docs/training.md "A schedule of the radius"):
// the radius starts at Start C_mu and shrinks linearly to C_mu over the
// first Fraction of the optimizer steps, then stays there. Only the model
// trained at C_mu is evaluated, saved and certified: the radius of training
// steps is not released (training data is not what the certificate
// protects: docs/privacy.md "The certified bound", threat model).
type RadiusSchedule struct {
	Start    float64 `json:"start"`    // factor of C_mu at step 0: finite, > 1
	Fraction float64 `json:"fraction"` // of the total steps: in (0, 1]
}

// Radius returns the radius of optimizer step step (0-based) of total for
// the final radius cMu: cMu (Start + (1 - Start) step / (Fraction total))
// before step Fraction total, cMu from there; cMu for a nil schedule.
func (r *RadiusSchedule) Radius(step, total int, cMu float64) float64 {
	if r == nil {
		return cMu
	}
	t := float64(step) / (r.Fraction * float64(total))
	if !(t < 1) {
		return cMu
	}
	return cMu * (r.Start + (1-r.Start)*t)
}

// validateRadiusSchedule checks RadiusSchedule: nil, or Start finite > 1
// and Fraction in (0, 1], for a clipped variant in principled mode, on the
// CPU engine (the device twin reads the radius once).
func (o *Options) validateRadiusSchedule() error {
	r := o.RadiusSchedule
	if r == nil {
		return nil
	}
	switch {
	case !(r.Start > 1) || math.IsInf(r.Start, 0):
		return optionError("radius_schedule.start", r.Start, "the starting factor of C_mu must be a finite number > 1")
	case !(r.Fraction > 0) || r.Fraction > 1:
		return optionError("radius_schedule.fraction", r.Fraction, "the fraction of the steps must be in (0, 1]")
	case o.Variant != nvib.ModelNVDPClipped && o.Variant != nvib.ModelGaussian:
		return optionError("radius_schedule", o.Variant, "a schedule of the radius needs a clipped variant (nvdp-clipped, gaussian)")
	case o.Mode.IsReference():
		return optionError("radius_schedule", o.Mode, "principled mode only")
	case o.Device != nil:
		return optionError("radius_schedule", "device", "the device twin has no schedule of the radius yet: train on the CPU")
	}
	return nil
}

func oneOf(option, value string, allowed ...string) error {
	if slices.Contains(allowed, value) {
		return nil
	}
	return optionError(option, value, "want one of %s", strings.Join(allowed, ", "))
}

// zeroMeans says what 0 means for the options where it is a choice.
var zeroMeans = map[string]string{"train_limit": " (0: all)", "dev_limit": " (0: all)", "patience": " (0: no early stopping)",
	"checkpoint_every": " (0: at epoch ends only)"}

// validateFloats checks that every float64 option is a finite number (all
// of them, by reflection, so that a new option cannot be missed), but a
// target option may be NoTarget; an Auto left over means Resolve was not
// called.
func (o *Options) validateFloats() error {
	v := reflect.ValueOf(o).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.Float64 || !f.IsExported() {
			continue
		}
		x := v.Field(i).Float()
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case IsNoTarget(x) && targetKeys[name]: // no target
		case IsAuto(x) && autoOptions[name]:
			return optionError(name, nil, "auto, not resolved: Options.Resolve derives it from the task, encoder, variant and mode")
		case math.IsNaN(x) || math.IsInf(x, 0):
			return optionError(name, x, "must be a finite number")
		}
	}
	return nil
}

// validateEncoder checks the encoder spec's form (scratch:PRESET with a
// known preset, hf:DIR or hf:owner/name) and that a scratch encoder has a
// tokenizer.
func (o *Options) validateEncoder() error {
	const want = "want scratch:PRESET, hf:DIR or hf:owner/name"
	kind, arg, ok := strings.Cut(o.Encoder, ":")
	switch {
	case o.Encoder == "":
		return optionError("encoder", nil, "required (%s)", want)
	case !ok || arg == "" || (kind != "scratch" && kind != "hf"):
		return optionError("encoder", o.Encoder, "%s", want)
	case kind == "scratch" && o.ScratchConfig == nil:
		if _, err := encoder.Preset(arg); err != nil {
			return optionError("encoder", o.Encoder, "%v", err)
		}
	}
	if kind == "scratch" && o.Vocab == "" {
		return optionError("vocab", nil, "required for a scratch encoder (a vocab.txt, tokenizer.json or a directory with them)")
	}
	return nil
}

// validateClip checks the clipping constants of the variants that use them.
func (o *Options) validateClip() error {
	switch o.Variant {
	case nvib.ModelNVDPClipped, nvib.ModelNVDP:
		switch {
		case !(o.CMu > 0):
			return optionError("c_mu", o.CMu, "the radius C_mu must be > 0")
		case !(o.CAlphaMax > 0):
			return optionError("c_alpha_max", o.CAlphaMax, "C_amax must be > 0")
		case o.CAlphaMin < 0 || o.CAlphaMin > o.CAlphaMax:
			return optionError("c_alpha_min", o.CAlphaMin, "C_amin must be in [0, C_amax = %v]", o.CAlphaMax)
		case o.LogvarMargin < 0:
			return optionError("logvar_margin", o.LogvarMargin, "must be >= 0")
		}
	case nvib.ModelGaussian:
		switch {
		case !(o.CMu > 0):
			return optionError("c_mu", o.CMu, "the gaussian variant's token radius C must be > 0")
		case o.Mode.IsReference():
			return optionError("mode", o.Mode, "the gaussian variant is principled only (it has no released-code counterpart)")
		case o.LogvarMargin != 0:
			return optionError("logvar_margin", o.LogvarMargin, "the gaussian variant has fixed noise (sigma = the prior sigma): no margin")
		case o.CAlphaMin != 0:
			return optionError("c_alpha_min", o.CAlphaMin, "the gaussian variant has no Dirichlet weights")
		}
	}
	return nil
}

// validateLatent checks LatentDim: >= 1 when given, and against the encoder
// (latentFor) when its shape is known before it is built (a scratch
// encoder); a pretrained encoder's is checked by ModelConfig, once loaded.
func (o *Options) validateLatent() error {
	if o.LatentDim == nil {
		return nil
	}
	if *o.LatentDim < 1 {
		return optionError("latent_dim", *o.LatentDim, "the release's width P must be >= 1 (leave it out for the encoder's hidden size)")
	}
	if enc, ok := o.scratchEncoder(); ok {
		return o.latentFor(enc)
	}
	return nil
}

// latentFor checks a given LatentDim against the encoder enc
// (nvib.CheckLatent: a multiple of its attention heads, the NVDP block's;
// its hidden size in reference mode). The baseline ignores it.
func (o *Options) latentFor(enc encoder.Config) error {
	if o.LatentDim == nil || o.Variant == nvib.ModelBaseline {
		return nil
	}
	if err := nvib.CheckLatent(o.Variant, o.Mode, *o.LatentDim, enc.HiddenSize, enc.NumAttentionHeads); err != nil {
		return optionError("latent_dim", *o.LatentDim, "%v", err)
	}
	return nil
}

// CheckTargetValues checks the target values alone, as Validate does: each
// of TargetEpsilon and TargetRD is NoTarget or a finite number > 0 (0 is
// an error, never "no target"), and not both are given. Errors are
// *OptionError naming target_epsilon or target_rd. For a program that
// checks a target before the rest of the options are known (a sweep's
// base options).
func (o *Options) CheckTargetValues() error {
	for _, f := range []struct {
		option string
		v      float64
	}{{"target_epsilon", o.TargetEpsilon}, {"target_rd", o.TargetRD}} {
		switch {
		case IsNoTarget(f.v):
		case math.IsInf(f.v, 0):
			return optionError(f.option, f.v, "must be a finite number")
		case !(f.v > 0):
			return optionError(f.option, f.v, "must be > 0 (leave it out for no target)")
		}
	}
	if !IsNoTarget(o.TargetEpsilon) && !IsNoTarget(o.TargetRD) {
		return optionError("target_epsilon", o.TargetEpsilon, "and a target RD %v are both given: give one", o.TargetRD)
	}
	return nil
}

// validateTarget checks the privacy target: a clipped variant in
// principled mode has one (target_epsilon or target_rd) or
// hand_set_clipping, never both; the target's settings need a target.
func (o *Options) validateTarget() error {
	if err := o.CheckTargetValues(); err != nil {
		return err
	}
	for _, f := range []struct {
		option string
		v      float64
	}{{"variance_share", o.VarianceShare}, {"dirichlet_share", o.DirichletShare}} {
		if f.v < 0 {
			return optionError(f.option, f.v, "must be >= 0")
		}
	}
	if !o.HasTarget() {
		switch {
		case !o.HandSetClipping && nvib.Calibratable(o.Variant) && !o.Mode.IsReference():
			return option.MentionErrorf([]string{"hand_set_clipping"}, "target_epsilon", nil, "required for the %s variant: a certified epsilon per release to calibrate the clipping to (e.g. %g; docs/privacy.md, \"A guarantee by default\"), or hand_set_clipping for the given constants and whatever epsilon they certify", o.Variant, privacy.DefaultTargetEpsilon)
		case o.Releases > 1:
			return optionError("releases", o.Releases, "needs a target (a certified epsilon or RD)")
		case o.VarianceShare > 0:
			return optionError("variance_share", o.VarianceShare, "the budget's shares need a target (a certified epsilon or RD)")
		case o.DirichletShare > 0:
			return optionError("dirichlet_share", o.DirichletShare, "the budget's shares need a target (a certified epsilon or RD)")
		}
		return nil
	}
	target, value, epsilon := "target_rd", o.TargetRD, !IsNoTarget(o.TargetEpsilon)
	if epsilon {
		target, value = "target_epsilon", o.TargetEpsilon
	}
	switch {
	case o.HandSetClipping:
		return option.MentionErrorf([]string{target}, "hand_set_clipping", nil, "and a target (%s %v) are both given: give one", target, value)
	case !nvib.Calibratable(o.Variant):
		return optionError(target, value, "only the nvdp-clipped and gaussian variants can be calibrated (variant %s has no clipping)", o.Variant)
	case o.Mode.IsReference():
		return optionError("mode", o.Mode, "a target needs principled mode: reference mode clips without a sigma cap and with C_amin 0, so its certified bound is infinite; calibrate in principled mode")
	case o.Releases < 1:
		return optionError("releases", o.Releases, "must be >= 1")
	case epsilon && !(o.TargetDelta > 0 && o.TargetDelta < 1):
		return optionError("target_delta", o.TargetDelta, "the target's delta must be in (0, 1)")
	case !epsilon && !(o.TargetOrder > 1):
		return optionError("target_order", o.TargetOrder, "the target RD's Renyi order must be > 1")
	case o.VarianceShare+o.DirichletShare >= 1:
		return optionError("variance_share", o.VarianceShare, "the variance and Dirichlet shares (%v + %v) must sum to < 1 (the mean part gets the rest)", o.VarianceShare, o.DirichletShare)
	case o.FixCMu && o.FixLogvarMargin && o.FixCAlphaMin:
		return optionError("c_mu", o.CMu, "C_mu, the logvar margin and C_amin are all fixed: nothing left to calibrate to the target")
	case o.Variant == nvib.ModelGaussian && o.FixCMu:
		return optionError("c_mu", o.CMu, "fixed with a target: the gaussian variant's only constant is its radius C, which the target calibrates; give one")
	case o.Variant == nvib.ModelGaussian && (o.VarianceShare > 0 || o.DirichletShare > 0):
		return optionError("variance_share", o.VarianceShare, "the gaussian variant has fixed noise and no Dirichlet weights; the radius C carries the whole budget")
	}
	return nil
}

// CheckFiles checks the files a training run of o reads, before any work:
// GlueDir is a directory with the task's train and dev splits, and Vocab
// (when given) exists. Errors name the path.
func (o *Options) CheckFiles() error {
	task, err := glue.LookupTask(o.Task)
	if err != nil {
		return optionError("task", o.Task, "%v", err)
	}
	if st, err := os.Stat(o.GlueDir); err != nil || !st.IsDir() {
		return optionError("glue_dir", o.GlueDir, "not a directory (the GLUE directory with %s/{train,dev,test}.tsv)", task.Dir)
	}
	for _, split := range []string{"train", "dev"} {
		if _, err := glue.CheckSplit(o.GlueDir, task, split); err != nil {
			if split == "train" && errors.Is(err, glue.ErrMissingSplit) {
				return noTrainSplit(task, err)
			}
			return err
		}
	}
	if o.Vocab != "" {
		if _, err := os.Stat(o.Vocab); err != nil {
			return optionError("vocab", o.Vocab, "%v", err)
		}
	}
	return nil
}

// ModelConfig builds the nvib configuration of the run (resolved options)
// for an encoder of the given shape: the release's width P = LatentDim
// (checked against the encoder: latentFor), or the encoder's hidden size
// when it is not set (nvib.Config.LatentDim then stays 0, the files of
// before the option), and the clipping constants as o holds them. It reads
// o only: the calibration to a privacy target is a step of its own
// (Calibrate, PrepareModelConfig). Errors: an invalid latent width or
// configuration.
func (o *Options) ModelConfig(enc encoder.Config, numLabels int) (nvib.Config, error) {
	cfg, err := o.modelConfig(enc, numLabels)
	if err != nil {
		return cfg, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// modelConfig is ModelConfig before the configuration is validated: the
// base configuration of the calibration.
func (o *Options) modelConfig(enc encoder.Config, numLabels int) (nvib.Config, error) {
	cfg := nvib.DefaultConfig(o.Variant, o.Mode, enc.HiddenSize, enc.NumAttentionHeads, enc.IntermediateSize, numLabels)
	if err := o.latentFor(enc); err != nil {
		return cfg, err
	}
	if o.LatentDim != nil && o.Variant != nvib.ModelBaseline {
		cfg.LatentDim = *o.LatentDim
	}
	cfg.LayerNormEps = enc.LayerNormEps
	if enc.ModelType == "roberta" {
		cfg.Head = nvib.HeadFirstToken
	}
	if o.HeadReads != "" && o.Variant != nvib.ModelBaseline {
		cfg.HeadReads = o.HeadReads
		if o.HeadReads == nvib.HeadReadsRelease {
			cfg.Head = nvib.HeadMean // a mean over the released rows, whatever the backbone
		}
	}
	cfg.LambdaG, cfg.LambdaD = o.Lambda, o.Lambda
	if !nvib.HasKL(o.Variant) {
		cfg.LambdaG, cfg.LambdaD = 0, 0 // no KL terms
	}
	cfg.KLSchedule, cfg.KLWarmup = o.KLSchedule, o.KLWarmup
	if o.NVIBInit != "" {
		cfg.Init = o.NVIBInit
	}
	cfg.Clip = nvib.DefaultClip(o.Mode, o.CMu, o.CAlphaMax)
	if o.ClipOrder != cfg.Clip.Order {
		cfg.Clip.Order = o.ClipOrder
		if !o.Mode.IsReference() {
			cfg.Clip.CAlphaMin = nvib.PrincipledAlphaMin(o.ClipOrder, cfg.Clip.CAlphaMax)
		}
	}
	if o.Variant != nvib.ModelGaussian { // gaussian reads Clip.CMu only: the rest keeps its defaults
		cfg.Clip.CAlphaMin, cfg.Clip.LogvarMargin = o.CAlphaMin, o.LogvarMargin
	}
	cfg.Clip.Enabled = o.Variant == nvib.ModelNVDPClipped
	if o.Variant == nvib.ModelGaussian {
		cfg.ReleaseLen = o.MaxSeqLen // every one of the max-seq-len positions is released
	}
	return cfg, nil
}

// SaveOptions validates o and writes it as JSON to dir/train_options.json
// (format OptionsVersion).
func SaveOptions(dir string, o *Options) error {
	path := filepath.Join(dir, OptionsFile)
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c := *o
	c.Version = OptionsVersion
	return atomicfile.WriteJSON(path, &c)
}

// LoadOptions reads dir/train_options.json, upgrades a file of version 0,
// 2 or 3 (Upgrade), resolves and validates the options: what a resumed run
// or an evaluation uses is checked as a new run's options are (a version-3
// target of 0 is an error, and so is a version-4 clipped variant without a
// target or hand_set_clipping). Errors name the file (a missing file wraps
// fs.ErrNotExist).
func LoadOptions(dir string) (*Options, error) {
	path := filepath.Join(dir, OptionsFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model dir %s: %w", dir, err)
	}
	var probe struct {
		Version int `json:"options_version"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !slices.Contains(readVersions, probe.Version) {
		return nil, fmt.Errorf("%s: %w", path, versionError(probe.Version))
	}
	if probe.Version == 0 {
		if b, err = dropRetiredV0(b); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	o := &Options{}
	if err := json.Unmarshal(b, o); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := o.Upgrade(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	o.Resolve()
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// Differences returns the options whose values differ between saved (a
// run's options, as LoadOptions reads them) and given (those a resume of the
// run is asked for), by JSON key in the order of Options' fields
// (option.Differences: pointers by value, Auto equal to Auto), leaving out
// where the run is and whether it continues (out, resume) and the file's
// format (options_version); tasks are compared by the GLUE task they name
// (glue.LookupTask: "SST-2" is sst2). A resumed run (Run with Resume)
// continues with the saved options: a caller that was given options
// explicitly refuses those that differ (cmd/nvdp names their flags) rather
// than resume a run other than the one asked for.
func Differences(saved, given *Options) []option.Difference {
	var out []option.Difference
	for _, d := range option.Differences(saved, given) {
		switch d.Option {
		case "out", "resume", "options_version":
			continue
		case "task":
			a, errA := glue.LookupTask(saved.Task)
			b, errB := glue.LookupTask(given.Task)
			if errA == nil && errB == nil && a.Name == b.Name {
				continue
			}
		}
		out = append(out, d)
	}
	return out
}

// readVersions are the options_version values this program reads.
var readVersions = []int{0, 2, 3, OptionsVersion}

func versionError(v int) error {
	return fmt.Errorf("options_version %d: this program reads versions 0, 2, 3 and %d", v, OptionsVersion)
}

// Upgrade gives options decoded from a file of an older format (Version 0,
// 2 or 3) their meaning in OptionsVersion and sets Version to it: version 0
// as upgradeV0 says; in versions 0 and 2 a target_epsilon or target_rd of 0
// meant "no target" (those versions left the key out then, so only a
// hand-edited file holds a 0), which is NoTarget now (in version 3 a 0
// target is an error, Validate's); versions 0 to 3 trained a clipped
// variant (nvib.Calibratable) in principled mode without a target with its
// hand-set constants, which version 4 says with HandSetClipping, set here
// for such options. Errors: a version this program does not read.
func (o *Options) Upgrade() error {
	switch o.Version {
	case 0:
		o.upgradeV0()
		fallthrough
	case 2:
		for _, v := range []*float64{&o.TargetEpsilon, &o.TargetRD} {
			if *v == 0 {
				*v = NoTarget()
			}
		}
		fallthrough
	case 3:
		o.HandSetClipping = !o.HasTarget() && nvib.Calibratable(o.Variant) && !o.Mode.IsReference()
	case OptionsVersion:
	default:
		return versionError(o.Version)
	}
	o.Version = OptionsVersion
	return nil
}

// retiredV0 are the keys of version-0 files that no option reads any more
// (lambda_set recorded an explicit lambda; every value is explicit now).
var retiredV0 = []string{"lambda_set"}

// dropRetiredV0 removes the retired keys from a version-0 file, so that the
// strict decoding (Options.UnmarshalJSON) reads it.
func dropRetiredV0(b []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for _, k := range retiredV0 {
		delete(m, k)
	}
	return json.Marshal(m)
}

// upgradeV0 gives the options of a version-0 file their explicit values:
// there 0 meant "the default" in c_alpha_min and logvar_margin (unless
// calibrated) and in clip_order, target_delta, target_order and releases,
// and -1 meant "off" in patience and grad_clip (a missing dropout or
// nvib_init, "the preset's" or "the mode's", decodes as Auto or "" already).
// The result resolves to the model those files were trained with
// (TestLoadOptionsVersion0).
func (o *Options) upgradeV0() {
	if !o.Calibrated {
		if o.CAlphaMin == 0 {
			o.CAlphaMin = Auto()
		}
		if o.LogvarMargin == 0 {
			o.LogvarMargin = Auto()
		}
	}
	for _, d := range []struct {
		v   *float64
		def float64
	}{{&o.ClipOrder, privacy.DefaultOrder}, {&o.TargetDelta, privacy.DefaultDelta}, {&o.TargetOrder, privacy.DefaultOrder}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.Releases == 0 {
		o.Releases = 1
	}
	if o.Patience < 0 {
		o.Patience = 0
	}
	if o.GradClip < 0 {
		o.GradClip = 0
	}
}

// optionsFields is Options without its JSON methods.
type optionsFields Options

// optionsJSON is the JSON form of Options: the options that may be Auto,
// and the targets that may be NoTarget, as pointers: NaN (Auto, NoTarget)
// written as null and null or a missing key read as NaN (the shallower
// fields here hide the embedded ones of the same name).
type optionsJSON struct {
	*optionsFields
	CMu           *float64 `json:"c_mu"`
	CAlphaMax     *float64 `json:"c_alpha_max"`
	CAlphaMin     *float64 `json:"c_alpha_min"`
	LogvarMargin  *float64 `json:"logvar_margin"`
	LR            *float64 `json:"lr"`
	Dropout       *float64 `json:"dropout"`
	TargetEpsilon *float64 `json:"target_epsilon"`
	TargetRD      *float64 `json:"target_rd"`
}

func (j *optionsJSON) autoFields(o *Options) []struct {
	v *float64
	p **float64
} {
	return []struct {
		v *float64
		p **float64
	}{{&o.CMu, &j.CMu}, {&o.CAlphaMax, &j.CAlphaMax}, {&o.CAlphaMin, &j.CAlphaMin},
		{&o.LogvarMargin, &j.LogvarMargin}, {&o.LR, &j.LR}, {&o.Dropout, &j.Dropout},
		{&o.TargetEpsilon, &j.TargetEpsilon}, {&o.TargetRD, &j.TargetRD}}
}

// MarshalJSON writes o with Auto options and NoTarget targets as null.
// Resolved options (every train_options.json) have no Auto; unresolved ones
// travel as JSON too (a sweep's base options to its cells).
func (o Options) MarshalJSON() ([]byte, error) {
	f := optionsFields(o)
	j := optionsJSON{optionsFields: &f}
	for _, a := range j.autoFields(&o) {
		if !IsAuto(*a.v) {
			v := *a.v
			*a.p = &v
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads o as MarshalJSON writes it: null or a missing key is
// Auto in the options that may be Auto and NoTarget in target_epsilon and
// target_rd; a key that is no option is an error.
func (o *Options) UnmarshalJSON(b []byte) error {
	j := optionsJSON{optionsFields: (*optionsFields)(o)}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt or newer option is an error, never ignored
	if err := dec.Decode(&j); err != nil {
		return err
	}
	for _, a := range j.autoFields(o) {
		*a.v = Auto()
		if *a.p != nil {
			*a.v = **a.p
		}
	}
	return nil
}
