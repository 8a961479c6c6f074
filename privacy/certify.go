package privacy

import (
	"fmt"
	"math"
	"strconv"

	"github.com/nvdp-project/nvdp/jsonfloat"
	"github.com/nvdp-project/nvdp/option"
)

// ClipSet is the set of clipped posteriors a model can release: the
// constraints of principled clipping, from paper §3.2 and docs/privacy.md,
// "The certified bound". Every posterior in the set has N aligned components
// in P dimensions:
//
//	component 0, the prior:  mu = prior mean, logvar = ln prior_var, alpha = PriorAlpha, the same in every posterior
//	components 1..N-1:       ||mu_i - prior mean||_2 <= CMu,
//	                         logvar_ij in [floor_j, cap_j],
//	                         alpha_i in [AlphaMin, AlphaMax].
//
// The logvar interval is LogvarFloor and LogvarCap when they are set.
// Otherwise it is derived as the clip derives it, by [LogvarBounds] with a
// cap: floor_j = ln((ClipOrder-1)/ClipOrder prior_var_j) + LogvarMargin and
// cap_j = ln prior_var_j.
//
// Posteriors are stored as float32. [Certify] uses every constant as float32
// storage rounds it, [StoredRadius] for CMu and float32 for the logvar bounds
// and the alphas, so that the certificate covers exactly the posteriors the
// clipping can write.
type ClipSet struct {
	// Components N (including the prior component) and Dims P.
	Components, Dims int
	// CMu is the radius C_mu of the mean ball (>= 0; +Inf: means unbounded).
	CMu float64
	// PriorMu and PriorVar are the prior mean and variance: length 1 (the same
	// for every dimension) or Dims.
	PriorMu, PriorVar []float64
	// ClipOrder is the Renyi order the sigma floor was derived for (> 1) and
	// LogvarMargin (nats of variance, >= 0) the margin above it; used when
	// LogvarFloor is nil.
	ClipOrder, LogvarMargin float64
	// LogvarFloor and LogvarCap, when non-nil, give the logvar interval
	// directly: length 1 or Dims; -Inf / +Inf mean no floor / no cap.
	LogvarFloor, LogvarCap []float64
	// AlphaMin and AlphaMax bound the pseudo-counts of the token components
	// (0 <= AlphaMin <= AlphaMax; AlphaMax may be +Inf).
	AlphaMin, AlphaMax float64
	// PriorAlpha is the pseudo-count of the prior component as stored (the
	// clipped value when the prior is clipped), > 0.
	PriorAlpha float64
}

// LogvarBounds returns the logvar interval of the sigma clip. It is the one
// place the interval is computed: package nvib clips with it and [ClipSet]
// certifies it.
//
// The floor is ln((order-1)/order priorVar) + margin, the paper's Eq.
// clip_sigma_derived with the margin of docs/privacy.md. When capped, the cap
// is ln priorVar and the floor is never above it; a margin >= ln(order/(order-1))
// gives the fixed-noise design, floor = cap. Uncapped, as in the reference,
// the cap is +Inf.
func LogvarBounds(order, priorVar, margin float64, capped bool) (floor, cap float64) {
	floor = math.Log((order-1)/order*priorVar) + margin
	if !capped {
		return floor, math.Inf(1)
	}
	cap = math.Log(priorVar)
	return math.Min(floor, cap), cap
}

// StoredPriorAlpha returns the pseudo-count of the prior component as the
// NVIB layer stores it: exp of the float32 prior log alpha, clamped into
// [aMin, aMax] when the prior component is clipped, and rounded to float32.
// It is the one place this is computed; nvib.ClipConfig.PriorAlpha calls it.
func StoredPriorAlpha(logAlpha float64, clipped bool, aMin, aMax float64) float64 {
	a := math.Exp(float64(float32(logAlpha)))
	if clipped {
		a = math.Min(math.Max(a, aMin), aMax)
	}
	return float64(float32(a))
}

// StoredRadius returns the mean-ball radius the clip enforces on float32
// posteriors: the largest float32 not above cMu, which is cMu itself when it
// is a float32. nvib.ClipMu guarantees ||mu - c||_2 <= StoredRadius(cMu) for
// the stored float32 mu, and [Certify] uses this radius.
func StoredRadius(cMu float64) float64 {
	if math.IsInf(cMu, 1) || cMu > math.MaxFloat32 {
		return math.Inf(1)
	}
	r := float64(float32(cMu))
	if r > cMu {
		r = float64(math.Nextafter32(float32(cMu), 0))
	}
	return r
}

// f32 rounds v to float32 storage and back.
func f32(v float64) float64 { return float64(float32(v)) }

// broadcast returns v[j] for a length-1 or length-P slice.
func broadcast(v []float64, j int) float64 {
	if len(v) == 1 {
		return v[0]
	}
	return v[j]
}

