package main

import (
	"context"
	"fmt"
	"io"

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
	return runLearnedAttack(cmd, &f.learnedAttackFlags, f.o.Validate, checkVocab, run, printInvert)
}

// printInvert prints the summary of an inversion.
func printInvert(w io.Writer, r *attack.InvertReport) {
	printSetup(w, r.Setup, [][2]string{
		{"public", fmt.Sprintf("%d texts, %d tokens, %d distinct (the decoders' classes); releases per text %d", r.PublicTexts, r.PublicTokens, r.Classes, r.Options.ReleasesPerText)},
		{"victims", fmt.Sprintf("%d texts, %d tokens (%.1f%% unseen in the public texts); one release each", r.VictimTexts, r.VictimTokens, 100*r.Unseen)},
	}, func(tw io.Writer) {
		conf := fmt.Sprintf("%g%% CI", 100*r.Options.Confidence)
		fmt.Fprintf(tw, "features\tdecoder\taccuracy\t%s\tprecision\trecall\tF1\t%s\tshuffled: accuracy\tF1\n", conf, conf)
		for _, res := range r.Results {
			fmt.Fprintf(tw, "%s\t%s\t%.4f\t[%.4f, %.4f]\t%.4f\t%.4f\t%.4f\t[%.4f, %.4f]\t%.4f\t%.4f\n", res.Features, res.Decoder, res.Accuracy,
				res.AccuracyCI[0], res.AccuracyCI[1], res.Precision, res.Recall, res.F1, res.F1CI[0], res.F1CI[1], res.Shuffled.Accuracy, res.Shuffled.F1)
		}
	})
	for _, res := range r.Results {
		if res.Features != attack.FeaturesRelease {
			continue
		}
		for _, e := range res.Examples {
			fmt.Fprintf(w, "%s %s: %q -> %q\n", res.Features, res.Decoder, e.Text, e.Guess)
		}
	}
}
