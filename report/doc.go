// Package report turns a sweep directory, written by `nvdp sweep`, into the
// paper's tables and figures.
//
// [Read] reads the directory: every run under it, each directory holding
// report.json and audit_<mode>.json for the extra audit modes; each task's
// C_mu selection; and the attack reports. A sweep whose sweep.json lists
// cells without report.json is a [*MissingCellsError] unless
// [Options].AllowPartial. The [Tables] it returns are written by [Write]
// and [WriteFile] as markdown, CSV or JSON, and drawn by [WritePlots] as
// PNG and SVG with gonum.org/v1/plot.
//
// Per task, there is a row per variant, training mode, target epsilon, C_mu
// and lambda. The variants are baseline, nvdp, nvdp-clipped and gaussian,
// whose radius C stands for C_mu. The target epsilon is the certified
// epsilon a cell was calibrated to, from train_options.json or the
// epsilon=<E> directory of `nvdp sweep --target-epsilons`. Each row has the
// utility, the BDP eps_mu estimate and the RD max and mean, as mean ±
// standard deviation over seeds, as in paper Tables 3-5, in every audit mode
// the cells carry. Beside them is the certified guarantee of the clipping,
// report.json's privacy.certified, or "–" without it. The numbers are
// labelled as what they are: empirical audits over the audited texts, BDP
// estimates, or certified bounds. The best-trade-off summary is paper Table
// 1.
//
// Per task, the certified privacy-utility frontier puts the selection metric
// against the certified epsilon. It is a table after the task's, in JSON
// tasks[].frontier and in the CSV's last columns target_epsilon,
// calibrated_constant, calibrated_constant_value, wall_seconds_mean and
// wall_seconds_std, chance and pareto_certified. It is also a figure,
// <task>_frontier_certified, with all_frontier_certified tiling the tasks:
// the metric x 100 with sd error bars against the certified epsilon on a log
// axis, a Pareto front per variant, the same rows' BDP estimates as hollow
// markers, and the baseline and the chance level as horizontal lines.
//
// The other figures are the privacy-utility scatter with its Pareto front,
// the training curves from metrics.jsonl, the histogram of the per-pair
// bounds, and the attacks against the certificate; see [PlotDistinguishROC]
// and docs/attacks.md.
//
// The code: read.go and load.go read the files, build.go aggregates cells
// into rows, write.go renders the tables, and plots.go, frontier.go,
// distinguish.go and attacks.go draw the figures.
package report