// Validate checks the constants. Its error is an [*option.Error] naming the
// constant by its option name, so that a program names its own flag or field
// for it; the reason names the paper's symbol. The names are components,
// dims, c_mu, c_alpha_min, c_alpha_max, prior_alpha, prior_mu, prior_var,
// clip_order, logvar_margin, logvar_floor and logvar_cap.
//
// C_mu, C_amax and the logvar floor and cap may be infinite; the certificate
// is then +Inf, or the bound without that clip.
func (s ClipSet) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) }
	invalid := func(name string, v any, format string, a ...any) error {
		return option.Errorf(name, v, "clip set: "+format, a...)
	}
	switch {
	case s.Components < 1:
		return invalid("components", s.Components, "N must be >= 1 (the prior component counts)")
	case s.Dims < 1:
		return invalid("dims", s.Dims, "P must be >= 1")
	case bad(s.CMu) || s.CMu < 0:
		return invalid("c_mu", s.CMu, "C_mu must be >= 0")
	case bad(s.AlphaMin) || s.AlphaMin < 0 || math.IsInf(s.AlphaMin, 0):
		return invalid("c_alpha_min", s.AlphaMin, "C_amin must be finite and >= 0")
	case bad(s.AlphaMax) || !(s.AlphaMax > 0):
		return invalid("c_alpha_max", s.AlphaMax, "C_amax must be > 0")
	case s.AlphaMax < s.AlphaMin:
		return option.MentionErrorf([]string{"c_alpha_max"}, "c_alpha_min", s.AlphaMin, "clip set: C_amin must be <= c_alpha_max %v", s.AlphaMax)
	case !(s.PriorAlpha > 0) || math.IsInf(s.PriorAlpha, 0):
		return invalid("prior_alpha", s.PriorAlpha, "the prior's pseudo-count must be finite and > 0")
	}
	for _, pv := range []struct {
		name string
		v    []float64
		pos  bool
	}{{"prior_mu", s.PriorMu, false}, {"prior_var", s.PriorVar, true}} {
		if len(pv.v) != 1 && len(pv.v) != s.Dims {
			return invalid(pv.name, nil, "%d values, want 1 or P = %d", len(pv.v), s.Dims)
		}
		for j, v := range pv.v {
			if math.IsNaN(v) || math.IsInf(v, 0) || (pv.pos && !(v > 0)) {
				return invalid(pv.name, nil, "[%d] = %v, want a finite value%s", j, v, map[bool]string{true: " > 0"}[pv.pos])
			}
		}
	}
	if s.LogvarFloor == nil && s.LogvarCap == nil {
		if !(s.ClipOrder > 1) || math.IsInf(s.ClipOrder, 0) {
			return invalid("clip_order", s.ClipOrder, "the Renyi order of the sigma clip must be finite and > 1 (or give the logvar floor and cap)")
		}
		if bad(s.LogvarMargin) || s.LogvarMargin < 0 || math.IsInf(s.LogvarMargin, 0) {
			return invalid("logvar_margin", s.LogvarMargin, "must be finite and >= 0")
		}
		return nil
	}
	if s.LogvarFloor == nil || s.LogvarCap == nil {
		name := map[bool]string{true: "logvar_floor", false: "logvar_cap"}[s.LogvarFloor == nil]
		return option.MentionErrorf([]string{"logvar_floor", "logvar_cap"}, name, nil,
			"clip set: give both logvar_floor and logvar_cap, or neither (then the margin and clip order)")
	}
	for _, pv := range []struct {
		name string
		v    []float64
	}{{"logvar_floor", s.LogvarFloor}, {"logvar_cap", s.LogvarCap}} {
		if len(pv.v) != 1 && len(pv.v) != s.Dims {
			return invalid(pv.name, nil, "%d values, want 1 or P = %d", len(pv.v), s.Dims)
		}
		for j, v := range pv.v {
			if math.IsNaN(v) {
				return invalid(pv.name, nil, "[%d] is NaN", j)
			}
		}
	}
	for j := 0; j < s.distinctBoxDims(); j++ {
		if f, c := broadcast(s.LogvarFloor, j), broadcast(s.LogvarCap, j); f > c {
			return option.MentionErrorf([]string{"logvar_cap"}, "logvar_floor", f, "clip set: above logvar_cap %v in dim %d", c, j)
		}
	}
	return nil
}

// LogvarRange returns the logvar floor and cap of dim j: LogvarFloor and
// LogvarCap when given, and otherwise [LogvarBounds] of the prior variance,
// with a cap.
func (s ClipSet) LogvarRange(j int) (floor, cap float64) {
	if s.LogvarFloor != nil {
		return broadcast(s.LogvarFloor, j), broadcast(s.LogvarCap, j)
	}
	return LogvarBounds(s.ClipOrder, broadcast(s.PriorVar, j), s.LogvarMargin, true)
}

