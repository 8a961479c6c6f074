package train

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// WriteText writes r as the table `nvdp run` prints: the task, variant and
// constants, the privacy target met, training, utility, the audit with the
// certified guarantee (see [privacy.CertifiedReport.WriteRows]), the
// collapse check, the non-private baseline, the seconds and the report file.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("task / variant / mode", fmt.Sprintf("%s / %s / %s", r.Task, r.Variant, r.Mode))
	row("encoder (backend)", fmt.Sprintf("%s (%s)", r.Encoder, r.Backend))
	if r.Variant != "baseline" && r.Variant != nvib.ModelGaussian {
		row("lambda", fmt.Sprint(r.Lambda))
	}
	if r.CAlphaMax > 0 {
		row("C_mu / C_amin / C_amax", fmt.Sprintf("%g / %.6g / %g", r.CMu, r.CAlphaMin, r.CAlphaMax))
	}
	if r.Variant == nvib.ModelGaussian {
		row("token radius C / noise sigma", fmt.Sprintf("%.6g / %g", r.CMu, r.Sigma))
	}
	if c := r.Calibration; c != nil && c.Calibration != nil && c.Guarantee != nil { // runs without a target have none
		t, g := c.Target, c.Guarantee
		target := fmt.Sprintf("epsilon %g at delta %g", t.Epsilon, t.Delta)
		if t.Kind == privacy.KindRD {
			target = fmt.Sprintf("RD %g nats at order %g", t.RD, t.Order)
		}
		constant := fmt.Sprintf("logvar margin %.6g", c.LogvarMargin)
		if c.Variant == nvib.ModelGaussian {
			constant = fmt.Sprintf("C %.6g", c.CMu)
		}
		row("privacy target", fmt.Sprintf("%s, %d release(s): %s, certified epsilon %s at delta %g (%s)",
			target, t.Releases, constant, privacy.FormatValue(g.Epsilon), g.Delta, model.CertificateFile))
	}
	if t := r.Training; t != nil {
		row("training", fmt.Sprintf("%d epochs, %d steps, best epoch %d, %.0f s", t.Epochs, t.Steps, t.BestEpoch, t.Seconds))
	}
	names := make([]string, 0, len(r.Utility))
	for k := range r.Utility {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		row("utility "+r.UtilitySplit+" "+k, fmt.Sprintf("%.4f", r.Utility[k]))
	}
	if p := r.Privacy; p != nil {
		row("audit", fmt.Sprintf("%s, %s split, %d examples x %d components, order %g", p.Mode, p.Split, p.Examples, p.Components, p.Order))
		pairs := p.Split + " pairs"
		if p.Mode == privacy.ModeReference {
			pairs = "z-filtered within-batch " + pairs
		}
		row("RD max over "+pairs+" ("+privacy.LabelEmpirical+", not a guarantee)", privacy.FormatValue(p.RDMax))
		row("RD mean ("+privacy.LabelEmpirical+")", privacy.FormatOptional(p.RDMean))
		row(fmt.Sprintf("BDP ε_μ (%s), delta %g", privacy.LabelEstimate, p.Delta), privacy.FormatOptional(p.BDPEpsilon))
		row("invalid pairs", fmt.Sprintf("%d of %d", p.InvalidPairs, p.Pairs))
		if p.Certified == nil {
			row("certified guarantee", "none in "+ReportFile)
		}
		p.Certified.WriteRows(row)
	} else {
		row("privacy", "null ("+r.Note+")")
	}
	if c := r.Collapse; c != nil {
		v := fmt.Sprintf("no (%s %.4f, chance %.4f)", c.Metric, c.Value, c.Chance)
		if c.AtChance {
			v = c.Reason
		}
		row("collapse check", v)
	}
	if b := r.Baseline; b != nil {
		v := fmt.Sprintf("%.4f", b.Mean)
		if len(b.Values) > 1 {
			v = fmt.Sprintf("%.4f ± %.4f over %d seeds", b.Mean, b.SD, len(b.Values))
		}
		if u, ok := r.Utility[b.Metric]; ok {
			v += fmt.Sprintf("; this run %+.1f points", 100*(u-b.Mean))
		}
		row(fmt.Sprintf("non-private baseline %s %s (%s: %s)", r.UtilitySplit, b.Metric, b.Source, b.Path), v)
	}
	row("seconds", fmt.Sprintf("%.1f", r.Seconds))
	row("report", r.Dir+"/"+ReportFile)
	return tw.Flush()
}

// WriteText writes the summary of r as `nvdp train` prints it: how the
// run ended, its epochs, steps and seconds, and the best dev metric with
// the model directory.
func (r *Result) WriteText(w io.Writer) {
	status := "finished"
	switch {
	case r.Interrupted:
		status = "stopped (resume with --resume)"
	case r.StoppedEarly:
		status = "stopped early"
	}
	fmt.Fprintf(w, "%s %s: %s after %d epochs (%d steps, %.0f s, backend %s)\n", r.Task, r.Variant, status, r.Epochs, r.Steps, r.Seconds, r.Backend)
	if r.BestEpoch > 0 {
		fmt.Fprintf(w, "best dev %s %.4f at epoch %d; model in %s\n", r.MetricName, float64(r.BestMetric), r.BestEpoch, r.Dir)
	}
}

// WriteText writes the summary of r as `nvdp eval` prints it: the task,
// split and examples, the metrics by name, the files written and the
// certified guarantee (see [privacy.CertifiedReport.WriteRows]).
func (r *EvalResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s %s (%s): %d examples\n", r.Task, r.Split, r.Variant, r.Examples)
	names := make([]string, 0, len(r.Metrics))
	for k := range r.Metrics {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(w, "  %-22s %.4f\n", k, r.Metrics[k])
	}
	fmt.Fprintf(w, "predictions: %s\n", r.Predictions)
	if r.Posteriors != "" {
		fmt.Fprintf(w, "posteriors:  %s (%d components)\n", r.Posteriors, r.Components)
	}
	if r.Certified != nil {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		r.Certified.WriteRows(func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) })
		tw.Flush()
	}
}
