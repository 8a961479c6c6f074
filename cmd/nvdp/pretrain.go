package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/mlm"
	"github.com/spf13/cobra"
)

func newPretrainCmd() *cobra.Command {
	o := mlm.Options{}
	var dropout float64
	var noProgress, jsonOut bool
	var initFrom string
	cmd := &cobra.Command{
		Use:   "pretrain --corpus FILE_OR_DIR --config bert-tiny|bert-mini --vocab FILE --steps N --out DIR",
		Short: "Pretrain a BERT encoder with masked-language modelling on your own text",
		Long: `Pretrain a BERT encoder (from scratch, or from a checkpoint with --init-from) with the
masked-language-model objective (BERT §3.1):
15% of the tokens predicted (80% [MASK], 10% random token, 10% unchanged; --whole-word masks
all pieces of a word), consecutive lines packed into [CLS] A [SEP] B [SEP] sequences of up to
--seq tokens, AdamW with linear warm-up and decay, gradient clipping at 1.

--corpus is a text file (one sentence or document per line; blank lines separate documents),
a directory of .txt files, or a GLUE directory (glue:DIR, or auto-detected) whose train and
test sentences become the corpus (dev is never read). Duplicate lines are dropped and a
held-out slice of documents (--holdout, default 1%) measures MLM loss and masked-token accuracy.

--out receives a Hugging Face BertForMaskedLM directory (config.json, model.safetensors,
vocab.txt) that --encoder hf:DIR loads, plus pretrain_metrics.jsonl, pretrain_summary.json and
a checkpoint (--resume continues; Ctrl-C or SIGTERM stops after the current step with a
checkpoint).

--init-from hf:DIR (or a hub name) starts from an existing BERT checkpoint instead of a random
initialisation: continued, domain-adaptive pretraining on your text. docs/pretraining.md.`,
		Example: `  nvdp pretrain --corpus glue:../shared/data/glue --config bert-mini \
    --vocab ../shared/models/bert-base-uncased-vocab/vocab.txt --steps 2000 --out runs/mini-mlm
  nvdp train --task rte --encoder hf:runs/mini-mlm ...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("dropout") {
				o.Dropout = &dropout
			}
			if initFrom != "" {
				if o.Resume {
					return fmt.Errorf("--init-from starts a run; --resume continues one (its checkpoint already holds the weights)")
				}
				if cmd.Flags().Changed("config") {
					return fmt.Errorf("--init-from takes the model config from the checkpoint; do not give --config")
				}
				dir, err := resolveInitFrom(initFrom)
				if err != nil {
					return err
				}
				o.InitFrom = dir
				if o.Vocab == "" {
					o.Vocab = dir // the checkpoint's own tokenizer files
				}
			}
			if !o.Resume {
				for _, f := range []string{"corpus", "vocab", "steps"} {
					if f == "vocab" && o.Vocab != "" {
						continue // $NVDP_VOCAB or the --init-from directory
					}
					if !cmd.Flags().Changed(f) {
						return fmt.Errorf("--%s is required", f)
					}
				}
			} else if !cmd.Flags().Changed("steps") {
				o.Steps = 0 // keep the saved value
			}
			if o.Out == "" {
				return fmt.Errorf("--out is required")
			}
			ctx, cancel := signalContext(cmd)
			defer cancel()
			r, err := mlm.Run(ctx, o, newProgress(cmd, noProgress))
			if err != nil {
				return resumeHint(err, "nvdp pretrain --resume --out "+o.Out)
			}
			if jsonOut {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			w := cmd.OutOrStdout()
			status := "finished"
			if r.StoppedEarly {
				status = "stopped (resume with --resume)"
			}
			fmt.Fprintf(w, "pretrain %s: %s after %d steps (%.2f epochs, %.0f s, backend %s)\n", r.Config, status, r.Steps, r.Epochs, r.ElapsedS, r.Backend)
			if r.InitialHeldOut != nil {
				fmt.Fprintf(w, "held-out MLM loss %.4f -> %.4f, masked-token accuracy %.4f -> %.4f (%d masked tokens)\n",
					r.InitialHeldOut.Loss, r.FinalHeldOut.Loss, r.InitialHeldOut.MaskedAcc, r.FinalHeldOut.MaskedAcc, r.FinalHeldOut.MaskedTokens)
			} else {
				fmt.Fprintf(w, "held-out MLM loss %.4f, masked-token accuracy %.4f (%d masked tokens)\n",
					r.FinalHeldOut.Loss, r.FinalHeldOut.MaskedAcc, r.FinalHeldOut.MaskedTokens)
			}
			fmt.Fprintf(w, "model in %s (use --encoder hf:%s)\n", r.Out, r.Out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Corpus, "corpus", "", "text file, directory of .txt files, or GLUE directory (glue:DIR); GLUE dev is never used")
	f.StringVar(&o.Config, "config", "bert-mini", "model preset (bert-tiny, bert-mini, bert-base) or a config.json path")
	f.StringVar(&initFrom, "init-from", "", "continue pretraining from a checkpoint: hf:DIR or hf:owner/name (downloaded); its config and, unless --vocab, its tokenizer")
	f.StringVar(&o.Vocab, "vocab", os.Getenv("NVDP_VOCAB"), "WordPiece vocabulary (vocab.txt, tokenizer.json or a directory; $NVDP_VOCAB)")
	f.IntVar(&o.Seq, "seq", 128, "maximum sequence length in tokens")
	f.IntVar(&o.BatchSize, "batch-size", 64, "sequences per optimizer step")
	f.IntVar(&o.Steps, "steps", 0, "optimizer steps (required)")
	f.StringVar(&o.Out, "out", "", "output directory (required)")
	f.Float64Var(&o.LR, "lr", 5e-4, "peak learning rate")
	f.Float64Var(&o.WarmupRatio, "warmup-ratio", 0.06, "linear warm-up fraction of the steps")
	f.Float64Var(&o.WeightDecay, "weight-decay", 0.01, "AdamW decoupled weight decay (not on biases / LayerNorm)")
	f.Float64Var(&o.GradClip, "grad-clip", 1, "global gradient-norm clipping (< 0: off)")
	f.Float64Var(&o.MaskProb, "mask-prob", 0.15, "fraction of tokens predicted")
	f.BoolVar(&o.WholeWord, "whole-word", false, "whole-word masking (all WordPiece pieces of a chosen word)")
	f.BoolVar(&o.NoPack, "no-pack", false, "one line per sequence instead of packing consecutive lines")
	f.IntVar(&o.Holdout, "holdout", 0, "held-out documents for evaluation (0: 1%)")
	f.IntVar(&o.MaxEvalSeqs, "max-eval-seqs", 1024, "evaluate at most this many held-out sequences")
	f.Float64Var(&dropout, "dropout", 0.1, "hidden and attention dropout (default: the config's)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of initialisation, held-out split, data order, masking and dropout")
	f.IntVar(&o.SaveEvery, "save-every", 500, "checkpoint (and export the model) every K steps")
	f.IntVar(&o.EvalEvery, "eval-every", 0, "evaluate the held-out slice every K steps (0: steps/20)")
	f.BoolVar(&o.Resume, "resume", false, "continue the run in --out from its checkpoint (saved options are used)")
	f.IntVar(&o.StopAfter, "stop-after-steps", 0, "stop with a checkpoint after K steps in total (resumable)")
	f.BoolVar(&noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	f.BoolVar(&jsonOut, "json", false, "print the summary as JSON on stdout")
	return cmd
}

// resolveInitFrom turns --init-from (hf:DIR, DIR or hf:owner/name) into a
// local directory, downloading a hub model into the cache when needed.
func resolveInitFrom(spec string) (string, error) {
	dir, err := encoder.ResolveHF(strings.TrimPrefix(spec, "hf:"), encoder.LoadOptions{})
	if err != nil {
		return "", fmt.Errorf("--init-from %s: %w", spec, err)
	}
	return dir, nil
}

func init() { rootCmd.AddCommand(newPretrainCmd()) }
