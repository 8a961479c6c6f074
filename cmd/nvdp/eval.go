package main

import (
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
)

// evalFlags are the flags of `nvdp eval`, bound to task.EvalOptions; the
// options left out take the model's (train.DefaultEvalOptions).
type evalFlags struct {
	model   string
	o       task.EvalOptions
	jsonOut bool
	dev     deviceFlags
}

func newEvalCmd() *cobra.Command {
	f := &evalFlags{}
	cmd := &cobra.Command{
		Use:   "eval --model DIR --split dev|test --out DIR",
		Short: "Evaluate a trained model: metrics, GLUE predictions and the posterior file for the audit",
		Long: `Run a model directory written by 'nvdp train' on a split: OUT/eval_<split>.json (metrics, and
the certified guarantee of an NVDP or gaussian model's release), the predictions and, for NVDP
and gaussian models (which sample, seeded by --seed), OUT/posteriors_<split>.safetensors for
'nvdp audit'. docs/training.md, "nvdp eval"; docs/speech.md, "Task: nvdp run --task lid".`,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.model, "model", "", "model directory written by nvdp train (required)")
	fs.StringVar(&f.o.Split, "split", "dev", "dev | test | train")
	fs.StringVar(&f.o.Out, "out", "", "output directory (default: the model directory)")
	fs.StringVar(&f.o.GlueDir, "glue-dir", "", "GLUE directory (default: the one the model was trained with)")
	fs.StringVar(&f.o.DataDir, "lid-dir", "", "speech models: the corpus (default: the one the model was trained with)")
	fs.Uint64Var(&f.o.Seed, "seed", train.DefaultEvalSeed, "seed of the NVDP sampling at evaluation")
	fs.IntVar(&f.o.BatchSize, "batch-size", 0, "evaluation batch size (default: the model's)")
	fs.IntVar(&f.o.Limit, "limit", 0, "use only the first K examples (0: all)")
	fs.IntVar(&f.o.MaxSeqLen, "max-seq-len", 0, "truncation and posterior padding length (default: the model's)")
	fs.BoolVar(&f.o.NoPost, "no-posteriors", false, "do not write the posterior file")
	fs.BoolVar(&f.o.SkipBadRows, "skip-bad-rows", false, "skip malformed TSV rows instead of failing")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as JSON on stdout")
	f.dev.bind(fs)
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

// run evaluates --model on --split (task.EvalDir) and prints the result;
// the options whose flags are left out keep the model's.
func (f *evalFlags) run(cmd *cobra.Command) error {
	if err := f.dev.check(); err != nil {
		return err
	}
	eo := f.o
	eo.Given = givenFlags(cmd)
	r, err := task.EvalDir(cmd.Context(), f.model, eo, f.dev.device, f.dev.open) // cancelled on SIGINT or SIGTERM (execute in main.go)
	if err != nil {
		return flagError(err)
	}
	return printResult(cmd.OutOrStdout(), f.jsonOut, r)
}
