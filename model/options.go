// Package model is a trained model and what it is made with:
//
//   - the options a model is trained and saved with, [Options], in
//     train_options.json: their defaults, Resolve, validation, and the JSON
//     format and its versions;
//   - the calibration of its clipping to a privacy target, [Calibration], in
//     certificate.json;
//   - the model itself, [TextModel]: the encoder, the NVIB layer, the NVDP block
//     and the head, with its tokenizer and task. [Build] makes a fresh model,
//     [Load] loads a model directory, and [SaveFiles] writes one;
//   - its input, [Encoded]: a tokenised split and its batches, with
//     [LoadSplit] and [EvalPadLen].
//
// Training in package train, releasing in package release and attacking in
// package attack all read a model from here; loading a model does not pass
// through training.
package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
)

// Options are the settings of one training run. Start from [DefaultOptions]:
// every field holds the value it says, an explicit 0 included, and a zero
// value is never replaced by a default.
//
// The fields whose default depends on other options, CMu, CAlphaMax,
// CAlphaMin, LogvarMargin, LR and Dropout, hold [Auto] until
// [Options.Resolve] derives them. LatentDim, whose default is the encoder's
// hidden size, is nil until [Options.ModelConfig] reads it from the encoder.
// [Options.Validate] checks the result. Errors name the option by its JSON
// key, as train_options.json stores it; see [OptionError].
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
	// LogvarMargin and CAlphaMin with Calibrated set (Calibration.Apply),
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
	// RunTime are the choices of one run, no part of the model or of its
	// options file: a resumed run takes them from its caller (Resume).
	RunTime `json:"-"`
}

// RunTime are the run-time choices of a training run. They are not saved with
// the model, and train_options.json holds none of them: a resumed run takes
// them from its caller. [RunTime.Validate] checks them.
//
// Out and Resume travel in the JSON of [Options] when set (the options of a
// sweep's cell, sent to the process that runs it); [SaveOptions] writes
// neither, and [LoadOptions] ignores those of files written before they
// moved here.
type RunTime struct {
	// Out is the output / model directory of the run (required).
	Out string
	// Resume continues the run in Out from its last checkpoint, with the
	// options saved there.
	Resume bool
	// StopAfterSteps stops the run after this many optimizer steps in total, with a
	// checkpoint (0: off); for tests of resumption and for time-boxed runs.
	StopAfterSteps int
	// Device, when set, trains and evaluates on this GPU (package dnn; the
	// parameters, gradients and AdamW moments live there); nil: the CPU
	// engine. A run-time choice, not part of the model or its options file:
	// a model trained on either device loads and runs on the other; a run
	// resumes on the device it started on (its checkpoint holds that
	// device's random state).
	Device *cuda.Device
	// HostNoise draws a training step's dropout and NVDP noise on the host
	// from the device's Philox stream (rngstream.TrainSampleDevice), on
	// either device: a CPU run and a GPU run of one seed then see the same
	// noise, for the comparison of the two (scripts/gpu-check.sh). On the GPU
	// it costs an upload of the noise per step. Run-time, as Device.
	HostNoise bool
	// LogSteps appends each optimizer step's training loss to
	// train.StepsFile in Out (train.StepLoss lines; a resumed run goes on
	// appending), for comparisons step by step (the CPU and the GPU engine:
	// scripts/gpu-check.sh). Run-time, as Device.
	LogSteps bool
}

// Auto returns the value of the options whose default depends on other
// options until [Options.Resolve] derives them: CMu, CAlphaMax, CAlphaMin,
// LogvarMargin, LR and Dropout. It is [option.Auto], a NaN, the "not set"
// marker that nvdp's options types share, and the only "not set" marker of
// Options' float options; [IsAuto] tests for it. The one integer option with a
// derived default, LatentDim, is a pointer instead, nil when not set.
func Auto() float64 { return option.Auto() }

// IsAuto reports whether v is [Auto], as [option.IsAuto] does.
func IsAuto(v float64) bool { return option.IsAuto(v) }

// NoTarget is the value of TargetEpsilon and TargetRD when no target is
// given: NaN, the project's "not set" marker (option.Auto), written as JSON
// null. Unlike Auto it is no placeholder for a derived default: Resolve
// keeps it and Validate accepts it. An explicit 0 is a value, and an error.
func NoTarget() float64 { return option.Auto() }

// IsNoTarget reports whether the target option v, TargetEpsilon or
// TargetRD, is [NoTarget].
func IsNoTarget(v float64) bool { return option.IsAuto(v) }

