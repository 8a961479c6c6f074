package privacy

import (
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
	"github.com/nvdp-project/nvdp/option"
)

// ClipSetReport is the certified report of a clip set as `nvdp certify`
// prints it: the [CertifiedReport] with the one-release supremum, the
// Dirichlet witness counts and the constants as the clip stores them.
//
// Model, Variant and Mode name a certified model and Witness the file of
// the attaining pair (ClipSetOptions). The type is written, never
// read: the embedded report's UnmarshalJSON would read only its own fields.
type ClipSetReport struct {
	// Model, Variant and Mode are set when a model directory is certified.
	Model   string `json:"model,omitempty"`
	Variant string `json:"variant,omitempty"`
	Mode    string `json:"mode,omitempty"`

	*CertifiedReport
	// RDPerRelease is the one-release supremum at Order, which the witness attains.
	RDPerRelease jsonfloat.Float `json:"rd_per_release"`
	// DirichletWitness counts the token components of the witness by (alpha, alpha').
	DirichletWitness *DirichletWitness `json:"dirichlet_witness,omitempty"`

	// The constants certified (as the clip stores them: see ClipSet).
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
	// Witness is the witness file (absent when no pair attains the bound).
	Witness string `json:"witness,omitempty"`
}

// DirichletWitness counts the token components of a witness pair by their
// pseudo-counts (alpha, alpha').
type DirichletWitness struct {
	LowHigh  int `json:"alpha_min_max"` // (C_amin, C_amax)
	HighLow  int `json:"alpha_max_min"` // (C_amax, C_amin)
	HighHigh int `json:"alpha_max_max"` // (C_amax, C_amax)
}

// ClipSetOptions configure [NewClipSetReport]: the report's options, the
// file of the witness pair, and the model whose clip set is certified.
type ClipSetOptions struct {
	ReportOptions
	// Witness is the posterior file the pair attaining the one-release
	// certificate at Order is written to ("": none), see [WitnessPair].
	// No pair attains an unbounded certificate: nothing is written then,
	// with a warning saying why.
	Witness string
	// Model, Variant and Mode label the report of a model directory's clip
	// set ("": constants given otherwise).
	Model, Variant, Mode string
}

// Validate checks o before any work: the witness file's directory exists,
// then [ReportOptions.Validate]. Errors are [*option.Error] values, witness
// for the directory.
func (o ClipSetOptions) Validate() error {
	if w := o.Witness; w != "" {
		if st, err := os.Stat(filepath.Dir(w)); err != nil || !st.IsDir() {
			return option.Errorf("witness", option.Show(w), "the directory %s does not exist", filepath.Dir(w))
		}
	}
	return o.ReportOptions.Validate()
}

// NewClipSetReport certifies set with the options o and returns the report
// with set's constants, writing the witness pair to o.Witness.
//
// Errors are those of [ClipSetOptions.Validate] and [NewCertifiedReport],
// and an [*option.Error] for the option "witness": a pair that would not
// fit, see [WitnessFits], checked before any other work, and the witness
// file's write.
func NewClipSetReport(set ClipSet, o ClipSetOptions) (*ClipSetReport, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Witness != "" {
		if err := WitnessFits(set); err != nil {
			return nil, option.Errorf("witness", nil, "%v", err)
		}
	}
	r, err := newClipSetReport(set, o.ReportOptions)
	if err != nil {
		return nil, err
	}
	r.Model, r.Variant, r.Mode = o.Model, o.Variant, o.Mode
	if o.Witness == "" {
		return r, nil
	}
	w, _, err := WitnessPair(set, o.Order, o.Direction)
	if err != nil {
		return nil, option.Errorf("witness", nil, "%v", err)
	}
	if w == nil {
		slog.Warn("no witness pair: a constant is unbounded, so no pair attains the bound", "witness", o.Witness, "reason", r.PerRelease.Reason)
		return r, nil
	}
	if err := WritePosteriors(o.Witness, w); err != nil {
		return nil, option.Errorf("witness", nil, "%v", err)
	}
	r.Witness = o.Witness
	return r, nil
}

