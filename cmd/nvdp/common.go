package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/loop"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// trainFlags binds the flags of `nvdp train`, `run` and `sweep` to o, which
// holds model.DefaultOptions(): --help shows the real defaults ("auto" where
// model.Options.Resolve derives one), and an explicit value, 0 included, is
// what the run uses (model.Options.Validate rejects the meaningless ones).
func trainFlags(fs *pflag.FlagSet, o *model.Options, noProgress *bool) {
	fs.StringVar(&o.Task, "task", o.Task, "GLUE task: sst2, mrpc, rte, stsb, qnli; or lid, spoken language identification (--lid-dir) (required)")
	fs.StringVar(&o.GlueDir, "glue-dir", os.Getenv("NVDP_GLUE_DIR"), "GLUE directory with <TASK>/{train,dev,test}.tsv (default $NVDP_GLUE_DIR)")
	fs.StringVar(&o.Encoder, "encoder", o.Encoder, "encoder: scratch:bert-tiny|scratch:bert-mini|hf:DIR|hf:owner/name")
	fs.StringVar(&o.Vocab, "vocab", os.Getenv("NVDP_VOCAB"), "tokenizer file or directory (default: the encoder directory's; required for scratch encoders; $NVDP_VOCAB)")
	fs.StringVar(&o.Variant, "variant", o.Variant, "baseline | nvdp | nvdp-clipped | gaussian (Gaussian-mechanism baseline: each token embedding clipped to radius --c-mu plus N(0, prior var) noise, docs/model.md)")
	fs.StringVar((*string)(&o.Mode), "mode", string(o.Mode), "principled | reference (model and clipping behaviour, docs/model.md)")
	fs.Float64Var(&o.Lambda, "lambda", o.Lambda, "lambda_G = lambda_D, weight of the KL regularisers (>= 0; 0: none)")
	autoFloatVar(fs, &o.CMu, "c-mu", "C_mu, radius of the mean ball; for --variant gaussian the radius C of each token embedding (auto: per task, paper table: "+model.PaperClips(func(h glue.Clip) float64 { return h.CMu })+")")
	autoFloatVar(fs, &o.CAlphaMax, "c-alpha-max", "C_amax, largest pseudo-count (auto: per task: "+model.PaperClips(func(h glue.Clip) float64 { return h.CAlphaMax })+")")
	autoFloatVar(fs, &o.CAlphaMin, "c-alpha-min", "C_amin, smallest pseudo-count (auto: principled (lambda-1)/lambda C_amax (1+1e-3); reference 0)")
	autoFloatVar(fs, &o.LogvarMargin, "logvar-margin", fmt.Sprintf("nats added to the logvar floor ln((lambda-1)/lambda prior_var) (auto: principled %g, reference 0); larger is a tighter worst-case bound", nvib.DefaultLogvarMargin))
	fs.StringVar(&o.KLSchedule, "kl-schedule", o.KLSchedule, "KL weight schedule s(t): linear-decay (reference) | constant | warmup | warmup-decay")
	fs.StringVar(&o.NVIBInit, "nvib-init", o.NVIBInit, "NVIB initialisation: hf (released code) | nvib (intended) | clip (inside the clipping region); default: the mode's, docs/model.md")
	fs.Var(textFlag[*int]{&o.LatentDim, "int", option.ParseIntPtr, option.FormatIntPtr}, "latent-dim", "P, the width of the release: the NVIB posterior (or the gaussian release) projects the encoder output to P dims, the NVDP block and head run at P (auto: the encoder's hidden size; divisible by its attention heads; principled mode; docs/model.md)")
	fs.StringVar(&o.HeadReads, "head-reads", o.HeadReads, "what the head pools: block (the NVDP block's output; default) | release (the mean of the released token rows, no block; principled, a variant with a release; docs/model.md)")
	fs.BoolVar(&o.LogSteps, "log-steps", false, "append each optimizer step's training loss to "+train.StepsFile+" in --out (comparisons step by step, e.g. of --device cpu and cuda)")
	fs.Var(textFlag[*model.RadiusSchedule]{&o.RadiusSchedule, "start:fraction", model.ParseRadiusSchedule, model.FormatRadiusSchedule}, "radius-schedule", "START:FRACTION: train with the clip radius START x C_mu at the first step, shrinking linearly to C_mu over FRACTION of the steps (nvdp-clipped, gaussian; evaluation and the certificate use C_mu; default off; docs/training.md)")
	fs.Float64Var(&o.KLWarmup, "kl-warmup", o.KLWarmup, "warm-up fraction of the KL schedule (warmup, warmup-decay)")
	fs.IntVar(&o.Epochs, "epochs", o.Epochs, "maximum epochs (>= 1; early stopping may end sooner)")
	fs.IntVar(&o.BatchSize, "batch-size", o.BatchSize, "training batch size (last partial batch dropped)")
	fs.IntVar(&o.EvalBatchSize, "eval-batch-size", o.EvalBatchSize, "evaluation batch size")
	autoFloatVar(fs, &o.LR, "lr", fmt.Sprintf("peak learning rate (auto: %g for scratch encoders trained through a release, %g for the scratch baseline, %g pretrained BERT, %g RoBERTa)",
		model.DefaultLRScratchPrivate, model.DefaultLRScratch, model.DefaultLRPretrained, model.DefaultLRRoberta))
	optimizerFlags(fs, &o.WarmupRatio, &o.WeightDecay, &o.GradClip)
	fs.IntVar(&o.MaxSeqLen, "max-seq-len", o.MaxSeqLen, "maximum tokens per example; posterior files have max-seq-len + 1 components")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of initialisation, data order, dropout and NVDP sampling")
	fs.IntVar(&o.TrainLimit, "train-limit", o.TrainLimit, "use only the first K training rows (0: all)")
	fs.IntVar(&o.DevLimit, "dev-limit", o.DevLimit, "use only the first K dev rows (0: all)")
	fs.IntVar(&o.Patience, "patience", o.Patience, "early stopping: epochs without dev improvement (0: off)")
	fs.IntVar(&o.CheckpointEach, "checkpoint-every", o.CheckpointEach, "also checkpoint every K optimizer steps (0: at epoch ends only, where there always is one)")
	autoFloatVar(fs, &o.Dropout, "dropout", "encoder hidden and attention dropout (auto: the preset's 0.1 for scratch encoders, 0 for pretrained)")
	fs.BoolVar(&o.SkipBadRows, "skip-bad-rows", o.SkipBadRows, "skip malformed TSV rows (counted) instead of failing")
	fs.StringVar(&o.Out, "out", o.Out, "output / model directory (required)")
	fs.BoolVar(&o.Resume, "resume", o.Resume, "continue the run in --out from its last checkpoint (saved options are used)")
	fs.IntVar(&o.StopAfterSteps, "stop-after-steps", o.StopAfterSteps, "stop (with a checkpoint, resumable) after K optimizer steps in total")
	fs.BoolVar(noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	fs.Float64Var(&o.ClipOrder, "clip-order", o.ClipOrder, "Renyi order the sigma floor and the default C_amin are derived for (the paper's)")
	targetVar(fs, &o.TargetEpsilon, "target-epsilon", "calibrate the clipping (nvdp-clipped; gaussian: its radius C) so that the certified epsilon at --delta is this, > 0; a clipped variant needs a target or --hand-set-clipping (docs/training.md)")
	fs.BoolVar(&o.HandSetClipping, "hand-set-clipping", o.HandSetClipping, "train a clipped variant with the given (or the paper's per-task) clipping constants and no target: its certified epsilon is whatever they give (the paper's: thousands)")
	targetVar(fs, &o.TargetRD, "target-rd", "calibrate the clipping (nvdp-clipped; gaussian: its radius C) so that the certified RD at --order is this many nats, > 0 (none: no target)")
	fs.IntVar(&o.Releases, "releases", o.Releases, "releases of one text the target covers (RDP adds up)")
	fs.Float64Var(&o.VarianceShare, "variance-share", o.VarianceShare, "share of the target RD given to the variance part (logvar margin); 0: fixed sigma")
	fs.Float64Var(&o.DirichletShare, "dirichlet-share", o.DirichletShare, "share of the target RD given to the Dirichlet part (C_amin); 0: C_amin = C_amax")
}

// optimizerFlags binds the optimizer options internal/loop gives every
// trainer (train, run, sweep and pretrain), with one meaning each.
func optimizerFlags(fs *pflag.FlagSet, warmupRatio, weightDecay, gradClip *float64) {
	fs.Float64Var(warmupRatio, "warmup-ratio", *warmupRatio, "linear learning-rate warm-up fraction of all steps")
	fs.Float64Var(weightDecay, "weight-decay", *weightDecay, "AdamW decoupled weight decay (not on biases and LayerNorm)")
	fs.Float64Var(gradClip, "grad-clip", *gradClip, "gradient clipping by global L2 norm (0: off)")
}

// textFlag is the flag value of an option whose text form is a library's
// (option.ParseFloat, ParseCount, model.ParseRadiusSchedule, ...): "auto",
// "none" or "off" for its sentinel, every other value left to the options'
// Validate. typ is the type --help shows.
type textFlag[T any] struct {
	p      *T
	typ    string
	parse  func(string) (T, error)
	format func(T) string
}

func (f textFlag[T]) String() string { return f.format(*f.p) }

func (f textFlag[T]) Set(s string) error {
	v, err := f.parse(s)
	if err == nil {
		*f.p = v
	}
	return err
}

func (f textFlag[T]) Type() string { return f.typ }

// show writes v, a value of the flag's option, as the flag writes its own
// (flagText); false when v is not of its type.
func (f textFlag[T]) show(v any) (string, bool) {
	x, ok := v.(T)
	return f.format(x), ok
}

// floatOr is the flag value of a float option whose NaN sentinel
// (option.Auto, model.NoTarget) is word; want is what its error says a
// value must be.
func floatOr(p *float64, word string, finite bool, want string) textFlag[float64] {
	parse := func(s string) (float64, error) {
		if v, ok := option.ParseFloat(s, word, finite); ok {
			return v, nil
		}
		return 0, fmt.Errorf("%q is %s", s, want)
	}
	return textFlag[float64]{p, "float", parse, func(v float64) string { return option.FormatFloat(v, word) }}
}

// autoFloatVar binds an option that may be option.Auto: "auto" or a finite number.
func autoFloatVar(fs *pflag.FlagSet, p *float64, name, usage string) {
	fs.Var(floatOr(p, "auto", true, "neither a finite number nor auto"), name, usage)
}

// targetValue is the flag value of a privacy target: "none"
// (model.NoTarget, the default) or a number.
func targetValue(p *float64) textFlag[float64] {
	return floatOr(p, "none", false, "neither a number nor none")
}

func targetVar(fs *pflag.FlagSet, p *float64, name, usage string) {
	fs.Var(targetValue(p), name, usage)
}

// budgetVar binds a budget: a number, "inf" for no limit, or "none"
// (option.Auto, the default when the flag is not given).
func budgetVar(fs *pflag.FlagSet, p *float64, name, usage string) {
	fs.Var(floatOr(p, "none", false, "not a number, inf or none"), name, usage)
}

// autoIntVar binds a count that may be option.AutoInt: "auto" or a count >= 0.
func autoIntVar(fs *pflag.FlagSet, p *int, name, usage string) {
	fs.Var(textFlag[int]{p, "int", option.ParseCount, option.FormatCount}, name, usage)
}

// optionFlags names the flags of the options whose flag is not their JSON
// key with dashes (option.Error.Option).
var optionFlags = map[string]string{"target_delta": "delta", "target_order": "order", "target": "target-epsilon / --target-rd",
	"data_dir": "lid-dir", "radius_schedule.start": "radius-schedule", "radius_schedule.fraction": "radius-schedule",
	"allow_unproved": "allow-unproved-release"}

// optionFlag is the flag that sets option, a JSON key.
func optionFlag(option string) string {
	if f, ok := optionFlags[option]; ok {
		return f
	}
	return strings.ReplaceAll(option, "_", "-")
}

// flagError says a library error about options in the CLI's terms: an
// *option.Error itself (not one wrapped in an error about a file) becomes
// "--flag value: reason", the options it mentions named as flags too, and
// an *option.CombinationError names its options as flags; other errors pass
// unchanged.
func flagError(err error) error {
	toFlag := func(o string) string { return "--" + optionFlag(o) }
	switch e := err.(type) {
	case *option.Error:
		return fmt.Errorf("--%s%s: %s", optionFlag(e.Option), option.FormatValue(e.Value), e.ReasonWith(toFlag))
	case *option.CombinationError:
		return errors.New(e.With(toFlag))
	}
	return err
}

// signalContext is the context of a long command, which SIGINT and SIGTERM
// cancel so that it stops gracefully (training after the step, with a
// checkpoint); stopping says how, logged when a signal arrives. Once it is
// cancelled the signals are let go: a second one ends the process at once.
func signalContext(cmd *cobra.Command, stopping string) (context.Context, context.CancelFunc) {
	gracefulStop.Store(true) // execute lets the command finish stopping
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
		if cause := context.Cause(ctx); cause != context.Canceled {
			slog.Warn("stopping: "+stopping+" (signal again to end at once)", "cause", cause)
		}
	}()
	return ctx, stop
}

