package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// certifyFlags are the pinned flags of `nvdp certify`.
type certifyFlags struct {
	model            string
	components, dims int
	order            float64
	orders           string
	cMu              float64
	priorMu          string
	priorVar         string
	logvarMargin     float64
	logvarFloor      string
	logvarCap        string
	clipOrder        float64
	cAlphaMin        float64
	cAlphaMax        float64
	priorAlpha       float64
	delta            float64
	releases         int
	direction        string
	witness          string
	jsonOut          bool
}

// constantFlags describe the clip set; --model reads them from the model instead.
var constantFlags = []string{"components", "dims", "c-mu", "prior-mu", "prior-var", "logvar-margin", "logvar-floor",
	"logvar-cap", "clip-order", "c-alpha-min", "c-alpha-max", "prior-alpha"}

func newCertifyCmd() *cobra.Command {
	f := &certifyFlags{}
	cmd := &cobra.Command{
		Use:   "certify --model DIR | --components N --dims P --c-mu C --c-alpha-min A --c-alpha-max B ...",
		Short: "Certified Renyi bound of a clipping: the worst case of Eq. rdp over every pair of texts",
		Long: `Certify the privacy of a clipping configuration: the supremum of the paper's Eq. rdp over
every ordered pair of posteriors the clipping can release (N components including the prior
component, P dimensions), at --order and on the order grid, with its (epsilon, delta)
conversion and the certified Bayesian-DP epsilon. Unlike 'nvdp audit', which bounds the pairs
of a posterior file, the certificate holds for any two input texts: its scope is --releases
releases of one text's embedding against any other text's, not the training data.

--model DIR certifies a trained model with its own N (max-seq-len + 1), P (its latent width:
the hidden size unless trained with --latent-dim), prior
and clipping constants (a gaussian model: its radius C and noise sigma, the set
nvib.GaussianClipSet: 2 lambda C^2 max-seq-len / sigma^2); an unclipped model certifies +Inf
with the reason. Otherwise give the
constants: --logvar-margin M derives the sigma range as the clipping does (floor
ln((L2-1)/L2 prior_var) + M with L2 = --clip-order, cap ln prior_var), or give the range with
--logvar-floor and --logvar-cap. --witness FILE writes a pair of posteriors (M = 2) that
attains the bound, which 'nvdp audit --posteriors FILE' reads. docs/privacy.md.`,
		Example: `  nvdp certify --components 129 --dims 128 --order 1.1 --c-mu 2 --prior-var 1 \
    --logvar-margin 0.6931 --c-alpha-min 0.3 --c-alpha-max 1 --json
  nvdp certify --model runs/sst2-clipped --witness witness.safetensors`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runCertify(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model directory: certify its clipping with its own N, P, prior and constants")
	fl.IntVar(&f.components, "components", 0, "N, components per posterior including the prior component (max-seq-len + 1)")
	fl.IntVar(&f.dims, "dims", 0, "P, dimensions per component (the latent width: the hidden size unless --latent-dim)")
	fl.Float64Var(&f.order, "order", privacy.DefaultOrder, "Renyi order lambda > 1 of rd_certified")
	fl.StringVar(&f.orders, "orders", "", "comma-separated Renyi orders of the certified curve (default: privacy.DefaultOrders, 1.01..1024)")
	fl.Float64Var(&f.cMu, "c-mu", 0, "C_mu, radius of the mean ball (>= 0)")
	fl.StringVar(&f.priorMu, "prior-mu", "0", "prior mean: a scalar or a comma list of P values")
	fl.StringVar(&f.priorVar, "prior-var", "1", "prior variance: a scalar or a comma list of P values (> 0)")
	fl.Float64Var(&f.logvarMargin, "logvar-margin", nvib.DefaultLogvarMargin, "nats of variance above the floor ln((L2-1)/L2 prior_var), L2 = --clip-order (>= ln(L2/(L2-1)): fixed sigma)")
	fl.StringVar(&f.logvarFloor, "logvar-floor", "", "explicit logvar floor: a scalar or a comma list of P values (with --logvar-cap, instead of --logvar-margin)")
	fl.StringVar(&f.logvarCap, "logvar-cap", "", "explicit logvar cap: a scalar or a comma list of P values (with --logvar-floor)")
	fl.Float64Var(&f.clipOrder, "clip-order", 0, "the Renyi order the sigma floor was derived for (default: --order)")
	fl.Float64Var(&f.cAlphaMin, "c-alpha-min", 0, "C_amin, smallest pseudo-count of a token component (> 0 for a finite bound)")
	fl.Float64Var(&f.cAlphaMax, "c-alpha-max", 0, "C_amax, largest pseudo-count of a token component")
	fl.Float64Var(&f.priorAlpha, "prior-alpha", math.Exp(nvib.DefaultPrior().LogAlpha), "pseudo-count of the prior component (nvib.DefaultPrior: 1)")
	fl.Float64Var(&f.delta, "delta", privacy.DefaultDelta, "delta of the (epsilon, delta) conversion and of the certified BDP")
	fl.IntVar(&f.releases, "releases", 1, "releases of the same text (RDP adds up: the curve is k times one release)")
	fl.StringVar(&f.direction, "gaussian-direction", string(privacy.DirectionStandard), "Gaussian term in the bound's own direction (standard) or as printed in Eq. rdp (paper); the supremum is the same, the witness differs")
	fl.StringVar(&f.witness, "witness", "", "write the attaining pair (M = 2) as a posterior file for 'nvdp audit --posteriors'")
	fl.BoolVar(&f.jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}

func init() { rootCmd.AddCommand(newCertifyCmd()) }

// certifyReport is the output of `nvdp certify` (--json: one object): the
// library's certified report (privacy.CertifiedReport: the certificate at
// --order and the guarantee of --releases releases) with what only the
// command shows: the model certified, the one-release supremum and its
// witness, and the constants as the clip stores them. (It is written, never
// read: the embedded report's UnmarshalJSON would read only its own fields.)
type certifyReport struct {
	// Model, Variant and Mode are set with --model.
	Model   string `json:"model,omitempty"`
	Variant string `json:"variant,omitempty"`
	Mode    string `json:"mode,omitempty"`

	*privacy.CertifiedReport
	// RDPerRelease is the one-release supremum at Order, which the witness attains.
	RDPerRelease jsonfloat.Float `json:"rd_per_release"`
	// DirichletWitness counts the token components of the witness by (alpha, alpha').
	DirichletWitness *dirichletWitness `json:"dirichlet_witness,omitempty"`

	// The constants certified (as the clip stores them: see privacy.ClipSet).
	CMu      jsonfloat.Float `json:"c_mu"`
	PriorMu  any             `json:"prior_mu"`  // scalar or [P]
	PriorVar any             `json:"prior_var"` // scalar or [P]
	// ClipOrder and LogvarMargin derive the sigma range (absent when it was given explicitly).
	ClipOrder    *float64 `json:"clip_order,omitempty"`
	LogvarMargin *float64 `json:"logvar_margin,omitempty"`
	// LogvarFloor and LogvarCap are the sigma range certified (scalar or [P];
	// "-Infinity", "Infinity": none).
	LogvarFloor any             `json:"logvar_floor"`
	LogvarCap   any             `json:"logvar_cap"`
	CAlphaMin   jsonfloat.Float `json:"c_alpha_min"`
	CAlphaMax   jsonfloat.Float `json:"c_alpha_max"`
	PriorAlpha  float64         `json:"prior_alpha"`
	// Witness is the --witness file (absent when no pair attains the bound).
	Witness string `json:"witness,omitempty"`
}

type dirichletWitness struct {
	LowHigh  int `json:"alpha_min_max"` // (C_amin, C_amax)
	HighLow  int `json:"alpha_max_min"` // (C_amax, C_amin)
	HighHigh int `json:"alpha_max_max"` // (C_amax, C_amax)
}

// reportOptions parses --orders and checks the flags that apply with and
// without --model (privacy.ReportOptions.Validate, before any work; errors
// name the flags). The source is set once the clip set is known.
func (f *certifyFlags) reportOptions() (privacy.ReportOptions, error) {
	o := privacy.ReportOptions{Order: f.order, Direction: privacy.GaussianDirection(f.direction), Releases: f.releases, Delta: f.delta}
	if f.orders != "" {
		var err error
		if o.Orders, err = parseFloatList("--orders", f.orders); err != nil {
			return o, err
		}
	}
	return o, flagError(o.Validate())
}

// clipSet builds the clip set from the constant flags and validates it
// (privacy.ClipSet.Validate: its errors name the constants, mapped here to
// their flags). Which flags go together is the CLI's: the required
// constants, and the logvar range given either by --logvar-margin (with
// --clip-order, by default --order) or by --logvar-floor and --logvar-cap.
func (f *certifyFlags) clipSet(fs *pflag.FlagSet) (privacy.ClipSet, error) {
	var s privacy.ClipSet
	for _, req := range []string{"components", "dims", "c-mu", "c-alpha-min", "c-alpha-max"} {
		if !fs.Changed(req) {
			return s, fmt.Errorf("--%s is required (or --model DIR)", req)
		}
	}
	s = privacy.ClipSet{Components: f.components, Dims: f.dims, CMu: f.cMu,
		AlphaMin: f.cAlphaMin, AlphaMax: f.cAlphaMax, PriorAlpha: f.priorAlpha}
	lists := []struct {
		flag, s string
		to      *[]float64
	}{{"prior-mu", f.priorMu, &s.PriorMu}, {"prior-var", f.priorVar, &s.PriorVar}}
	if fs.Changed("logvar-floor") || fs.Changed("logvar-cap") {
		if fs.Changed("logvar-margin") {
			return s, errors.New("--logvar-margin and --logvar-floor/--logvar-cap: give the margin (the range is derived) or the range, not both")
		}
		if fs.Changed("clip-order") {
			return s, errors.New("--clip-order derives the floor from --logvar-margin; with --logvar-floor/--logvar-cap the range is explicit")
		}
		for _, b := range []struct {
			flag, s string
			to      *[]float64
		}{{"logvar-floor", f.logvarFloor, &s.LogvarFloor}, {"logvar-cap", f.logvarCap, &s.LogvarCap}} {
			if fs.Changed(b.flag) {
				lists = append(lists, b)
			}
		}
	} else {
		s.ClipOrder, s.LogvarMargin = f.order, f.logvarMargin
		if fs.Changed("clip-order") {
			s.ClipOrder = f.clipOrder
		}
	}
	for _, l := range lists {
		v, err := parseFloatList("--"+l.flag, l.s)
		if err != nil {
			return s, err
		}
		*l.to = v
	}
	return s, flagError(s.Validate())
}

// modelClipSet is the clip set of the model in dir (task.Model.ClipSet).
func modelClipSet(dir string) (privacy.ClipSet, *nvib.Config, error) {
	m, err := task.Open(dir)
	if err != nil {
		return privacy.ClipSet{}, nil, fmt.Errorf("--model: %w", err)
	}
	set, cfg, err := m.ClipSet()
	if err != nil {
		return set, nil, fmt.Errorf("--model: %w", err)
	}
	return set, cfg, nil
}

func runCertify(cmd *cobra.Command, f *certifyFlags) error {
	fs := cmd.Flags()
	if f.witness != "" { // before any work: the file's directory exists
		if st, err := os.Stat(filepath.Dir(f.witness)); err != nil || !st.IsDir() {
			return fmt.Errorf("--witness %s: the directory %s does not exist", f.witness, filepath.Dir(f.witness))
		}
	}
	ro, err := f.reportOptions()
	if err != nil {
		return err
	}
	var set privacy.ClipSet
	rep := &certifyReport{}
	ro.Source = "constants given on the command line"
	if f.model != "" {
		for _, c := range constantFlags {
			if fs.Changed(c) {
				return fmt.Errorf("--%s and --model: the model's own constants are certified", c)
			}
		}
		var cfg *nvib.Config
		if set, cfg, err = modelClipSet(f.model); err != nil {
			return err
		}
		rep.Model, rep.Variant, rep.Mode = f.model, cfg.Model, string(cfg.Mode)
		ro.Source = train.ModelSource(f.model)
	} else if set, err = f.clipSet(fs); err != nil {
		return err
	}
	if f.witness != "" {
		if err := privacy.WitnessFits(set); err != nil {
			return fmt.Errorf("--witness: %w", err)
		}
	}
	if rep.CertifiedReport, err = privacy.NewCertifiedReport(set, ro); err != nil {
		return err
	}
	cert := rep.PerRelease
	rep.RDPerRelease = cert.RD
	if cert.Finite && set.Components > 1 {
		rep.DirichletWitness = &dirichletWitness{cert.AlphaLowHigh, cert.AlphaHighLow, cert.AlphaHighHigh}
	}
	rep.setConstants(set)
	if f.witness != "" {
		w, _, err := privacy.WitnessPair(set, f.order, privacy.GaussianDirection(f.direction))
		if err != nil {
			return fmt.Errorf("--witness: %w", err)
		}
		if w == nil {
			slog.Warn("no witness pair: a constant is unbounded, so no pair attains the bound", "witness", f.witness, "reason", cert.Reason)
		} else {
			if err := privacy.WritePosteriors(f.witness, w); err != nil {
				return fmt.Errorf("--witness: %w", err)
			}
			rep.Witness = f.witness
		}
	}
	if f.jsonOut {
		return printJSON(cmd.OutOrStdout(), rep)
	}
	printCertify(cmd.OutOrStdout(), rep)
	return nil
}

// setConstants writes the constants of set into r.
func (r *certifyReport) setConstants(set privacy.ClipSet) {
	r.CMu, r.CAlphaMin, r.CAlphaMax, r.PriorAlpha = jsonfloat.Float(set.CMu), jsonfloat.Float(set.AlphaMin), jsonfloat.Float(set.AlphaMax), set.PriorAlpha
	r.PriorMu, r.PriorVar = scalarOrList(set.PriorMu), scalarOrList(set.PriorVar)
	if set.LogvarFloor != nil {
		r.LogvarFloor, r.LogvarCap = scalarOrList(set.LogvarFloor), scalarOrList(set.LogvarCap)
		return
	}
	co, m := set.ClipOrder, set.LogvarMargin
	r.ClipOrder, r.LogvarMargin = &co, &m
	floor, cap := make([]float64, len(set.PriorVar)), make([]float64, len(set.PriorVar))
	for j := range set.PriorVar {
		floor[j], cap[j] = set.LogvarRange(j)
	}
	r.LogvarFloor, r.LogvarCap = scalarOrList(floor), scalarOrList(cap)
}

// scalarOrList is v[0] for a length-1 slice, else v (non-finite values as
// jsonfloat strings).
func scalarOrList(v []float64) any {
	out := make([]jsonfloat.Float, len(v))
	for i, x := range v {
		out[i] = jsonfloat.Float(x)
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}

func printCertify(w io.Writer, r *certifyReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	if r.Model != "" {
		row("model", fmt.Sprintf("%s (%s, %s)", r.Model, r.Variant, r.Mode))
	}
	row("certified", r.Scope)
	row("constants", fmt.Sprintf("N %d, P %d, C_mu %s, C_amin %s, C_amax %s, prior alpha %g", r.Components, r.Dims,
		fg(r.CMu), fg(r.CAlphaMin), fg(r.CAlphaMax), r.PriorAlpha))
	lv := fmt.Sprintf("[%s, %s]", fmtVec(r.LogvarFloor), fmtVec(r.LogvarCap))
	if r.LogvarMargin != nil {
		lv += fmt.Sprintf(" (margin %g at clip order %g)", *r.LogvarMargin, *r.ClipOrder)
	}
	row("logvar range", lv)
	rd := fmt.Sprintf("rd_certified (order %g)", r.Order)
	if r.Releases > 1 {
		rd = fmt.Sprintf("rd_certified (order %g, %d releases)", r.Order, r.Releases)
	}
	row(rd, ff(r.RD)+" nats")
	if r.Finite {
		row("  variance / mean / dirichlet", ff(r.Parts.Variance)+" / "+ff(r.Parts.Mean)+" / "+ff(r.Parts.Dirichlet))
	} else {
		row("  reason", r.Reason)
	}
	row("finite below order", fg(r.MaxOrder))
	row(fmt.Sprintf("epsilon (delta %g)", r.Delta), ff(r.Epsilon)+", "+r.How())
	if r.Accountant == privacy.AccountantGaussian {
		row("  by the RDP conversion", ff(r.RDPEpsilon)+" at order "+fg(r.BestOrder)+" (looser)")
	}
	row(fmt.Sprintf("BDP eps_mu (delta %g)", r.Delta), ff(r.BDPEpsilon)+" (moment order "+fg(r.BDPOrder)+")")
	if r.Release != nil {
		row("release", r.Release.String())
	}
	if r.Witness != "" {
		row("witness", r.Witness)
	}
	tw.Flush()
}

// fg formats v in the shortest form (+Inf, n/a for NaN).
func fg(v jsonfloat.Float) string {
	if math.IsNaN(float64(v)) {
		return "n/a"
	}
	return strconv.FormatFloat(float64(v), 'g', 8, 64)
}

// fmtVec formats a scalarOrList value: the scalar, or min..max of a list.
func fmtVec(v any) string {
	switch x := v.(type) {
	case jsonfloat.Float:
		return fg(x)
	case []jsonfloat.Float:
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, e := range x {
			lo, hi = math.Min(lo, float64(e)), math.Max(hi, float64(e))
		}
		return strconv.FormatFloat(lo, 'g', 6, 64) + ".." + strconv.FormatFloat(hi, 'g', 6, 64)
	}
	return strings.TrimSpace(fmt.Sprint(v))
}
