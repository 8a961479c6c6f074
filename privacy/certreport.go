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
	// LabelCertified marks a guarantee computed from the clip constants
	// alone (Certify, CertifyCurve): valid for every pair of inputs.
	LabelCertified = "certified"
	// LabelEmpirical marks numbers audited on a finite set of texts (audit.Audit):
	// the maximum over the pairs audited, not a bound for other texts.
	LabelEmpirical = "empirical"
	// LabelEstimate marks a statistical estimate (the audit's Student-t BDP
	// accountant), not a bound.
	LabelEstimate = "estimate"
)

// CertifiedBDPNote says how the certified BDP is obtained (CertifiedBDP).
const CertifiedBDPNote = "eps_mu <= cert(1+l) + ln(1/delta_mu)/l minimised over l"

// CertifiedScope says what a certificate of `releases` releases covers for
// posteriors of n components (the prior component included) in p
// dimensions; n or p < 1 (unknown, e.g. a table over models) leaves the
// sizes out.
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

// CertifiedReport is the presentation of the certified guarantee of a clip
// set: the "certified" object of report.json, eval_<split>.json and `nvdp
// audit --json`, and the core of `nvdp certify --json`. Every RD and epsilon
// is of Releases releases (RDP composes additively); +Inf is "Infinity" in
// JSON (jsonfloat) and reads back as +Inf, as does the null of files
// written before jsonfloat.
type CertifiedReport struct {
	Label string `json:"label"` // LabelCertified
	Scope string `json:"scope"` // CertifiedScope(Releases, Components, Dims)
	// Source says where the clip constants come from (a model configuration,
	// a posterior file's metadata, command-line flags).
	Source string `json:"source"`
	// Constants are the clip set's constants (ClipSet.Metadata keys).
	Constants  map[string]string `json:"constants"`
	Components int               `json:"components"` // N, the prior component included
	Dims       int               `json:"dims"`       // P
	// Certificate is the certificate at Order of all Releases releases: RD
	// and its parts are Releases x the one-release supremum (PerRelease),
	// the parts zero when RD is +Inf; MaxOrder: finite exactly below it
	// (+Inf: every order). No witness here: see PerRelease.
	Certificate
	// The guarantee of Releases releases: (Epsilon, Delta)-DP by Accountant
	// (Guarantee: exact for a Gaussian release, with its GaussianMu; else the
	// RDP conversion RDPEpsilon at BestOrder), the certified BDP at Delta and
	// the RDP curve.
	Releases   int             `json:"releases"`
	Delta      float64         `json:"delta"`
	Epsilon    jsonfloat.Float `json:"epsilon"`
	Accountant string          `json:"accountant,omitempty"`
	GaussianMu jsonfloat.Float `json:"gaussian_mu,omitempty"`
	RDPEpsilon jsonfloat.Float `json:"rdp_epsilon,omitempty"`
	BestOrder  jsonfloat.Float `json:"best_order"`
	BDPEpsilon jsonfloat.Float `json:"bdp_epsilon_certified"`
	BDPOrder   jsonfloat.Float `json:"bdp_order_certified"` // moment order l
	BDPNote    string          `json:"bdp_note"`            // CertifiedBDPNote
	Curve      []OrderRD       `json:"orders"`
	// Release is the mechanism the guarantee covers (Guarantee.Release).
	Release *ReleaseMechanism `json:"release,omitempty"`
	// PerRelease is the one-release certificate at Order, with its witness
	// pair (not written; nil when read from JSON).
	PerRelease *Certificate `json:"-"`
}

// CheckReport checks the parameters of CertifyReport before any work: the
// Renyi order (finite, > 1), every order of the curve's grid, the Gaussian
// direction ("" is DirectionStandard), the releases (>= 1) and delta (in
// (0, 1)). Errors are *option.Error named order, orders,
// gaussian_direction, releases and delta, so that a program names its own
// flags for them.
func CheckReport(order float64, orders []float64, dir GaussianDirection, releases int, delta float64) error {
	if !(order > 1) || math.IsInf(order, 0) {
		return option.Errorf("order", order, "the Renyi order must be finite and > 1")
	}
	for _, o := range orders {
		if !(o > 1) || math.IsInf(o, 0) {
			return option.Errorf("orders", o, "every Renyi order must be finite and > 1")
		}
	}
	switch dir {
	case "", DirectionStandard, DirectionPaper:
	default:
		return option.Errorf("gaussian_direction", string(dir), "want %s or %s", DirectionStandard, DirectionPaper)
	}
	if releases < 1 {
		return option.Errorf("releases", releases, "must be >= 1")
	}
	if err := CheckDelta(delta); err != nil {
		return err
	}
	return nil
}

