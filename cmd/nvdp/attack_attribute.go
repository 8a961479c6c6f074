package main

import (
	"context"
	"strings"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/spf13/cobra"
)

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
		Long: `Attack a model's release by attribute inference (docs/attacks.md): the attacker holds the task's
train split as public text and the dev split's texts are the victims. A property the task does
not need is read from each text itself:
` + strings.Join(rules, "\n") + `
The attacker releases each public text (--releases-per-text times), trains a classifier (linear:
logistic regression; mlp) on the mean-pooled release (the mean of Z over all its components) to
predict the property, and predicts it for each victim from one release. Reported: accuracy (with a
Clopper-Pearson interval) and AUC (with a bootstrap interval over the victims), against the
majority class of the public texts; the same classifiers on the model's mean-pooled encoder output
(the non-private upper reference). The certified epsilon of one release is printed beside them.`,
		Example: `  nvdp attack attribute --model runs/sst2-clipped --property name
  nvdp attack attribute --model runs/sst2-clipped --property digit --public-limit 0 --json > digit.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runAttackAttribute(cmd, f) },
	}
	fs := cmd.Flags()
	f.bind(fs, &f.o.LearnedOptions)
	fs.StringVar(&f.o.Property, "property", f.o.Property, "the property inferred: name | digit | female-pronoun")
	fs.StringVar(&f.o.Classifier, "classifier", f.o.Classifier, "linear (logistic regression) | mlp | all")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

func init() { attackCmd.AddCommand(newAttackAttributeCmd()) }

func runAttackAttribute(cmd *cobra.Command, f *attributeFlags) error {
	run := func(ctx context.Context, t *attack.Target, c *attack.Corpus, report progress.Func) (*attack.AttributeReport, error) {
		return attack.Attribute(ctx, t, c, f.o, report)
	}
	return runLearnedAttack(cmd, &f.learnedAttackFlags, f.o.Validate, nil, run, (*attack.AttributeReport).WriteText)
}
