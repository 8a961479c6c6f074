package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
)

func newSweepCmd() *cobra.Command {
	so := &train.SweepOptions{Base: train.DefaultPipelineOptions()}
	po := &so.Base
	var af *auditFlagValues
	var cmuLambda float64
	var noProgress, inProcess bool
	var tasks, variants, lambdas, seeds, cmuGrid, cmuSeeds, extraModes, targetEpsilons string
	cmd := &cobra.Command{
		Use:   "sweep --tasks T,.. --variants V,.. --lambdas L,.. --seeds S,.. [train flags] --out DIR",
		Short: "Run the paper's grid (tasks x variants x lambdas x seeds): one `nvdp run` per cell",
		Long: `Runs every cell of tasks x variants x lambdas x seeds (the baseline once per task and
seed) with the train + eval + audit pipeline of 'nvdp run', each in
DIR/<task>/<variant>/lambda=<l>/seed=<s>/ (baseline: DIR/<task>/baseline/seed=<s>/).
Every train and audit flag of 'nvdp run' applies to all cells. Cells whose report.json
exists are skipped; interrupted cells resume from their checkpoint; DIR/sweep.json lists
every cell and its status (rewritten atomically). Ctrl-C stops the running cells at their
next step with a checkpoint: rerun the same command to continue.

--c-mu-grid runs nvdp-clipped over the grid first (at --c-mu-lambda, default the first
lambda, and --c-mu-seeds, default the first seed; DIR/<task>/cmu-grid/...), picks per task
the smallest C_mu whose dev selection metric is within --c-mu-tolerance of the best
(paper §3.2), writes DIR/<task>/c_mu_selection.json, and runs the clipped cells with it.
--target-epsilons E1,E2,... adds a dimension to the nvdp-clipped and gaussian cells: each is
calibrated to a certified epsilon at --delta (DIR/<task>/nvdp-clipped/epsilon=<e>/lambda=<l>/seed=<s>/;
the constants not given on the command line are calibrated, see 'nvdp train';
DIR/<task>/gaussian/epsilon=<e>/seed=<s>/, its radius C calibrated whatever --c-mu says); a
single --target-epsilon or --target-rd applies to every nvdp-clipped and gaussian cell.
gaussian (the Gaussian-mechanism baseline) has no KL term: lambda is not one of its
dimensions (DIR/<task>/gaussian/seed=<s>/ without a target, C = --c-mu).
--jobs N runs N cells at once as subprocesses of this binary (logs in DIR/logs/).
'nvdp report DIR' makes the tables and plots.`,
		Example: `  nvdp sweep --tasks sst2,rte --variants baseline,nvdp,nvdp-clipped --lambdas 1e-3,1e-2,1e-1,1 \
    --seeds 1,2,3 --glue-dir ../shared/data/glue --encoder scratch:bert-tiny \
    --vocab ../shared/models/bert-base-uncased-vocab/vocab.txt --epochs 3 --out sweeps/glue`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, f := range []string{"task", "variant", "lambda", "seed", "resume", "stop-after-steps"} {
				if cmd.Flags().Changed(f) {
					return fmt.Errorf("--%s is per cell in a sweep: use --tasks, --variants, --lambdas, --seeds (resumption is automatic)", f)
				}
			}
			finishTrainFlags(cmd, &po.Train)
			so.Out = po.Train.Out
			var err error
			if so.Tasks, err = parseList("--tasks", tasks); err != nil {
				return err
			}
			if so.Variants, err = parseList("--variants", variants); err != nil {
				return err
			}
			if so.Lambdas, err = parseFloatList("--lambdas", lambdas); err != nil {
				return err
			}
			if so.Seeds, err = parseUintList("--seeds", seeds); err != nil {
				return err
			}
			if cmuGrid != "" {
				if so.CMuGrid, err = parseFloatList("--c-mu-grid", cmuGrid); err != nil {
					return err
				}
				if cmd.Flags().Changed("c-mu") {
					return fmt.Errorf("--c-mu and --c-mu-grid: give one (the grid selects C_mu)")
				}
			}
			if cmd.Flags().Changed("c-mu-lambda") {
				so.CMuLambda = &cmuLambda
			}
			if cmuSeeds != "" {
				if so.CMuSeeds, err = parseUintList("--c-mu-seeds", cmuSeeds); err != nil {
					return err
				}
			}
			if extraModes != "" {
				ms, err := parseList("--extra-audit-modes", extraModes)
				if err != nil {
					return err
				}
				for _, m := range ms {
					if m != string(privacy.ModePrincipled) && m != string(privacy.ModeReference) {
						return fmt.Errorf("--extra-audit-modes: %q: want principled or reference", m)
					}
					so.ExtraAuditModes = append(so.ExtraAuditModes, privacy.Mode(m))
				}
			}
			if err := af.finish(po); err != nil {
				return err
			}
			if targetEpsilons != "" {
				if so.TargetEpsilons, err = parseFloatList("--target-epsilons", targetEpsilons); err != nil {
					return err
				}
				fixGivenConstants(cmd, &po.Train)
				po.Train.TargetDelta = po.Audit.Delta
			}
			setTargetOrderDelta(&po.Train, po.Audit.Order, po.Audit.Delta)
			ctx, cancel := signalContext(cmd)
			defer cancel()
			switch {
			case so.Jobs > 1 && !inProcess:
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("--jobs: cannot find this binary to run cells as subprocesses: %w (use --in-process)", err)
				}
				so.Runner = subprocessRunner(exe, filepath.Join(so.Out, train.SweepLogDir), cellEnv(os.Environ(), runtime.NumCPU(), so.Jobs))
			case so.Jobs > 1:
				so.Runner = train.InProcessRunner(nil)
			default:
				so.Runner = train.InProcessRunner(progressWriter(cmd, noProgress))
			}
			res, err := train.Sweep(ctx, *so)
			if res != nil {
				m := res.Manifest
				fmt.Fprintf(cmd.OutOrStdout(), "sweep %s: %d cells (%s), %d ran this time; manifest %s\n", so.Out, len(m.Cells),
					fmtCounts(m.Counts), res.Ran, filepath.Join(so.Out, train.SweepManifestFile))
				for _, task := range so.Tasks {
					if s := m.Selections[task]; s != nil {
						fmt.Fprintf(cmd.OutOrStdout(), "%s C_mu = %g: %s\n", task, s.CMu, s.Reason)
					}
				}
			}
			if ctx.Err() != nil {
				return fmt.Errorf("sweep interrupted: finished cells keep their report.json, the others resume when the same command is run again")
			}
			return err
		},
	}
	fs := cmd.Flags()
	trainFlags(fs, &po.Train, &noProgress)
	for _, f := range []string{"task", "variant", "lambda", "seed", "resume", "stop-after-steps"} {
		_ = fs.MarkHidden(f)
	}
	fs.StringVar(&tasks, "tasks", "sst2", "comma-separated GLUE tasks")
	fs.StringVar(&variants, "variants", "nvdp,nvdp-clipped", "comma-separated variants: baseline, nvdp, nvdp-clipped, gaussian")
	fs.StringVar(&lambdas, "lambdas", "1e-3,1e-2,1e-1,1", "comma-separated lambda_G = lambda_D values (nvdp variants)")
	fs.StringVar(&seeds, "seeds", "1", "comma-separated seeds")
	fs.IntVar(&so.Jobs, "jobs", 1, "cells run at once (subprocesses of this binary; see --in-process)")
	fs.BoolVar(&inProcess, "in-process", false, "with --jobs N: run cells as goroutines instead of subprocesses")
	fs.StringVar(&cmuGrid, "c-mu-grid", "", "comma-separated C_mu grid for nvdp-clipped (selection as paper §3.2)")
	fs.Float64Var(&so.CMuTolerance, "c-mu-tolerance", 0.01, "C_mu selection: absolute tolerance on the dev selection metric")
	fs.Float64Var(&cmuLambda, "c-mu-lambda", 0, "C_mu selection: lambda of the grid runs (default: the first of --lambdas)")
	fs.StringVar(&cmuSeeds, "c-mu-seeds", "", "C_mu selection: seeds of the grid runs (default: the first of --seeds)")
	fs.StringVar(&targetEpsilons, "target-epsilons", "", "comma-separated certified epsilons (at --delta): a sweep dimension of the nvdp-clipped and gaussian cells, each calibrated to one")
	fs.StringVar(&extraModes, "extra-audit-modes", "", "also audit every NVDP cell in these modes (e.g. reference), written to audit_<mode>.json")
	af = pipelineAuditFlags(fs, po)
	return cmd
}