// logvarBox returns the stored (float32-rounded) logvar floor and cap of dim j.
func (s ClipSet) logvarBox(j int) (floor, cap float64) {
	floor, cap = s.LogvarRange(j)
	return f32(floor), f32(cap)
}

// uniformBox reports whether every dimension has the same logvar box (the
// floor and cap, or the prior variance they derive from, broadcast).
func (s ClipSet) uniformBox() bool {
	if s.LogvarFloor != nil {
		return len(s.LogvarFloor) <= 1 && len(s.LogvarCap) <= 1
	}
	return len(s.PriorVar) <= 1
}

// distinctBoxDims is the number of leading dimensions whose boxes cover
// every box of s: 1 when the box is broadcast (a minimum or a test over the
// dimensions then needs only the first), P otherwise.
func (s ClipSet) distinctBoxDims() int {
	if s.uniformBox() {
		return min(s.Dims, 1)
	}
	return s.Dims
}

// Unclipped returns s without clipping: the means, the pseudo-counts and the
// sigma range unbounded, with C_mu = C_amax = +Inf, C_amin = 0, and no floor
// or cap, and the prior component kept. Its certificate is +Inf.
func (s ClipSet) Unclipped() ClipSet {
	s.CMu, s.AlphaMin, s.AlphaMax = math.Inf(1), 0, math.Inf(1)
	s.LogvarFloor, s.LogvarCap = []float64{math.Inf(-1)}, []float64{math.Inf(1)}
	return s
}

// MaxOrder returns the supremum of the Renyi orders at which the certified
// bound is finite: the bound is finite exactly for 1 < lambda < MaxOrder. +Inf
// means every order.
//
// The limits come from docs/privacy.md. The Gaussian radicand needs
// lambda sigma_min^2 > (lambda-1) sigma_max^2, that is lambda < hi/(hi-lo),
// per dimension. The Dirichlet component term needs
// lambda C_amin > (lambda-1) C_amax, that is lambda < C_amax/(C_amax-C_amin).
//
// It returns 1 when no order is finite: C_amin = 0, or no cap, or no floor.
func (s ClipSet) MaxOrder() float64 {
	if s.Components == 1 {
		return math.Inf(1)
	}
	m := math.Inf(1)
	A, B := f32(s.AlphaMin), f32(s.AlphaMax)
	if !(A > 0) || math.IsInf(B, 1) {
		return 1
	}
	if B > A {
		m = B / (B - A)
	}
	for j := 0; j < s.distinctBoxDims(); j++ {
		fl, cp := s.logvarBox(j)
		if math.IsInf(fl, -1) || math.IsInf(cp, 1) {
			return 1
		}
		lo, hi := math.Exp(fl), math.Exp(cp)
		if hi > lo {
			m = math.Min(m, hi/(hi-lo))
		}
	}
	return m
}

// Certificate is the certified Renyi bound of one release at one order: the
// supremum of Eq. rdp over every ordered pair of posteriors in a ClipSet.
type Certificate struct {
	Order float64 `json:"order"`
	// RD is the supremum (nats); +Inf when the set allows an undefined bound.
	RD jsonfloat.Float `json:"rd_certified"`
	// Parts of RD at the witness: the Gaussian log-variance terms, the
	// Gaussian mean terms and the Dirichlet terms (total + components).
	Parts CertParts `json:"parts"`
	// Finite is false when RD is +Inf; Reason then says why.
	Finite bool   `json:"finite"`
	Reason string `json:"reason,omitempty"`
	// Witness is a pair (q, q') in the set whose Eq. rdp value is RD
	// (example 0 = q, example 1 = q') in the Gaussian direction asked; nil
	// when RD is infinite because a constant is unbounded.
	Witness *Posteriors `json:"-"`
	// Dirichlet witness counts among the N-1 token components: (alpha,
	// alpha') = (C_amin, C_amax), (C_amax, C_amin), (C_amax, C_amax).
	AlphaLowHigh, AlphaHighLow, AlphaHighHigh int `json:"-"`
}

// CertParts are the three parts of a certified bound, in nats.
type CertParts struct {
	Variance  jsonfloat.Float `json:"variance"`
	Mean      jsonfloat.Float `json:"mean"`
	Dirichlet jsonfloat.Float `json:"dirichlet"`
}

