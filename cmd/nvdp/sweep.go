package main

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/sweep"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
)

// sweepFlags are the flags of `nvdp sweep` beyond the train and audit flags
// of `nvdp run`, which bind to the sweep options' base.
type sweepFlags struct {
	af                                                                      *auditStrings
	dv                                                                      task.Data
	cmuLambda                                                               float64
	noProgress, inProcess, planStages                                       bool
	tasks, variants, lambdas, seeds, cmuGrid, cmuSeeds, extraModes, targets string
}

func newSweepCmd() *cobra.Command {
	so := &sweep.Options{Base: train.DefaultPipelineOptions(), CMuTolerance: new(float64)}
	po := &so.Base
	sf := new(sweepFlags)
	cmd := &cobra.Command{
		Use:   "sweep --tasks T,.. --variants V,.. --lambdas L,.. --seeds S,.. [train flags] --out DIR",
		Short: "Run the paper's grid (tasks x variants x lambdas x seeds): one `nvdp run` per cell",
		Long: `Runs every cell of tasks x variants x lambdas x seeds with the pipeline of 'nvdp run', each in
DIR/<task>/<variant>/..., listed with its status in DIR/sweep.json; every train and audit flag of
'nvdp run' applies to all cells. Done cells are skipped and interrupted ones resume: rerun the
same command. The nvdp-clipped and gaussian cells need --target-epsilons, one --target-epsilon /
--target-rd, or --hand-set-clipping. Details (layout, --c-mu-grid, --jobs, --plan, --tasks lid):
docs/results.md ("nvdp sweep"). 'nvdp report DIR' makes the tables.`,
		Example: `  nvdp sweep --tasks sst2,rte --variants baseline,nvdp,nvdp-clipped --lambdas 1e-3,1e-2,1e-1,1 \
    --hand-set-clipping --seeds 1,2,3 --glue-dir ../shared/data/glue --encoder scratch:bert-tiny \
    --vocab ../shared/models/bert-base-uncased-vocab/vocab.txt --epochs 3 --out sweeps/glue`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := sf.bind(cmd, so); err != nil {
				return err
			}
			if sf.planStages {
				p, err := sweep.PlanStages(*so)
				if err != nil {
					return sweepFlagError(err)
				}
				return printJSON(cmd.OutOrStdout(), p.Summary(so.Out))
			}
			if err := so.SetRunner([]string{"sweep-cell", "--log-level", logLevel}, newProgress(cmd, sf.noProgress)); err != nil {
				return flagError(err)
			}
			return runSweep(cmd, so)
		},
	}
	fs := cmd.Flags()
	trainFlags(fs, &po.Train, &sf.noProgress)
	for _, k := range sweep.PerCell {
		_ = fs.MarkHidden(optionFlag(k))
	}
	fs.StringVar(&sf.tasks, "tasks", "sst2", "comma-separated GLUE tasks, or lid alone (spoken language identification: --lid-dir, --max-seconds)")
	dataFlags(fs, &sf.dv)
	fs.StringVar(&sf.variants, "variants", "nvdp,nvdp-clipped", "comma-separated variants: baseline, nvdp, nvdp-clipped, gaussian")
	fs.StringVar(&sf.lambdas, "lambdas", "1e-3,1e-2,1e-1,1", "comma-separated lambda_G = lambda_D values (nvdp variants)")
	fs.StringVar(&sf.seeds, "seeds", "1", "comma-separated seeds")
	fs.IntVar(&so.Jobs, "jobs", 1, "cells run at once; N > 1 runs each as a subprocess of this binary")
	fs.BoolVar(&sf.planStages, "plan", false, "write the sweep's stages (DIR/stages.json) and run nothing: see 'nvdp sweep stage'")
	fs.BoolVar(&sf.inProcess, "in-process", false, "run the cells in this process, one at a time (as --jobs 1 does; with --jobs N > 1 an error)")
	fs.StringVar(&sf.cmuGrid, "c-mu-grid", "", "comma-separated C_mu grid for nvdp-clipped (selection as paper §3.2)")
	fs.Float64Var(so.CMuTolerance, "c-mu-tolerance", sweep.DefaultCMuTolerance, "C_mu selection: absolute tolerance on the dev selection metric (0: the best only)")
	fs.Float64Var(&sf.cmuLambda, "c-mu-lambda", 0, "C_mu selection: lambda of the grid runs (default: the first of --lambdas)")
	fs.StringVar(&sf.cmuSeeds, "c-mu-seeds", "", "C_mu selection: seeds of the grid runs (default: the first of --seeds)")
	fs.StringVar(&sf.targets, "target-epsilons", "", "comma-separated certified epsilons (at --delta): a sweep dimension of the nvdp-clipped and gaussian cells, each calibrated to one")
	fs.StringVar(&sf.extraModes, "extra-audit-modes", "", "also audit every NVDP cell in these modes (e.g. reference), written to audit_<mode>.json")
	sf.af = pipelineAuditFlags(fs, po)
	cmd.AddCommand(newSweepStageCmd(), newSweepSelectCmd(), newSweepFinishCmd())
	return cmd
}

