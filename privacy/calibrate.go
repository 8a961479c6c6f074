package privacy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/jsonfloat"
)

// Target is what a calibration must certify, of one of two kinds.
//
// A [KindEpsilon] target is Epsilon at Delta for Releases releases, using the
// (epsilon, delta) conversion minimised over the order grid. A [KindRD] target
// is RD nats at Order for Releases releases; its Delta, optional with 0
// meaning [DefaultDelta], is the delta at which the calibration's guarantee
// reports its epsilon.
//
// Kind says which, so that a zero value never stands for "absent": the kind's
// value must be finite and > 0, an explicit 0 being an error and never "no
// target", and the other kind's value must be unset, 0. Build targets with
// [EpsilonTarget] and [RDTarget].
//
// The JSON form has "kind". A target written before it, as in the
// certificate.json of older runs, reads with the kind of its value that is
// > 0; see [Target.UnmarshalJSON].
type Target struct {
	Kind     TargetKind `json:"kind"`
	Epsilon  float64    `json:"epsilon,omitempty"`
	Delta    float64    `json:"delta,omitempty"`
	RD       float64    `json:"rd,omitempty"`
	Order    float64    `json:"order,omitempty"`
	Releases int        `json:"releases"`
}

// TargetKind is the kind of a Target: KindEpsilon or KindRD.
type TargetKind string

// The kinds of Target.
const (
	KindEpsilon TargetKind = "epsilon" // certified epsilon at delta
	KindRD      TargetKind = "rd"      // certified RD (nats) at a Renyi order
)

// EpsilonTarget returns the target of a certified epsilon eps at delta for
// releases releases of one text. [Target.Validate] checks the values.
func EpsilonTarget(eps, delta float64, releases int) Target {
	return Target{Kind: KindEpsilon, Epsilon: eps, Delta: delta, Releases: releases}
}

// RDTarget returns the target of a certified RD of rd nats at the Renyi
// order for releases releases of one text. [Target.Validate] checks the
// values.
func RDTarget(rd, order float64, releases int) Target {
	return Target{Kind: KindRD, RD: rd, Order: order, Releases: releases}
}

// Validate checks the target: a known Kind, with its value finite and > 0 and
// the other kind's value unset; releases >= 1; for an epsilon target, delta in
// (0, 1); for an RD target, a valid order, and delta in (0, 1) when given.
// Its errors name the field.
func (t Target) Validate() error {
	const one = "give exactly one of a target epsilon and a target RD"
	switch t.Kind {
	case KindEpsilon:
		switch {
		case !(t.Epsilon > 0) || math.IsInf(t.Epsilon, 0):
			return fmt.Errorf("target: epsilon %v: want a finite value > 0", t.Epsilon)
		case CheckDelta(t.Delta) != nil:
			return fmt.Errorf("target: epsilon %v: %w", t.Epsilon, CheckDelta(t.Delta))
		case t.RD != 0:
			return fmt.Errorf("target: an epsilon target with RD %v: %s", t.RD, one)
		}
	case KindRD:
		switch {
		case !(t.RD > 0) || math.IsInf(t.RD, 0):
			return fmt.Errorf("target: RD %v: want a finite value > 0", t.RD)
		case t.Epsilon != 0:
			return fmt.Errorf("target: an RD target with epsilon %v: %s", t.Epsilon, one)
		case t.Delta != 0 && CheckDelta(t.Delta) != nil:
			return fmt.Errorf("target: RD %v: %w (or 0 for %v)", t.RD, CheckDelta(t.Delta), DefaultDelta)
		}
		if err := CheckOrder(t.Order); err != nil {
			return fmt.Errorf("target: RD %v: %w", t.RD, err)
		}
	case "":
		return fmt.Errorf("target: no kind: %s (EpsilonTarget, RDTarget)", one)
	default:
		return fmt.Errorf("target: kind %q: want %q or %q", t.Kind, KindEpsilon, KindRD)
	}
	if t.Releases < 1 {
		return fmt.Errorf("target: releases = %d, want >= 1", t.Releases)
	}
	return nil
}

// UnmarshalJSON reads a target as it is written. A target written before
// Target had a kind, without a "kind" key as in the certificate.json of older
// runs, whose Validate allowed exactly one of epsilon and RD > 0, reads with
// the kind of the value that is > 0.
func (t *Target) UnmarshalJSON(b []byte) error {
	type plain Target // without this method
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.Kind == "" {
		switch {
		case p.RD > 0 && p.Epsilon > 0: // no such file was written: Validate says
		case p.RD > 0:
			p.Kind = KindRD
		case p.Epsilon > 0:
			p.Kind = KindEpsilon
		}
	}
	*t = Target(p)
	return nil
}