// gaussVar is the log-variance part of the closed-form Renyi divergence
// D_lambda(N(m1, x) || N(m2, y)) per dimension (Gil, Alajaji & Linder 2013):
// [ 1/2 ln s2 - (1-lambda)/2 ln x - lambda/2 ln y ] / (1-lambda), with
// s2 = lambda y + (1-lambda) x; ok is false when s2 <= 0. The mean part is
// lambda/2 (m1-m2)^2 / s2.
func gaussVar(lam, x, y float64) (v, s2 float64, ok bool) {
	s2 = lam*y + (1-lam)*x
	if !(s2 > 0) {
		return math.Inf(1), s2, false
	}
	return (0.5*math.Log(s2) - (1-lam)*0.5*math.Log(x) - lam*0.5*math.Log(y)) / (1 - lam), s2, true
}

// dirComponent is one component's Dirichlet term of Eq. rdp:
// lnG(lambda a - (lambda-1) b)/(lambda-1) + lnG(b) - lambda/(lambda-1) lnG(a).
func dirComponent(lam, a, b float64) float64 {
	return lgamma(lam*a-(lam-1)*b)/(lam-1) + lgamma(b) - lam/(lam-1)*lgamma(a)
}

// dirTotal is the total term of Eq. rdp: -(lnG(lambda a0 - (lambda-1) b0)/(lambda-1) + lnG(b0) - lambda/(lambda-1) lnG(a0)).
func dirTotal(lam, a0, b0 float64) float64 { return -dirComponent(lam, a0, b0) }

// corner is one vertex of the per-dimension variance box: the stored logvars
// lx of q and ly of q' in the standard direction (sigma_q^2 = exp(lx)).
type corner struct{ lx, ly float64 }

// Certify returns the supremum of Eq. rdp at Renyi order lambda over all
// ordered pairs (q, q') of posteriors in set, its three parts, and a witness
// pair that attains it. dir is the Gaussian term's direction, with ""
// meaning [DirectionStandard]. The supremum is the same in both directions,
// since the set is symmetric; only the witness differs.
//
// The derivation is in docs/privacy.md, "The certified bound". The set is a
// product over components and, within a component, over alpha, logvar_j and
// mu. The prior component is identical in both posteriors and contributes 0.
//
// For each token component, the Gaussian part is, per dimension, quasi-convex
// in each variance, which is proved, so its supremum is at a corner of
// [lo,hi]^2. The mean term lambda/2 sum_j Delta_j^2/s_j^2, with
// ||Delta|| <= 2 C_mu, is largest with all of Delta on the dimension of
// smallest s_j^2.
//
// The Dirichlet part is convex in alpha', which is proved: it is a
// log-partition function of an exponential family composed with an affine
// map. With alpha' at a vertex, the maximiser over alpha is taken at a
// vertex; this is checked numerically, not proved, as random restarts of
// coordinate ascent never exceed it. Turning an (A, A) component into (B, B)
// never lowers the bound, which is proved by the concavity of the digamma
// function. So only the counts of (A, B) and (B, A) components are
// enumerated, in O(N^2).
//
// It returns an error when order <= 1 or not finite, or the set is invalid.
func Certify(set ClipSet, order float64, dir GaussianDirection) (*Certificate, error) {
	return supremum(set, order, dir, nil, true)
}

// MaxWitnessBytes bounds the memory of a witness pair, see [WitnessPair]:
// two posteriors of N x P means and log-variances in float32 and N
// pseudo-counts, about 16 N P bytes.
const MaxWitnessBytes = 1 << 30

// WitnessPair returns the pair (q, q') of posteriors in set that attains the
// certificate at order, as a posterior file of 2 examples, with the
// certificate; the pair is [Certify]'s Witness. It returns a nil pair when no
// pair attains the certificate, as with an unbounded constant; the
// certificate's Reason says which.
//
// Its errors are those of [Certify], and a set whose pair would take more
// than [MaxWitnessBytes], refused before anything is allocated.
func WitnessPair(set ClipSet, order float64, dir GaussianDirection) (*Posteriors, *Certificate, error) {
	if err := WitnessFits(set); err != nil {
		return nil, nil, err
	}
	c, err := supremum(set, order, dir, nil, true)
	if err != nil {
		return nil, nil, err
	}
	return c.Witness, c, nil
}

// WitnessFits returns an error when the witness pair of set would take more
// than [MaxWitnessBytes]. [WitnessPair] checks it, and callers check it
// before any other work.
func WitnessFits(set ClipSet) error {
	if b := witnessBytes(set); b > MaxWitnessBytes {
		return fmt.Errorf("witness: %d components x %d dims take about %.3g GiB, above the %d GiB this builds; certify without a witness",
			set.Components, set.Dims, b/(1<<30), MaxWitnessBytes>>30)
	}
	return nil
}

// witnessBytes is the memory of a witness pair of set: 2 examples of N x P
// float32 mu and logvar and N float32 alpha (and the mask).
func witnessBytes(set ClipSet) float64 {
	n, p := float64(set.Components), float64(set.Dims)
	return 2 * (2*n*p*4 + 2*n*4)
}