// bind sets so from the flags (the lists, each task's defaults for the
// flags left out, the C_mu selection, the audit and the targets) and
// refuses the flags the sweep decides per cell; the sweep validates the
// result.
func (sf *sweepFlags) bind(cmd *cobra.Command, so *sweep.Options) error {
	po := &so.Base
	so.Out = po.Train.Out
	var modes []string
	for _, err := range []error{
		parseInto(&so.Tasks, "--tasks", sf.tasks, false, option.ParseList),
		parseInto(&so.Variants, "--variants", sf.variants, false, option.ParseList),
		so.ApplyTasks(givenFlags(cmd), &sf.dv), // each task's options as `nvdp run --task` makes them
		parseInto(&so.Lambdas, "--lambdas", sf.lambdas, false, option.ParseFloats),
		parseInto(&so.CMuGrid, "--c-mu-grid", sf.cmuGrid, true, option.ParseFloats),
		parseInto(&so.TargetEpsilons, "--target-epsilons", sf.targets, true, option.ParseFloats),
		parseInto(&so.Seeds, "--seeds", sf.seeds, false, option.ParseUints),
		parseInto(&so.CMuSeeds, "--c-mu-seeds", sf.cmuSeeds, true, option.ParseUints),
		parseInto(&modes, "--extra-audit-modes", sf.extraModes, true, option.ParseList),
	} {
		if err != nil {
			return flagError(err)
		}
	}
	if err := so.CheckGiven(givenFlags(cmd)); err != nil {
		return flagError(err)
	}
	if cmd.Flags().Changed("c-mu-lambda") {
		so.CMuLambda = &sf.cmuLambda
	}
	for _, m := range modes {
		so.ExtraAuditModes = append(so.ExtraAuditModes, privacy.Mode(m))
	}
	if err := sf.af.finish(cmd, po); err != nil {
		return err
	}
	so.ResolveTargets(givenFlags(cmd))
	return nil
}

// runSweep runs the sweep until done or interrupted and prints its counts
// and C_mu selections.
func runSweep(cmd *cobra.Command, so *sweep.Options) error {
	ctx, cancel := signalContext(cmd, stopTraining)
	defer cancel()
	res, err := sweep.Run(ctx, *so)
	if res != nil {
		res.WriteText(cmd.OutOrStdout(), so.Out, so.Tasks)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("sweep interrupted: finished cells keep their report.json, the others resume when the same command is run again")
	}
	return sweepFlagError(err)
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
			return rep.WriteText(cmd.OutOrStdout())
		},
	}
}

// The sweep in stages (sweep.PlanStages; deploy/k8s/sweep; docs/results.md,
// "A sweep in stages"): `nvdp sweep --plan` writes the stages, `nvdp sweep
// stage` runs one index of one, `select` chooses C_mu between them,
// `finish` writes the manifest.

