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
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// File names inside a training output / model directory.
const (
	OptionsFile    = "train_options.json"
	MetricsFile    = "metrics.jsonl"
	WeightsFile    = encoder.WeightsFile // every parameter of the best model (safetensors)
	CheckpointFile = "checkpoint-last.safetensors"
	StateFile      = "train_state.json"
)

// Options are the settings of one training run: every flag of the pinned
// `nvdp train` command. Zero values mean "the default for this task and
// backbone" (see Defaults); booleans and the seed are taken as given.
type Options struct {
	Task    string `json:"task"`     // sst2, mrpc, rte, stsb, qnli
	GlueDir string `json:"glue_dir"` // directory with <TASK>/{train,dev,test}.tsv
	// Encoder is scratch:PRESET (bert-tiny, bert-mini, ...), hf:DIR or hf:owner/name.
	Encoder string `json:"encoder"`
	// Vocab is the tokenizer (vocab.txt, tokenizer.json, vocab.json+merges.txt or a directory);
	// default: the encoder directory's tokenizer files (required for scratch encoders).
	Vocab   string       `json:"vocab"`
	Variant string       `json:"variant"` // baseline | nvdp | nvdp-clipped | gaussian
	Mode    privacy.Mode `json:"mode"`    // principled | reference
	// Lambda is lambda_G = lambda_D, the weight of the KL regularisers (>= 0; ignored by baseline and gaussian).
	Lambda float64 `json:"lambda"`
	// LambdaSet records that Lambda was given explicitly (so 0 is a valid choice).
	LambdaSet bool `json:"lambda_set,omitempty"`
	// CMu is the radius of the mean ball, CAlphaMax / CAlphaMin the pseudo-count bounds
	// (nvdp-clipped; CAlphaMin 0 = principled default (lambda-1)/lambda C_amax (1+1e-3)).
	// For gaussian, CMu is the radius C of the L2 ball each token embedding is
	// clipped to (nvib.GaussianRelease); the pseudo-count bounds are unused.
	CMu       float64 `json:"c_mu"`
	CAlphaMax float64 `json:"c_alpha_max"`
	CAlphaMin float64 `json:"c_alpha_min"`
	// LogvarMargin (nats of variance, > 0 when set) raises the logvar floor above
	// ln((lambda-1)/lambda prior_var); 0 = the mode's default (principled 1e-3,
	// reference 0). The worst-case Gaussian radicand of Eq. rdp is
	// (lambda-1) prior_var (e^margin - 1), so a larger margin tightens the bound
	// (docs/privacy.md).
	LogvarMargin float64 `json:"logvar_margin,omitempty"`
	// KLSchedule is s(t): linear-decay (reference), constant, warmup, warmup-decay; KLWarmup its fraction.
	KLSchedule string  `json:"kl_schedule"`
	KLWarmup   float64 `json:"kl_warmup"`
	// NVIBInit is the NVIB projections' initialisation: hf (released code), nvib (intended) or
	// clip (inside the clipping region); "" = the default of nvib.DefaultConfig.
	NVIBInit string `json:"nvib_init,omitempty"`

	Epochs         int     `json:"epochs"`
	BatchSize      int     `json:"batch_size"`
	EvalBatchSize  int     `json:"eval_batch_size"`
	LR             float64 `json:"lr"`
	WarmupRatio    float64 `json:"warmup_ratio"`
	WeightDecay    float64 `json:"weight_decay"`
	GradClip       float64 `json:"grad_clip"` // global L2 norm; < 0 disables
	MaxSeqLen      int     `json:"max_seq_len"`
	Seed           uint64  `json:"seed"`
	TrainLimit     int     `json:"train_limit"` // first K training rows (0: all)
	DevLimit       int     `json:"dev_limit"`   // first K dev rows (0: all)
	Patience       int     `json:"patience"`    // early stopping: epochs without improvement (< 0: off)
	CheckpointEach int     `json:"checkpoint_every"`
	// Dropout overrides the encoder's hidden and attention dropout; nil: the preset's (0.1)
	// for scratch encoders, 0 for pretrained ones (ref §8: dropout 0 everywhere).
	Dropout     *float64 `json:"dropout,omitempty"`
	SkipBadRows bool     `json:"skip_bad_rows"`
	Out         string   `json:"out"`
	Resume      bool     `json:"resume"`

	// ClipOrder is the Renyi order lambda the logvar floor ln((lambda-1)/lambda
	// prior_var) + LogvarMargin and the principled default C_amin are derived
	// for (nvib.ClipConfig.Order); 0 = nvib.DefaultOrder (1.1, the paper's).
	ClipOrder float64 `json:"clip_order,omitempty"`

	// Privacy target (nvdp-clipped and gaussian, principled mode;
	// docs/training.md "Calibration"; for gaussian only C = CMu is
	// calibrated, the noise is fixed). With TargetEpsilon (at TargetDelta) or TargetRD (at
	// TargetOrder) > 0, the clipping constants that are not fixed (FixCMu,
	// FixLogvarMargin, FixCAlphaMin) are chosen by privacy.Calibrate when the
	// options are resolved, so that the certified guarantee of Releases
	// releases of one text meets the target; VarianceShare and DirichletShare
	// split the budget (privacy.Split; both 0: fixed noise, C_mu carries it).
	// The chosen constants are written into CMu, LogvarMargin and CAlphaMin
	// with Calibrated set, and the calibration into CertificateFile.
	TargetEpsilon  float64 `json:"target_epsilon,omitempty"`
	TargetDelta    float64 `json:"target_delta,omitempty"` // default privacy.DefaultDelta
	TargetRD       float64 `json:"target_rd,omitempty"`    // nats
	TargetOrder    float64 `json:"target_order,omitempty"` // Renyi order of TargetRD; default nvib.DefaultOrder
	Releases       int     `json:"releases,omitempty"`     // default 1
	VarianceShare  float64 `json:"variance_share,omitempty"`
	DirichletShare float64 `json:"dirichlet_share,omitempty"`
	// FixCMu, FixLogvarMargin and FixCAlphaMin keep CMu, LogvarMargin and
	// CAlphaMin (or their defaults) as given instead of calibrating them (the
	// CLI sets them for the flags given on the command line).
	FixCMu          bool `json:"fix_c_mu,omitempty"`
	FixLogvarMargin bool `json:"fix_logvar_margin,omitempty"`
	FixCAlphaMin    bool `json:"fix_c_alpha_min,omitempty"`
	// Calibrated records that CMu, LogvarMargin and CAlphaMin hold calibrated
	// constants: ModelConfig uses them as they are (a resumed run does not
	// calibrate again).
	Calibrated bool `json:"calibrated,omitempty"`
	// calibration is the calibration ModelConfig made (nil when none), written
	// to CertificateFile with the model directory.
	calibration *Certificate

	// ScratchConfig, when set, replaces the preset of a scratch: encoder (library use, tests).
	ScratchConfig *encoder.Config `json:"scratch_config,omitempty"`
	// StopAfterSteps stops the run after this many optimizer steps in total, with a
	// checkpoint (0: off); for tests of resumption and for time-boxed runs.
	StopAfterSteps int `json:"-"`
	// Quiet disables the progress bar.
	Quiet bool `json:"-"`
}

