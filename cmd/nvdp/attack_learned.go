package main

import (
	"context"
	"io"

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
