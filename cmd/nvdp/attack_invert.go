package main

import (
	"github.com/nvdp-project/nvdp/attack"
	"github.com/spf13/cobra"
)

// invertFlags are the flags of `nvdp attack invert`, bound to
// attack.DefaultInvertOptions.
type invertFlags struct {
	learnedAttackFlags
	o attack.InvertOptions
}

func newAttackInvertCmd() *cobra.Command {
	f := &invertFlags{o: attack.DefaultInvertOptions()}
	cmd := &cobra.Command{
		Use:   "invert --model DIR [--glue-dir D] [--vocab V] [--decoder nn|linear|mlp|all]",
		Short: "Reconstruct the tokens of texts from their released embeddings: token precision / recall / F1 and exact-token accuracy",
		Long: `Attack a model's release by inversion: the attacker holds the task's train split as public
text, learns the token at each released component from the public texts' releases (--decoder nn,
linear, mlp) and guesses the tokens of the dev split's texts, each released once. Reported per
decoder: token accuracy, precision, recall and F1 with intervals, against the encoder output and
chance, beside the certified epsilon of one release. Details: docs/attacks.md.`,
		Example: `  nvdp attack invert --model runs/sst2-clipped
  nvdp attack invert --model runs/sst2-clipped --public-limit 20000 --decoder mlp --epochs 10 --json > invert.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLearnedAttack(cmd, &f.learnedAttackFlags, f.o, attack.RunInvert, (*attack.InvertReport).WriteText)
		},
	}
	fs := cmd.Flags()
	f.bind(fs, &f.o.LearnedOptions)
	fs.StringVar(&f.in.Vocab, "vocab", "", "the attacker's tokenizer file or directory (default: the model's); it must be the model's vocabulary")
	fs.StringVar(&f.o.Decoder, "decoder", f.o.Decoder, "nn (nearest neighbour) | linear | mlp | all")
	fs.IntVar(&f.o.Examples, "examples", f.o.Examples, "victim texts whose reconstruction each decoder shows")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}
