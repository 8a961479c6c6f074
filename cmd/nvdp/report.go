package main

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/nvdp-project/nvdp/report"
	"github.com/spf13/cobra"
)

type reportFlags struct {
	format, out, plotsDir, attacks string
	plots, allowPartial            bool
}

func newReportCmd() *cobra.Command {
	f := &reportFlags{}
	cmd := &cobra.Command{
		Use:   "report DIR [--format md|csv|json] [--plots]",
		Short: "Paper-style tables (and plots) of a sweep directory",
		Long: `Reads every report.json under DIR (an 'nvdp sweep' directory, or any tree of 'nvdp run'
outputs) and writes per task the table of the paper's Tables 3-5, the certified privacy-utility
frontier, the best-trade-off summary of Table 1 and the attack tables (--attacks); --plots writes
the figures. Columns, figures, formats and partial sweeps: docs/results.md ("nvdp report") and
docs/attacks.md ("Along the frontier").`,
		Example: `  nvdp report sweeps/glue --plots
  nvdp report sweeps/frontier --plots --plots-dir figs   # figs/<task>_frontier_certified.{png,svg}
  nvdp report sweeps/glue --format csv --out glue.csv`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args[0]) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.format, "format", "md", "table format: md | csv | json")
	fs.StringVar(&f.out, "out", "", "write the tables to this file instead of stdout")
	fs.BoolVar(&f.plots, "plots", false, "also write the figures (PNG and SVG)")
	fs.StringVar(&f.plotsDir, "plots-dir", "", "directory of the figures (default DIR/plots)")
	fs.BoolVar(&f.allowPartial, "allow-partial", false, "report a sweep whose sweep.json (or stages.json) lists cells without report.json (failed, not run): a warning names them, the tables leave them out (default: an error naming them)")
	fs.StringVar(&f.attacks, "attacks", "", "directory with the attack reports to tabulate and plot (attack_distinguish*.json, attack_invert*.json, attack_attribute*.json; default DIR)")
	return cmd
}

// run builds the tables of the sweep directory dir, writes them to --out
// or stdout and, with --plots, the figures.
func (f *reportFlags) run(cmd *cobra.Command, dir string) error {
	if err := report.CheckFormat(f.format); err != nil { // before any work or file
		return flagError(err)
	}
	t, err := report.Read(dir, report.Options{Attacks: f.attacks, AllowPartial: f.allowPartial})
	if me := (*report.MissingCellsError)(nil); errors.As(err, &me) {
		return fmt.Errorf("%w (--allow-partial reports them)", err)
	} else if err != nil {
		return err
	}
	if f.out == "" {
		err = report.Write(cmd.OutOrStdout(), t, f.format)
	} else {
		err = report.WriteFile(f.out, t, f.format)
	}
	if err != nil || !f.plots {
		return err
	}
	plots := cmp.Or(f.plotsDir, filepath.Join(dir, "plots"))
	files, err := report.WritePlots(t, plots)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d plot files to %s\n", len(files), plots)
	return nil
}
