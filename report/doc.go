// Package report turns a sweep directory (`nvdp sweep`) into the paper's
// tables and figures.
//
// [Read] reads the directory: every run under it (each directory holding
// report.json, and audit_<mode>.json for the extra audit modes), each
// task's C_mu selection and the attack reports. A sweep whose sweep.json
// lists cells without report.json is a [*MissingCellsError] unless
// [Options].AllowPartial. The [Tables] it returns are written by
// [WriteMarkdown], [WriteCSV] and [WriteJSON], and drawn by [WritePlots]
// (PNG and SVG, with gonum.org/v1/plot).
//
// Per task, the rows are per variant (baseline, nvdp, nvdp-clipped,
// gaussian), training mode, target epsilon (the certified epsilon a cell
// was calibrated to: train_options.json, or the epsilon=<E> directory of
// `nvdp sweep --target-epsilons`), C_mu (the radius C for gaussian) and
// lambda. Each row has the utility, the BDP eps_mu estimate and the RD max
// / avg as mean ± standard deviation over seeds (paper Tables 3-5), in every
// audit mode the cells carry, beside the certified guarantee of the
// clipping (report.json privacy.certified; "–" without it). The numbers are
// labelled as what they are: empirical audits over the audited texts, BDP
// estimates, certified bounds. The best-trade-off summary is paper Table 1.
//
// Per task, the certified privacy-utility frontier puts the selection
// metric against the certified epsilon: a table after the task's (JSON
// tasks[].frontier; the CSV's last columns target_epsilon,
// calibrated_constant, calibrated_constant_value, wall_seconds_mean/std,
// chance, pareto_certified) and a figure (<task>_frontier_certified, and
// all_frontier_certified tiling the tasks): the metric x 100 with sd error
// bars against the certified epsilon on a log axis, a Pareto front per
// variant, the same rows' BDP estimates as hollow markers, the baseline and
// the chance level as horizontal lines. The other figures are the
// privacy-utility scatter with its Pareto front, the training curves from
// metrics.jsonl, the histogram of the per-pair bounds, and the attacks
// against the certificate ([PlotDistinguishROC], docs/attacks.md).
//
// The code: read.go and load.go read the files, build.go aggregates cells
// into rows, write.go renders the tables, plots.go, frontier.go,
// distinguish.go and attacks.go draw the figures.
package report