// newClipSetReport is [NewClipSetReport] without the witness.
func newClipSetReport(set ClipSet, o ReportOptions) (*ClipSetReport, error) {
	c, err := NewCertifiedReport(set, o)
	if err != nil {
		return nil, err
	}
	r := &ClipSetReport{CertifiedReport: c, RDPerRelease: c.PerRelease.RD}
	if one := c.PerRelease; one.Finite && set.Components > 1 {
		r.DirichletWitness = &DirichletWitness{one.AlphaLowHigh, one.AlphaHighLow, one.AlphaHighHigh}
	}
	r.CMu, r.CAlphaMin, r.CAlphaMax, r.PriorAlpha = jsonfloat.Float(set.CMu), jsonfloat.Float(set.AlphaMin), jsonfloat.Float(set.AlphaMax), set.PriorAlpha
	r.PriorMu, r.PriorVar = scalarOrList(set.PriorMu), scalarOrList(set.PriorVar)
	if set.LogvarFloor != nil {
		r.LogvarFloor, r.LogvarCap = scalarOrList(set.LogvarFloor), scalarOrList(set.LogvarCap)
		return r, nil
	}
	co, m := set.ClipOrder, set.LogvarMargin
	r.ClipOrder, r.LogvarMargin = &co, &m
	floor, cap := make([]float64, len(set.PriorVar)), make([]float64, len(set.PriorVar))
	for j := range set.PriorVar {
		floor[j], cap[j] = set.LogvarRange(j)
	}
	r.LogvarFloor, r.LogvarCap = scalarOrList(floor), scalarOrList(cap)
	return r, nil
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

// WriteText writes r as the table `nvdp certify` prints: the model, scope,
// constants and logvar range, the certified RD with its parts or the reason
// it is +Inf, the (epsilon, delta) guarantee, the certified BDP, the release
// and the witness file.
func (r *ClipSetReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	if r.Model != "" {
		row("model", fmt.Sprintf("%s (%s, %s)", r.Model, r.Variant, r.Mode))
	}
	row("certified", r.Scope)
	row("constants", fmt.Sprintf("N %d, P %d, C_mu %s, C_amin %s, C_amax %s, prior alpha %g", r.Components, r.Dims,
		formatShort(r.CMu), formatShort(r.CAlphaMin), formatShort(r.CAlphaMax), r.PriorAlpha))
	lv := fmt.Sprintf("[%s, %s]", formatRange(r.LogvarFloor), formatRange(r.LogvarCap))
	if r.LogvarMargin != nil {
		lv += fmt.Sprintf(" (margin %g at clip order %g)", *r.LogvarMargin, *r.ClipOrder)
	}
	row("logvar range", lv)
	rd := fmt.Sprintf("rd_certified (order %g)", r.Order)
	if r.Releases > 1 {
		rd = fmt.Sprintf("rd_certified (order %g, %d releases)", r.Order, r.Releases)
	}
	row(rd, FormatValue(r.RD)+" nats")
	if r.Finite {
		row("  variance / mean / dirichlet", FormatValue(r.Parts.Variance)+" / "+FormatValue(r.Parts.Mean)+" / "+FormatValue(r.Parts.Dirichlet))
	} else {
		row("  reason", r.Reason)
	}
	row("finite below order", formatShort(r.MaxOrder))
	row(fmt.Sprintf("epsilon (delta %g)", r.Delta), FormatValue(r.Epsilon)+", "+r.How())
	if r.Accountant == AccountantGaussian {
		row("  by the RDP conversion", FormatValue(r.RDPEpsilon)+" at order "+formatShort(r.BestOrder)+" (looser)")
	}
	row(fmt.Sprintf("BDP eps_mu (delta %g)", r.Delta), FormatValue(r.BDPEpsilon)+" (moment order "+formatShort(r.BDPOrder)+")")
	if r.Release != nil {
		row("release", r.Release.String())
	}
	if r.Witness != "" {
		row("witness", r.Witness)
	}
	return tw.Flush()
}

// formatShort formats v in the shortest form up to 8 digits (+Inf, n/a for NaN).
func formatShort(v jsonfloat.Float) string {
	if math.IsNaN(float64(v)) {
		return "n/a"
	}
	return strconv.FormatFloat(float64(v), 'g', 8, 64)
}

// formatRange formats a scalarOrList value: the scalar, or min..max of a list.
func formatRange(v any) string {
	switch x := v.(type) {
	case jsonfloat.Float:
		return formatShort(x)
	case []jsonfloat.Float:
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, e := range x {
			lo, hi = math.Min(lo, float64(e)), math.Max(hi, float64(e))
		}
		return strconv.FormatFloat(lo, 'g', 6, 64) + ".." + strconv.FormatFloat(hi, 'g', 6, 64)
	}
	return strings.TrimSpace(fmt.Sprint(v))
}
