package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/nvdp-project/nvdp/sweep"
	"github.com/spf13/cobra"
)

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