// CertifyReport certifies set at order in direction dir ("" = standard)
// and computes the guarantee of `releases` releases at delta over orders
// (nil: DefaultOrders). source names where the constants come from.
// Errors (prefixed with the source): order <= 1, delta not in (0, 1),
// releases < 1, an invalid set (named).
func CertifyReport(set ClipSet, order float64, dir GaussianDirection, releases int, delta float64, orders []float64, source string) (*CertifiedReport, error) {
	if err := CheckReport(order, orders, dir, releases, delta); err != nil {
		return nil, fmt.Errorf("certify (%s): %w", source, err)
	}
	c, err := certify(set, order, dir, nil, false) // no witness: WitnessPair builds it when asked
	if err != nil {
		return nil, fmt.Errorf("certify (%s): %w", source, err)
	}
	g, err := CertifyCurve(set, orders, dir, releases, delta)
	if err != nil {
		return nil, fmt.Errorf("certify (%s): %w", source, err)
	}
	k := float64(releases)
	times := func(v jsonfloat.Float) jsonfloat.Float { return jsonfloat.Float(k * float64(v)) }
	all := Certificate{Order: c.Order, Direction: c.Direction, RD: times(c.RD), Finite: c.Finite, Reason: c.Reason, MaxOrder: c.MaxOrder,
		Parts: CertParts{Variance: times(c.Parts.Variance), Mean: times(c.Parts.Mean), Dirichlet: times(c.Parts.Dirichlet)}}
	return &CertifiedReport{Label: LabelCertified, Scope: CertifiedScope(releases, set.Components, set.Dims), Source: source,
		Constants: set.Metadata(), Components: set.Components, Dims: set.Dims, Certificate: all, Releases: g.Releases, Delta: g.Delta,
		Epsilon: g.Epsilon, Accountant: g.Accountant, GaussianMu: g.GaussianMu, RDPEpsilon: g.RDPEpsilon,
		BestOrder: g.BestOrder, BDPEpsilon: g.BDPEpsilon, BDPOrder: g.BDPOrder,
		BDPNote: CertifiedBDPNote, Curve: g.Curve, Release: g.Release, PerRelease: c}, nil
}

// Unbounded reports whether the certificate is +Inf at Order and at every
// order of the curve: the clipping bounds nothing (an unclipped model, no
// sigma cap, C_amin = 0; Reason says which).
func (r *CertifiedReport) Unbounded() bool { return !r.Finite && math.IsInf(float64(r.Epsilon), 1) }

// UnmarshalJSON reads a report written by encoding/json. Files written
// before jsonfloat have null for every non-finite number: a null bound
// (rd_certified, epsilon, bdp_epsilon_certified, max_order) is +Inf, a
// null order (best_order, bdp_order_certified) NaN.
func (r *CertifiedReport) UnmarshalJSON(b []byte) error {
	type plain CertifiedReport // without this method
	inf, nan := jsonfloat.Float(math.Inf(1)), jsonfloat.Float(math.NaN())
	p := plain{Certificate: Certificate{RD: inf, MaxOrder: inf}, Epsilon: inf, BDPEpsilon: inf, BestOrder: nan, BDPOrder: nan}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.Accountant == "" { // written before the accountant: the RDP conversion
		p.Accountant, p.RDPEpsilon = AccountantRDP, p.Epsilon
	}
	*r = CertifiedReport(p)
	return nil
}

// How says how Epsilon was certified (Guarantee.How).
func (r *CertifiedReport) How() string {
	return (&Guarantee{Accountant: r.Accountant, GaussianMu: r.GaussianMu, BestOrder: r.BestOrder}).How()
}

// UnmarshalJSON reads a curve point: a null rd (files written before
// jsonfloat) is +Inf.
func (p *OrderRD) UnmarshalJSON(b []byte) error {
	type plain OrderRD
	q := plain{RD: jsonfloat.Float(math.Inf(1))}
	if err := json.Unmarshal(b, &q); err != nil {
		return err
	}
	*p = OrderRD(q)
	return nil
}