// Split says how a calibration divides the target RD between the three parts
// of the certified bound, and which clipping constants the user fixed. See
// docs/privacy.md, "Calibration".
//
// The three parts have one constant each. The variance part has the logvar
// margin, which sets the sigma range [floor, cap]; the Dirichlet part has
// C_amin, which sets the alpha range [C_amin, C_amax] with C_amax fixed; and
// the mean part has C_mu. A fixed constant keeps the base set's value.
//
// Each free constant but the last is set so that its part alone, with the
// other two at zero cost, is its share of the target RD. The last free
// constant, in the order C_mu, margin, C_amin, is solved by a monotone root
// find so that the whole certificate meets the target. The default Split{}
// gives the variance and Dirichlet parts nothing: a fixed-noise design, with
// floor = cap and C_amin = C_amax, where C_mu carries the whole budget.
type Split struct {
	VarianceShare  float64 `json:"variance_share"`
	DirichletShare float64 `json:"dirichlet_share"`
	FixCMu         bool    `json:"fix_c_mu,omitempty"`
	FixMargin      bool    `json:"fix_logvar_margin,omitempty"`
	FixAlphaMin    bool    `json:"fix_c_alpha_min,omitempty"`
}

// Calibration is the result of [Calibrate]: the clip set with the constants
// chosen, the certified guarantee on the order grid, and the target.
type Calibration struct {
	Set       ClipSet    `json:"-"`
	Target    Target     `json:"target"`
	Split     Split      `json:"split"`
	Order     float64    `json:"order"` // the order the budget was split at
	Guarantee *Guarantee `json:"guarantee"`
	// Achieved is the certified value of the target's kind: epsilon, or the
	// RD of Releases releases at Target.Order.
	Achieved float64 `json:"achieved"`
}

// knob is one free constant of the calibration.
type knob int

const (
	knobCMu knob = iota
	knobMargin
	knobAlphaMin
)

func (k knob) String() string {
	return [...]string{"C_mu", "the logvar margin", "C_amin"}[k]
}

// marginMax is the largest logvar margin: floor = cap (fixed sigma).
func marginMax(clipOrder float64) float64 { return math.Log(clipOrder / (clipOrder - 1)) }

// Calibrate chooses the free clipping constants of base so that the
// certified guarantee meets t.
//
// For an RD target, the certificate at t.Order, times t.Releases, equals t.RD
// within float32 storage rounding: a relative error of about 1e-7, never
// above the target. For an epsilon target, the epsilon converted over orders
// equals t.Epsilon in the same way; a nil orders means [DefaultOrders].
//
// The constants that base fixes, see [Split], are kept. base.LogvarFloor must
// be nil when the margin is free, since the margin is the variance constant.
//
// It returns an error for an invalid base or target, and for a target that
// cannot be met, naming the constant to change.
func Calibrate(base ClipSet, t Target, sp Split, orders []float64, dir GaussianDirection) (*Calibration, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if orders == nil {
		orders = DefaultOrders
	}
	if base.LogvarFloor != nil && !sp.FixMargin {
		return nil, errors.New("calibrate: the sigma range is given as an explicit logvar floor and cap; fix it or give the margin and the clip order instead")
	}
	if sp.VarianceShare < 0 || sp.DirichletShare < 0 || sp.VarianceShare+sp.DirichletShare >= 1 || math.IsNaN(sp.VarianceShare+sp.DirichletShare) {
		return nil, fmt.Errorf("calibrate: variance share %v and Dirichlet share %v must be >= 0 and sum to < 1 (the mean part gets the rest)", sp.VarianceShare, sp.DirichletShare)
	}
	probe := base
	if !sp.FixCMu && !(probe.CMu >= 0) {
		probe.CMu = 0
	}
	if !sp.FixAlphaMin {
		probe.AlphaMin = probe.AlphaMax
	}
	if !sp.FixMargin {
		probe.LogvarMargin = 0
	}
	if err := probe.Validate(); err != nil {
		return nil, err
	}
	var free []knob
	for k, fixed := range []bool{sp.FixCMu, sp.FixMargin, sp.FixAlphaMin} {
		if !fixed {
			free = append(free, knob(k))
		}
	}
	if len(free) == 0 {
		return nil, errors.New("calibrate: every clipping constant is fixed; nothing to calibrate")
	}
	cal := &calibrator{base: probe, dir: dir, free: free, split: sp, releases: float64(t.Releases), memo: map[dirKey]dirSupV{}}
	res := &Calibration{Target: t, Split: sp}
	if t.Kind == KindRD {
		set, err := cal.atOrder(t.Order, t.RD/cal.releases)
		if err != nil {
			return nil, err
		}
		res.Set, res.Order = set, t.Order
	} else {
		set, order, err := cal.forEpsilon(t, orders)
		if err != nil {
			return nil, err
		}
		res.Set, res.Order = set, order
	}
	g, err := CertifyCurve(res.Set, CurveOptions{Orders: orders, Direction: dir, Releases: t.Releases, Delta: deltaOr(t.Delta)})
	if err != nil {
		return nil, err
	}
	res.Guarantee = g
	if t.Kind == KindRD {
		c, err := Certify(res.Set, t.Order, dir)
		if err != nil {
			return nil, err
		}
		res.Achieved = cal.releases * float64(c.RD)
	} else {
		res.Achieved = float64(g.Epsilon)
	}
	return res, nil
}