// TaskHyper are the paper's per-task clipping constants for BERT-base
// (appendix hyperparameter table): C_mu and C_amax.
var TaskHyper = map[string]struct{ CMu, CAlphaMax float64 }{
	"mrpc": {2, 0.5},
	"qnli": {7, 1},
	"sst2": {2, 1},
	"rte":  {6, 0.5},
	"stsb": {10, 1},
}

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

// Defaults fills the zero fields of o with the defaults for its task and
// backbone: variant nvdp-clipped, mode principled, lambda 1e-2, C_mu / C_amax
// from TaskHyper, KL schedule linear-decay, epochs 10, batch size 32 / eval
// 16, warm-up 0.06, weight decay 0, grad clip 1.0, max-seq-len 128, patience
// 3, checkpoint every 500 steps, learning rate DefaultLR* (by backbone and,
// for scratch encoders, by whether the variant releases); dropout: the
// preset's for scratch encoders, 0 for pretrained ones (ref §8).
func (o *Options) Defaults() {
	if o.Variant == "" {
		o.Variant = nvib.ModelNVDPClipped
	}
	if o.Mode == "" {
		o.Mode = privacy.ModePrincipled
	}
	if !o.LambdaSet && o.Lambda == 0 {
		o.Lambda = 1e-2
	}
	if h, ok := TaskHyper[strings.ToLower(strings.ReplaceAll(o.Task, "-", ""))]; ok {
		if o.CMu == 0 {
			o.CMu = h.CMu
		}
		if o.CAlphaMax == 0 {
			o.CAlphaMax = h.CAlphaMax
		}
	}
	if o.KLSchedule == "" {
		o.KLSchedule = nvib.ScheduleLinearDecay
	}
	if o.Epochs == 0 {
		o.Epochs = 10
	}
	if o.BatchSize == 0 {
		o.BatchSize = 32
	}
	if o.EvalBatchSize == 0 {
		o.EvalBatchSize = 16
	}
	if o.WarmupRatio == 0 {
		o.WarmupRatio = 0.06
	}
	if o.GradClip == 0 {
		o.GradClip = 1
	}
	if o.MaxSeqLen == 0 {
		o.MaxSeqLen = 128
	}
	if o.Patience == 0 {
		o.Patience = 3
	}
	if o.CheckpointEach == 0 {
		o.CheckpointEach = 500
	}
	scratch := strings.HasPrefix(o.Encoder, "scratch:")
	if o.LR == 0 {
		switch {
		case scratch && o.Variant != nvib.ModelBaseline:
			o.LR = DefaultLRScratchPrivate
		case scratch:
			o.LR = DefaultLRScratch
		case strings.Contains(strings.ToLower(o.Encoder), "roberta"):
			o.LR = DefaultLRRoberta
		default:
			o.LR = DefaultLRPretrained
		}
	}
	if o.Dropout == nil && !scratch {
		zero := 0.0
		o.Dropout = &zero
	}
	if o.HasTarget() {
		if o.Releases == 0 {
			o.Releases = 1
		}
		if o.TargetEpsilon > 0 && o.TargetDelta == 0 {
			o.TargetDelta = privacy.DefaultDelta
		}
		if o.TargetRD > 0 && o.TargetOrder == 0 {
			o.TargetOrder = nvib.DefaultOrder
		}
	}
}

