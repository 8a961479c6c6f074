package main

import (
	"encoding/json"
	"fmt"

	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
)

func newTrainCmd() *cobra.Command {
	o := &train.Options{}
	var dropout float64
	var noProgress, jsonOut bool
	cmd := &cobra.Command{
		Use:   "train --task TASK --glue-dir DIR --encoder SPEC --variant V --out DIR",
		Short: "Train a baseline, NVDP or NVDP-Clipped model on a GLUE task",
		Long: `Fine-tune an encoder with (or without) the NVIB bottleneck on a GLUE task.

AdamW with linear warm-up and decay, KL schedule s(t), gradient clipping, dynamic padding,
dev evaluation every epoch on the task's selection metric, early stopping (--patience),
best model kept in --out (config.json, nvdp_config.json, model.safetensors, tokenizer files,
train_options.json), metrics.jsonl, and a resumable checkpoint (--resume). docs/training.md.`,
		Example: `  nvdp train --task sst2 --glue-dir ../shared/data/glue --encoder scratch:bert-tiny \
    --vocab ../shared/models/bert-base-uncased-vocab/vocab.txt --variant nvdp-clipped \
    --lambda 1e-2 --epochs 3 --out runs/sst2-clipped`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			finishTrainFlags(cmd, o, dropout)
			ctx, cancel := signalContext(cmd)
			defer cancel()
			r, err := train.Run(ctx, *o, progressWriter(cmd, noProgress))
			if err != nil {
				return err
			}
			if jsonOut {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			w := cmd.OutOrStdout()
			status := "finished"
			switch {
			case r.Interrupted:
				status = "stopped (resume with --resume)"
			case r.StoppedEarly:
				status = "stopped early"
			}
			fmt.Fprintf(w, "%s %s: %s after %d epochs (%d steps, %.0f s, backend %s)\n", r.Task, r.Variant, status, r.Epochs, r.Steps, r.Seconds, r.Backend)
			if r.BestEpoch > 0 {
				fmt.Fprintf(w, "best dev %s %.4f at epoch %d; model in %s\n", r.MetricName, float64(r.BestMetric), r.BestEpoch, r.Dir)
			}
			return nil
		},
	}
	trainFlags(cmd.Flags(), o, &dropout, &noProgress)
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON on stdout")
	return cmd
}

func init() { rootCmd.AddCommand(newTrainCmd()) }