func fmtCounts(c map[string]int) string {
	var s []string
	for _, k := range []string{train.CellDone, train.CellRunning, train.CellPending, train.CellInterrupted, train.CellFailed, train.CellSkipped} {
		if c[k] > 0 {
			s = append(s, fmt.Sprintf("%d %s", c[k], k))
		}
	}
	return strings.Join(s, ", ")
}

// subprocessRunner runs a cell as `exe sweep-cell` with its pipeline options
// as JSON on stdin; stdout and stderr go to logDir/<cell>.log. Cancelling
// ctx sends the child SIGINT (it stops at its next step with a checkpoint)
// and kills it only if it has not exited 5 minutes later.
func subprocessRunner(exe, logDir string, env []string) train.CellRunner {
	return func(ctx context.Context, cell train.Cell, po train.PipelineOptions) error {
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return err
		}
		spec, err := json.Marshal(po)
		if err != nil {
			return err
		}
		logPath := filepath.Join(logDir, strings.ReplaceAll(cell.ID, string(filepath.Separator), "_")+".log")
		lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer lf.Close()
		fmt.Fprintf(lf, "=== %s cell %s (resume %v)\n", time.Now().UTC().Format(time.RFC3339), cell.ID, po.Train.Resume)
		c := exec.CommandContext(ctx, exe, "sweep-cell", "--log-level", logLevel)
		c.Stdin = bytes.NewReader(spec)
		c.Env = env
		c.Stdout, c.Stderr = lf, lf
		c.Cancel = func() error { return c.Process.Signal(os.Interrupt) }
		c.WaitDelay = 5 * time.Minute
		if err := c.Run(); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("cell %s interrupted (log %s): %w", cell.ID, logPath, ctx.Err())
			}
			return fmt.Errorf("cell %s: %w (log %s: %s)", cell.ID, err, logPath, lastLine(logPath))
		}
		return nil
	}
}