// HasTarget reports whether o asks for calibrated clipping (a privacy target).
func (o *Options) HasTarget() bool { return o.TargetEpsilon > 0 || o.TargetRD > 0 }

// Validate checks the options after Defaults. Errors name the flag.
func (o *Options) Validate() error {
	if _, err := glue.LookupTask(o.Task); err != nil {
		return fmt.Errorf("--task: %w", err)
	}
	if o.GlueDir == "" {
		return fmt.Errorf("--glue-dir is required")
	}
	if o.Encoder == "" {
		return fmt.Errorf("--encoder is required (scratch:bert-tiny, scratch:bert-mini, hf:DIR or hf:owner/name)")
	}
	switch o.Variant {
	case nvib.ModelBaseline, nvib.ModelNVDP, nvib.ModelNVDPClipped, nvib.ModelGaussian:
	default:
		return fmt.Errorf("--variant %q: want baseline, nvdp, nvdp-clipped or gaussian", o.Variant)
	}
	if !o.Mode.Valid() || o.Mode == "" {
		return fmt.Errorf("--mode %q: want principled or reference", o.Mode)
	}
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	if o.Lambda < 0 || bad(o.Lambda) {
		return fmt.Errorf("--lambda %v: must be a finite number >= 0", o.Lambda)
	}
	if o.Variant == nvib.ModelNVDPClipped {
		if !(o.CMu > 0) || bad(o.CMu) {
			return fmt.Errorf("--c-mu %v: must be > 0", o.CMu)
		}
		if !(o.CAlphaMax > 0) || bad(o.CAlphaMax) {
			return fmt.Errorf("--c-alpha-max %v: must be > 0", o.CAlphaMax)
		}
		if o.CAlphaMin < 0 || o.CAlphaMin > o.CAlphaMax || bad(o.CAlphaMin) {
			return fmt.Errorf("--c-alpha-min %v: must be in [0, c-alpha-max = %v]", o.CAlphaMin, o.CAlphaMax)
		}
		if o.LogvarMargin < 0 || bad(o.LogvarMargin) {
			return fmt.Errorf("--logvar-margin %v: must be a finite number >= 0", o.LogvarMargin)
		}
	}
	if o.Variant == nvib.ModelGaussian {
		switch {
		case !(o.CMu > 0) || bad(o.CMu):
			return fmt.Errorf("--c-mu %v: the gaussian variant's token radius C must be > 0", o.CMu)
		case o.Mode.IsReference():
			return fmt.Errorf("--mode reference: the gaussian variant is principled only (it has no released-code counterpart)")
		case o.LogvarMargin != 0 || o.CAlphaMin != 0:
			return fmt.Errorf("--logvar-margin / --c-alpha-min: the gaussian variant has fixed noise (sigma = the prior sigma) and no Dirichlet weights")
		}
	}
	if err := o.validateTarget(); err != nil {
		return err
	}
	if o.Epochs < 1 {
		return fmt.Errorf("--epochs %d: must be >= 1", o.Epochs)
	}
	if o.BatchSize < 1 || o.EvalBatchSize < 1 {
		return fmt.Errorf("--batch-size %d / eval batch size %d: must be >= 1", o.BatchSize, o.EvalBatchSize)
	}
	if !(o.LR > 0) || bad(o.LR) {
		return fmt.Errorf("--lr %v: must be > 0", o.LR)
	}
	if o.WarmupRatio < 0 || o.WarmupRatio >= 1 {
		return fmt.Errorf("--warmup-ratio %v: must be in [0, 1)", o.WarmupRatio)
	}
	if o.WeightDecay < 0 || bad(o.WeightDecay) {
		return fmt.Errorf("--weight-decay %v: must be >= 0", o.WeightDecay)
	}
	if o.MaxSeqLen < 3 {
		return fmt.Errorf("--max-seq-len %d: must be >= 3 (room for the special tokens)", o.MaxSeqLen)
	}
	if o.TrainLimit < 0 || o.DevLimit < 0 {
		return fmt.Errorf("--train-limit %d / --dev-limit %d: must be >= 0", o.TrainLimit, o.DevLimit)
	}
	if o.Dropout != nil && (*o.Dropout < 0 || *o.Dropout >= 1 || bad(*o.Dropout)) {
		return fmt.Errorf("--dropout %v: must be in [0, 1)", *o.Dropout)
	}
	if o.KLWarmup < 0 || o.KLWarmup >= 1 {
		return fmt.Errorf("--kl-warmup %v: must be in [0, 1)", o.KLWarmup)
	}
	if o.Out == "" {
		return fmt.Errorf("--out is required")
	}
	return nil
}

