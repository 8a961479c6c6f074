package audit

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nvdp-project/nvdp/privacy"
)

// WriteText writes r, the audit of the posterior file path, as the text
// `nvdp audit` prints.
//
// The text is a table of the audit's rows (reference or principled mode, its
// empirical numbers labelled by emp), the certified guarantee cert (nil:
// none, said in a note; see [privacy.CertifiedReport.WriteRows]) and the
// seconds, then the histogram of the bounds, the BDP per moment order and
// the notes.
func (r *Report) WriteText(w io.Writer, path string, emp EmpiricalLabel, cert *privacy.CertifiedReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("file", path)
	row("mode", string(r.Mode))
	row("examples x components x dims", fmt.Sprintf("%d x %d x %d", r.Examples, r.Components, r.Dims))
	row("Renyi order", strconv.FormatFloat(r.Order, 'g', -1, 64))
	if r.Mode == privacy.ModeReference {
		referenceRows(row, r)
	} else {
		principledRows(row, r, emp)
	}
	cert.WriteRows(row)
	row("seconds", fmt.Sprintf("%.2f", r.Seconds))
	tw.Flush()
	if r.Histogram != nil && len(r.Histogram.Counts) > 0 {
		printHistogram(w, r.Histogram)
	}
	if len(r.BDPOrders) > 0 {
		printBDPOrders(w, r.BDPOrders)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if cert == nil {
		fmt.Fprintln(w, "note: no certified guarantee: the file's metadata carries no clip constants (clip_*); every number above is empirical")
	}
}

// referenceRows writes the rows of a reference-mode audit: its batches
// and the z-filtered and unfiltered within-batch bounds.
func referenceRows(row func(k, v string), r *Report) {
	row("batch size / q", fmt.Sprintf("%d / %.6g", r.BatchSize, r.Q))
	row("batches (skipped)", fmt.Sprintf("%d (%v)", r.Batches, r.SkippedBatches))
	row("within-batch pairs", fmt.Sprint(r.Pairs))
	row("invalid pairs", fmt.Sprint(r.InvalidPairs))
	row("RD max (z-filtered; empirical batch estimate, not a guarantee)", privacy.FormatValue(r.RDMax))
	row("RD mean (z-filtered; empirical)", privacy.FormatOptional(r.RDMean))
	row("RD max (unfiltered; empirical, not a guarantee)", privacy.FormatOptional(r.RDMaxUnfiltered))
	row("RD mean (unfiltered; empirical)", privacy.FormatOptional(r.RDMeanUnfiltered))
	row("accountant cost C", privacy.FormatOptional(r.AccountantCost))
	row(fmt.Sprintf("BDP ε_μ estimate (released accountant, delta %g)", r.Delta), privacy.FormatOptional(r.BDPEpsilon))
}

// principledRows writes the rows of a principled audit: its pairs, the
// invalid ones, the empirical bounds and the BDP estimates (labelled by emp).
func principledRows(row func(k, v string), r *Report, emp EmpiricalLabel) {
	split := ""
	if s := r.Metadata["split"]; s != "" {
		split = s + " "
	}
	pairs := fmt.Sprint(r.Pairs)
	if r.Sampled {
		pairs += fmt.Sprintf(" (sampled, seed %d)", r.Seed)
	}
	row("ordered pairs", pairs)
	row("mask / Gaussian direction", fmt.Sprintf("%v / %s", r.Mask, r.GaussianDirection))
	row("invalid pairs (+Inf)", fmt.Sprint(r.InvalidPairs))
	for _, ip := range r.InvalidExamples {
		row(fmt.Sprintf("  (%d, %d)", ip.Q, ip.QPrime), ip.Reason)
	}
	arg := ""
	if len(r.Argmax) == 2 {
		arg = fmt.Sprintf("  at (q=%d, q'=%d)", r.Argmax[0], r.Argmax[1])
	}
	over := fmt.Sprintf("%d(%d-1) = %d %spairs", r.Examples, r.Examples, r.Pairs, split)
	if r.Sampled {
		over = fmt.Sprintf("a sample of %d of the %d(%d-1) %spairs", r.Pairs, r.Examples, r.Examples, split)
	}
	row("RD max over "+over+" (empirical, not a guarantee)", privacy.FormatValue(r.RDMax)+arg)
	row("RD mean (empirical)", privacy.FormatOptional(r.RDMean))
	if r.Quantiles != nil {
		sketch := ""
		if r.QuantileAccuracy != nil {
			sketch = fmt.Sprintf(", sketch within %g relative", *r.QuantileAccuracy)
		}
		row("RD p50 / p90 / p99 (empirical"+sketch+")", fmt.Sprintf("%s / %s / %s", privacy.FormatValue(r.Quantiles["p50"]), privacy.FormatValue(r.Quantiles["p90"]), privacy.FormatValue(r.Quantiles["p99"])))
	}
	worst := privacy.FormatOptional(r.BDPEpsilon)
	if r.BDPOrder != nil {
		worst += fmt.Sprintf("  at moment order %s", privacy.FormatValue(*r.BDPOrder))
	}
	row(fmt.Sprintf("BDP ε_μ estimate, worst individual (delta %g)", r.Delta), worst)
	row("BDP ε_μ estimate, pooled pairs", privacy.FormatOptional(r.BDPEpsilonPooled))
	row("  BDP ε_μ above: "+privacy.LabelEstimate+"s", strings.TrimSuffix(strings.TrimPrefix(emp.BDP, privacy.LabelEstimate+" ("), ")"))
}

// printHistogram prints the histogram of the finite per-pair bounds, a bar
// of up to 40 '#' per bin.
func printHistogram(w io.Writer, h *Histogram) {
	fmt.Fprintln(w, "\nhistogram of finite RD bounds (empirical, audited pairs):")
	maxc := 0
	for _, c := range h.Counts {
		maxc = max(maxc, c)
	}
	for i, c := range h.Counts {
		fmt.Fprintf(w, "  [%10.4f, %10.4f) %9d %s\n", h.Edges[i], h.Edges[i+1], c, strings.Repeat("#", (40*c+maxc-1)/max(maxc, 1)))
	}
	if h.Below+h.Above > 0 {
		fmt.Fprintf(w, "  below %d, above %d (edges fixed before the pass)\n", h.Below, h.Above)
	}
}

// printBDPOrders prints the table of the BDP estimates per moment order.
func printBDPOrders(w io.Writer, orders []BDPOrder) {
	fmt.Fprintln(w, "\nBDP per moment order l (Renyi order l+1; empirical estimates):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  l\tall pairs finite\tinf pairs\teps worst\tworst example\teps pooled")
	for _, b := range orders {
		inf := fmt.Sprint(b.InfPairs)
		if b.Skipped != "" {
			inf = "skipped (certified +Inf)"
		}
		fmt.Fprintf(tw, "  %g\t%v\t%s\t%s\t%d\t%s\n", b.Order, b.Finite, inf, privacy.FormatOptional(b.Epsilon), b.WorstExample, privacy.FormatOptional(b.EpsPooled))
	}
	tw.Flush()
}