// supremum is Certify with an optional memo of the Dirichlet supremum (the
// calibration evaluates many sets that share it).
func supremum(set ClipSet, order float64, dir GaussianDirection, memo map[dirKey]dirSupV, witness bool) (*Certificate, error) {
	if err := CheckOrder(order); err != nil {
		return nil, err
	}
	if err := set.Validate(); err != nil {
		return nil, err
	}
	if dir == "" {
		dir = DirectionStandard
	}
	if dir != DirectionStandard && dir != DirectionPaper {
		return nil, fmt.Errorf("gaussian direction %q: want standard or paper", dir)
	}
	lam := order
	N := set.Components
	n := N - 1
	c := &Certificate{Order: order, Finite: true}
	infinite := func(reason string) (*Certificate, error) {
		c.RD, c.Finite, c.Reason = jsonfloat.Float(math.Inf(1)), false, reason
		c.Parts = CertParts{}
		return c, nil
	}
	if n == 0 {
		if witness {
			c.Witness = set.witness(nil, nil, 0, 0, 0, 0, 0, dir)
		}
		return c, nil
	}
	C := StoredRadius(set.CMu)
	A, B := f32(set.AlphaMin), f32(set.AlphaMax)
	ap := f32(set.PriorAlpha)
	if math.IsInf(C, 1) {
		return infinite("the mean radius C_mu is unbounded: the mean term of Eq. rdp has no supremum")
	}
	if math.IsInf(B, 1) {
		return infinite("C_amax is unbounded: the Dirichlet terms of Eq. rdp have no supremum")
	}
	g := set.gaussianSup(lam, C, witness)
	if g.reason != "" {
		if witness && g.badDim >= 0 {
			c.Witness = set.infiniteGaussWitness(g.badDim, g.bad, dir)
		}
		return infinite(g.reason)
	}
	corners, meanCorners, jStar := g.corners, g.meanCorners, g.jStar
	// Dirichlet part.
	if !(A > 0) {
		return infinite("C_amin = 0: lnGamma(alpha) is infinite at alpha = 0")
	}
	if g := lam*A - (lam-1)*B; !(g > 0) {
		if witness {
			c.Witness = set.witness(corners, meanCorners, jStar, n, 0, 0, C, dir)
			c.Witness.Alpha[1], c.Witness.Alpha[N+1] = float32(A), float32(B)
		}
		return infinite(fmt.Sprintf("order %g: lambda C_amin - (lambda-1) C_amax = %g <= 0; finite only below order %g", order, g, set.MaxOrder()))
	}
	d := dirichletSup(lam, A, B, ap, n, memo)
	c.AlphaLowHigh, c.AlphaHighLow, c.AlphaHighHigh = d.k1, d.k2, n-d.k1-d.k2
	bestD := d.v
	variance := float64(n) * (g.sumV + g.varStar)
	mean := float64(n) * g.meanStar
	total := variance + mean + bestD
	c.Parts = CertParts{Variance: jsonfloat.Float(variance), Mean: jsonfloat.Float(mean), Dirichlet: jsonfloat.Float(bestD)}
	c.RD = jsonfloat.Float(total)
	if witness {
		c.Witness = set.witness(corners, meanCorners, jStar, n, c.AlphaLowHigh, c.AlphaHighLow, C, dir)
	}
	if math.IsInf(total, 0) || math.IsNaN(total) {
		return infinite(fmt.Sprintf("the bound overflows float64 (%g)", total))
	}
	return c, nil
}

// gaussSup is the Gaussian part of the supremum of one token component:
// per dimension the best corner of its variance box without the mean term,
// summed (sumV), and the one dimension jStar that carries the mean term
// (the largest gain of the best corner with it: meanStar its mean term,
// varStar its variance term above that dimension's best). corners and
// meanCorners are the corners per dimension, kept only for a witness. An
// infinite part has a reason, and badDim >= 0 with the corner bad whose
// radicand is <= 0 when that is why.
type gaussSup struct {
	sumV                 float64
	jStar                int
	meanStar, varStar    float64
	corners, meanCorners []corner
	reason               string
	badDim               int
	bad                  corner
}

// boxSup is the best corners of one dimension's variance box at an order:
// kV the best without the mean term (bestV), kVM the best with it (bestVM
// = vmVar + vmMean).
type boxSup struct {
	bestV, bestVM, vmMean, vmVar float64
	kV, kVM                      corner
}