// stopTraining is what a training command does on a signal.
const stopTraining = "ending the current stage (loading data stops at once; a training step finishes and writes a checkpoint)"

// resumeHint adds to a training command's error what the user does next:
// continueWith after a stop (loop.Interrupted), or --resume's part.
func resumeHint(err error, continueWith string) error {
	var stopped *loop.Interrupted
	switch {
	case errors.As(err, &stopped):
		return fmt.Errorf("%w\ncontinue with: %s", err, continueWith)
	case errors.Is(err, loop.ErrRunExists):
		return fmt.Errorf("%w (--resume continues it)", err)
	case errors.Is(err, loop.ErrNoCheckpoint):
		return fmt.Errorf("--resume: %w", err)
	}
	return err
}

// auditStrings is --bdp-orders, parsed after cobra has run, in `nvdp
// audit`, `nvdp run` and `nvdp sweep`.
type auditStrings struct{ bdpOrders string }

// apply sets o's BDP orders from --bdp-orders and checks the flags given
// (audit.Options.CheckGiven: an explicit --q 0).
func (a auditStrings) apply(o *audit.Options, given option.Given) error {
	orders, err := parseFloatList("--bdp-orders", a.bdpOrders)
	if err != nil {
		return err
	}
	o.BDPOrders = orders
	return flagError(o.CheckGiven(given))
}

