package privacy

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/option"
)

// Labels of the kinds of privacy number the tools print and write: every
// number is one of these, and says so.
const (
	// LabelCertified marks a guarantee computed from the clip constants alone,
	// by [Certify] or [CertifyCurve]: it is valid for every pair of inputs.
	LabelCertified = "certified"
	// LabelEmpirical marks numbers audited on a finite set of texts, as by
	// audit.Audit: the maximum over the pairs audited, not a bound for other
	// texts.
	LabelEmpirical = "empirical"
	// LabelEstimate marks a statistical estimate, such as the audit's Student-t
	// BDP accountant, not a bound.
	LabelEstimate = "estimate"
)

// CertifiedBDPNote says how the certified BDP is obtained; see
// [CertifiedBDP].
const CertifiedBDPNote = "eps_mu <= cert(1+l) + ln(1/delta_mu)/l minimised over l"

// CertifiedScope says what a certificate of `releases` releases covers, for
// posteriors of n components, the prior component included, in p
// dimensions. When n or p is < 1, meaning unknown as in a table over models,
// the sizes are left out.
func CertifiedScope(releases, n, p int) string {
	what := "one release"
	if releases > 1 {
		what = fmt.Sprintf("%d releases", releases)
	}
	pairs := "every pair of inputs"
	if n >= 1 && p >= 1 {
		pairs = fmt.Sprintf("every pair of inputs; N = %d components, P = %d dims", n, p)
	}
	return what + " of the embedding of one input (a text, an utterance) vs any other input (" + pairs + "); not the training data"
}

// CertifiedReport is the certified guarantee of a clip set as the tools
// write it: the "certified" object of report.json, eval_<split>.json and
// `nvdp audit --json`, and the core of `nvdp certify --json`. It is a
// [Guarantee], the curve and the epsilon of Releases releases, with the
// [Certificate] at one order of all Releases releases, and where the
// constants come from.
//
// In JSON +Inf is jsonfloat's "Infinity", and it reads back as +Inf, as does
// the null of files written before jsonfloat. The guarantee's Format is 0
// here: the file that holds the report has its own version.
type CertifiedReport struct {
	// Source says where the clip constants come from (a model configuration,
	// a posterior file's metadata, command-line flags).
	Source string `json:"source"`
	// Constants are the clip set's constants (ClipSet.Metadata keys).
	Constants  map[string]string `json:"constants"`
	Components int               `json:"components"` // N, the prior component included
	Dims       int               `json:"dims"`       // P
	// Certificate is the certificate at Order of all Releases releases: RD
	// and its parts are Releases x the one-release supremum (PerRelease),
	// the parts zero when RD is +Inf. No witness here: see PerRelease. Its
	// direction and the order it is finite below are the guarantee's.
	Certificate
	// Guarantee is the guarantee of Releases releases (CertifyCurve): the
	// RDP curve, the (Epsilon, Delta)-DP by its Accountant and the
	// certified BDP at Delta.
	Guarantee
	BDPNote string `json:"bdp_note"` // CertifiedBDPNote
	// PerRelease is the one-release certificate at Order, with its witness
	// pair (not written; nil when read from JSON).
	PerRelease *Certificate `json:"-"`
}

// ReportOptions are the parameters of [NewCertifiedReport]: the order of its
// certificate and those of its guarantee. The zero value is not valid: Order,
// Releases and Delta have no default here; [DefaultOrder], 1 and
// [DefaultDelta] are the tools' defaults.
type ReportOptions struct {
	// Order is the Renyi order of the report's certificate (finite, > 1).
	Order float64
	// Direction is the Gaussian term's direction ("" is DirectionStandard).
	Direction GaussianDirection
	// Releases is the number of releases of one input covered (>= 1).
	Releases int
	// Delta is the delta of the (epsilon, delta) conversion and of the
	// certified BDP, in (0, 1).
	Delta float64
	// Orders is the grid of the certified curve (each finite and > 1; nil:
	// DefaultOrders).
	Orders []float64
	// Source says where the clip set's constants come from
	// (CertifiedReport.Source; it prefixes the errors).
	Source string
}