// validateTarget checks the clip order and the privacy target (after Defaults).
func (o *Options) validateTarget() error {
	if o.ClipOrder != 0 && (!(o.ClipOrder > 1) || math.IsInf(o.ClipOrder, 0)) {
		return fmt.Errorf("--clip-order %v: the Renyi order must be finite and > 1", o.ClipOrder)
	}
	for _, f := range []struct {
		flag string
		v    float64
	}{{"--target-epsilon", o.TargetEpsilon}, {"--target-rd", o.TargetRD}, {"--variance-share", o.VarianceShare}, {"--dirichlet-share", o.DirichletShare}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s %v: must be a finite number >= 0", f.flag, f.v)
		}
	}
	if !o.HasTarget() {
		switch {
		case o.Releases > 1:
			return fmt.Errorf("--releases %d: needs a target (--target-epsilon or --target-rd)", o.Releases)
		case o.VarianceShare > 0 || o.DirichletShare > 0:
			return fmt.Errorf("--variance-share / --dirichlet-share: need a target (--target-epsilon or --target-rd)")
		}
		return nil
	}
	switch {
	case o.TargetEpsilon > 0 && o.TargetRD > 0:
		return fmt.Errorf("--target-epsilon %v and --target-rd %v: give one", o.TargetEpsilon, o.TargetRD)
	case !nvib.Calibratable(o.Variant):
		return fmt.Errorf("--target-epsilon / --target-rd: only the nvdp-clipped and gaussian variants can be calibrated (--variant %s has no clipping)", o.Variant)
	case o.Mode.IsReference():
		return fmt.Errorf("--target-epsilon / --target-rd: --mode reference clips without a sigma cap and with C_amin 0, so its certified bound is infinite; calibrate in principled mode")
	case o.Releases < 1:
		return fmt.Errorf("--releases %d: must be >= 1", o.Releases)
	case o.TargetEpsilon > 0 && !(o.TargetDelta > 0 && o.TargetDelta < 1):
		return fmt.Errorf("--delta %v: the target's delta must be in (0, 1)", o.TargetDelta)
	case o.TargetRD > 0 && (!(o.TargetOrder > 1) || math.IsInf(o.TargetOrder, 0)):
		return fmt.Errorf("--order %v: the target RD's Renyi order must be finite and > 1", o.TargetOrder)
	case o.VarianceShare+o.DirichletShare >= 1:
		return fmt.Errorf("--variance-share %v + --dirichlet-share %v: must sum to < 1 (the mean part gets the rest)", o.VarianceShare, o.DirichletShare)
	case o.FixCMu && o.FixLogvarMargin && o.FixCAlphaMin:
		return fmt.Errorf("--c-mu, --logvar-margin and --c-alpha-min are all given: nothing left to calibrate to the target")
	case o.Variant == nvib.ModelGaussian && o.FixCMu:
		return fmt.Errorf("--c-mu and a target: the gaussian variant's only constant is its radius C (--c-mu), which the target calibrates; give one")
	case o.Variant == nvib.ModelGaussian && (o.VarianceShare > 0 || o.DirichletShare > 0):
		return fmt.Errorf("--variance-share / --dirichlet-share: the gaussian variant has fixed noise and no Dirichlet weights; the radius C carries the whole budget")
	}
	return nil
}