// gaussianSup is the Gaussian part of the supremum at order lam with mean
// radius C (corners kept for a witness). A dimension's best corners depend
// on its (floor, cap) box alone: a box equal to the previous dimension's
// reuses its results (every dimension when the box is broadcast), the same
// numbers in the same order of summation as evaluating each.
func (s ClipSet) gaussianSup(lam, C float64, witness bool) gaussSup {
	P := s.Dims
	g := gaussSup{jStar: -1, badDim: -1}
	if witness {
		g.corners, g.meanCorners = make([]corner, P), make([]corner, P)
	}
	gainStar := math.Inf(-1)
	uniform := s.uniformBox()
	var prev struct {
		have   bool
		fl, cp float64
		boxSup
	}
	for j := 0; j < P; j++ {
		var fl, cp float64
		if uniform && prev.have {
			fl, cp = prev.fl, prev.cp
		} else {
			fl, cp = s.logvarBox(j)
		}
		if !prev.have || fl != prev.fl || cp != prev.cp {
			if math.IsInf(cp, 1) {
				g.reason = fmt.Sprintf("sigma is not capped (dim %d): the Gaussian radicand lambda sigma'^2 + (1-lambda) sigma^2 can be <= 0", j)
				return g
			}
			if math.IsInf(fl, -1) {
				g.reason = fmt.Sprintf("sigma has no floor (dim %d): the Gaussian radicand can be <= 0", j)
				return g
			}
			b, bad, s2, ok := cornerSup(lam, C, fl, cp)
			if !ok {
				g.reason = fmt.Sprintf("order %g: sigma^2 in [%g, %g] (dim %d) allows lambda sigma_min^2 - (lambda-1) sigma_max^2 = %g <= 0; finite only below order %g",
					lam, math.Exp(fl), math.Exp(cp), j, s2, s.MaxOrder())
				g.badDim, g.bad = j, bad
				return g
			}
			prev.have, prev.fl, prev.cp, prev.boxSup = true, fl, cp, b
		}
		if witness {
			g.corners[j], g.meanCorners[j] = prev.kV, prev.kVM
		}
		g.sumV += prev.bestV
		if gain := prev.bestVM - prev.bestV; gain > gainStar {
			g.jStar, gainStar, g.meanStar, g.varStar = j, gain, prev.vmMean, prev.vmVar-prev.bestV
		}
		if uniform && !witness {
			// every further dimension adds the same bestV and never a
			// larger gain: the same sum, in the same order, without the
			// rest (in a local: a field of g kept in memory made this loop
			// 4 times slower at 10^7 dimensions)
			sum, v := g.sumV, prev.bestV
			for j++; j < P; j++ {
				sum += v
			}
			g.sumV = sum
		}
	}
	return g
}

// cornerSup returns the best corners of the variance box [fl, cp]^2 (log
// variances) at order lam with mean radius C, the mean term lambda/2 (2C)^2
// / s2 on this dimension; ok is false, with the corner and its radicand s2,
// when a corner's radicand is <= 0.
func cornerSup(lam, C, fl, cp float64) (b boxSup, bad corner, s2 float64, ok bool) {
	b.bestV, b.bestVM = math.Inf(-1), math.Inf(-1)
	for _, k := range []corner{{fl, fl}, {fl, cp}, {cp, fl}, {cp, cp}} {
		v, s2, ok := gaussVar(lam, math.Exp(k.lx), math.Exp(k.ly))
		if !ok {
			return b, k, s2, false
		}
		if v > b.bestV {
			b.bestV, b.kV = v, k
		}
		m := lam / 2 * (2 * C) * (2 * C) / s2
		if v+m > b.bestVM {
			b.bestVM, b.kVM, b.vmMean, b.vmVar = v+m, k, m, v
		}
	}
	return b, corner{}, 0, true
}

// witness builds the pair (q, q') as a 2-example posterior file: token
// components with the variance corners, the mean on dimension jStar at
// +C / -C from the prior mean, and k1 (A, B), k2 (B, A), rest (B, B) alphas.
func (s ClipSet) witness(corners, meanCorners []corner, jStar, n, k1, k2 int, C float64, dir GaussianDirection) *Posteriors {
	N, P := s.Components, s.Dims
	w := NewPosteriors(2, N, P)
	for j := 0; j < P; j++ {
		w.PriorMu[j], w.PriorVar[j] = broadcast(s.PriorMu, j), broadcast(s.PriorVar, j)
	}
	A, B := float32(s.AlphaMin), float32(s.AlphaMax)
	for e := 0; e < 2; e++ {
		for i := 0; i < N; i++ {
			for j := 0; j < P; j++ {
				k := (e*N+i)*P + j
				w.Mu[k] = float32(w.PriorMu[j])
				w.Logvar[k] = float32(math.Log(w.PriorVar[j]))
			}
		}
		w.Alpha[e*N] = float32(s.PriorAlpha)
	}
	for i := 1; i < N && corners != nil; i++ {
		for j := 0; j < P; j++ {
			k := corners[j]
			if j == jStar {
				k = meanCorners[j]
			}
			x, y := k.lx, k.ly
			if dir == DirectionPaper { // the printed Gaussian term is D(N_q' || N_q)
				x, y = y, x
			}
			w.Logvar[i*P+j] = float32(x)
			w.Logvar[(N+i)*P+j] = float32(y)
			if j == jStar {
				w.Mu[i*P+j] = float32(w.PriorMu[j] + C)
				w.Mu[(N+i)*P+j] = float32(w.PriorMu[j] - C)
			}
		}
		switch {
		case i <= k1:
			w.Alpha[i], w.Alpha[N+i] = A, B
		case i <= k1+k2:
			w.Alpha[i], w.Alpha[N+i] = B, A
		default:
			w.Alpha[i], w.Alpha[N+i] = B, B
		}
	}
	w.Metadata = s.Metadata()
	w.Metadata["witness"] = "certified"
	return w
}

