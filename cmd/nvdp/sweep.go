package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/speech"
	"github.com/nvdp-project/nvdp/sweep"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
)

func newSweepCmd() *cobra.Command {
	so := &sweep.Options{Base: train.DefaultPipelineOptions()}
	po := &so.Base
	var af *auditFlagValues
	var sv speechFlagValues
	var cmuLambda, cmuTolerance float64
	var noProgress, inProcess, planStages bool
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
Without a target the nvdp-clipped and gaussian cells (principled mode) need --hand-set-clipping:
their given constants, whatever epsilon they certify (the C_mu grid cells are hand-set by
design and get it themselves; the clipped cells after the selection need the flag).
gaussian (the Gaussian-mechanism baseline) has no KL term: lambda is not one of its
dimensions (DIR/<task>/gaussian/seed=<s>/ without a target, C = --c-mu).
--jobs N runs N cells at once as subprocesses of this binary (logs in DIR/logs/).
--plan writes the sweep's stages (DIR/stages.json) and runs nothing: the cells of the C_mu grid
stage and of the main stage, each at a fixed index, for a cluster that runs each index as its
own process ('nvdp sweep stage', 'select', 'finish'; deploy/k8s/sweep).
--tasks lid (alone) sweeps spoken language identification as 'nvdp run --task lid' runs it
(--lid-dir, --max-seconds; the speech task's defaults for the flags left out; utility on
test, so no --c-mu-grid, whose selection reads the report's utility).
'nvdp report DIR' makes the tables and plots.`,
		Example: `  nvdp sweep --tasks sst2,rte --variants baseline,nvdp,nvdp-clipped --lambdas 1e-3,1e-2,1e-1,1 \
    --hand-set-clipping --seeds 1,2,3 --glue-dir ../shared/data/glue --encoder scratch:bert-tiny \
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
			if slices.Contains(so.Tasks, speech.TaskName) {
				// The speech task's options as `nvdp run --task lid` makes them.
				o, err := speechOptions(cmd, &sv, po.Train)
				if err != nil {
					return err
				}
				po.Train = o.Train
				so.Speech = &sweep.SpeechData{DataDir: o.DataDir, MaxSeconds: o.MaxSeconds}
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
			so.CMuTolerance = &cmuTolerance
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
			if planStages {
				p, err := sweep.PlanStages(*so)
				if err != nil {
					return sweepFlagError(err)
				}
				return printJSON(cmd.OutOrStdout(), stageCounts(so.Out, p))
			}
			switch {
			case so.Jobs < 1:
				return fmt.Errorf("--jobs %d: must be >= 1", so.Jobs)
			case so.Jobs > 1 && inProcess:
				return fmt.Errorf("--jobs %d with --in-process: cells in one process run one at a time "+
					"(they would share nn's cores and OpenBLAS's process-wide thread count); drop --in-process to run them as subprocesses", so.Jobs)
			case so.Jobs > 1:
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("--jobs: cannot find this binary to run cells as subprocesses: %w", err)
				}
				so.Runner = sweep.Subprocess([]string{exe, "sweep-cell", "--log-level", logLevel},
					sweep.SubprocessEnv(os.Environ(), runtime.NumCPU(), so.Jobs), filepath.Join(so.Out, sweep.LogDir))
			default:
				so.Progress = newProgress(cmd, noProgress)
				po.Audit.Progress = so.Progress
			}
			ctx, cancel := signalContext(cmd, stopTraining)
			defer cancel()
			res, err := sweep.Run(ctx, *so)
			if res != nil {
				m := res.Manifest
				fmt.Fprintf(cmd.OutOrStdout(), "sweep %s: %d cells (%s), %d ran this time; manifest %s\n", so.Out, len(m.Cells),
					fmtCounts(m.Counts), res.Ran, filepath.Join(so.Out, sweep.ManifestFile))
				for _, task := range so.Tasks {
					if s := m.Selections[task]; s != nil {
						fmt.Fprintf(cmd.OutOrStdout(), "%s C_mu = %g: %s\n", task, s.CMu, s.Reason)
					}
				}
			}
			if ctx.Err() != nil {
				return fmt.Errorf("sweep interrupted: finished cells keep their report.json, the others resume when the same command is run again")
			}
			return sweepFlagError(err)
		},
	}
	fs := cmd.Flags()
	trainFlags(fs, &po.Train, &noProgress)
	for _, f := range []string{"task", "variant", "lambda", "seed", "resume", "stop-after-steps"} {
		_ = fs.MarkHidden(f)
	}
	fs.StringVar(&tasks, "tasks", "sst2", "comma-separated GLUE tasks, or lid alone (spoken language identification: --lid-dir, --max-seconds)")
	speechFlags(fs, &sv)
	fs.StringVar(&variants, "variants", "nvdp,nvdp-clipped", "comma-separated variants: baseline, nvdp, nvdp-clipped, gaussian")
	fs.StringVar(&lambdas, "lambdas", "1e-3,1e-2,1e-1,1", "comma-separated lambda_G = lambda_D values (nvdp variants)")
	fs.StringVar(&seeds, "seeds", "1", "comma-separated seeds")
	fs.IntVar(&so.Jobs, "jobs", 1, "cells run at once; N > 1 runs each as a subprocess of this binary")
	fs.BoolVar(&planStages, "plan", false, "write the sweep's stages (DIR/stages.json) and run nothing: see 'nvdp sweep stage'")
	fs.BoolVar(&inProcess, "in-process", false, "run the cells in this process, one at a time (as --jobs 1 does; with --jobs N > 1 an error)")
	fs.StringVar(&cmuGrid, "c-mu-grid", "", "comma-separated C_mu grid for nvdp-clipped (selection as paper §3.2)")
	fs.Float64Var(&cmuTolerance, "c-mu-tolerance", sweep.DefaultCMuTolerance, "C_mu selection: absolute tolerance on the dev selection metric (0: the best only)")
	fs.Float64Var(&cmuLambda, "c-mu-lambda", 0, "C_mu selection: lambda of the grid runs (default: the first of --lambdas)")
	fs.StringVar(&cmuSeeds, "c-mu-seeds", "", "C_mu selection: seeds of the grid runs (default: the first of --seeds)")
	fs.StringVar(&targetEpsilons, "target-epsilons", "", "comma-separated certified epsilons (at --delta): a sweep dimension of the nvdp-clipped and gaussian cells, each calibrated to one")
	fs.StringVar(&extraModes, "extra-audit-modes", "", "also audit every NVDP cell in these modes (e.g. reference), written to audit_<mode>.json")
	af = pipelineAuditFlags(fs, po)
	cmd.AddCommand(newSweepStageCmd(), newSweepSelectCmd(), newSweepFinishCmd())
	return cmd
}