// ModelConfig builds the nvib configuration of the run for an encoder of the
// given shape. With a privacy target not yet calibrated (HasTarget and not
// Calibrated) it calibrates the free clipping constants for N = MaxSeqLen+1
// components and P = the encoder's hidden size, writes them into o (CMu,
// LogvarMargin, CAlphaMin, Calibrated) and keeps the calibration for
// CertificateFile; a target that cannot be met is an error.
func (o *Options) ModelConfig(enc encoder.Config, numLabels int) (nvib.Config, error) {
	mode := o.Mode
	cfg := nvib.DefaultConfig(o.Variant, mode, enc.HiddenSize, enc.NumAttentionHeads, enc.IntermediateSize, numLabels)
	cfg.LayerNormEps = enc.LayerNormEps
	if enc.ModelType == "roberta" {
		cfg.Head = nvib.HeadFirstToken
	}
	cfg.LambdaG, cfg.LambdaD = o.Lambda, o.Lambda
	if !nvib.HasKL(o.Variant) {
		cfg.LambdaG, cfg.LambdaD = 0, 0 // no KL terms
	}
	cfg.KLSchedule, cfg.KLWarmup = o.KLSchedule, o.KLWarmup
	if o.NVIBInit != "" {
		cfg.Init = o.NVIBInit
	}
	cfg.Clip = nvib.DefaultClip(mode, o.CMu, o.CAlphaMax)
	if cfg.Clip.CMu == 0 { // nvdp without clipping: keep valid constants in the file
		cfg.Clip = nvib.DefaultClip(mode, 8, 1.5)
	}
	if o.ClipOrder > 0 && o.ClipOrder != cfg.Clip.Order {
		cfg.Clip.Order = o.ClipOrder
		if !mode.IsReference() {
			cfg.Clip.CAlphaMin = nvib.PrincipledAlphaMin(o.ClipOrder, cfg.Clip.CAlphaMax)
		}
	}
	if o.Variant != nvib.ModelGaussian { // gaussian reads Clip.CMu only: the rest keeps its defaults
		if o.CAlphaMin > 0 || o.Calibrated {
			cfg.Clip.CAlphaMin = o.CAlphaMin
		}
		if o.LogvarMargin > 0 || o.Calibrated {
			cfg.Clip.LogvarMargin = o.LogvarMargin
		}
	}
	cfg.Clip.Enabled = o.Variant == nvib.ModelNVDPClipped
	if o.Variant == nvib.ModelGaussian {
		cfg.ReleaseLen = o.MaxSeqLen // every one of the max-seq-len positions is released
	}
	if o.HasTarget() && !o.Calibrated {
		if err := o.calibrate(&cfg, o.MaxSeqLen+1, enc.HiddenSize); err != nil {
			return cfg, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// CertificateFile is the calibration record in a model directory of a run
// with a privacy target.
const CertificateFile = "certificate.json"

// Certificate is DIR/certificate.json: the privacy target, how the budget was
// split, the clipping constants chosen and the certified guarantee of the
// model's clipping (privacy.Calibration), with the constants as the model
// stores them.
type Certificate struct {
	Label string `json:"label"` // "certified"
	Scope string `json:"scope"`
	// Variant is the model variant ("gaussian": CMu is the token radius C,
	// the logvar range is [ln sigma^2, ln sigma^2] and the pseudo-counts are
	// nvib.GaussianAlpha; LogvarMargin and ClipOrder do not apply).
	Variant string `json:"variant,omitempty"`
	*privacy.Calibration
	Components   int     `json:"components"` // N = max-seq-len + 1 (prior component included)
	Dims         int     `json:"dims"`       // P = hidden size
	CMu          float64 `json:"c_mu"`
	LogvarMargin float64 `json:"logvar_margin"`
	ClipOrder    float64 `json:"clip_order"`
	LogvarFloor  float64 `json:"logvar_floor"` // the sigma range, derived from the margin and clip order
	LogvarCap    float64 `json:"logvar_cap"`
	CAlphaMin    float64 `json:"c_alpha_min"`
	CAlphaMax    float64 `json:"c_alpha_max"`
	PriorMu      float64 `json:"prior_mu"`
	PriorVar     float64 `json:"prior_var"`
	PriorAlpha   float64 `json:"prior_alpha"`
}

// Target returns the privacy target of o (after Defaults).
func (o *Options) Target() privacy.Target {
	return privacy.Target{Epsilon: o.TargetEpsilon, Delta: o.TargetDelta, RD: o.TargetRD, Order: o.TargetOrder, Releases: o.Releases}
}

// calibrate chooses the free clipping constants of cfg.Clip for the target
// of o and records them in cfg, o and o.calibration.
func (o *Options) calibrate(cfg *nvib.Config, n, p int) error {
	if cfg.Model == nvib.ModelGaussian {
		return o.calibrateGaussian(cfg, n, p)
	}
	base := cfg.Clip.ClipSet(cfg.Prior, n, p)
	sp := privacy.Split{VarianceShare: o.VarianceShare, DirichletShare: o.DirichletShare,
		FixCMu: o.FixCMu, FixMargin: o.FixLogvarMargin, FixAlphaMin: o.FixCAlphaMin}
	t := o.Target()
	cal, err := privacy.Calibrate(base, t, sp, nil, privacy.DirectionStandard)
	if err != nil {
		return fmt.Errorf("privacy target (N = %d components, P = %d dims): %w", n, p, err)
	}
	s := cal.Set
	cfg.Clip.CMu, cfg.Clip.LogvarMargin, cfg.Clip.CAlphaMin = s.CMu, s.LogvarMargin, s.AlphaMin
	o.CMu, o.LogvarMargin, o.CAlphaMin, o.Calibrated = s.CMu, s.LogvarMargin, s.AlphaMin, true
	floor, cap := cfg.Clip.LogvarBounds(cfg.Prior.Var)
	o.calibration = &Certificate{Label: privacy.LabelCertified,
		Scope:       privacy.CertifiedScope(t.Releases, n, p),
		Calibration: cal, Components: n, Dims: p, CMu: s.CMu, LogvarMargin: s.LogvarMargin, ClipOrder: cfg.Clip.Order,
		LogvarFloor: floor, LogvarCap: cap, CAlphaMin: s.AlphaMin, CAlphaMax: s.AlphaMax,
		PriorMu: cfg.Prior.Mu, PriorVar: cfg.Prior.Var, PriorAlpha: s.PriorAlpha}
	slog.Info("calibrated clipping to the privacy target", "target_epsilon", t.Epsilon, "target_rd", t.RD, "releases", t.Releases,
		"c_mu", s.CMu, "logvar_margin", s.LogvarMargin, "c_alpha_min", s.AlphaMin, "c_alpha_max", s.AlphaMax,
		"epsilon", float64(cal.Guarantee.Epsilon), "achieved", cal.Achieved)
	return nil
}

// calibrateGaussian chooses the radius C of a gaussian release for the
// target of o, with the same calibrator as nvdp-clipped on the release's
// clip set (nvib.GaussianClipSet: the logvar range and the pseudo-counts
// fixed, only C free, the fixed-noise design), and records it in
// cfg.Clip.CMu, o.CMu and o.calibration.
func (o *Options) calibrateGaussian(cfg *nvib.Config, n, p int) error {
	base := nvib.GaussianClipSet(cfg.Clip.CMu, cfg.Prior.Var, n-1, p)
	sp := privacy.Split{FixMargin: true, FixAlphaMin: true}
	t := o.Target()
	cal, err := privacy.Calibrate(base, t, sp, nil, privacy.DirectionStandard)
	if err != nil {
		return fmt.Errorf("privacy target (gaussian, N = %d components, P = %d dims): %w", n, p, err)
	}
	s := cal.Set
	cfg.Clip.CMu, o.CMu, o.Calibrated = s.CMu, s.CMu, true
	lv := s.LogvarFloor[0]
	o.calibration = &Certificate{Label: privacy.LabelCertified, Variant: nvib.ModelGaussian,
		Scope:       privacy.CertifiedScope(t.Releases, n, p),
		Calibration: cal, Components: n, Dims: p, CMu: s.CMu,
		LogvarFloor: lv, LogvarCap: lv, CAlphaMin: s.AlphaMin, CAlphaMax: s.AlphaMax,
		PriorMu: 0, PriorVar: cfg.Prior.Var, PriorAlpha: s.PriorAlpha}
	slog.Info("calibrated the gaussian release's radius to the privacy target", "target_epsilon", t.Epsilon, "target_rd", t.RD,
		"releases", t.Releases, "c", s.CMu, "sigma", math.Sqrt(cfg.Prior.Var), "positions", n-1,
		"epsilon", float64(cal.Guarantee.Epsilon), "achieved", cal.Achieved)
	return nil
}

// Calibration returns the certificate of the calibration ModelConfig made
// for o (nil when none was made in this process).
func (o *Options) Calibration() *Certificate { return o.calibration }

// SaveCertificate writes c to dir/certificate.json.
func SaveCertificate(dir string, c *Certificate) error {
	return atomicfile.WriteJSON(filepath.Join(dir, CertificateFile), c)
}

// LoadCertificate reads dir/certificate.json (written by runs with a privacy
// target). Errors: the file is missing or not a certificate.
func LoadCertificate(dir string) (*Certificate, error) {
	path := filepath.Join(dir, CertificateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Certificate
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// SaveOptions writes o as JSON to dir/train_options.json.
func SaveOptions(dir string, o *Options) error {
	return atomicfile.WriteJSON(filepath.Join(dir, OptionsFile), o)
}

// LoadOptions reads dir/train_options.json.
func LoadOptions(dir string) (*Options, error) {
	path := filepath.Join(dir, OptionsFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model dir %s: %w", dir, err)
	}
	o := &Options{}
	if err := json.Unmarshal(b, o); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}
