package nvib

import (
	"errors"
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/privacy"
)

// ClipConfig holds the clipping of the posterior parameters of paper §3.2,
// Eqs. clip_mu_derived, clip_sigma_derived and clip_alpha_derived; see also
// ref §5.
//
// With Enabled, clipping runs after the prior component is prepended and
// before sampling:
//
//	mu_i      <- c + C_mu (mu_i - c)/||mu_i - c||_2  when ||mu_i - c||_2 > C_mu
//	logvar_ij <- clamp(logvar_ij, LogvarFloor, LogvarCap)
//	alpha_i   <- clamp(alpha_i, C_amin, C_amax)
//
// Here c is the prior mean, the L2 norm runs over all P dimensions, and the
// logvar clamp is elementwise. LogvarFloor is ln((lambda-1)/lambda *
// prior_var) + LogvarMargin: the paper requires sigma >= sqrt((lambda-1)/lambda)
// prior sigma, with margin 0 in the paper and the reference. LogvarCap is
// ln(prior_var) with CapSigma, a principled addition, and +Inf otherwise.
//
// The backward pass uses the true Jacobian of the L2-ball projection for mu
// and a zero gradient where logvar or alpha is clamped. The bounds are
// inclusive and pass the gradient, as torch.clamp does.
//
// The principled defaults make Eq. rdp finite for every pair of clipped
// posteriors with aligned components: sigma lies in [floor, prior sigma]
// with the floor strictly above sqrt((lambda-1)/lambda) prior sigma, and
// C_amin > (lambda-1)/lambda * C_amax, so lambda a_i - (lambda-1) a'_i > 0
// for every component and for the totals. See "Clipping guarantees
// finiteness" in docs/privacy.md.
type ClipConfig struct {
	Enabled bool `json:"enabled"`
	// CMu is the radius C_mu of the L2 ball around the prior mean. It must
	// be positive.
	CMu float64 `json:"c_mu"`
	// CAlphaMin and CAlphaMax bound the pseudo-counts, with
	// 0 <= CAlphaMin <= CAlphaMax and CAlphaMax > 0.
	CAlphaMin float64 `json:"c_alpha_min"`
	CAlphaMax float64 `json:"c_alpha_max"`
	// Order is the Renyi order lambda used for the sigma floor. It must be
	// above 1; the paper's is [privacy.DefaultOrder].
	Order float64 `json:"order"`
	// LogvarMargin is added to the logvar floor, in nats of variance. It
	// must not be negative.
	LogvarMargin float64 `json:"logvar_margin"`
	// CapSigma caps logvar at ln(prior_var). This is a principled addition:
	// the reference has no cap.
	CapSigma bool `json:"cap_sigma"`
	// ClipPrior also clips component 0, as the reference does, giving
	// alpha_0 = min(1, C_amax).
	ClipPrior bool `json:"clip_prior"`
	// ReferenceCenter centres the mu projection at 0 instead of the prior
	// mean, as the reference's max-norm clip does.
	ReferenceCenter bool `json:"reference_center,omitempty"`
}

// Default clipping constants.
const (
	// DefaultLogvarMargin keeps the principled sigma floor strictly inside the
	// validity boundary: sigma_min = sqrt((lambda-1)/lambda) prior sigma * e^{margin/2}.
	DefaultLogvarMargin = 1e-3
	// DefaultAlphaMinMargin is the relative margin of the principled C_amin
	// above (lambda-1)/lambda * C_amax.
	DefaultAlphaMinMargin = 1e-3
)