// Default learning rates. Pretrained backbones use the paper's rates:
// BERT-base 7e-5 and RoBERTa-base 2e-5.
//
// From-scratch encoders use 1e-3 without a release, for the non-private
// baseline, and 5e-4 through one, for nvdp, nvdp-clipped and gaussian; a
// randomly initialised encoder learns nothing useful in a few epochs at 7e-5.
// At 1e-3 a from-scratch encoder trained through a calibrated release sits on
// a loss plateau of seed-dependent length, and at 2e-3 it collapses, while at
// 5e-4 every seed and both BLAS backends measured learn. See docs/training.md,
// "Robustness".
const (
	DefaultLRPretrained     = 7e-5
	DefaultLRRoberta        = 2e-5
	DefaultLRScratch        = 1e-3
	DefaultLRScratchPrivate = 5e-4
)

// DefaultEncoder is the encoder of a run that names none: BERT-Tiny from
// scratch, the only kind that trains on a CPU in minutes.
const DefaultEncoder = "scratch:bert-tiny"

// DefaultOptions returns the defaults of every option, from ref §8 and the
// paper's table:
//
//   - variant nvdp-clipped, mode principled, lambda 1e-2, KL schedule
//     linear-decay, and the NVIB init of the mode;
//   - 10 epochs, batch size 32 and 16 for evaluation, warm-up 0.06, weight
//     decay 0, gradient clipping at 1.0, max-seq-len 128, seed 1, patience 3,
//     and a checkpoint every 500 steps;
//   - clip order [privacy.DefaultOrder], and no target, [NoTarget], with
//     delta [privacy.DefaultDelta] and order privacy.DefaultOrder for 1
//     release when one is given;
//   - CMu, CAlphaMax, CAlphaMin, LogvarMargin, LR and Dropout [Auto], for
//     [Options.Resolve]; the encoder [DefaultEncoder]; HandSetClipping off.
//
// Task, GlueDir, Vocab and Out are empty: the caller gives them, and a target
// or HandSetClipping too, without which [Options.Validate] refuses the
// default variant, since it gives a guarantee by default; see
// validateTarget.
func DefaultOptions() Options {
	return Options{Version: OptionsVersion, Encoder: DefaultEncoder, Variant: nvib.ModelNVDPClipped, Mode: privacy.ModePrincipled, Lambda: 1e-2,
		CMu: Auto(), CAlphaMax: Auto(), CAlphaMin: Auto(), LogvarMargin: Auto(), KLSchedule: nvib.ScheduleLinearDecay,
		Epochs: 10, BatchSize: 32, EvalBatchSize: 16, LR: Auto(), WarmupRatio: 0.06, GradClip: 1, MaxSeqLen: 128, Seed: 1,
		Patience: 3, CheckpointEach: 500, Dropout: Auto(), ClipOrder: privacy.DefaultOrder,
		TargetEpsilon: NoTarget(), TargetDelta: privacy.DefaultDelta, TargetRD: NoTarget(), TargetOrder: privacy.DefaultOrder, Releases: 1}
}

// DefaultLR returns the learning rate of a run without an explicit one. It
// goes by backbone: [DefaultLRPretrained], or [DefaultLRRoberta] for an
// encoder spec naming roberta. For scratch encoders it goes by whether the
// variant releases, [DefaultLRScratchPrivate], or not, [DefaultLRScratch] for
// the baseline.
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

// ScratchPrefix marks an encoder spec built from a preset, scratch:PRESET.
// Package speech reads its Wav2Vec2 specs with it too.
const ScratchPrefix = "scratch:"

// Resolve replaces each [Auto] option by the default it depends on, and is
// idempotent:
//
//   - CMu and CAlphaMax by the task's, [glue.Task.PaperClip];
//   - CAlphaMin and LogvarMargin by the mode's, 0 for gaussian;
//   - LR by [DefaultLR];
//   - Dropout by the preset's hidden dropout for scratch encoders, or
//     ScratchConfig's when set, and by 0 for pretrained ones;
//   - an empty NVIBInit by the mode's.
//
// Options given explicitly, 0 included, are kept. An Auto that cannot be
// derived, as for an unknown task or preset, stays Auto for
// [Options.Validate] to report. A target stays as it is; [NoTarget] means
// none.
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

// HasTarget reports whether o asks for calibrated clipping: whether
// TargetEpsilon or TargetRD is given, that is not [NoTarget].
// [Options.Validate] checks the value, an explicit 0 included.
func (o *Options) HasTarget() bool { return !IsNoTarget(o.TargetEpsilon) || !IsNoTarget(o.TargetRD) }

// FixGiven keeps the clipping constants that were given explicitly as they
// are in the calibration to a target, which chooses the others: given
// reports an option by JSON key (c_mu, logvar_margin, c_alpha_min), as a
// command line's flags. It sets FixCMu, FixLogvarMargin and FixCAlphaMin.
func (o *Options) FixGiven(given func(name string) bool) {
	o.FixCMu, o.FixLogvarMargin, o.FixCAlphaMin = given("c_mu"), given("logvar_margin"), given("c_alpha_min")
}

