package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// learnedAttackFlags are the flags `nvdp attack invert` and `nvdp attack
// attribute` share: the model, the corpus, the learned attackers' training
// and the intervals. Every flag's default is its option's
// (attack.DefaultCorpusOptions, the attack's Default*Options), and an
// explicit value, 0 included, is what the attack uses (the options'
// Validate rejects the meaningless ones).
type learnedAttackFlags struct {
	model               string
	corpus              attack.CorpusOptions
	noProgress, jsonOut bool
}

// bind binds the shared flags; releases, seed, learner and interval are
// the attack's options.
func (f *learnedAttackFlags) bind(fs *pflag.FlagSet, releases *int, seed *uint64, l *attack.Learner, iv *attack.Interval) {
	f.corpus = attack.DefaultCorpusOptions()
	fs.StringVar(&f.model, "model", "", "model directory written by nvdp train or nvdp run (nvdp-clipped or gaussian; required)")
	fs.StringVar(&f.corpus.GlueDir, "glue-dir", "", "GLUE directory with <TASK>/{train,dev}.tsv (default: the one the model was trained with)")
	fs.IntVar(&f.corpus.PublicLimit, "public-limit", f.corpus.PublicLimit, "the attacker's public texts: the first K rows of the train split (0: all)")
	fs.IntVar(&f.corpus.VictimLimit, "victim-limit", f.corpus.VictimLimit, "the victims: the first K rows of the dev split (0: all)")
	fs.BoolVar(&f.corpus.SkipBadRows, "skip-bad-rows", false, "skip malformed TSV rows instead of failing")
	fs.IntVar(releases, "releases-per-text", *releases, "releases of each public text the attacker trains on (each victim text is released once)")
	fs.Uint64Var(seed, "seed", *seed, "seed of the releases' noise, the attackers' training and the bootstrap")
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

// load reads the model and the corpus (from the model's GLUE directory
// unless --glue-dir), every text checked (attack.LoadCorpus).
func (f *learnedAttackFlags) load(cmd *cobra.Command) (*attack.Target, *attack.Corpus, error) {
	t, err := attack.LoadTarget(f.model)
	if err != nil {
		return nil, nil, fmt.Errorf("--model: %w", err)
	}
	o := f.corpus
	if !cmd.Flags().Changed("glue-dir") {
		o.GlueDir = t.GlueDir()
	}
	c, err := attack.LoadCorpus(t.Task(), o)
	if err != nil {
		return nil, nil, flagError(err)
	}
	return t, c, nil
}

// printAttackJSON writes an attack's report as indented JSON.
func printAttackJSON(w io.Writer, report any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}

// attackHeader writes the rows a learned attack's summary starts with: the
// model, the certified guarantee of one release, the corpus.
func attackHeader(row func(k, v string), m release.ModelInfo, g *privacy.Guarantee, c *attack.Corpus) {
	row("model", fmt.Sprintf("%s (%s, %s, %s): N %d components, P %d", m.Dir, m.Task, m.Variant, m.Mode, m.N, m.P))
	row("certified", fmt.Sprintf("epsilon %s at delta %g (order %s) for one release of one text", ff(g.Epsilon), g.Delta, fg(g.BestOrder)))
	row("corpus", fmt.Sprintf("public %s, victims %s", c.PublicPath, c.VictimPath))
}
