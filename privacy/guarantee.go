package privacy

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/jsonfloat"
)

// DefaultOrders is the grid of Renyi orders of the certified RDP curve. It is
// the grid of dp_accounting and Opacus, 1.1, 1.2, ..., 10.9, 12, ..., 63, with
// 1.01 to 1.09 added below it, where clips derived for low orders are finite,
// and 64 to 1024 above it, for fixed-noise designs at small epsilon.
var DefaultOrders = func() []float64 {
	var o []float64
	for x := 1; x <= 9; x++ {
		o = append(o, 1+float64(x)/100)
	}
	for x := 1; x < 100; x++ {
		o = append(o, 1+float64(x)/10)
	}
	for x := 12; x <= 64; x++ {
		o = append(o, float64(x))
	}
	return append(o, 96, 128, 256, 512, 1024)
}()

// DefaultDelta is the delta of the certified (epsilon, delta) guarantee and
// of the BDP accountant's delta_mu: the paper's 1e-5.
const DefaultDelta = 1e-5

// EpsilonAt converts the RDP guarantee of a mechanism, rd nats at order
// lambda, to an epsilon of (epsilon, delta)-DP. It uses the improved
// conversion of Balle et al. 2020, Thm 21, and Canonne, Kamath and Steinke
// 2020, Prop 12:
//
//	epsilon = rd + ln((lambda-1)/lambda) - (ln delta + ln lambda)/(lambda-1),
//
// clamped at 0. As dp_accounting's compute_epsilon does, it returns 0 when
// delta >= sqrt(1 - e^{-rd}): by Bretagnolle-Huber the total variation is at
// most sqrt(1 - e^{-KL}) <= sqrt(1 - e^{-rd}). It returns +Inf when rd is +Inf.
//
// It returns an error when order <= 1, delta is not in (0, 1), or rd is
// negative or NaN.
func EpsilonAt(order, rd, delta float64) (float64, error) {
	if err := CheckOrder(order); err != nil {
		return 0, err
	}
	if err := CheckDelta(delta); err != nil {
		return 0, err
	}
	if !(rd >= 0) {
		return 0, fmt.Errorf("RDP value %v at order %v: must be >= 0", rd, order)
	}
	if math.IsInf(rd, 1) {
		return math.Inf(1), nil
	}
	if delta*delta+math.Expm1(-rd) > 0 {
		return 0, nil
	}
	eps := rd + math.Log1p(-1/order) - (math.Log(delta)+math.Log(order))/(order-1)
	return math.Max(0, eps), nil
}

// OrderRD is one point of an RDP curve: the Renyi order and the bound in
// nats. The bound is +Inf where it is infinite, written "Infinity" in JSON.
type OrderRD struct {
	Order float64         `json:"order"`
	RD    jsonfloat.Float `json:"rd"`
}

// BestEpsilon minimises [EpsilonAt] over the points of curve, and returns the
// (epsilon, delta) guarantee and the order that gives it. When every point
// is infinite it returns +Inf and a NaN order. Its errors are those of
// EpsilonAt.
func BestEpsilon(curve []OrderRD, delta float64) (eps, order float64, err error) {
	eps, order = math.Inf(1), math.NaN()
	for _, p := range curve {
		e, err := EpsilonAt(p.Order, float64(p.RD), delta)
		if err != nil {
			return 0, 0, err
		}
		if e < eps {
			eps, order = e, p.Order
		}
	}
	return eps, order, nil
}

// CertifiedBDP returns the Bayesian-DP epsilon_mu at delta_mu implied by a
// certified RDP curve, and the moment order l that gives it.
//
// The accountant's cost c(l) = ln E_x'[exp(l D_{l+1})], defined in
// docs/privacy.md under "Bayesian DP", is at most l cert(l+1) for every x'.
// So epsilon_mu <= min over l of cert(1+l) + ln(1/delta_mu)/l, where each
// point of the curve gives l = order - 1. Unlike the audit's estimate it needs
// no Student-t bound: it holds for every data distribution.
//
// When every point is infinite it returns +Inf and a NaN order.
func CertifiedBDP(curve []OrderRD, deltaMu float64) (eps, l float64, err error) {
	if err := CheckDelta(deltaMu); err != nil {
		return 0, 0, err
	}
	eps, l = math.Inf(1), math.NaN()
	for _, p := range curve {
		if err := CheckOrder(p.Order); err != nil {
			return 0, 0, err
		}
		if e := float64(p.RD) - math.Log(deltaMu)/(p.Order-1); e < eps {
			eps, l = e, p.Order-1
		}
	}
	return eps, l, nil
}