// pipelineAuditFlags binds the audit options of `nvdp run` and `sweep` to
// po; call finish in RunE.
func pipelineAuditFlags(fs *pflag.FlagSet, po *train.PipelineOptions) *auditStrings {
	a := &auditStrings{}
	fs.StringVar(&po.AuditSplit, "audit-split", po.AuditSplit, "split whose posteriors are audited: dev | test")
	fs.IntVar(&po.AuditLimit, "audit-limit", po.AuditLimit, "audit only the first K examples of the audit split (0: all)")
	fs.Uint64Var(&po.EvalSeed, "eval-seed", po.EvalSeed, "seed of the NVDP sampling at evaluation")
	fs.StringVar((*string)(&po.Audit.Mode), "audit-mode", "", "audit mode: principled | reference (default: --mode)")
	fs.Float64Var(&po.Audit.Order, "order", po.Audit.Order, "Renyi order lambda > 1 of the RD bound (the audit's, and --target-rd's)")
	fs.Float64Var(&po.Audit.Delta, "delta", po.Audit.Delta, "BDP delta_mu (also the delta of --target-epsilon)")
	fs.BoolVar(&po.Audit.UseMask, "mask", false, "principled audit: drop padding components (treats the length as public)")
	fs.IntVar(&po.Audit.Pairs, "pairs", 0, "principled audit: a uniform sample of K ordered pairs instead of all")
	fs.Uint64Var(&po.Audit.Seed, "audit-seed", po.Audit.Seed, "seed of the --pairs sample")
	fs.StringVar(&a.bdpOrders, "bdp-orders", option.FormatFloats(audit.DefaultBDPOrders), "comma-separated BDP moment orders l > 0")
	fs.Float64Var(&po.Audit.Confidence, "confidence", po.Audit.Confidence, "confidence of the Student-t upper bound")
	fs.StringVar((*string)(&po.Audit.Direction), "gaussian-direction", "", "principled audit: Gaussian term D(N_q||N_q') in the bound's direction (standard, default) or as printed in Eq. rdp (paper)")
	fs.IntVar(&po.Audit.BatchSize, "audit-batch-size", po.Audit.BatchSize, "reference audit: batch size")
	fs.Float64Var(&po.Audit.Q, "q", 0, "reference audit: accountant sampling ratio (default batch size / M)")
	fs.IntVar(&po.Audit.Workers, "workers", 0, "audit worker goroutines (default GOMAXPROCS)")
	return a
}