// cellEnv is the environment of the cell subprocesses of `--jobs N`: the
// sweep's own, with OPENBLAS_NUM_THREADS and GOMAXPROCS set to cpus/N (at
// least 1) where the user has not set them, so that N cells share the cores
// instead of each spinning up a BLAS thread per core. Measured on 2 cores with
// bert-tiny: two one-thread cells finish about twice as many training steps
// per minute as one two-thread cell (docs/results.md).
func cellEnv(environ []string, cpus, jobs int) []string {
	per := max(1, cpus/max(1, jobs))
	env := slices.Clone(environ)
	for _, k := range []string{"OPENBLAS_NUM_THREADS", "GOMAXPROCS"} {
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			env = append(env, k+"="+strconv.Itoa(per))
		}
	}
	return env
}

// lastLine is the last non-empty line of a log file (the child's error).
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// newSweepCellCmd is the hidden subcommand a sweep runs per cell with --jobs:
// train.PipelineOptions as JSON on stdin, the pipeline of `nvdp run`.
func newSweepCellCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "sweep-cell < OPTIONS.json",
		Short:  "Run one sweep cell (internal: pipeline options as JSON on stdin)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := io.ReadAll(cmd.InOrStdin())
			if err != nil {
				return err
			}
			var po train.PipelineOptions
			dec := json.NewDecoder(bytes.NewReader(b))
			if err := dec.Decode(&po); err != nil {
				return fmt.Errorf("sweep-cell: options on stdin: %w", err)
			}
			po.Train.Quiet = true
			ctx, cancel := signalContext(cmd)
			defer cancel()
			rep, err := train.RunPipeline(ctx, po, nil)
			if err != nil {
				return err
			}
			printRunReport(cmd.OutOrStdout(), rep)
			return nil
		},
	}
}

func init() {
	rootCmd.AddCommand(newSweepCmd())
	rootCmd.AddCommand(newSweepCellCmd())
}
