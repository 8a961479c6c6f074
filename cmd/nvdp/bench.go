package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/bench"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	var config string
	var jsonOut bool
	var dev deviceFlags
	o := bench.Options{Batch: 32, Seq: 128, Steps: 5,
		// Timed steps are short and few: a debug line each, no bar.
		Progress: func(e progress.Event) { slog.Debug("step", "phase", e.Stage, "i", e.Done-1) }}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Time training and inference steps of a BERT classifier on this machine",
		Long: `bench times full training steps (encoder forward, masked mean pooling, Linear, softmax
cross-entropy, backward, AdamW) and inference steps of a freshly initialised encoder on random
tokens, after one untimed warm-up step, and reports the mean seconds per step, training tokens
per second and the peak RSS. --device cuda runs them on an NVIDIA GPU. Compare with the PyTorch
peer (--no-dropout): docs/performance.md.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := encoder.Preset(config)
			if err != nil {
				return fmt.Errorf("--config: %w", err)
			}
			if o.Device, err = dev.open(); err != nil {
				return err
			}
			defer cuda.CloseLogged(o.Device)
			slog.Info("bench", "backend", nn.Backend(), "config", config, "batch", o.Batch, "seq", o.Seq, "steps", o.Steps, "dropout", !o.NoDropout)
			res, err := bench.Run(config, cfg, o)
			if err != nil {
				return flagError(err)
			}
			if jsonOut {
				return json.NewEncoder(os.Stdout).Encode(res)
			}
			return res.WriteText(os.Stdout, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&config, "config", "bert-tiny", "encoder preset: bert-tiny, bert-mini, bert-base, bert-large, roberta-base")
	f.IntVar(&o.Batch, "batch", o.Batch, "batch size")
	f.IntVar(&o.Seq, "seq", o.Seq, "sequence length")
	f.IntVar(&o.Steps, "steps", o.Steps, "timed steps (after one warm-up step)")
	f.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	f.BoolVar(&o.NoDropout, "no-dropout", false, "disable dropout (as the PyTorch peer)")
	f.Uint64Var(&o.Seed, "seed", 0, "initialisation and data seed")
	dev.bind(f)
	return cmd
}