func deltaOr(d float64) float64 {
	if d > 0 {
		return d
	}
	return DefaultDelta
}

type calibrator struct {
	base     ClipSet
	dir      GaussianDirection
	free     []knob
	split    Split
	releases float64
	memo     map[dirKey]dirSupV
}

// with returns the base set with knob k set to v.
func (c *calibrator) with(s ClipSet, k knob, v float64) ClipSet {
	switch k {
	case knobCMu:
		s.CMu = v
	case knobMargin:
		s.LogvarMargin = v
	case knobAlphaMin:
		s.AlphaMin = v
	}
	return s
}

// rd is the certified one-release RD of s at order (+Inf on any error).
func (c *calibrator) rd(s ClipSet, order float64) float64 {
	cert, err := supremum(s, order, c.dir, c.memo, false)
	if err != nil {
		return math.Inf(1)
	}
	return float64(cert.RD)
}

// rng is the search interval of a knob and whether the bound increases with it.
func (c *calibrator) rng(k knob, order float64) (lo, hi float64, increasing bool) {
	switch k {
	case knobCMu:
		return 0, math.Inf(1), true
	case knobMargin:
		return 0, marginMax(c.base.ClipOrder), false
	default: // C_amin: the bound is finite only above (order-1)/order C_amax
		return (order - 1) / order * c.base.AlphaMax, c.base.AlphaMax, false
	}
}