// finish parses the BDP orders, then resolves and validates the audit
// options before any work (train.PipelineOptions.ResolveAudit).
func (a *auditStrings) finish(cmd *cobra.Command, po *train.PipelineOptions) error {
	if err := a.apply(&po.Audit, givenFlags(cmd)); err != nil {
		return err
	}
	return flagError(po.ResolveAudit())
}

// requiredFlagCmd gives cmd the string flag name (required; usage) and
// runs run with its value, or fails with "--name: required" without it.
func requiredFlagCmd(cmd *cobra.Command, name, usage string, run func(cmd *cobra.Command, v string) error) *cobra.Command {
	var v string
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if v == "" {
			return fmt.Errorf("--%s: required", name)
		}
		return run(cmd, v)
	}
	cmd.Flags().StringVar(&v, name, "", usage)
	return cmd
}

// printResult prints r, a command's result, on w: as one line of JSON with
// --json (jsonOut), else as its text.
func printResult(w io.Writer, jsonOut bool, r interface{ WriteText(io.Writer) }) error {
	if jsonOut {
		return json.NewEncoder(w).Encode(r)
	}
	r.WriteText(w)
	return nil
}

// printJSON writes v to w as one indented JSON object.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseInto parses the comma-separated value s of flag into *to with parse
// (option.ParseList, ...), unless s is empty and optional.
func parseInto[T any](to *[]T, flag, s string, optional bool, parse func(s string) ([]T, error)) error {
	if s == "" && optional {
		return nil
	}
	v, err := parse(s)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	*to = v
	return nil
}

func parseFloatList(flag, s string) ([]float64, error) {
	var v []float64
	return v, parseInto(&v, flag, s, false, option.ParseFloats)
}
