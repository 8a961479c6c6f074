package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/speech"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// speechFlagValues are the flags of `nvdp train` and `nvdp run` that only
// the speech task (--task lid, package speech) reads.
type speechFlagValues struct {
	dataDir    string
	maxSeconds float64
}

func speechFlags(fs *pflag.FlagSet, v *speechFlagValues) {
	fs.StringVar(&v.dataDir, "lid-dir", os.Getenv("NVDP_LID_DIR"), "--task lid: the corpus in CommonLanguage's layout (the synthetic stand-in of scripts/make-lid-corpus.sh, or common_voice_kpd; default $NVDP_LID_DIR)")
	fs.Float64Var(&v.maxSeconds, "max-seconds", speech.DefaultMaxSeconds, "--task lid: every utterance is cropped or zero-padded to this many seconds, so every release has the same frames F + 1 components (docs/speech.md)")
}

// speechOptions builds the speech options of a `--task lid` command from
// its flags: the text task's options (train.Options) as given, with the
// speech task's defaults for the flags left out (encoder scratch:small,
// lambda by variant, warm-up 0.1). --max-seq-len does not apply: the
// frames follow from --max-seconds.
func speechOptions(cmd *cobra.Command, v *speechFlagValues, t train.Options) (speech.Options, error) {
	fs := cmd.Flags()
	o := speech.DefaultOptions()
	def := o.Train
	o.DataDir, o.MaxSeconds, o.Train = v.dataDir, v.maxSeconds, t
	if fs.Changed("max-seq-len") {
		return o, errors.New("--max-seq-len is the text tasks' length: for --task lid, --max-seconds fixes the frames")
	}
	if !fs.Changed("encoder") {
		o.Train.Encoder = def.Encoder
	}
	if !fs.Changed("lambda") {
		o.Train.Lambda = def.Lambda
	}
	if !fs.Changed("warmup-ratio") {
		o.Train.WarmupRatio = def.WarmupRatio
	}
	o.Train.GlueDir, o.Train.Vocab = "", ""
	return o, nil
}

// checkSpeechOptions resolves and validates o before any work (errors name
// the flags); a resume reads the saved options instead.
func checkSpeechOptions(o *speech.Options) error {
	if o.Train.Resume {
		return nil
	}
	return flagError(o.Check())
}

// runSpeech is `nvdp run --task lid`.
func runSpeech(ctx context.Context, cmd *cobra.Command, v *speechFlagValues, po *train.PipelineOptions, report progress.Func) (*train.Report, error) {
	o, err := speechOptions(cmd, v, po.Train)
	if err != nil {
		return nil, err
	}
	if !po.SkipTrain {
		if err := checkSpeechOptions(&o); err != nil {
			return nil, err
		}
	}
	if po.Baseline != "" {
		return nil, errors.New("--baseline is for the GLUE tasks; run --variant baseline of --task lid beside it")
	}
	rep, err := speech.RunPipeline(ctx, speech.NewPipelineOptions(o, *po), report)
	return rep, flagError(err)
}

// trainSpeech is `nvdp train --task lid`.
func trainSpeech(ctx context.Context, cmd *cobra.Command, v *speechFlagValues, t *train.Options, report progress.Func) (*train.Result, error) {
	o, err := speechOptions(cmd, v, *t)
	if err != nil {
		return nil, err
	}
	if err := checkSpeechOptions(&o); err != nil {
		return nil, err
	}
	r, err := speech.Run(ctx, o, report)
	return r, flagError(err)
}

// evalSpeech is `nvdp eval` of a speech model directory.
func evalSpeech(cmd *cobra.Command, f *evalFlags) (*train.EvalResult, error) {
	m, o, err := speech.LoadModel(f.model)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	fs := cmd.Flags()
	if fs.Changed("lid-dir") {
		o.DataDir = f.lidDir
	}
	for _, name := range []string{"glue-dir", "max-seq-len", "skip-bad-rows"} {
		if fs.Changed(name) {
			return nil, fmt.Errorf("--%s does not apply to a speech model (%s)", name, f.model)
		}
	}
	eo := speech.EvalOptions{Split: f.split, Limit: f.limit, BatchSize: o.Train.EvalBatchSize, Seed: f.seed, Out: f.out, NoPost: f.noPost}
	if fs.Changed("batch-size") {
		eo.BatchSize = f.batchSize
	}
	ctx := cmd.Context() // nvdp eval catches no signal: one ends it at once
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := speech.Evaluate(ctx, f.model, m, o, eo)
	return r, flagError(err)
}
