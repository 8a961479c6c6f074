package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/report"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newAttackCmd is `nvdp attack`, the parent of the attacks on a release
// (docs/attacks.md).
func newAttackCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "attack",
		Short: "Attacks on a release: what it actually leaks, against the certified guarantee",
		Long: `Empirical privacy attacks on the releases of a trained model (docs/attacks.md). Their numbers
are what an attacker achieves, to be read against the certified guarantee ('nvdp certify'): an
attack that exceeds the certified epsilon shows a bug in the mechanism, the density or the
certificate.`,
	}
	cmd.AddCommand(newDistinguishCmd(), newAttackInvertCmd(), newAttackAttributeCmd())
	return cmd
}

// distinguishFlags are the flags of `nvdp attack distinguish`, bound to
// attack.DistinguishInputs and attack.DistinguishOptions.
type distinguishFlags struct {
	in                      attack.DistinguishInputs
	opt                     attack.DistinguishOptions
	pairIndex, out, plotDir string
	jsonOut, noProgress     bool
}

func newDistinguishCmd() *cobra.Command {
	f := &distinguishFlags{opt: attack.DefaultDistinguishOptions()}
	cmd := &cobra.Command{
		Use:   "distinguish --model DIR [--pair witness|argmax|random] [--texts A,B | --posteriors FILE --pair-index i,j]",
		Short: "Distinguishing attack: an epsilon lower bound from the likelihood-ratio test between two inputs' releases",
		Long: `Tell apart the releases of two inputs by the most powerful test (the exact log-likelihood ratio
of the release density, on --releases K releases of each) and report the ROC and a lower bound on
epsilon at --delta beside the model's certified epsilon: a bound above it is a bug. Method, pairs
(--pair, --texts, --pair-index), outputs and fields: docs/attacks.md ("nvdp attack distinguish").`,
		Example: `  nvdp attack distinguish --model runs/sst2-clipped --json
  nvdp attack distinguish --model runs/sst2-clipped --pair argmax --releases 100000 --plot-dir figs
  nvdp attack distinguish --model runs/sst2-clipped --texts "the movie is great","the movie is awful"
  nvdp certify --model runs/sst2-clipped --witness w.safetensors && nvdp attack distinguish --posteriors w.safetensors`,
		RunE: func(cmd *cobra.Command, args []string) error { return runDistinguish(cmd, f) },
	}
	fs, in, o := cmd.Flags(), &f.in, &f.opt
	fs.StringVar(&in.Model, "model", "", "model directory written by nvdp run or nvdp train (nvdp-clipped or gaussian)")
	fs.StringVar(&in.Posteriors, "posteriors", "", "posterior file: a witness (nvdp certify --witness) or the posteriors to take pairs from")
	fs.StringVar(&in.Pair.Kind, "pair", attack.PairWitness, "candidate pair: witness | argmax | random")
	fs.StringSliceVar(&in.Pair.Texts, "texts", nil, "two texts A,B to tell apart under --model")
	fs.StringVar(&f.pairIndex, "pair-index", "", "i,j: posteriors i and j of the posterior file")
	fs.StringVar(&in.Pair.Audit, "audit", "", "--pair argmax: read the argmax from this audit JSON (nvdp audit --json, or a run's report.json) instead of auditing")
	fs.StringVar(&in.Split, "split", "dev", "without --posteriors: the split whose posteriors under --model give the pairs (dev | test | train)")
	fs.StringVar(&in.GlueDir, "glue-dir", "", "the GLUE directory of --split (default: the model's, train_options.json glue_dir)")
	fs.IntVar(&in.Pair.RandomPairs, "random-pairs", 1, "--pair random: how many pairs")
	fs.IntVar(&o.Releases, "releases", o.Releases, "K, releases drawn from each posterior (the threshold test's bound is at most about ln(K/7.4))")
	fs.Float64Var(&o.Delta, "delta", o.Delta, "delta of the lower bound and of the certified epsilon it is compared with")
	fs.Float64Var(&o.Confidence, "confidence", o.Confidence, "confidence of the lower bound (Clopper-Pearson)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the releases (and of --pair random)")
	fs.IntVar(&o.Workers, "workers", 0, "goroutines drawing releases (default GOMAXPROCS)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as one JSON object on stdout")
	fs.StringVar(&f.out, "out", "", "also write the JSON report to this file (conventionally "+attack.DistinguishFile+")")
	fs.StringVar(&f.plotDir, "plot-dir", "", "write the ROC figures (PNG and SVG) into this directory")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	return cmd
}

// bindPair says which flags were given (attack.DistinguishInputs.Given,
// which checks the flags given together) and parses --pair-index.
func (f *distinguishFlags) bindPair(cmd *cobra.Command) error {
	f.in.Given = givenFlags(cmd)
	if !cmd.Flags().Changed("pair-index") {
		return nil
	}
	var v []int
	if err := parseInto(&v, "--pair-index", f.pairIndex, false, func(s string) ([]int, error) {
		return option.ParseListOf(s, "an index >= 0", strconv.Atoi)
	}); err != nil {
		return err
	}
	if len(v) != 2 || v[0] < 0 || v[1] < 0 {
		return fmt.Errorf("--pair-index %q: want i,j, two indices >= 0", f.pairIndex)
	}
	f.in.Pair.Index = [2]int{v[0], v[1]}
	return nil
}

// runDistinguish attacks the pairs of the flags (attack.RunDistinguish),
// writes the ROC figures (--plot-dir) and the JSON report (--out), then
// prints the report on stdout (as JSON with --json).
func runDistinguish(cmd *cobra.Command, f *distinguishFlags) error {
	if err := f.bindPair(cmd); err != nil {
		return err
	}
	ctx, cancel := signalContext(cmd, "stopping the releases")
	defer cancel()
	opt := f.opt
	opt.Progress = newProgress(cmd, f.noProgress)
	rep, err := attack.RunDistinguish(ctx, f.in, opt)
	if se := (*attack.SplitError)(nil); errors.As(err, &se) {
		return fmt.Errorf("--model %s, --split %s: %w", se.Model, se.Split, flagError(se.Err))
	} else if err != nil {
		return flagError(err)
	}
	if f.plotDir != "" {
		if err := os.MkdirAll(f.plotDir, 0o755); err != nil {
			return fmt.Errorf("--plot-dir: %w", err)
		}
		if rep.Plots, err = report.PlotDistinguishROC(rep, filepath.Join(f.plotDir, "distinguish_roc")); err != nil {
			return fmt.Errorf("--plot-dir: %w", err)
		}
	}
	if f.out != "" {
		if err := atomicfile.WriteJSON(f.out, rep); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if f.jsonOut {
		return printJSON(cmd.OutOrStdout(), rep)
	}
	return rep.WriteText(cmd.OutOrStdout())
}

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