// Guarantee is the certified privacy of k releases of one text by a model
// whose clipping is a [ClipSet].
//
// It holds the RDP curve, k times the one-release certificate at each order,
// since RDP composes additively; the certified (epsilon, delta) and the
// accountant that gave it; and the certified BDP. The accountant is exact for
// a Gaussian release, see [ClipSet.GaussianMu], and otherwise is the RDP
// conversion minimised over orders.
//
// Its scope is any two inputs, that is texts, and k releases; it does not
// cover the training data. See docs/privacy.md, "Threat model".
type Guarantee struct {
	// Format is GuaranteeFormat (0 in files written before it: format 1,
	// whose epsilon is always the RDP conversion).
	Format int `json:"format,omitempty"`
	// Label is LabelCertified; Scope is CertifiedScope(Releases, N, P) of
	// the clip set (what the numbers cover). Guarantees read from files
	// written before these fields have them empty.
	Label     string            `json:"label,omitempty"`
	Scope     string            `json:"scope,omitempty"`
	Releases  int               `json:"releases"`
	Delta     float64           `json:"delta"`
	Direction GaussianDirection `json:"gaussian_direction"`
	// Curve is the certified RDP of all Releases releases per order.
	Curve []OrderRD `json:"orders"`
	// MaxOrder: the curve is finite below it (+Inf: everywhere).
	MaxOrder jsonfloat.Float `json:"max_order"`
	// Epsilon is the certified epsilon at Delta, by Accountant:
	// AccountantGaussian (exact; GaussianMu is then the mu of all Releases
	// releases, sqrt(Releases) times one release's) or AccountantRDP (Curve
	// converted, = RDPEpsilon). Files of format 1 have no accountant: RDP.
	Epsilon    jsonfloat.Float `json:"epsilon"`
	Accountant string          `json:"accountant,omitempty"`
	GaussianMu jsonfloat.Float `json:"gaussian_mu,omitempty"`
	// RDPEpsilon is Curve's conversion at Delta minimised over the orders,
	// BestOrder the order that gives it: the certified epsilon of the RDP
	// accountant, above Epsilon where the exact one applies.
	RDPEpsilon jsonfloat.Float `json:"rdp_epsilon,omitempty"`
	BestOrder  jsonfloat.Float `json:"best_order"`
	// BDPEpsilon is CertifiedBDP of Curve at Delta, BDPOrder its moment order l.
	BDPEpsilon jsonfloat.Float `json:"bdp_epsilon_certified"`
	BDPOrder   jsonfloat.Float `json:"bdp_order_certified"`
	// Release is the mechanism whose released bits the guarantee covers
	// (ClipSet.ReleaseMechanism): exact, with its lattice, or not, and why.
	// Nil in files written before it.
	Release *ReleaseMechanism `json:"release,omitempty"`
}

// CurveOptions says which curve [CertifyCurve] certifies: its orders, the
// Gaussian divergence's direction, the number of releases and the delta of
// the (epsilon, delta) conversion.
type CurveOptions struct {
	// Orders are the Renyi orders of the curve, each > 1; nil means
	// [DefaultOrders].
	Orders []float64
	// Direction is the Gaussian divergence's direction; "" means
	// [DirectionStandard].
	Direction GaussianDirection
	// Releases is the number of releases composed, >= 1.
	Releases int
	// Delta is the delta of the conversion, in (0, 1).
	Delta float64
}