// DefaultClip returns the clipping configuration of mode for radius cMu and
// maximum pseudo-count cAlphaMax, with clipping enabled.
//
// In principled mode sigma is capped at the prior sigma, the logvar floor
// has margin [DefaultLogvarMargin], C_amin is [PrincipledAlphaMin], and the
// prior component is not clipped, since it is the same in every posterior.
//
// In reference mode, as in ref §5, C_amin is 0, there is no cap and no
// margin, the prior is clipped, and mu is clipped around 0.
func DefaultClip(mode privacy.Mode, cMu, cAlphaMax float64) ClipConfig {
	if mode.IsReference() {
		return ClipConfig{Enabled: true, CMu: cMu, CAlphaMin: 0, CAlphaMax: cAlphaMax, Order: privacy.DefaultOrder,
			ClipPrior: true, ReferenceCenter: true}
	}
	return ClipConfig{Enabled: true, CMu: cMu, CAlphaMax: cAlphaMax, Order: privacy.DefaultOrder,
		CAlphaMin:    PrincipledAlphaMin(privacy.DefaultOrder, cAlphaMax),
		LogvarMargin: DefaultLogvarMargin, CapSigma: true}
}

// PrincipledAlphaMin returns the smallest C_amin the principled clipping
// uses for order lambda: (lambda-1)/lambda * C_amax * (1 +
// [DefaultAlphaMinMargin]). With it, lambda a - (lambda-1) a' >= lambda
// C_amin - (lambda-1) C_amax > 0.
func PrincipledAlphaMin(order, cAlphaMax float64) float64 {
	return (order - 1) / order * cAlphaMax * (1 + DefaultAlphaMinMargin)
}

// Validate checks the constants when Enabled is set; a disabled
// configuration is always valid.
func (c ClipConfig) Validate() error {
	if !c.Enabled {
		return nil
	}
	switch {
	case !(c.CMu > 0) || math.IsInf(c.CMu, 0):
		return fmt.Errorf("clip: C_mu = %v, want a finite value > 0", c.CMu)
	case !(c.CAlphaMax > 0) || math.IsInf(c.CAlphaMax, 0):
		return fmt.Errorf("clip: C_amax = %v, want a finite value > 0", c.CAlphaMax)
	case !(c.CAlphaMin >= 0) || c.CAlphaMin > c.CAlphaMax:
		return fmt.Errorf("clip: C_amin = %v, want 0 <= C_amin <= C_amax = %v", c.CAlphaMin, c.CAlphaMax)
	case !(c.Order > 1) || math.IsInf(c.Order, 0):
		return fmt.Errorf("clip: Renyi order lambda = %v, want > 1", c.Order)
	case !(c.LogvarMargin >= 0):
		return fmt.Errorf("clip: logvar margin = %v, want >= 0", c.LogvarMargin)
	case c.CapSigma && c.LogvarMargin > math.Log(c.Order/(c.Order-1)):
		return fmt.Errorf("clip: logvar margin %v puts the floor above the cap ln(prior_var) (need <= ln(lambda/(lambda-1)) = %v; equal: fixed sigma)",
			c.LogvarMargin, math.Log(c.Order/(c.Order-1)))
	}
	return nil
}

// GuaranteesFiniteBound reports whether the configuration makes Eq. rdp
// finite for every pair of clipped posteriors with aligned components, as
// docs/privacy.md explains. It returns nil if so, else an error naming the
// first missing condition.
func (c ClipConfig) GuaranteesFiniteBound() error {
	if err := c.Validate(); err != nil {
		return err
	}
	var errs []error
	if !c.Enabled {
		return errors.New("clipping disabled: sigma, alpha unbounded")
	}
	if !c.CapSigma {
		errs = append(errs, errors.New("sigma not capped at the prior sigma: a pair with sigma_q' > sqrt(lambda/(lambda-1)) sigma_q has no real sigma'"))
	}
	if !(c.LogvarMargin > 0) {
		errs = append(errs, errors.New("logvar floor on the boundary (margin 0): sigma' can be 0 and the bound infinite"))
	}
	if !(c.Order*c.CAlphaMin-(c.Order-1)*c.CAlphaMax > 0) {
		errs = append(errs, fmt.Errorf("C_amin = %v <= (lambda-1)/lambda C_amax = %v: lnGamma(lambda a - (lambda-1) a') can be infinite",
			c.CAlphaMin, (c.Order-1)/c.Order*c.CAlphaMax))
	}
	return errors.Join(errs...)
}

