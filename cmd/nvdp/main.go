// Command nvdp trains privatising NVDP models on GLUE, audits their posteriors
// (Renyi divergence bound, Bayesian DP) and reports privacy-utility trade-offs.
//
// Each command lives in its own file (newXCmd, with its subcommands); init
// registers them on rootCmd. The CLI is a thin layer over the library packages.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

var (
	logLevel, logFormat string
	logLvl              slog.LevelVar // --log-level, parsed
	rootCmd             = &cobra.Command{
		Use:           "nvdp",
		Short:         "Nonparametric Variational Differential Privacy with principled clipping",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if err := logLvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			switch h := (&slog.HandlerOptions{Level: &logLvl}); logFormat {
			case "text":
				slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, h)))
			case "json":
				slog.SetDefault(slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), h)))
			default:
				return fmt.Errorf("--log-format %q: want text or json", logFormat)
			}
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
	rootCmd.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log format on stderr: text | json (JSON lines, for machines)")
	rootCmd.AddCommand(newAttackCmd(), newAuditCmd(), newBenchCmd(), newCertifyCmd(), newEmbedCmd(), newEvalCmd(), newLIDCorpusCmd(),
		newPretrainCmd(), newReportCmd(), newRunCmd(), newServeCmd(), newSweepCmd(), newSweepCellCmd(), newTrainCmd())
	noArgsByDefault(rootCmd)
}

// noArgsByDefault makes every command under c whose Args is nil take none
// ("nvdp certify extra" is an error); cobra's help and completion, added as
// root executes, keep theirs.
func noArgsByDefault(c *cobra.Command) {
	for _, sub := range c.Commands() {
		if sub.Args == nil {
			sub.Args = cobra.NoArgs
		}
		noArgsByDefault(sub)
	}
}

func main() {
	os.Exit(execute(rootCmd, os.Stderr))
}

// execute runs root under a context the first SIGINT or SIGTERM cancels
// and returns the exit status: 0, or 1 after writing "nvdp: <error>" to
// stderr. A command that stops gracefully (signalContext) finishes that, its
// error marked as interrupted; any other ends within interruptGrace. A
// second signal ends the process at once.
func execute(root *cobra.Command, stderr io.Writer) int {
	refuseUnknownSubcommands(root)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // the signals are let go: a second one ends the process
		if context.Cause(ctx) == context.Canceled {
			return // the command returned
		}
		time.Sleep(interruptGrace)
		if gracefulStop.Load() {
			return // the command stops as it says (signalContext)
		}
		fmt.Fprintf(stderr, "nvdp: interrupted (%v): stopped at once\n", context.Cause(ctx))
		os.Exit(1)
	}()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if cause := context.Cause(ctx); ctx.Err() != nil && cause != context.Canceled && !strings.Contains(err.Error(), "interrupted") {
		err = fmt.Errorf("interrupted (%v): %w", cause, err)
	}
	fmt.Fprintln(stderr, "nvdp:", err)
	return 1
}

// interruptGrace is how long a command that registered no graceful stop
// has, after a signal cancelled its context, to return on its own.
var interruptGrace = 2 * time.Second

// gracefulStop is set by signalContext: the command stops gracefully on a
// signal (a checkpoint, a drain), however long that takes.
var gracefulStop atomic.Bool

// refuseUnknownSubcommands makes every command group under root, cobra's
// completion included, refuse an unknown subcommand ("nvdp attack frob")
// with an error instead of its help and exit status 0 (cobra's way); a
// group without arguments still prints its help.
func refuseUnknownSubcommands(root *cobra.Command) {
	if !root.HasParent() { // cobra's own groups too, which it adds as it executes
		root.InitDefaultHelpCmd()
		root.InitDefaultCompletionCmd()
	}
	for _, c := range root.Commands() {
		refuseUnknownSubcommands(c)
	}
	if !root.HasSubCommands() || !root.HasParent() {
		return // cobra refuses an unknown command of the root itself
	}
	if root.Args == nil {
		root.Args = cobra.NoArgs
	}
	if !root.Runnable() {
		root.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
	}
}
