package model

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/memlimit"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
)

// OptionError is an invalid option. It is [option.Error], the type every
// options type of nvdp returns; Option is the JSON key as train_options.json
// spells it, such as "c_mu". Programs map Option to their own names, as the
// CLI does to its flags.
type OptionError = option.Error

func optionError(name string, value any, format string, args ...any) error {
	return option.Errorf(name, value, format, args...)
}

// Validate checks resolved options; call [Options.Resolve] first. It checks
// every option in its range, every float option finite, the constants of the
// variant, and the privacy target: a clipped variant in principled mode needs
// a target or HandSetClipping, not both, as docs/privacy.md says in "A
// guarantee by default". It reads no file; [Options.CheckFiles] does. Its
// errors are [*OptionError].
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

// ValidateTraining checks every resolved option except the text task's data
// and encoder, that is task, glue_dir, encoder and vocab. It checks the
// variant, mode, clipping, privacy target, latent width, schedule and
// optimiser options that a trainer of another modality shares, such as
// package speech, whose encoder and data are its own. [Options.Validate]
// calls it. Its errors are [*OptionError].
func (o *Options) ValidateTraining() error {
	if err := o.RunTime.Validate(); err != nil {
		return err
	}
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

// Validate checks the run-time choices: StopAfterSteps >= 0, where 0 means
// do not stop. [Options.ValidateTraining] calls it. Its errors are
// [*OptionError] for stop_after_steps.
func (r RunTime) Validate() error {
	if r.StopAfterSteps < 0 {
		return optionError("stop_after_steps", r.StopAfterSteps, "must be >= 0 (0: do not stop)")
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
		if f := t.Field(i); f.Type == reflect.TypeFor[*float64]() && !targetKeys[f.Tag.Get("json")] {
			m[f.Tag.Get("json")] = true
		}
	}
	return m
}()

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

// oneOf checks that the string option is one of allowed.
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
	return memlimit.Need{What: fmt.Sprintf("training the layers at the release's width P = %d (parameters, gradients, AdamW moments)", *o.LatentDim),
		Bytes: latentBytes(*o.LatentDim, enc), Limit: MaxLatentBytes, Of: "the training may hold for them", Option: "latent_dim", Value: *o.LatentDim}.Check()
}

// MaxLatentBytes bounds the memory, in float32, of the layers whose width is
// the release's P, latent_dim: their parameters, gradients and two AdamW
// moments. A wider P is refused before anything is allocated.
const MaxLatentBytes = 1 << 36

// latentBytes is the memory of the float32 layers at width P of a model
// on encoder enc, as training holds it (parameters, gradients and two AdamW
// moments: 4 copies): the NVIB projections from the hidden size H
// (at most 4 H P), the NVDP block at P (attention 4 P^2, its feed-forward
// 2 P I P/H, nvib.Config.BlockIntermediate) and the head (P^2). An upper
// estimate, for a refusal before allocation.
func latentBytes(P int, enc encoder.Config) float64 {
	p, h := float64(P), float64(max(enc.HiddenSize, 1))
	inter := float64(enc.IntermediateSize) * p / h
	return 4 * 4 * (4*h*p + 4*p*p + 2*p*inter + p*p)
}

// CheckTargetValues checks the target values alone, as [Options.Validate]
// does: each of TargetEpsilon and TargetRD is [NoTarget] or a finite number
// > 0, where 0 is an error and never "no target", and not both are given. It
// is for a program that checks a target before the rest of the options are
// known, as for a sweep's base options. Its errors are [*OptionError] naming
// target_epsilon or target_rd.
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
	case epsilon && privacy.CheckDelta(o.TargetDelta) != nil:
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
// GlueDir is a directory with the task's train and dev splits, and Vocab,
// when given, exists. Its errors name the path.
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
				return NoTrainSplit(task, err)
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

// NoTrainSplit returns the error of a task whose GLUE directory has no
// training split, as QNLI's distributed files have none. Such a model is
// trained on another copy of the data and only evaluated here, by
// train.Evaluate.
func NoTrainSplit(t *glue.Task, err error) error {
	return fmt.Errorf("task %s has no training split in this GLUE directory (%w): train it on a copy that has one and evaluate the model here", t.Name, err)
}