func fmtCounts(c map[string]int) string {
	var s []string
	for _, k := range []string{sweep.CellDone, sweep.CellRunning, sweep.CellPending, sweep.CellInterrupted, sweep.CellFailed, sweep.CellSkipped} {
		if c[k] > 0 {
			s = append(s, fmt.Sprintf("%d %s", c[k], k))
		}
	}
	return strings.Join(s, ", ")
}

// sweepFlagError names the flag of an invalid sweep option (an *option.Error
// anywhere in err's chain; flagError's names).
func sweepFlagError(err error) error {
	var oe *option.Error
	if errors.As(err, &oe) {
		return flagError(oe)
	}
	return err
}

// newSweepCellCmd is the hidden subcommand a sweep runs per cell with --jobs
// N > 1 (sweep.Subprocess): the cell as JSON on stdin (sweep.ReadCellOptions),
// the pipeline of `nvdp run` (sweep.RunCell).
func newSweepCellCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "sweep-cell < OPTIONS.json",
		Short:  "Run one sweep cell (internal: pipeline options as JSON on stdin)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := sweep.ReadCellOptions(cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("sweep-cell: stdin: %w", err)
			}
			ctx, cancel := signalContext(cmd, stopTraining)
			defer cancel()
			rep, err := sweep.RunCell(ctx, spec, newProgress(cmd, true)) // stderr is the cell's log
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
