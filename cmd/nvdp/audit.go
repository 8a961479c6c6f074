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
		Long: `Audit a posterior file (safetensors: mu [M,N,P], logvar [M,N,P], alpha [M,N], optional mask [M,N]).

principled (default): the paper's Eq. rdp bound (kappa = 1) for every ordered pair over the whole
file, both directions, undefined pairs reported as +Inf; BDP (Triastcyn & Faltings 2020) for the
worst individual and pooled over pairs, minimised over --bdp-orders.
reference: the released code number for number (pairs inside consecutive batches, z-filter,
modified accountant). See docs/privacy.md.`,
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
	out := cmd.OutOrStdout()
	if f.jsonOut {
		enc := json.NewEncoder(out)
		return enc.Encode(r)
	}
	printReport(out, f.posteriors, r)
	return nil
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

func printReport(w io.Writer, path string, r *privacy.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("file", path)
	row("mode", string(r.Mode))
	row("examples x components x dims", fmt.Sprintf("%d x %d x %d", r.Examples, r.Components, r.Dims))
	row("Renyi order", strconv.FormatFloat(r.Order, 'g', -1, 64))
	if r.Mode == privacy.ModeReference {
		row("batch size / q", fmt.Sprintf("%d / %.6g", r.BatchSize, r.Q))
		row("batches (skipped)", fmt.Sprintf("%d (%v)", r.Batches, r.SkippedBatches))
		row("within-batch pairs", fmt.Sprint(r.Pairs))
		row("invalid pairs", fmt.Sprint(r.InvalidPairs))
		row("RD max (z-filtered)", ff(r.RDMax))
		row("RD mean (z-filtered)", ff(r.RDMean))
		row("RD max (unfiltered)", ff(*r.RDMaxUnfiltered))
		row("RD mean (unfiltered)", ff(*r.RDMeanUnfiltered))
		row("accountant cost C", ff(*r.AccountantCost))
		row(fmt.Sprintf("BDP eps_mu (delta %g)", r.Delta), ff(r.BDPEpsilon))
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
		row("RD max", ff(r.RDMax)+arg)
		row("RD mean", ff(r.RDMean))
		if r.Quantiles != nil {
			row("RD p50 / p90 / p99", fmt.Sprintf("%s / %s / %s", ff(r.Quantiles["p50"]), ff(r.Quantiles["p90"]), ff(r.Quantiles["p99"])))
		}
		row(fmt.Sprintf("BDP eps_mu worst individual (delta %g)", r.Delta), ff(r.BDPEpsilon)+fmt.Sprintf("  at moment order %s", ff(*r.BDPOrder)))
		row("BDP eps_mu pooled pairs", ff(*r.BDPEpsilonPooled))
	}
	row("seconds", fmt.Sprintf("%.2f", r.Seconds))
	tw.Flush()
	if r.Histogram != nil && len(r.Histogram.Counts) > 0 {
		fmt.Fprintln(w, "\nhistogram of finite RD bounds:")
		maxc := 0
		for _, c := range r.Histogram.Counts {
			maxc = max(maxc, c)
		}
		for i, c := range r.Histogram.Counts {
			fmt.Fprintf(w, "  [%10.4f, %10.4f) %9d %s\n", r.Histogram.Edges[i], r.Histogram.Edges[i+1], c, strings.Repeat("#", (40*c+maxc-1)/max(maxc, 1)))
		}
	}
	if len(r.BDPOrders) > 0 {
		fmt.Fprintln(w, "\nBDP per moment order l (Renyi order l+1):")
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
}