// LogvarBounds returns the logvar floor and cap for prior variance priorVar,
// computed by [privacy.LogvarBounds].
//
// The floor is ln((lambda-1)/lambda * priorVar) + margin, at most the cap.
// The cap is +Inf without CapSigma. For lambda 1.1 and prior_var 1 the floor
// is ln(0.1/1.1) = -2.3978952728, as in ref §5.
func (c ClipConfig) LogvarBounds(priorVar float64) (floor, cap float64) {
	return privacy.LogvarBounds(c.Order, priorVar, c.LogvarMargin, c.CapSigma)
}

// PriorAlpha is the pseudo-count of the prior component as the layer stores
// it: exp of the float32 prior log alpha, clamped into [C_amin, C_amax] when
// the prior is clipped, rounded to float32.
func (c ClipConfig) PriorAlpha(prior Prior) float64 {
	return privacy.StoredPriorAlpha(prior.LogAlpha, c.clipsComponent(0), c.CAlphaMin, c.CAlphaMax)
}

// ClipSet returns the set of posteriors this clipping can release, for
// [privacy.Certify], given the prior and N components in P dimensions: N-1
// tokens plus the prior component. Without Enabled or without the sigma cap
// the set is unbounded, because C_mu, C_amax or the cap is infinite, and its
// certificate is +Inf.
func (c ClipConfig) ClipSet(prior Prior, N, P int) privacy.ClipSet {
	s := privacy.ClipSet{Components: N, Dims: P, CMu: c.CMu,
		PriorMu: []float64{prior.Mu}, PriorVar: []float64{prior.Var},
		ClipOrder: c.Order, LogvarMargin: c.LogvarMargin,
		AlphaMin: c.CAlphaMin, AlphaMax: c.CAlphaMax, PriorAlpha: c.PriorAlpha(prior)}
	if !c.Enabled {
		return s.Unclipped()
	}
	if !c.CapSigma {
		floor, cap := c.LogvarBounds(prior.Var)
		s.LogvarFloor, s.LogvarCap = []float64{floor}, []float64{cap}
	}
	// ReferenceCenter (ball around 0, not the prior mean) certifies the same:
	// only ||mu - mu'|| <= 2 C_mu enters the bound.
	return s
}

// ClipMu projects mu, of length P, in place onto the L2 ball of radius cMu
// around center, or around the origin when center is nil. It returns the
// distance n before the projection and whether the projection was active.
// This is paper Eq. clip_mu_derived and ref §5 step 1 with
// n = max(||mu||, 1e-8). Infinite entries project onto the direction of
// their signs. The test vector of ref §5 is ClipMu([3,4], nil, 2) = [1.2, 1.6].
//
// The ball is the one the certificate uses: its radius is
// R = [privacy.StoredRadius](cMu), the largest float32 <= cMu. A row is
// projected when its distance exceeds R rather than cMu, since a row at a
// distance in (R, cMu] would be stored outside the certified ball; a shrink
// loop then ensures every stored row ends within R.
//
// Every product is rounded on its own, as float64(x*y), so that Go cannot
// fuse a multiply-add. The stored row is then the same on every platform and
// equals that of the device twin, nvib_clip_mu in dnn, bit for bit.
func ClipMu(mu []float32, center []float32, cMu float64) (n float64, active bool) {
	var s float64
	for j, v := range mu {
		d := float64(v) - centre(center, j)
		s += float64(d * d)
	}
	n = math.Max(math.Sqrt(s), 1e-8)
	R := privacy.StoredRadius(cMu)
	if !(n > R) { // also false for NaN: NaN propagates
		return n, false
	}
	projectMu(mu, center, n, R)
	return n, true
}

