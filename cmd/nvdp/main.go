// Command nvdp trains privatising NVDP models on GLUE, audits their posteriors
// (Renyi divergence bound, Bayesian DP) and reports privacy-utility trade-offs.
//
// Each subcommand lives in its own file and registers itself on rootCmd in an
// init function; the CLI is a thin layer over the library packages.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

var (
	logLevel string
	rootCmd  = &cobra.Command{
		Use:           "nvdp",
		Short:         "Nonparametric Variational Differential Privacy with principled clipping",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
			// Parameters, gradients and optimizer state are pointer-free float32
			// slices, so a tighter GC target costs little and keeps the peak
			// memory of a bert-base step under 3 GiB (docs/performance.md).
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(20)
			}
			return nil
		},
	}
)

func init() {
	rootCmd.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "nvdp:", err)
		os.Exit(1)
	}
}