// infiniteGaussWitness is a pair whose Gaussian radicand at dim j is <= 0.
func (s ClipSet) infiniteGaussWitness(j int, k corner, dir GaussianDirection) *Posteriors {
	corners := make([]corner, s.Dims)
	for jj := range corners {
		fl, _ := s.logvarBox(jj)
		corners[jj] = corner{fl, fl}
	}
	corners[j] = k
	return s.witness(corners, corners, -1, s.Components-1, 0, 0, 0, dir)
}

// Metadata returns the set's constants as posterior-file metadata, so that
// `nvdp audit` can certify a file: the keys clip_* as nvib writes them, and
// prior_log_alpha. prior_mu and prior_var are written from the file's fields.
func (s ClipSet) Metadata() map[string]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	m := map[string]string{
		"clip_enabled": "true", "clip_mu": f(s.CMu), "clip_alpha_min": f(s.AlphaMin), "clip_alpha_max": f(s.AlphaMax),
		"clip_cap_sigma": "true", "prior_alpha": f(s.PriorAlpha),
	}
	if s.LogvarFloor == nil {
		m["clip_order"], m["clip_logvar_margin"] = f(s.ClipOrder), f(s.LogvarMargin)
	} else {
		m["clip_logvar_floor"], m["clip_logvar_cap"] = formatPrior(s.LogvarFloor), formatPrior(s.LogvarCap)
	}
	return m
}

// dirKey identifies a Dirichlet supremum: order, stored C_amin, C_amax,
// prior alpha and the number of token components.
type dirKey struct {
	lam, a, b, ap float64
	n             int
}

// dirSupV is the Dirichlet supremum and its witness counts: k1 components
// (C_amin, C_amax), k2 (C_amax, C_amin), the rest (C_amax, C_amax).
type dirSupV struct {
	v      float64
	k1, k2 int
}

// dirichletSup is the supremum of the Dirichlet part of Eq. rdp over
// alpha, alpha' in [A, B]^n with the prior pseudo-count ap in both (A > 0,
// lambda A > (lambda-1) B). With alpha' at a vertex (convexity) and alpha at
// a vertex (checked numerically), and no (A, A) component (it never beats
// (B, B)), the value depends on the counts k1 of (A, B) and k2 of (B, A):
//
//	D(k1, k2) = k1 d(A,B) + k2 d(B,A) + T(ap + k1 A + (n-k1) B, ap + k2 A + (n-k2) B).
//
// For fixed k1 it is concave in k2 (T is concave in its second argument:
// d2T/db0^2 = -(lambda-1) psi'(gamma) - psi'(b0) < 0), so the best k2 is found
// by binary search on the differences: O(n log n).
func dirichletSup(lam, A, B, ap float64, n int, memo map[dirKey]dirSupV) dirSupV {
	if A == B || n == 0 {
		return dirSupV{}
	}
	key := dirKey{lam, A, B, ap, n}
	if v, ok := memo[key]; ok {
		return v
	}
	dAB, dBA := dirComponent(lam, A, B), dirComponent(lam, B, A)
	best := dirSupV{v: math.Inf(-1)}
	for k1 := 0; k1 <= n; k1++ {
		a0 := ap + float64(k1)*A + float64(n-k1)*B
		g := func(k2 int) float64 {
			return float64(k1)*dAB + float64(k2)*dBA + dirTotal(lam, a0, ap+float64(k2)*A+float64(n-k2)*B)
		}
		// largest k2 in [0, n-k1] with g(k2) - g(k2-1) > 0 (differences non-increasing)
		lo, hi := 0, n-k1
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if g(mid) > g(mid-1) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		if v := g(lo); v > best.v {
			best = dirSupV{v, k1, lo}
		}
	}
	if memo != nil {
		memo[key] = best
	}
	return best
}