// CheckTargetGiven checks, before any work, that the options of a target
// given explicitly (given; nil: none) come with their target: target_order
// is the Renyi order of a TargetRD and target_delta the delta of a
// TargetEpsilon, so either given without it is an error, a
// [*option.CombinationError] naming both. A training run checks it; a
// pipeline's audit has an order and delta of its own.
func (o *Options) CheckTargetGiven(given option.Given) error {
	switch {
	case given.Has("target_order") && IsNoTarget(o.TargetRD):
		return option.Combination("%s is the Renyi order of %s; give %s or leave it out", "target_order", "target_rd", "target_rd")
	case given.Has("target_delta") && IsNoTarget(o.TargetEpsilon):
		return option.Combination("%s is the delta of %s; give %s or leave it out", "target_delta", "target_epsilon", "target_epsilon")
	}
	return nil
}

// TargetAt gives a target RD the Renyi order order (TargetOrder) and a
// target epsilon the delta delta (TargetDelta); without that target the
// option is left as it is. A pipeline gives its audit's: one order and one
// delta for the audit and the target.
func (o *Options) TargetAt(order, delta float64) {
	if !IsNoTarget(o.TargetRD) {
		o.TargetOrder = order
	}
	if !IsNoTarget(o.TargetEpsilon) {
		o.TargetDelta = delta
	}
}

// PaperClips lists one of the paper's clipping constants per GLUE task
// ([glue.Task.PaperClip], the value of v) as "MRPC 2, QNLI 7, ...": the
// tasks by their GLUE directory names, in the order of [glue.TaskNames].
func PaperClips(v func(glue.Clip) float64) string {
	names := glue.TaskNames()
	parts := make([]string, 0, len(names))
	for _, name := range names {
		t, err := glue.LookupTask(name)
		if err != nil {
			panic(err) // TaskNames lists the registered tasks
		}
		parts = append(parts, fmt.Sprintf("%s %g", t.Dir, v(t.PaperClip)))
	}
	return strings.Join(parts, ", ")
}

// RadiusSchedule is a schedule of the clip radius during training, set in
// Options.RadiusSchedule; see docs/training.md, "A schedule of the radius".
// The radius starts at Start C_mu and shrinks linearly to C_mu over the
// first Fraction of the optimizer steps, then stays there.
//
// Only the model trained at C_mu is evaluated, saved and certified. The
// radius of training steps is not released, since training data is not what
// the certificate protects; see docs/privacy.md, "The certified bound", and
// the threat model.
type RadiusSchedule struct {
	Start    float64 `json:"start"`    // factor of C_mu at step 0: finite, > 1
	Fraction float64 `json:"fraction"` // of the total steps: in (0, 1]
}

// FormatRadiusSchedule writes r as "START:FRACTION" (the shortest decimals
// that [ParseRadiusSchedule] reads back), or "off" for nil, as a command
// line gives it.
func FormatRadiusSchedule(r *RadiusSchedule) string {
	if r == nil {
		return "off"
	}
	return strconv.FormatFloat(r.Start, 'g', -1, 64) + ":" + strconv.FormatFloat(r.Fraction, 'g', -1, 64)
}

// ParseRadiusSchedule reads the text that [FormatRadiusSchedule] writes:
// "off" is nil, START:FRACTION a schedule of those two numbers, which
// [Options.Validate] checks; other text is an error.
func ParseRadiusSchedule(s string) (*RadiusSchedule, error) {
	if s == "off" {
		return nil, nil
	}
	a, b, ok := strings.Cut(s, ":")
	start, err1 := strconv.ParseFloat(a, 64)
	frac, err2 := strconv.ParseFloat(b, 64)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%q is not START:FRACTION (e.g. 4:0.5) or off", s)
	}
	return &RadiusSchedule{Start: start, Fraction: frac}, nil
}

// Radius returns the radius of optimizer step step, counted from 0, of total
// steps for the final radius cMu. Before step Fraction total it is
// cMu (Start + (1 - Start) step / (Fraction total)), and cMu from there. A nil
// schedule gives cMu.
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

// ModelConfig builds the nvib configuration of the run, from resolved
// options, for an encoder of the given shape. It holds the clipping
// constants as o holds them, and the release's width P = LatentDim, checked
// against the encoder. When LatentDim is not set, P is the encoder's hidden
// size and [nvib.Config].LatentDim stays 0, as in the files from before the
// option.
//
// It reads o only: the calibration to a privacy target is a step of its own,
// see [Calibrate] and [PrepareModelConfig]. It returns an error for an invalid
// latent width or configuration.
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
