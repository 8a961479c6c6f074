package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/report"
	"github.com/spf13/cobra"
)

// reportWriters are the table formats of `nvdp report --format`.
var reportWriters = map[string]func(io.Writer, *report.Tables) error{
	"md": report.WriteMarkdown, "markdown": report.WriteMarkdown, "csv": report.WriteCSV, "json": report.WriteJSON,
}

// reportFlags are the flags of `nvdp report`.
type reportFlags struct {
	format, out, plotsDir, attacks string
	plots, allowPartial            bool
}

// reportLong is the Long help of `nvdp report`.
const reportLong = `Reads every report.json under DIR (an 'nvdp sweep' directory, or any tree of 'nvdp run'
outputs) and writes, per task, the table of the paper's Tables 3-5: rows model x lambda,
columns the dev metric(s) x 100, the BDP eps_mu estimate and RD max / avg (empirical: over
the audited pairs, not a guarantee), mean ± std over seeds, in every audit mode the cells
carry (report.json, and audit_<mode>.json from 'nvdp sweep --extra-audit-modes'), and the
certified RD and epsilon (the clipping's guarantee for every pair of inputs, report.json
privacy.certified; "–" for reports without it); then the best-trade-off summary of Table 1.
Rows are per variant, target epsilon (the certified epsilon a cell was calibrated to:
train_options.json target_epsilon, or the epsilon=<E> directory of 'nvdp sweep
--target-epsilons'), C_mu and lambda. C_mu grid cells are left out of the tables; the C_mu
selection is printed under its task. A sweep whose sweep.json (stages.json of a sweep in
stages not finished) lists cells without report.json (failed, interrupted, not run) is an
error naming them; --allow-partial reports
the others, warns with their names and lists them above the tables (json: missing_cells).

Per task with certified data, the certified privacy-utility frontier table: one row per
private variant (nvdp-clipped, gaussian, ...) and target epsilon, plus the baseline: seeds,
the selection metric (mean ± sd), certified epsilon (delta) and certified RD at its order,
the calibrated constant (C_mu, or the gaussian radius C), the empirical rd_max and BDP
eps_mu estimate (principled audit; not guarantees), the wall time, and whether the row is
on its variant's certified Pareto front; the chance level (report.json collapse) and the
rows left out for an infinite certified epsilon are noted under it. The CSV carries the
same in its last columns (target_epsilon, calibrated_constant[_value], wall_seconds_*,
chance, pareto_certified), the JSON as tasks[].frontier.

--plots writes PNG and SVG figures to --plots-dir (default DIR/plots): privacy-utility
scatter with the Pareto front per task (<task>_tradeoff_<mode>_<x>, against rd_max and BDP
eps_mu; principled plots also show the certified guarantee as its own series); the
certified frontier per task (<task>_frontier_certified: metric against certified epsilon
on a log axis, mean ± sd over seeds, a Pareto front per variant, the empirical BDP estimate
of the same rows as hollow markers, the baseline and chance level as horizontal lines) and,
with more than one task, all of them tiled (all_frontier_certified); training curves from
metrics.jsonl and the histogram of per-pair bounds from the audit; per task with
distinguishing attacks ('nvdp attack distinguish --out .../attack_distinguish*.json', found
under --attacks, default DIR; placed by the cell of their --model) the certified frontier next
to the attacks' epsilon lower bounds against the certified epsilon
(<task>_frontier_distinguish; docs/attacks.md). The learned attacks found there too
('nvdp attack invert --json > .../attack_invert*.json', 'nvdp attack attribute --json >
.../attack_attribute*.json') get a table per task and attack (md, csv: extra attack_* columns
and one line per model, attacker and metric; json: learned_attacks) and, with --plots, their
scores against the certified epsilon next to the frontier, with the encoder-output reference,
the chance level and, for the attribute's AUC, the certified bound (<task>_frontier_invert:
token F1 and exact-token accuracy; <task>_frontier_attribute: AUC and accuracy).`

func newReportCmd() *cobra.Command {
	f := &reportFlags{}
	cmd := &cobra.Command{
		Use:   "report DIR [--format md|csv|json] [--plots]",
		Short: "Paper-style tables (and plots) of a sweep directory",
		Long:  reportLong,
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
	if reportWriters[f.format] == nil { // before any work or file
		return fmt.Errorf("--format %q: want md, csv or json", f.format)
	}
	t, err := f.tables(dir)
	if err != nil {
		return err
	}
	if err := f.writeTables(cmd.OutOrStdout(), t); err != nil {
		return err
	}
	if !f.plots {
		return nil
	}
	if f.plotsDir == "" {
		f.plotsDir = filepath.Join(dir, "plots")
	}
	files, err := report.WritePlots(t, f.plotsDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d plot files to %s\n", len(files), f.plotsDir)
	return nil
}

// tables reads the sweep directory dir (report.Read), the attack reports
// under --attacks (default dir); with --allow-partial, a warning names the
// cells of the sweep without report.json.
func (f *reportFlags) tables(dir string) (*report.Tables, error) {
	t, err := report.Read(dir, report.Options{Attacks: f.attacks, AllowPartial: f.allowPartial})
	var me *report.MissingCellsError
	if errors.As(err, &me) {
		return nil, fmt.Errorf("%w (--allow-partial reports them)", err)
	}
	if err != nil {
		return nil, err
	}
	if len(t.Missing) > 0 {
		slog.Warn("a partial sweep: cells without report.json are left out of the tables", "dir", dir, "missing", len(t.Missing),
			"cells", report.MissingList(t.Missing))
	}
	return t, nil
}

// writeTables writes t in --format to --out (atomically: a failed write
// leaves no partial file) or, without --out, to stdout.
func (f *reportFlags) writeTables(stdout io.Writer, t *report.Tables) error {
	write := func(w io.Writer) error { return reportWriters[f.format](w, t) }
	if f.out == "" {
		return write(stdout)
	}
	if err := os.MkdirAll(filepath.Dir(f.out), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(f.out, write)
}

func init() { rootCmd.AddCommand(newReportCmd()) }
