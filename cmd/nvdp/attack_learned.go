package main

import (
	"context"
	"io"
	"strings"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// learnedAttackFlags are the flags `nvdp attack invert` and `attribute`
// share; every default is its option's, and an explicit value, 0 included,
// is what the attack uses (its Validate rejects the meaningless ones).
type learnedAttackFlags struct {
	in                  attack.LearnedInputs
	noProgress, jsonOut bool
}

// bind binds the shared flags to f and to o, the attack's shared options.
func (f *learnedAttackFlags) bind(fs *pflag.FlagSet, o *attack.LearnedOptions) {
	l, iv := &o.Learner, &o.Interval
	f.in.Corpus = attack.DefaultCorpusOptions()
	fs.StringVar(&f.in.Model, "model", "", "model directory written by nvdp train or nvdp run (nvdp-clipped or gaussian; required)")
	fs.StringVar(&f.in.Corpus.GlueDir, "glue-dir", "", "GLUE directory with <TASK>/{train,dev}.tsv (default: the one the model was trained with)")
	fs.IntVar(&f.in.Corpus.PublicLimit, "public-limit", f.in.Corpus.PublicLimit, "the attacker's public texts: the first K rows of the train split (0: all)")
	fs.IntVar(&f.in.Corpus.VictimLimit, "victim-limit", f.in.Corpus.VictimLimit, "the victims: the first K rows of the dev split (0: all)")
	fs.BoolVar(&f.in.Corpus.SkipBadRows, "skip-bad-rows", false, "skip malformed TSV rows instead of failing")
	fs.IntVar(&o.ReleasesPerText, "releases-per-text", o.ReleasesPerText, "releases of each public text the attacker trains on (each victim text is released once)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the releases' noise, the attackers' training and the bootstrap")
	fs.IntVar(&l.Epochs, "epochs", l.Epochs, "training epochs of the learned attackers")
	fs.IntVar(&l.BatchSize, "batch-size", l.BatchSize, "training batch size of the learned attackers (rows)")
	fs.Float64Var(&l.LR, "lr", l.LR, "learning rate of the learned attackers (AdamW, constant)")
	fs.Float64Var(&l.WeightDecay, "weight-decay", l.WeightDecay, "AdamW decoupled weight decay of the learned attackers")
	fs.IntVar(&l.Hidden, "mlp-hidden", l.Hidden, "hidden width of the MLP attacker")
	fs.Float64Var(&iv.Confidence, "confidence", iv.Confidence, "two-sided confidence of the intervals")
	fs.IntVar(&iv.Bootstrap, "bootstrap", iv.Bootstrap, "resamples of the bootstrap intervals")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as JSON on stdout")
}

// runLearnedAttack runs a learned attack (attack.RunInvert or RunAttribute
// with its options o) on the flags' inputs and prints its report.
func runLearnedAttack[O, R any](cmd *cobra.Command, f *learnedAttackFlags, o O,
	run func(context.Context, attack.LearnedInputs, O, progress.Func) (R, error), print func(R, io.Writer)) error {
	ctx, cancel := signalContext(cmd, "stopping the attack")
	defer cancel()
	r, err := run(ctx, f.in, o, newProgress(cmd, f.noProgress))
	if err != nil {
		return flagError(err)
	}
	if f.jsonOut {
		return printJSON(cmd.OutOrStdout(), r)
	}
	print(r, cmd.OutOrStdout())
	return nil
}

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

// attributeFlags are the flags of `nvdp attack attribute`, bound to
// attack.DefaultAttributeOptions.
type attributeFlags struct {
	learnedAttackFlags
	o attack.AttributeOptions
}

func newAttackAttributeCmd() *cobra.Command {
	f := &attributeFlags{o: attack.DefaultAttributeOptions()}
	var rules []string
	for _, p := range attack.Properties() {
		rules = append(rules, "  "+p.Name+": "+p.Rule)
	}
	cmd := &cobra.Command{
		Use:   "attribute --model DIR [--glue-dir D] [--property name|digit|female-pronoun]",
		Short: "Infer a sensitive property of texts from their released embeddings: accuracy and AUC against the majority baseline",
		Long: `Attack a model's release by attribute inference: the attacker holds the task's train split as
public text and the dev split's texts are the victims. A property the task does not need is read
from each text itself:
` + strings.Join(rules, "\n") + `
The attacker trains a classifier (linear, mlp) on the mean-pooled releases of the public texts
(--releases-per-text each) and predicts the property of each victim from one release. Reported:
accuracy and AUC with intervals against the majority class, the same classifiers on the encoder
output (the non-private reference) and the certified epsilon of one release. Details:
docs/attacks.md.`,
		Example: `  nvdp attack attribute --model runs/sst2-clipped --property name
  nvdp attack attribute --model runs/sst2-clipped --property digit --public-limit 0 --json > digit.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLearnedAttack(cmd, &f.learnedAttackFlags, f.o, attack.RunAttribute, (*attack.AttributeReport).WriteText)
		},
	}
	fs := cmd.Flags()
	f.bind(fs, &f.o.LearnedOptions)
	fs.StringVar(&f.o.Property, "property", f.o.Property, "the property inferred: name | digit | female-pronoun")
	fs.StringVar(&f.o.Classifier, "classifier", f.o.Classifier, "linear (logistic regression) | mlp | all")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}
