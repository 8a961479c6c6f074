package main

import (
	"strings"

	"github.com/nvdp-project/nvdp/attack"
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
