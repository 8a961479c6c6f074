package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/mlm"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// pretrainFlags are the flags of `nvdp pretrain`: the pretraining options,
// --init-from and the session's.
type pretrainFlags struct {
	o                   *mlm.Options
	initFrom            string
	noProgress, jsonOut bool
}

// pretrainLong is the Long help of `nvdp pretrain`.
const pretrainLong = `Pretrain a BERT encoder (from scratch, or from a checkpoint with --init-from) with the
masked-language-model objective (BERT §3.1): a fraction --mask-prob of the tokens predicted
(80% [MASK], 10% random token, 10% unchanged; --whole-word masks all pieces of a word),
consecutive lines packed into [CLS] A [SEP] B [SEP] sequences of up to --seq tokens, AdamW
with linear warm-up and decay, gradient clipping (--grad-clip).

--corpus is a text file (one sentence or document per line; blank lines separate documents),
a directory of .txt files, or a GLUE directory (glue:DIR, or auto-detected) whose train and
test sentences become the corpus (dev is never read). Duplicate lines are dropped and a
held-out slice of documents (--holdout, auto: 1%) measures MLM loss and masked-token accuracy.

--out receives a Hugging Face BertForMaskedLM directory (config.json, model.safetensors,
vocab.txt) that --encoder hf:DIR loads, plus pretrain_metrics.jsonl, pretrain_summary.json and
a checkpoint (--resume continues with the saved options, of which --steps, --save-every and
--eval-every may change; Ctrl-C or SIGTERM stops after the current step with a checkpoint).

--init-from hf:DIR (or a hub name) starts from an existing BERT checkpoint instead of a random
initialisation: continued, domain-adaptive pretraining on your text. docs/pretraining.md.`

func newPretrainCmd() *cobra.Command {
	pf := &pretrainFlags{o: new(mlm.DefaultOptions())}
	o := pf.o
	cmd := &cobra.Command{
		Use:   "pretrain --corpus FILE_OR_DIR --config bert-tiny|bert-mini --vocab FILE --steps N --out DIR",
		Short: "Pretrain a BERT encoder with masked-language modelling on your own text",
		Long:  pretrainLong,
		Example: `  nvdp pretrain --corpus glue:../shared/data/glue --config bert-mini \
    --vocab ../shared/models/bert-base-uncased-vocab/vocab.txt --steps 2000 --out runs/mini-mlm
  nvdp train --task rte --encoder hf:runs/mini-mlm ...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return pf.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.Corpus, "corpus", o.Corpus, "text file, directory of .txt files, or GLUE directory (glue:DIR); GLUE dev is never used")
	f.StringVar(&o.Config, "config", o.Config, "model preset ("+strings.Join(encoder.PresetNames(), ", ")+") or a config.json path")
	f.StringVar(&pf.initFrom, "init-from", "", "continue pretraining from a checkpoint: hf:DIR or hf:owner/name (downloaded); its config and, unless --vocab, its tokenizer")
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
	run, err := pretrainOptions(cmd, pf.o, pf.initFrom, report)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext(cmd, stopTraining)
	defer cancel()
	r, err := mlm.Run(ctx, run, report)
	if err != nil {
		return resumeHint(flagError(err), "nvdp pretrain --resume --out "+pf.o.Out)
	}
	if pf.jsonOut {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
	}
	r.WriteText(cmd.OutOrStdout())
	return nil
}

// resumeFlags are the flags a resumed pretraining run takes: the options a
// resume may change (mlm.Change) and those of the session.
var resumeFlags = map[string]bool{"out": true, "resume": true, "steps": true, "save-every": true, "eval-every": true,
	"stop-after-steps": true, "no-progress": true, "json": true}

// pretrainOptions returns the options of the run the flags ask for, checked
// before any work, errors naming the flags. A resumed run takes the saved
// options: its other flags are refused, and --steps, --save-every and
// --eval-every, when given, change them. A new run's options are validated,
// --init-from is resolved (a hub model downloaded, its bytes reported to
// report) and the files are checked.
func pretrainOptions(cmd *cobra.Command, o *mlm.Options, initFrom string, report progress.Func) (mlm.Options, error) {
	fs := cmd.Flags()
	if o.Resume {
		if initFrom != "" {
			return *o, fmt.Errorf("--init-from starts a run; --resume continues one (its checkpoint already holds the weights)")
		}
		var fixed []string
		fs.Visit(func(f *pflag.Flag) {
			if !resumeFlags[f.Name] {
				fixed = append(fixed, "--"+f.Name)
			}
		})
		if len(fixed) > 0 {
			return *o, fmt.Errorf("%s: a resumed run uses the options saved in %s; only --steps, --save-every and --eval-every change them",
				strings.Join(fixed, ", "), mlm.OptionsFile)
		}
		r := mlm.Options{Out: o.Out, Resume: true, StopAfterSteps: o.StopAfterSteps}
		for _, c := range []struct {
			flag string
			to   **int
			v    *int
		}{{"steps", &r.Change.Steps, &o.Steps}, {"save-every", &r.Change.SaveEvery, &o.SaveEvery}, {"eval-every", &r.Change.EvalEvery, &o.EvalEvery}} {
			if fs.Changed(c.flag) {
				*c.to = c.v
			}
		}
		return r, nil
	}
	if initFrom != "" && fs.Changed("config") {
		return *o, fmt.Errorf("--init-from takes the model config from the checkpoint; do not give --config")
	}
	o.InitFrom = initFrom
	if err := o.Validate(); err != nil {
		return *o, flagError(err)
	}
	if initFrom != "" {
		others := *o // the other files, before a download
		others.InitFrom = ""
		if err := others.CheckFiles(); err != nil {
			return *o, flagError(err)
		}
		dir, err := resolveInitFrom(initFrom, report)
		if err != nil {
			return *o, err
		}
		o.InitFrom = dir
	}
	return *o, flagError(o.CheckFiles())
}

// resolveInitFrom turns --init-from (hf:DIR, DIR or hf:owner/name) into a
// local directory, downloading a hub model into the cache when needed (its
// bytes reported to report).
func resolveInitFrom(spec string, report progress.Func) (string, error) {
	dir, err := encoder.ResolveHF(strings.TrimPrefix(spec, "hf:"), encoder.LoadOptions{Progress: report})
	if err != nil {
		return "", fmt.Errorf("--init-from %s: %w", spec, err)
	}
	return dir, nil
}

func init() { rootCmd.AddCommand(newPretrainCmd()) }
