package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/bench"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	var (
		config     string
		batch, seq int
		steps      int
		jsonOut    bool
		noDropout  bool
		seed       uint64
		dev        deviceFlags
	)
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
			d, err := dev.open()
			if err != nil {
				return err
			}
			defer closeDevice(d)
			slog.Info("bench", "backend", nn.Backend(), "config", config, "batch", batch, "seq", seq, "steps", steps, "dropout", !noDropout)
			o := bench.Options{Batch: batch, Seq: seq, Steps: steps, NoDropout: noDropout, Seed: seed, Device: d,
				// Timed steps are short and few: a debug line each, no bar.
				Progress: func(e progress.Event) { slog.Debug("step", "phase", e.Stage, "i", e.Done-1) }}
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
	f.IntVar(&batch, "batch", 32, "batch size")
	f.IntVar(&seq, "seq", 128, "sequence length")
	f.IntVar(&steps, "steps", 5, "timed steps (after one warm-up step)")
	f.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	f.BoolVar(&noDropout, "no-dropout", false, "disable dropout (as the PyTorch peer)")
	f.Uint64Var(&seed, "seed", 0, "initialisation and data seed")
	dev.bind(f)
	return cmd
}
