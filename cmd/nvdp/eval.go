package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
)

func newEvalCmd() *cobra.Command {
	o := train.EvalOptions{}
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "eval --model DIR --split dev|test --out DIR",
		Short: "Evaluate a trained model: metrics, GLUE predictions and the posterior file for the audit",
		Long: `Run a model directory written by 'nvdp train' on a split.

Writes OUT/eval_<split>.json (GLUE metrics on labelled splits), the predictions in GLUE
submission format (OUT/<TASK>.tsv for test, OUT/predictions_<split>.tsv otherwise) and,
for NVDP and gaussian models, OUT/posteriors_<split>.safetensors for 'nvdp audit': every
example padded to max-seq-len, so each posterior has max-seq-len + 1 components (padding
flagged in the mask; a gaussian model's release always has its own max-seq-len + 1), and the
certified guarantee of that release at the clip's order (eval_<split>.json "certified").
NVDP and gaussian models sample at evaluation (as the released code), from a generator
seeded by --seed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := train.Evaluate(o)
			if err != nil {
				return err
			}
			if jsonOut {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s %s (%s): %d examples\n", r.Task, r.Split, r.Variant, r.Examples)
			names := make([]string, 0, len(r.Metrics))
			for k := range r.Metrics {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				fmt.Fprintf(w, "  %-22s %.4f\n", k, r.Metrics[k])
			}
			fmt.Fprintf(w, "predictions: %s\n", r.Predictions)
			if r.Posteriors != "" {
				fmt.Fprintf(w, "posteriors:  %s (%d components)\n", r.Posteriors, r.Components)
			}
			if r.Certified != nil {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				certifiedRows(func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }, r.Certified)
				tw.Flush()
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Model, "model", "", "model directory written by nvdp train (required)")
	fs.StringVar(&o.Split, "split", "dev", "dev | test | train")
	fs.StringVar(&o.Out, "out", "", "output directory (default: the model directory)")
	fs.StringVar(&o.GlueDir, "glue-dir", "", "GLUE directory (default: the one the model was trained with)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the NVDP sampling at evaluation")
	fs.IntVar(&o.BatchSize, "batch-size", 0, "evaluation batch size (default: the model's, 16)")
	fs.IntVar(&o.Limit, "limit", 0, "use only the first K examples (0: all)")
	fs.IntVar(&o.MaxSeqLen, "max-seq-len", 0, "truncation and posterior padding length (default: the model's)")
	fs.BoolVar(&o.NoPost, "no-posteriors", false, "do not write the posterior file")
	fs.BoolVar(&o.SkipBadRows, "skip-bad-rows", false, "skip malformed TSV rows instead of failing")
	fs.BoolVar(&jsonOut, "json", false, "print the result as JSON on stdout")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

func init() { rootCmd.AddCommand(newEvalCmd()) }