// solve returns the knob value whose bound f is as close to target as
// bisection on float64 gets while f <= target: the largest such value when f
// increases with the knob, the smallest when it decreases. ok is false when
// no value in the range reaches f <= target.
func solve(f func(float64) float64, lo, hi float64, increasing bool, target float64) (v float64, ok bool) {
	if math.IsInf(hi, 1) { // grow the bracket
		hi = 1
		for f(hi) <= target {
			lo, hi = hi, hi*2
			if hi > 1e30 {
				return lo, true
			}
		}
	}
	good, bad := lo, hi // increasing: f(good) <= target < f(bad)
	if !increasing {
		good, bad = hi, lo
	}
	if f(good) > target {
		return good, false
	}
	if f(bad) <= target {
		return bad, true
	}
	for i := 0; i < 200 && good != bad; i++ {
		mid := good + (bad-good)/2
		if mid == good || mid == bad {
			break
		}
		if f(mid) <= target {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, true
}

// atOrder sets the free knobs so that the one-release certificate at order
// is r: shares first, then the closing knob.
func (c *calibrator) atOrder(order, r float64) (ClipSet, error) {
	s := c.base
	closing := c.free[0]
	for _, k := range c.free[1:] {
		share := c.split.VarianceShare
		if k == knobAlphaMin {
			share = c.split.DirichletShare
		}
		lo, hi, inc := c.rng(k, order)
		if share == 0 { // zero cost: floor = cap, or C_amin = C_amax
			s = c.with(s, k, hi)
			continue
		}
		// the part alone: the other knobs at zero cost
		alone := c.base
		alone.CMu = 0
		alone.AlphaMin = alone.AlphaMax
		alone.LogvarMargin = marginMax(alone.ClipOrder)
		v, ok := solve(func(x float64) float64 { return c.rd(c.with(alone, k, x), order) }, lo, hi, inc, share*r)
		if !ok {
			return s, fmt.Errorf("calibrate: %v cannot bring its part down to its share %g of RD %g at order %g", k, share, r, order)
		}
		s = c.with(s, k, v)
	}
	lo, hi, inc := c.rng(closing, order)
	v, ok := solve(func(x float64) float64 { return c.rd(c.with(s, closing, x), order) }, lo, hi, inc, r)
	if !ok {
		return s, fmt.Errorf("calibrate: the other constants alone certify %.6g nats at order %g, above the target %.6g: %s",
			c.rd(c.with(s, closing, map[bool]float64{true: lo, false: hi}[inc]), order), order, r, c.advice(closing))
	}
	return c.with(s, closing, v), nil
}

// advice names what to change when the fixed constants or the shares exceed
// the target: the constants the user fixed, and the shares given to free ones.
func (c *calibrator) advice(closing knob) string {
	var fixed []string
	if c.split.FixCMu {
		fixed = append(fixed, "a smaller C_mu")
	}
	switch {
	case c.split.FixMargin:
		fixed = append(fixed, "a larger logvar margin (narrower sigma range)")
	case closing != knobMargin && c.split.VarianceShare > 0:
		fixed = append(fixed, "a smaller variance share")
	}
	switch {
	case c.split.FixAlphaMin:
		fixed = append(fixed, "a larger C_amin")
	case closing != knobAlphaMin && c.split.DirichletShare > 0:
		fixed = append(fixed, "a smaller Dirichlet share")
	}
	if len(fixed) == 0 {
		return "raise the target or count fewer releases"
	}
	return "use " + joinOr(fixed) + ", or raise the target"
}

func joinOr(s []string) string {
	out := s[0]
	for i := 1; i < len(s); i++ {
		out += " or " + s[i]
	}
	return out
}

// forEpsilon calibrates an epsilon target: for each order of the grid, the
// RD budget whose conversion is exactly the target; the order whose
// constants give the closing knob the most room wins; then the closing knob
// is solved against the epsilon minimised over the whole grid.
func (c *calibrator) forEpsilon(t Target, orders []float64) (ClipSet, float64, error) {
	closing := c.free[0]
	_, _, inc := c.rng(closing, 0)
	var best ClipSet
	bestOrder, bestScore := math.NaN(), math.Inf(-1)
	for _, o := range orders {
		if err := CheckOrder(o); err != nil {
			return best, 0, err
		}
		// epsilon = k r + ln((o-1)/o) - (ln delta + ln o)/(o-1)  =>  r
		r := (t.Epsilon - math.Log1p(-1/o) + (math.Log(t.Delta)+math.Log(o))/(o-1)) / c.releases
		if !(r > 0) {
			continue
		}
		s, err := c.atOrder(o, r)
		if err != nil {
			continue
		}
		score := knobValue(s, closing)
		if !inc {
			score = -score
		}
		if score > bestScore {
			best, bestOrder, bestScore = s, o, score
		}
	}
	if math.IsNaN(bestOrder) {
		return best, 0, fmt.Errorf("calibrate: no order of the grid meets epsilon %g at delta %g with %g release(s): %s",
			t.Epsilon, t.Delta, c.releases, c.advice(closing))
	}
	eps := func(x float64) float64 { // as CertifyCurve certifies it (certifiedEpsilon)
		s := c.with(best, closing, x)
		var curve []OrderRD
		if _, gauss := s.GaussianMu(); !gauss { // the exact accountant needs no curve
			for _, o := range orders {
				curve = append(curve, OrderRD{Order: o, RD: jsonfloat.Float(c.releases * c.rd(s, o))})
			}
		}
		e, _, _, _, err := certifiedEpsilon(s, curve, int(c.releases), t.Delta)
		if err != nil {
			return math.Inf(1)
		}
		return e
	}
	lo, hi, _ := c.rng(closing, bestOrder)
	if inc {
		lo = knobValue(best, closing)
	} else {
		hi = knobValue(best, closing)
	}
	if closing == knobAlphaMin { // finite somewhere on the grid needs C_amin above the smallest order's threshold
		lo = math.Max(lo, (orders[0]-1)/orders[0]*c.base.AlphaMax)
	}
	v, ok := solve(eps, lo, hi, inc, t.Epsilon)
	if !ok {
		return best, 0, fmt.Errorf("calibrate: epsilon %g cannot be met: %s", t.Epsilon, c.advice(closing))
	}
	return c.with(best, closing, v), bestOrder, nil
}

func knobValue(s ClipSet, k knob) float64 {
	switch k {
	case knobCMu:
		return s.CMu
	case knobMargin:
		return s.LogvarMargin
	default:
		return s.AlphaMin
	}
}
