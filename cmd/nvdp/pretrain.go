package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/mlm"
	"github.com/spf13/cobra"
)

// pretrainFlags are the flags of `nvdp pretrain`: the pretraining options
// and the session's.
type pretrainFlags struct {
	o                   *mlm.Options
	noProgress, jsonOut bool
}

func newPretrainCmd() *cobra.Command {
	pf := &pretrainFlags{o: new(mlm.DefaultOptions())}
	o := pf.o
	cmd := &cobra.Command{
		Use:   "pretrain --corpus FILE_OR_DIR --config bert-tiny|bert-mini --vocab FILE --steps N --out DIR",
		Short: "Pretrain a BERT encoder with masked-language modelling on your own text",
		Long: `Pretrain a BERT encoder with the masked-language-model objective (BERT §3.1), from scratch or
from a checkpoint (--init-from). --corpus is a text file, a directory of .txt files, or glue:DIR;
--out receives a Hugging Face BertForMaskedLM directory that --encoder hf:DIR loads, with its
metrics and a checkpoint (--resume; Ctrl-C or SIGTERM stops after the current step with a
checkpoint). docs/pretraining.md.`,
		Example: `  nvdp pretrain --corpus glue:../shared/data/glue --config bert-mini \
    --vocab ../shared/models/bert-base-uncased-vocab/vocab.txt --steps 2000 --out runs/mini-mlm
  nvdp train --task rte --encoder hf:runs/mini-mlm ...`,
		RunE: func(cmd *cobra.Command, args []string) error { return pf.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.Corpus, "corpus", o.Corpus, "text file, directory of .txt files, or GLUE directory (glue:DIR); GLUE dev is never used")
	f.StringVar(&o.Config, "config", o.Config, "model preset ("+strings.Join(encoder.PresetNames(), ", ")+") or a config.json path")
	f.StringVar(&o.InitFrom, "init-from", "", "continue pretraining from a checkpoint: hf:DIR or hf:owner/name (downloaded); its config and, unless --vocab, its tokenizer")
	f.StringVar(&o.Vocab, "vocab", os.Getenv("NVDP_VOCAB"), "WordPiece vocabulary (vocab.txt, tokenizer.json or a directory; $NVDP_VOCAB)")
	f.IntVar(&o.Seq, "seq", o.Seq, fmt.Sprintf("maximum sequence length in tokens (>= %d)", mlm.MinSeq))
	f.IntVar(&o.BatchSize, "batch-size", o.BatchSize, "sequences per optimizer step")
	f.IntVar(&o.Steps, "steps", o.Steps, "optimizer steps (required)")
	f.StringVar(&o.Out, "out", o.Out, "output directory (required)")
	f.Float64Var(&o.LR, "lr", o.LR, "peak learning rate")
	optimizerFlags(f, &o.WarmupRatio, &o.WeightDecay, &o.GradClip)
	f.Float64Var(&o.MaskProb, "mask-prob", o.MaskProb, "fraction of tokens predicted")
	f.BoolVar(&o.WholeWord, "whole-word", o.WholeWord, "whole-word masking (all WordPiece pieces of a chosen word)")
	f.BoolVar(&o.NoPack, "no-pack", o.NoPack, "one line per sequence instead of packing consecutive lines")
	autoIntVar(f, &o.Holdout, "holdout", "held-out documents for evaluation (auto: 1% of the documents, at least min(100, 10%) and 1)")
	f.IntVar(&o.MaxEvalSeqs, "max-eval-seqs", o.MaxEvalSeqs, "evaluate at most this many held-out sequences")
	autoFloatVar(f, &o.Dropout, "dropout", "hidden and attention dropout (auto: the config's, 0.1 for the presets)")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of initialisation, held-out split, data order, masking and dropout")
	f.IntVar(&o.SaveEvery, "save-every", o.SaveEvery, "checkpoint (and export the model) every K steps (0: only when the run ends or stops)")
	autoIntVar(f, &o.EvalEvery, "eval-every", "evaluate the held-out slice every K steps (auto: steps/20; 0: only when the run ends or stops)")
	f.BoolVar(&o.Resume, "resume", o.Resume, "continue the run in --out from its checkpoint with the saved options (--steps, --save-every, --eval-every may change)")
	f.IntVar(&o.StopAfterSteps, "stop-after-steps", o.StopAfterSteps, "stop with a checkpoint after K steps in total (resumable)")
	f.BoolVar(&pf.noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	f.BoolVar(&pf.jsonOut, "json", false, "print the summary as JSON on stdout")
	return cmd
}

// run checks the options, pretrains and prints the summary.
func (pf *pretrainFlags) run(cmd *cobra.Command) error {
	report := newProgress(cmd, pf.noProgress)
	run, err := mlm.Requested(*pf.o, givenFlags(cmd))
	if err != nil {
		return flagError(err)
	}
	c, err := mlm.Prepare(run, report)
	if _, ok := err.(*mlm.InitFromError); ok {
		return fmt.Errorf("--init-from %w", err)
	}
	hint := "nvdp pretrain --resume --out " + pf.o.Out
	if err != nil {
		return resumeHint(flagError(err), hint)
	}
	ctx, cancel := signalContext(cmd, stopTraining)
	defer cancel()
	r, err := c.Run(ctx, report)
	if err != nil {
		return resumeHint(flagError(err), hint)
	}
	return printResult(cmd.OutOrStdout(), pf.jsonOut, r)
}
