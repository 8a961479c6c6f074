package main

import (
	"context"
	"fmt"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/tokenize"
	"github.com/spf13/cobra"
)

// invertFlags are the flags of `nvdp attack invert`, bound to
// attack.DefaultInvertOptions.
type invertFlags struct {
	learnedAttackFlags
	vocab string
	o     attack.InvertOptions
}

func newAttackInvertCmd() *cobra.Command {
	f := &invertFlags{o: attack.DefaultInvertOptions()}
	cmd := &cobra.Command{
		Use:   "invert --model DIR [--glue-dir D] [--vocab V] [--decoder nn|linear|mlp|all]",
		Short: "Reconstruct the tokens of texts from their released embeddings: token precision / recall / F1 and exact-token accuracy",
		Long: `Attack a model's release by inversion (docs/attacks.md): the attacker holds the task's train
split as public text of the same kind and the dev split's texts are the victims. It releases
each public text (--releases-per-text times) and learns, per released component Z_t (token t of
the text), the token there: nn, the token of the nearest public row among the noiseless release
means (the attacker knows the mechanism); linear and mlp, decoders over the public tokens trained
with softmax cross-entropy on the public releases. Each victim text is released once and every
token of it (the tokenizer's specials left out) is guessed; the attacker is told which
components hold tokens (a release hides the length), so the numbers overstate what a release
gives away.

Reported per decoder: exact-token accuracy (positions guessed right) and token precision,
recall and F1 (per text on the sets of distinct tokens, averaged over texts), with bootstrap
intervals over the victim texts; the same decoders on the model's encoder output (before the
NVIB layer: the non-private upper reference); and the majority public token (chance). The
certified epsilon of one release is printed beside them.`,
		Example: `  nvdp attack invert --model runs/sst2-clipped
  nvdp attack invert --model runs/sst2-clipped --public-limit 20000 --decoder mlp --epochs 10 --json > invert.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runAttackInvert(cmd, f) },
	}
	fs := cmd.Flags()
	f.bind(fs, &f.o.LearnedOptions)
	fs.StringVar(&f.vocab, "vocab", "", "the attacker's tokenizer file or directory (default: the model's); it must be the model's vocabulary")
	fs.StringVar(&f.o.Decoder, "decoder", f.o.Decoder, "nn (nearest neighbour) | linear | mlp | all")
	fs.IntVar(&f.o.Examples, "examples", f.o.Examples, "victim texts whose reconstruction each decoder shows")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

func init() { attackCmd.AddCommand(newAttackInvertCmd()) }

func runAttackInvert(cmd *cobra.Command, f *invertFlags) error {
	checkVocab := func(t *attack.Target) error {
		if f.vocab == "" {
			return nil
		}
		tok, err := tokenize.Load(f.vocab)
		if err != nil {
			return fmt.Errorf("--vocab: %w", err)
		}
		if err := t.CheckVocabulary(tok); err != nil {
			return fmt.Errorf("--vocab %s is not the model's vocabulary: %w", f.vocab, err)
		}
		return nil
	}
	run := func(ctx context.Context, t *attack.Target, c *attack.Corpus, report progress.Func) (*attack.InvertReport, error) {
		return attack.Invert(ctx, t, c, f.o, report)
	}
	return runLearnedAttack(cmd, &f.learnedAttackFlags, f.o.Validate, checkVocab, run, (*attack.InvertReport).WriteText)
}