// Validate checks the options before any work. Errors are [*option.Error]
// named order, orders, gaussian_direction, releases and delta, so that a
// program names its own flags for them.
func (o ReportOptions) Validate() error {
	if !(o.Order > 1) || math.IsInf(o.Order, 0) {
		return option.Errorf("order", o.Order, "the Renyi order must be finite and > 1")
	}
	for _, v := range o.Orders {
		if !(v > 1) || math.IsInf(v, 0) {
			return option.Errorf("orders", v, "every Renyi order must be finite and > 1")
		}
	}
	switch o.Direction {
	case "", DirectionStandard, DirectionPaper:
	default:
		return option.Errorf("gaussian_direction", string(o.Direction), "want %s or %s", DirectionStandard, DirectionPaper)
	}
	if o.Releases < 1 {
		return option.Errorf("releases", o.Releases, "must be >= 1")
	}
	return CheckDelta(o.Delta)
}

// NewCertifiedReport certifies set: it computes the certificate at o.Order
// of o.Releases releases, and the guarantee of as many releases, which is the
// curve over o.Orders with the epsilon and BDP at o.Delta.
//
// Its errors are prefixed with "certify (<o.Source>)". They are invalid
// options, see [ReportOptions.Validate], and an invalid set, named.
func NewCertifiedReport(set ClipSet, o ReportOptions) (*CertifiedReport, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("certify (%s): %w", o.Source, err)
	}
	c, err := supremum(set, o.Order, o.Direction, nil, false) // no witness: WitnessPair builds it when asked
	if err != nil {
		return nil, fmt.Errorf("certify (%s): %w", o.Source, err)
	}
	g, err := CertifyCurve(set, CurveOptions{Orders: o.Orders, Direction: o.Direction, Releases: o.Releases, Delta: o.Delta})
	if err != nil {
		return nil, fmt.Errorf("certify (%s): %w", o.Source, err)
	}
	g.Format = 0 // the report's file has the version
	k := float64(o.Releases)
	times := func(v jsonfloat.Float) jsonfloat.Float { return jsonfloat.Float(k * float64(v)) }
	all := *c
	all.RD, all.Witness = times(c.RD), nil
	all.Parts = CertParts{Variance: times(c.Parts.Variance), Mean: times(c.Parts.Mean), Dirichlet: times(c.Parts.Dirichlet)}
	all.AlphaLowHigh, all.AlphaHighLow, all.AlphaHighHigh = 0, 0, 0
	return &CertifiedReport{Source: o.Source, Constants: set.Metadata(), Components: set.Components, Dims: set.Dims,
		Certificate: all, Guarantee: *g, BDPNote: CertifiedBDPNote, PerRelease: c}, nil
}

// Unbounded reports whether the certificate is +Inf at Order and at every
// order of the curve, that is whether the clipping bounds nothing, as for an
// unclipped model, no sigma cap, or C_amin = 0; Reason says which.
func (r *CertifiedReport) Unbounded() bool { return !r.Finite && math.IsInf(float64(r.Epsilon), 1) }

// UnmarshalJSON reads a report written by encoding/json. Files written before
// jsonfloat are read as [Guarantee.UnmarshalJSON] reads them, with null
// bounds as +Inf and null orders as NaN, and a null rd_certified is +Inf.
func (r *CertifiedReport) UnmarshalJSON(b []byte) error {
	type plain CertifiedReport
	var p struct {
		plain
		// UnmarshalJSON hides the method the embedded Guarantee promotes,
		// so that json.Unmarshal fills the whole report, not the guarantee
		// alone.
		UnmarshalJSON struct{} `json:"-"`
	}
	p.Guarantee.setNullDefaults()
	p.RD = jsonfloat.Float(math.Inf(1))
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	p.Guarantee.setFormat1Accountant()
	*r = CertifiedReport(p.plain)
	return nil
}

// UnmarshalJSON reads a curve point. A null rd, as in files written before
// jsonfloat, is +Inf.
func (p *OrderRD) UnmarshalJSON(b []byte) error {
	type plain OrderRD
	q := plain{RD: jsonfloat.Float(math.Inf(1))}
	if err := json.Unmarshal(b, &q); err != nil {
		return err
	}
	*p = OrderRD(q)
	return nil
}