// projectMu is ClipMu's projection of a row at distance n > R from the centre onto the stored
// radius R.
func projectMu(mu []float32, center []float32, n, R float64) {
	// The offset of entry j from the centre is float64(v) - c over a length n; for a row with
	// ±Inf entries, the direction of their signs over their number's root.
	inf := math.IsInf(n, 1)
	length := n
	if inf {
		var cnt int
		for _, v := range mu {
			if math.IsInf(float64(v), 0) {
				cnt++
			}
		}
		length = math.Sqrt(float64(cnt))
	}
	// Project onto R, then shrink towards the centre until the stored
	// vector's distance is within it: rounding each entry to float32 can put
	// the result outside the ball (~1e-7 relative, more when |centre| >>
	// C_mu). At try 24 the factor is 0: the row is the centre.
	shrinkMu(mu, center, R, R/length, inf, 0)
}

// shrinkMu runs the tries of projectMu from try first on: try 0 stores the centre plus the offset
// times r (the direction of the infinite entries' signs when inf), a later try shrinks the stored
// row towards the centre by 2^(try-24), until the stored row lies within R or try 24.
func shrinkMu(mu []float32, center []float32, R, r float64, inf bool, first int) {
	for try := first; ; try++ {
		shrink := 1 - math.Ldexp(1, try-24) // try > 0: by 2^(try-24), doubling, since with a centre the rounding is relative to |c|
		var d2 float64
		for j, v := range mu {
			c := centre(center, j)
			if try == 0 {
				o := float64(v) - c
				if inf {
					o = infSign(v)
				}
				mu[j] = float32(c + float64(o*r))
			} else {
				mu[j] = float32(c + float64((float64(mu[j])-c)*shrink))
			}
			e := float64(mu[j]) - c
			d2 += float64(e * e)
		}
		if math.Sqrt(d2) <= R || try == 24 {
			return
		}
	}
}

// clipMu4 is ClipMu of four rows of one length, the same bits: each row's sums of squares run in
// ClipMu's order, entry by entry, but the four rows' chains of float64 additions interleave, so
// that an addition need not wait for the one before it. A row that is not projected, or whose
// distance is infinite or NaN, takes ClipMu's path; the first try of the projection runs on the
// four at once when all four are projected, each further try on its own row.
func clipMu4(m0, m1, m2, m3 []float32, center []float32, cMu float64) (n [4]float64, active [4]bool) {
	P := len(m0)
	m1, m2, m3 = m1[:P], m2[:P], m3[:P]
	var s0, s1, s2, s3 float64
	if center == nil {
		for j := range m0 {
			d0, d1, d2, d3 := float64(m0[j]), float64(m1[j]), float64(m2[j]), float64(m3[j])
			s0 += float64(d0 * d0)
			s1 += float64(d1 * d1)
			s2 += float64(d2 * d2)
			s3 += float64(d3 * d3)
		}
	} else {
		center = center[:P]
		for j, cj := range center {
			c := float64(cj)
			d0, d1, d2, d3 := float64(m0[j])-c, float64(m1[j])-c, float64(m2[j])-c, float64(m3[j])-c
			s0 += float64(d0 * d0)
			s1 += float64(d1 * d1)
			s2 += float64(d2 * d2)
			s3 += float64(d3 * d3)
		}
	}
	R := privacy.StoredRadius(cMu)
	rows := [4][]float32{m0, m1, m2, m3}
	all := true
	for i, s := range [4]float64{s0, s1, s2, s3} {
		n[i] = math.Max(math.Sqrt(s), 1e-8)
		active[i] = n[i] > R // false for NaN: NaN propagates
		all = all && active[i] && !math.IsInf(n[i], 1)
	}
	if !all {
		for i, m := range rows {
			if active[i] {
				projectMu(m, center, n[i], R)
			}
		}
		return n, active
	}
	// try 0 of shrinkMu on the four rows at once
	r0, r1, r2, r3 := R/n[0], R/n[1], R/n[2], R/n[3]
	var e0, e1, e2, e3 float64
	for j := range m0 {
		c := centre(center, j)
		m0[j] = float32(c + float64((float64(m0[j])-c)*r0))
		m1[j] = float32(c + float64((float64(m1[j])-c)*r1))
		m2[j] = float32(c + float64((float64(m2[j])-c)*r2))
		m3[j] = float32(c + float64((float64(m3[j])-c)*r3))
		f0, f1, f2, f3 := float64(m0[j])-c, float64(m1[j])-c, float64(m2[j])-c, float64(m3[j])-c
		e0 += float64(f0 * f0)
		e1 += float64(f1 * f1)
		e2 += float64(f2 * f2)
		e3 += float64(f3 * f3)
	}
	for i, d2 := range [4]float64{e0, e1, e2, e3} {
		if !(math.Sqrt(d2) <= R) {
			shrinkMu(rows[i], center, R, 0, false, 1)
		}
	}
	return n, active
}