// sweepDirCmd makes cmd a subcommand of `nvdp sweep` on the sweep directory
// --out (required), which run gets.
func sweepDirCmd(cmd *cobra.Command, run func(cmd *cobra.Command, out string) error) *cobra.Command {
	return requiredFlagCmd(cmd, "out", "the sweep directory (required)", run)
}

// newSweepStageCmd is `nvdp sweep stage`: one index of a stage.
func newSweepStageCmd() *cobra.Command {
	var stage string
	var index int
	var noProgress bool
	cmd := sweepDirCmd(&cobra.Command{
		Use:   "stage --out DIR --stage grid|main --index I",
		Short: "Run cell I of a stage of a planned sweep (one index of a Kubernetes Indexed Job)",
		Long: `Run cell I of the stage (grid: the C_mu grid; main: every other cell, after 'nvdp sweep
select') of the sweep planned in DIR ('nvdp sweep --plan'), as 'nvdp sweep' runs a cell:
skipped when its report.json is the run asked for, resumed from its checkpoint, an nvdp-clipped
cell linked to the grid run that is the same. Its status goes to DIR/stages/<stage>/<I>.json
only, so the indices of a stage run at once on a shared volume. Exit status 1 when it fails.`},
		func(cmd *cobra.Command, out string) error {
			ctx, cancel := signalContext(cmd, stopTraining)
			defer cancel()
			c, err := sweep.RunStageCell(ctx, out, stage, index, nil, newProgress(cmd, noProgress))
			if err != nil {
				return sweepFlagError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sweep %s: %s cell %d (%s): %s\n", out, stage, index, c.ID, c.Status)
			return nil
		})
	cmd.Flags().StringVar(&stage, "stage", "", "the stage: grid or main (required)")
	cmd.Flags().IntVar(&index, "index", -1, "the cell's index in the stage: JOB_COMPLETION_INDEX (required)")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "no progress bar or lines")
	return cmd
}

// newSweepSelectCmd is `nvdp sweep select`: the C_mu selection between the
// stages.
func newSweepSelectCmd() *cobra.Command {
	return sweepDirCmd(&cobra.Command{
		Use:   "select --out DIR",
		Short: "Select C_mu from the finished grid stage of a planned sweep and give the main stage its cells",
		Long: `Select C_mu per task from the grid stage's cells, as 'nvdp sweep' does (DIR/<task>/c_mu_selection.json),
and give the main stage's nvdp-clipped cells that C_mu, or skip them when a grid cell failed
(DIR/stages.json). Refused while a grid cell has not run. Prints the stages as JSON.`},
		func(cmd *cobra.Command, out string) error {
			p, err := sweep.SelectStage(out)
			if err != nil {
				return err
			}
			for task, s := range p.Selections {
				slog.Info("C_mu selection", "task", task, "c_mu", s.CMu, "reason", s.Reason)
			}
			return printJSON(cmd.OutOrStdout(), p.Summary(out))
		})
}

// newSweepFinishCmd is `nvdp sweep finish`: the manifest of a sweep run in
// stages.
func newSweepFinishCmd() *cobra.Command {
	return sweepDirCmd(&cobra.Command{
		Use:   "finish --out DIR",
		Short: "Write DIR/sweep.json of a sweep run in stages, as 'nvdp sweep' writes it",
		Long: `Gather the cells' records of the stages into DIR/sweep.json, the manifest 'nvdp sweep' writes,
and print its summary; then 'nvdp report DIR'. Exit status 1 (after writing it) when a cell
failed or has not run.`},
		func(cmd *cobra.Command, out string) error {
			m, err := sweep.FinishStages(out)
			if m != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "sweep %s: %d cells (%s); manifest %s\n", out, len(m.Cells), m.CountsText(), filepath.Join(out, sweep.ManifestFile))
			}
			return err
		})
}