// CertifyCurve returns the certified guarantee of o.Releases releases at each
// order of o.Orders, and its conversion to (epsilon, o.Delta), labelled
// [LabelCertified] with its scope. Orders at or past [ClipSet.MaxOrder] have
// an infinite bound.
//
// It returns an error for an invalid set, an order <= 1, an empty non-nil
// order grid, a delta not in (0, 1), or releases < 1.
func CertifyCurve(set ClipSet, o CurveOptions) (*Guarantee, error) {
	orders, dir, releases, delta := o.Orders, o.Direction, o.Releases, o.Delta
	if releases < 1 {
		return nil, fmt.Errorf("releases = %d: must be >= 1", releases)
	}
	if orders == nil {
		orders = DefaultOrders
	}
	if len(orders) == 0 {
		return nil, fmt.Errorf("certify: empty order grid")
	}
	if dir == "" {
		dir = DirectionStandard
	}
	g := &Guarantee{Format: GuaranteeFormat, Label: LabelCertified, Scope: CertifiedScope(releases, set.Components, set.Dims),
		Releases: releases, Delta: delta, Direction: dir, MaxOrder: jsonfloat.Float(set.MaxOrder())}
	memo := map[dirKey]dirSupV{}
	for _, o := range orders {
		c, err := supremum(set, o, dir, memo, false)
		if err != nil {
			return nil, err
		}
		g.Curve = append(g.Curve, OrderRD{Order: o, RD: jsonfloat.Float(float64(releases) * float64(c.RD))})
	}
	eps, best, err := BestEpsilon(g.Curve, delta)
	if err != nil {
		return nil, err
	}
	g.RDPEpsilon, g.BestOrder = jsonfloat.Float(eps), jsonfloat.Float(best)
	certified, _, acct, mu, err := certifiedEpsilon(set, g.Curve, releases, delta)
	if err != nil {
		return nil, err
	}
	g.Epsilon, g.Accountant, g.GaussianMu = jsonfloat.Float(certified), acct, jsonfloat.Float(mu)
	be, bl, err := CertifiedBDP(g.Curve, delta)
	if err != nil {
		return nil, err
	}
	g.BDPEpsilon, g.BDPOrder = jsonfloat.Float(be), jsonfloat.Float(bl)
	m := set.ReleaseMechanism()
	g.Release = &m
	return g, nil
}

// UnmarshalJSON reads a guarantee written by encoding/json. Files written
// before jsonfloat have null for every non-finite number: a null bound, in
// max_order, epsilon or bdp_epsilon_certified, is +Inf, and a null order, in
// best_order or bdp_order_certified, is NaN. Files of format 1 have no
// accountant: their epsilon is the RDP conversion.
func (g *Guarantee) UnmarshalJSON(b []byte) error {
	type plain Guarantee // without this method
	var p plain
	(*Guarantee)(&p).setNullDefaults()
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*g = Guarantee(p)
	g.setFormat1Accountant()
	return nil
}

// setNullDefaults sets the fields that a file written before jsonfloat has
// as null to what null meant there, before decoding: the bounds +Inf, the
// orders NaN.
func (g *Guarantee) setNullDefaults() {
	inf, nan := jsonfloat.Float(math.Inf(1)), jsonfloat.Float(math.NaN())
	g.MaxOrder, g.Epsilon, g.BDPEpsilon, g.BestOrder, g.BDPOrder = inf, inf, inf, nan, nan
}

// setFormat1Accountant gives a guarantee decoded from a file of format 1
// (no accountant) its accountant: the RDP conversion, which its epsilon is.
func (g *Guarantee) setFormat1Accountant() {
	if g.Accountant == "" {
		g.Accountant, g.RDPEpsilon = AccountantRDP, g.Epsilon
	}
}

// How says, for people, how Epsilon was certified: "exact (analytic
// Gaussian, mu M)" or "RDP at order O".
func (g *Guarantee) How() string {
	if g.Accountant == AccountantGaussian {
		return fmt.Sprintf("exact (analytic Gaussian mechanism, mu %.4g)", float64(g.GaussianMu))
	}
	return fmt.Sprintf("RDP at order %g", float64(g.BestOrder))
}