// centre is coordinate j of the ball's centre center, the origin when center is nil.
func centre(center []float32, j int) float64 {
	if center == nil {
		return 0
	}
	return float64(center[j])
}

// infSign is the direction of an infinite entry v: 1 for +Inf, -1 for -Inf, 0 for a finite v.
func infSign(v float32) float64 {
	switch {
	case math.IsInf(float64(v), 1):
		return 1
	case math.IsInf(float64(v), -1):
		return -1
	}
	return 0
}

// clipMuBackward maps dy (gradient w.r.t. the projected mu, length P) to the
// gradient w.r.t. the pre-projection mu in place: dx = (C/n)(dy - u (u.dy)),
// u = (y - c)/C the unit direction (y = projected mu).
func clipMuBackward(dy, y, center []float32, cMu, n float64) {
	if math.IsInf(n, 1) {
		clear(dy)
		return
	}
	cMu = privacy.StoredRadius(cMu) // the radius ClipMu projected onto
	var dot float64
	for j := range dy {
		dot += (float64(y[j]) - centre(center, j)) / cMu * float64(dy[j])
	}
	r := cMu / n
	for j := range dy {
		u := (float64(y[j]) - centre(center, j)) / cMu
		dy[j] = float32(r * (float64(dy[j]) - u*dot))
	}
}

// clipsComponent reports whether the clip applies to component k of a posterior: every component
// when enabled, but the prior's (k = 0) only with ClipPrior.
func (c ClipConfig) clipsComponent(k int) bool { return c.Enabled && (c.ClipPrior || k != 0) }

// clipCache records what clipping did, for the backward pass.
type clipCache struct {
	cfg      ClipConfig
	B, N, P  int
	center   []float32 // nil = origin
	muOut    []float32 // projected mu [B*N*P] (shared with the output tensor)
	muNorm   []float64 // [B*N] pre-projection distance; 0 = not projected
	lvPass   []bool    // [B*N*P] logvar gradient passes
	alphaOut []float32 // [B*N] alpha after clipping
	aPass    []bool    // [B*N] alpha gradient passes
}

// clipPosterior applies cfg to the concatenated (mu, logvar, logAlpha) of all
// N components (component 0 = prior; clipped only with ClipPrior) and returns
// alpha = clamp(exp(logAlpha)). mu and logvar [B,N,P] are modified in place;
// logAlpha is [B,N]. Without Enabled, alpha = exp(logAlpha) and nothing else
// changes (ref §1).
func clipPosterior(cfg ClipConfig, prior Prior, mu, logvar, logAlpha []float32, B, N, P int) ([]float32, *clipCache) {
	c := &clipCache{cfg: cfg, B: B, N: N, P: P, muOut: mu,
		muNorm: make([]float64, B*N), lvPass: make([]bool, B*N*P),
		alphaOut: make([]float32, B*N), aPass: make([]bool, B*N)}
	clipPosteriorInto(c, prior, mu, logvar, logAlpha)
	return c.alphaOut, c
}