// ClipSetFromMetadata rebuilds the clip set of a posterior file from its
// metadata, with the file's N, P and prior. It reads the clip_* keys that
// package nvib and [ClipSet.Metadata] write, and prior_alpha or
// prior_log_alpha with clip_prior. ok is false when the file carries no
// clipping constants; a file with clip_enabled=false gives an unbounded set,
// whose certificate is +Inf. Its errors name the metadata key.
func ClipSetFromMetadata(p *Posteriors) (set ClipSet, ok bool, err error) {
	md := clipMetadata(p.Metadata)
	en, has := md["clip_enabled"]
	if !has {
		return ClipSet{}, false, nil
	}
	set = ClipSet{Components: p.N, Dims: p.P, PriorMu: p.PriorMu, PriorVar: p.PriorVar}
	enabled, err := strconv.ParseBool(en)
	if err != nil {
		return set, false, fmt.Errorf("posterior metadata: clip_enabled = %q is not true or false", en)
	}
	logAlpha, stored, err := md.priorAlpha(&set)
	if err != nil {
		return set, false, err
	}
	if !enabled {
		if !stored {
			set.PriorAlpha = StoredPriorAlpha(logAlpha, false, 0, 0)
		}
		set = set.Unclipped()
		return set, true, set.Validate()
	}
	if err := md.clipConstants(&set); err != nil {
		return set, false, err
	}
	if err := md.logvarBounds(&set, p); err != nil {
		return set, false, err
	}
	if !stored {
		clipPrior, err := md.flag("clip_prior")
		if err != nil {
			return set, false, err
		}
		set.PriorAlpha = StoredPriorAlpha(logAlpha, clipPrior, set.AlphaMin, set.AlphaMax)
	}
	return set, true, set.Validate()
}

// clipMetadata is the metadata of a posterior file with clipping constants
// (clip_enabled is set).
type clipMetadata map[string]string

// num is the number under key, which must be present and not NaN.
func (md clipMetadata) num(key string) (float64, error) {
	s, ok := md[key]
	if !ok {
		return 0, fmt.Errorf("posterior metadata: %s missing (clip_enabled is set)", key)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("posterior metadata: %s = %q is not a number", key, s)
	}
	return v, nil
}

// flag is the boolean under key; false when absent.
func (md clipMetadata) flag(key string) (bool, error) {
	s, ok := md[key]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("posterior metadata: %s = %q is not true or false", key, s)
	}
	return b, nil
}

// priorAlpha reads the prior component's alpha: as written (prior_alpha,
// stored in set, stored true), or else prior_log_alpha, returned for
// deriving it with clip_prior (files written before prior_alpha).
func (md clipMetadata) priorAlpha(set *ClipSet) (logAlpha float64, stored bool, err error) {
	pa, stored := md["prior_alpha"]
	if stored {
		if set.PriorAlpha, err = strconv.ParseFloat(pa, 64); err != nil {
			return 0, stored, fmt.Errorf("posterior metadata: prior_alpha = %q is not a number", pa)
		}
		return 0, stored, nil
	}
	if logAlpha, err = md.num("prior_log_alpha"); err != nil {
		return 0, stored, err
	}
	return logAlpha, stored, nil
}

// clipConstants reads clip_mu, clip_alpha_min and clip_alpha_max into set.
func (md clipMetadata) clipConstants(set *ClipSet) error {
	for _, kv := range []struct {
		key string
		dst *float64
	}{{"clip_mu", &set.CMu}, {"clip_alpha_min", &set.AlphaMin}, {"clip_alpha_max", &set.AlphaMax}} {
		var err error
		if *kv.dst, err = md.num(kv.key); err != nil {
			return err
		}
	}
	return nil
}

// logvarBounds reads the log-variance bounds into set: explicit
// (clip_logvar_floor and clip_logvar_cap, P numbers each), or else derived
// from clip_order and clip_logvar_margin with p's prior variance (none
// when clip_cap_sigma is true).
func (md clipMetadata) logvarBounds(set *ClipSet, p *Posteriors) error {
	var err error
	if _, explicit := md["clip_logvar_floor"]; explicit {
		if set.LogvarFloor, err = parsePrior("clip_logvar_floor", md["clip_logvar_floor"], p.P); err != nil {
			return err
		}
		if set.LogvarCap, err = parsePrior("clip_logvar_cap", md["clip_logvar_cap"], p.P); err != nil {
			return err
		}
		return nil
	}
	if set.ClipOrder, err = md.num("clip_order"); err != nil {
		return err
	}
	if set.LogvarMargin, err = md.num("clip_logvar_margin"); err != nil {
		return err
	}
	capped, err := md.flag("clip_cap_sigma")
	if err != nil {
		return err
	}
	if !capped {
		set.LogvarFloor, set.LogvarCap = make([]float64, p.P), make([]float64, p.P)
		for j := range set.LogvarFloor {
			set.LogvarFloor[j], set.LogvarCap[j] = LogvarBounds(set.ClipOrder, broadcast(p.PriorVar, j), set.LogvarMargin, false)
		}
	}
	return nil
}
