package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
)

// auditFlags are the pinned flags of `nvdp audit` (issue 2).
type auditFlags struct {
	posteriors string
	mode       string
	order      float64
	delta      float64
	batchSize  int
	q          float64
	mask       bool
	bdpOrders  string
	confidence float64
	jsonOut    bool
	pairs      int
	seed       uint64
	direction  string
	workers    int
	noProgress bool
}

func newAuditCmd() *cobra.Command {
	f := &auditFlags{}
	cmd := &cobra.Command{
		Use:   "audit --posteriors FILE",
		Short: "Audit NVIB posteriors: Renyi bound over all pairs (Eq. rdp) and Bayesian DP",
		Long: `Audit a posterior file (safetensors: mu [M,N,P], logvar [M,N,P], alpha [M,N], optional attention_mask [M,N], 1 = real component).

principled (default): the paper's Eq. rdp bound (kappa = 1) for every ordered pair over the whole
file, both directions, undefined pairs reported as +Inf; BDP (Triastcyn & Faltings 2020) for the
worst individual and pooled over pairs, minimised over --bdp-orders.
reference: the released code number for number (pairs inside consecutive batches, z-filter,
modified accountant). See docs/privacy.md.

These numbers are empirical: the maximum over the pairs of the file's texts, not a bound for
other texts, and the BDP epsilon is a Student-t estimate. When the file's metadata carries the
clip constants (nvdp eval writes them), the certified guarantee is printed beside them: the
supremum of Eq. rdp over every pair of inputs the clipping allows (privacy.Certify), its
(epsilon, delta) conversion and the certified BDP; JSON: the "certified" object.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runAudit(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.posteriors, "posteriors", "", "posterior safetensors file (required)")
	fl.StringVar(&f.mode, "mode", "principled", "principled or reference")
	fl.Float64Var(&f.order, "order", 1.1, "Renyi order lambda > 1 of the RD bound")
	fl.Float64Var(&f.delta, "delta", 1e-5, "BDP delta_mu")
	fl.IntVar(&f.batchSize, "batch-size", 16, "reference mode: batch size (pairs inside consecutive batches)")
	fl.Float64Var(&f.q, "q", 0, "reference mode: accountant sampling ratio (default batch-size / M)")
	fl.BoolVar(&f.mask, "mask", false, "principled mode: drop padding components (treats the length as public; see docs/privacy.md)")
	fl.StringVar(&f.bdpOrders, "bdp-orders", joinFloats(privacy.DefaultBDPOrders), "comma-separated BDP moment orders l > 0 (Renyi order l+1)")
	fl.Float64Var(&f.confidence, "confidence", privacy.DefaultConfidence, "confidence of the Student-t upper bound")
	fl.BoolVar(&f.jsonOut, "json", false, "print one JSON object on stdout")
	fl.IntVar(&f.pairs, "pairs", 0, "principled mode: audit a uniform sample of K ordered pairs instead of all")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the --pairs sample")
	fl.StringVar(&f.direction, "gaussian-direction", "", "principled mode: Gaussian term D(N_q||N_q') in the bound's own direction (standard, default) or as printed in Eq. rdp, D(N_q'||N_q) (paper)")
	fl.IntVar(&f.workers, "workers", 0, "worker goroutines (default GOMAXPROCS)")
	fl.BoolVar(&f.noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	_ = cmd.MarkFlagRequired("posteriors")
	return cmd
}

func init() { rootCmd.AddCommand(newAuditCmd()) }

func joinFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

func runAudit(cmd *cobra.Command, f *auditFlags) error {
	orders, err := parseFloatList("--bdp-orders", f.bdpOrders)
	if err != nil {
		return err
	}
	if f.order <= 1 {
		return fmt.Errorf("--order %v: the Renyi order must be > 1", f.order)
	}
	p, err := privacy.ReadPosteriors(f.posteriors)
	if err != nil {
		return err
	}
	// The certified guarantee first: it is cheap, and bad clip metadata fails
	// before a long audit.
	cert, err := auditCertified(p, f.posteriors, f.order, privacy.GaussianDirection(f.direction), f.delta)
	if err != nil {
		return err
	}
	opt := privacy.Options{
		Mode: privacy.Mode(f.mode), Order: f.order, Delta: f.delta, Confidence: f.confidence, BDPOrders: orders,
		UseMask: f.mask, Direction: privacy.GaussianDirection(f.direction), Pairs: f.pairs, Seed: f.seed,
		BatchSize: f.batchSize, Q: f.q, Workers: f.workers,
	}
	// A progress bar for audits that take more than a moment (~1e9 pair-dims).
	if w := progressWriter(cmd, f.noProgress); w != nil && opt.Mode != privacy.ModeReference && float64(p.M)*float64(p.M)*float64(p.N)*float64(p.P) > 1e9 {
		opt.Progress = w
	}
	r, err := privacy.Audit(cmd.Context(), p, opt)
	if err != nil {
		return fmt.Errorf("audit %s: %w", f.posteriors, err)
	}
	emp := train.Empirical(r, p.Metadata["split"])
	out := cmd.OutOrStdout()
	if f.jsonOut {
		enc := json.NewEncoder(out)
		return enc.Encode(auditJSON{Report: r, Empirical: emp, Certified: cert})
	}
	printReport(out, f.posteriors, r, emp, cert)
	return nil
}

// auditJSON is the --json output: the audit report (its fields at the top
// level, as before), the label of its numbers (empirical) and, when the
// file's metadata carries the clip constants, the certified guarantee.
type auditJSON struct {
	*privacy.Report
	Empirical train.EmpiricalLabel     `json:"empirical"`
	Certified *privacy.CertifiedReport `json:"certified,omitempty"`
}

// auditCertified certifies the clip set in p's metadata
// (privacy.ClipSetFromMetadata) at the audit's order, direction and delta;
// nil when the metadata carries no clip constants. Errors name the file.
func auditCertified(p *privacy.Posteriors, path string, order float64, dir privacy.GaussianDirection, delta float64) (*privacy.CertifiedReport, error) {
	set, ok, err := privacy.ClipSetFromMetadata(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !ok {
		return nil, nil
	}
	c, err := privacy.CertifyReport(set, order, dir, 1, delta, nil, "clip constants in the metadata of "+path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func ff(v privacy.JSONFloat) string {
	x := float64(v)
	if math.IsInf(x, 1) {
		return "+Inf"
	}
	if math.IsNaN(x) {
		return "n/a"
	}
	return strconv.FormatFloat(x, 'f', 6, 64)
}

func printReport(w io.Writer, path string, r *privacy.Report, emp train.EmpiricalLabel, cert *privacy.CertifiedReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("file", path)
	row("mode", string(r.Mode))
	row("examples x components x dims", fmt.Sprintf("%d x %d x %d", r.Examples, r.Components, r.Dims))
	row("Renyi order", strconv.FormatFloat(r.Order, 'g', -1, 64))
	split := ""
	if s := r.Metadata["split"]; s != "" {
		split = s + " "
	}
	if r.Mode == privacy.ModeReference {
		row("batch size / q", fmt.Sprintf("%d / %.6g", r.BatchSize, r.Q))
		row("batches (skipped)", fmt.Sprintf("%d (%v)", r.Batches, r.SkippedBatches))
		row("within-batch pairs", fmt.Sprint(r.Pairs))
		row("invalid pairs", fmt.Sprint(r.InvalidPairs))
		row("RD max (z-filtered; empirical batch estimate, not a guarantee)", ff(r.RDMax))
		row("RD mean (z-filtered; empirical)", ff(r.RDMean))
		row("RD max (unfiltered; empirical, not a guarantee)", ff(*r.RDMaxUnfiltered))
		row("RD mean (unfiltered; empirical)", ff(*r.RDMeanUnfiltered))
		row("accountant cost C", ff(*r.AccountantCost))
		row(fmt.Sprintf("BDP ε_μ estimate (released accountant, delta %g)", r.Delta), ff(r.BDPEpsilon))
	} else {
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
		row("RD max over "+over+" (empirical, not a guarantee)", ff(r.RDMax)+arg)
		row("RD mean (empirical)", ff(r.RDMean))
		if r.Quantiles != nil {
			row("RD p50 / p90 / p99 (empirical)", fmt.Sprintf("%s / %s / %s", ff(r.Quantiles["p50"]), ff(r.Quantiles["p90"]), ff(r.Quantiles["p99"])))
		}
		row(fmt.Sprintf("BDP ε_μ estimate, worst individual (delta %g)", r.Delta), ff(r.BDPEpsilon)+fmt.Sprintf("  at moment order %s", ff(*r.BDPOrder)))
		row("BDP ε_μ estimate, pooled pairs", ff(*r.BDPEpsilonPooled))
		row("  BDP ε_μ above: "+privacy.LabelEstimate+"s", strings.TrimSuffix(strings.TrimPrefix(emp.BDP, privacy.LabelEstimate+" ("), ")"))
	}
	certifiedRows(row, cert)
	row("seconds", fmt.Sprintf("%.2f", r.Seconds))
	tw.Flush()
	if r.Histogram != nil && len(r.Histogram.Counts) > 0 {
		fmt.Fprintln(w, "\nhistogram of finite RD bounds (empirical, audited pairs):")
		maxc := 0
		for _, c := range r.Histogram.Counts {
			maxc = max(maxc, c)
		}
		for i, c := range r.Histogram.Counts {
			fmt.Fprintf(w, "  [%10.4f, %10.4f) %9d %s\n", r.Histogram.Edges[i], r.Histogram.Edges[i+1], c, strings.Repeat("#", (40*c+maxc-1)/max(maxc, 1)))
		}
	}
	if len(r.BDPOrders) > 0 {
		fmt.Fprintln(w, "\nBDP per moment order l (Renyi order l+1; empirical estimates):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  l\tall pairs finite\tinf pairs\teps worst\tworst example\teps pooled")
		for _, b := range r.BDPOrders {
			fmt.Fprintf(tw, "  %g\t%v\t%d\t%s\t%d\t%s\n", b.Order, b.Finite, b.InfPairs, ff(b.Epsilon), b.WorstExample, ff(b.EpsPooled))
		}
		tw.Flush()
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if cert == nil {
		fmt.Fprintln(w, "note: no certified guarantee: the file's metadata carries no clip constants (clip_*); every number above is empirical")
	}
}

// certifiedRows writes the certified guarantee c (nil: nothing) as rows:
// the certified RD at its order with its parts, the (epsilon, delta)
// guarantee at the best order and the certified BDP, or "none: unclipped"
// with the reason when no order is finite; then its scope. `nvdp audit`,
// `nvdp run` and `nvdp eval` print it so.
func certifiedRows(row func(k, v string), c *privacy.CertifiedReport) {
	if c == nil {
		return
	}
	if c.Unbounded() {
		row("certified guarantee (every pair of inputs)", "none: unclipped ("+c.Reason+")")
		row("  certified scope", c.Scope)
		return
	}
	releases := ""
	if c.Releases > 1 {
		releases = fmt.Sprintf(", %d releases", c.Releases)
	}
	row(fmt.Sprintf("certified RD (every pair of inputs), order %s%s", strconv.FormatFloat(c.Order, 'g', -1, 64), releases), certRD(c))
	if !c.Finite {
		row("  certified RD is +Inf", c.Reason)
	}
	row(fmt.Sprintf("certified ε (delta %g, best order)", c.Delta), ff(c.Epsilon)+orderSuffix("at order", c.BestOrder))
	row(fmt.Sprintf("certified BDP ε_μ (delta %g)", c.Delta), ff(c.BDPEpsilon)+orderSuffix("at moment order", c.BDPOrder)+"  ("+c.BDPNote+")")
	row("  certified scope", c.Scope)
}

// certRD is a certificate's value with its three parts.
func certRD(c *privacy.CertifiedReport) string {
	if !c.Finite {
		return ff(c.RD)
	}
	return fmt.Sprintf("%s  (variance %s + mean %s + Dirichlet %s)", ff(c.RD), ff(c.Parts.Variance), ff(c.Parts.Mean), ff(c.Parts.Dirichlet))
}

// orderSuffix is "  <what> <order>", or "" when the order is undefined (no finite point).
func orderSuffix(what string, o privacy.JSONFloat) string {
	if math.IsNaN(float64(o)) || math.IsInf(float64(o), 0) {
		return ""
	}
	return "  " + what + " " + strconv.FormatFloat(float64(o), 'g', 6, 64)
}