// clipPosteriorInto is clipPosterior into c, whose cfg, B, N, P and alphaOut [B*N] are set: what
// it records for the backward pass (muNorm, lvPass, aPass) only where c holds those slices, so
// that inference, which has no backward pass, allocates none of them. The values are the same
// either way.
func clipPosteriorInto(c *clipCache, prior Prior, mu, logvar, logAlpha []float32) {
	cfg, B, N, P := c.cfg, c.B, c.N, c.P
	if !cfg.ReferenceCenter && prior.Mu != 0 {
		c.center = make([]float32, P)
		for j := range c.center {
			c.center[j] = float32(prior.Mu)
		}
	}
	floor, cap := cfg.LogvarBounds(prior.Var)
	f32, c32 := float32(floor), float32(math.Min(cap, math.MaxFloat32))
	if math.IsInf(cap, 1) {
		c32 = float32(math.Inf(1))
	}
	// the means first, four rows at a time (clipMu4)
	var rows [4]int
	k := 0
	for r := 0; r < B*N; r++ {
		if !cfg.clipsComponent(r % N) {
			continue
		}
		if rows[k] = r; k < 3 {
			k++
			continue
		}
		k = 0
		n, active := clipMu4(mu[rows[0]*P:(rows[0]+1)*P], mu[rows[1]*P:(rows[1]+1)*P], mu[rows[2]*P:(rows[2]+1)*P], mu[rows[3]*P:(rows[3]+1)*P], c.center, cfg.CMu)
		for i, r := range rows {
			if active[i] && c.muNorm != nil {
				c.muNorm[r] = n[i]
			}
		}
	}
	for _, r := range rows[:k] {
		if n, active := ClipMu(mu[r*P:(r+1)*P], c.center, cfg.CMu); active && c.muNorm != nil {
			c.muNorm[r] = n
		}
	}
	for r := 0; r < B*N; r++ {
		clip := cfg.clipsComponent(r % N)
		a := math.Exp(float64(logAlpha[r]))
		if !clip {
			c.alphaOut[r] = float32(a)
			if c.aPass != nil {
				c.aPass[r] = true
			}
			if c.lvPass != nil {
				for k := r * P; k < (r+1)*P; k++ {
					c.lvPass[k] = true
				}
			}
			continue
		}
		for k := r * P; k < (r+1)*P; k++ {
			v := logvar[k]
			switch {
			case v < f32:
				logvar[k] = f32
			case v > c32:
				logvar[k] = c32
			case c.lvPass != nil:
				c.lvPass[k] = true // NaN also "passes" and propagates
			}
		}
		switch {
		case a < cfg.CAlphaMin:
			a = cfg.CAlphaMin
		case a > cfg.CAlphaMax:
			a = cfg.CAlphaMax
		case c.aPass != nil:
			c.aPass[r] = true
		}
		c.alphaOut[r] = float32(a)
	}
}

// backward maps gradients w.r.t. the clipped (mu, logvar, alpha) to gradients
// w.r.t. the pre-clip (mu, logvar, logAlpha), in place for dmu and dlogvar;
// it returns dlogAlpha [B*N] (d alpha/d logAlpha = alpha where not clamped).
func (c *clipCache) backward(dmu, dlogvar, dalpha []float32) []float32 {
	P := c.P
	for r := 0; r < c.B*c.N; r++ {
		if n := c.muNorm[r]; n > 0 {
			clipMuBackward(dmu[r*P:(r+1)*P], c.muOut[r*P:(r+1)*P], c.center, c.cfg.CMu, n)
		}
	}
	for k, pass := range c.lvPass {
		if !pass {
			dlogvar[k] = 0
		}
	}
	dla := make([]float32, len(dalpha))
	for r, g := range dalpha {
		if c.aPass[r] {
			dla[r] = g * c.alphaOut[r]
		}
	}
	return dla
}
