package nvib

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/privacy"
)

// GaussianAlpha is the Dirichlet pseudo-count a gaussian release's posterior
// carries for every component, the prior-like component 0 included. The
// release has no Dirichlet weights (the block uses uniform weights); the
// constant only lets the posterior file and the clip set have the NVDP
// format, where equal pseudo-counts in every posterior contribute exactly 0
// to Eq. rdp.
const GaussianAlpha = 1.0

// GaussianRelease is the release of ModelGaussian, a Gaussian mechanism in
// the style of DP-Forward (Du et al., CCS 2023) at the NVDP release point.
// For the encoder output x [B,S,H] and the token mask [B,S] (1 = real, nil =
// all real) of a batch with S <= L it releases, per example, L+1 rows
// z_0..z_L of P dimensions:
//
//	z_0 = 0 + sigma eps_0                                (input-independent, like NVDP's prior component)
//	z_t = clip_C(u_t) + sigma eps_t,  clip_C(v) = v min(1, C/||v||_2)     (t = 1..S, real tokens)
//	z_t = 0 + sigma eps_t                                (t = 1..S pads, and t = S+1..L)
//
// where u_t = x_t when P = H (no parameters, as DP-Forward) and u_t = W x_t +
// b, a learned projection to the latent width P (Proj, W [P,H], initialised
// to the rectangular identity and b = 0, as the NVIB layer's mu projection
// under InitClip), when P != H: the same P as an nvdp-clipped release of
// that latent width, so that the two compare at equal certified epsilon.
// The projection is applied before the clip, so it does not enter the
// certificate.
//
// with eps ~ N(0, I), C = Config.Clip.CMu (the stored radius
// privacy.StoredRadius(C): ClipMu with a zero centre keeps the float32 row
// inside it) and sigma^2 = the prior variance (Config.Prior.Var; as stored,
// exp(float32(ln sigma^2))). Every one of the L positions is released, so
// the release does not reveal the length and does not depend on how the
// batch was padded; nothing after it reads the mask.
//
// Its posterior (GaussianRelease.Forward) is the NVDP posterior format with
// mu = the rows above without noise, logvar = ln sigma^2 everywhere and
// alpha = GaussianAlpha everywhere, component 0 = (0, ln sigma^2,
// GaussianAlpha): the clip set GaussianClipSet, whose certificate under
// privacy.Certify is the Gaussian mechanism's RDP 2 lambda C^2 L / sigma^2
// (docs/privacy.md "Gaussian mechanism").
type GaussianRelease struct {
	C   float64 // radius of the token-embedding ball (>= 0)
	Var float64 // noise variance sigma^2 (> 0)
	L   int     // released token positions (>= 1)
	// Proj is the learned projection "gaussian.latent_proj" [P,H] of the
	// encoder output to the latent width P before the clip; nil when P = H.
	Proj *nn.Linear
}

// NewGaussianRelease returns the release of a gaussian model configuration
// (C = Clip.CMu, sigma^2 = Prior.Var, L = ReleaseLen; with a latent width
// P = cfg.Latent() != Hidden, Proj [P,H] initialised to the rectangular
// identity, bias 0).
func NewGaussianRelease(cfg Config) *GaussianRelease {
	g := &GaussianRelease{C: cfg.Clip.CMu, Var: cfg.Prior.Var, L: cfg.ReleaseLen}
	if P := cfg.Latent(); P != cfg.Hidden {
		g.Proj = nn.NewLinear("gaussian.latent_proj", cfg.Hidden, P, true)
		setRectIdentity(g.Proj.W.Value, 1)
	}
	return g
}

// Params returns the release's parameters: Proj's, none when P = H.
func (g *GaussianRelease) Params() []*nn.Param {
	if g.Proj == nil {
		return nil
	}
	return g.Proj.Params()
}

// Logvar is ln sigma^2 as the posterior stores it (float32).
func (g *GaussianRelease) Logvar() float32 { return float32(math.Log(g.Var)) }

// StoredVar is the noise variance the release draws with: exp of the stored
// float32 logvar (sigma^2 itself when ln sigma^2 is a float32, e.g. 1).
func (g *GaussianRelease) StoredVar() float64 { return math.Exp(float64(g.Logvar())) }

// GaussianCache holds what GaussianRelease.Backward needs.
type GaussianCache struct {
	B, S, N, P int
	x          *nn.Tensor // [B,S,H] the input of Proj (nil without one)
	mu         []float32  // [B*N*P] released means (shared with the posterior)
	real       []bool     // [B*S] row t of example b is a real token (its mean is clip(x))
	norm       []float64  // [B*S] pre-projection norm of a projected row; 0 = not projected
}

// Forward maps x [B,S,H] and mask [B,S] to the release's posterior: N = L+1
// components (component 0 the prior-like one) of P dimensions, mu, logvar,
// alpha as in GaussianRelease; Mask labels component 0 and the real tokens
// 1, the pads (positions past S included) 0; PadsReleased is true. Errors:
// S > L, an input width other than Proj's, a non-finite clipped row.
func (g *GaussianRelease) Forward(x *nn.Tensor, mask []float32) (*Posterior, *GaussianCache, error) {
	if len(x.Shape) != 3 {
		return nil, nil, fmt.Errorf("gaussian release: input %v, want [B,S,H]", x.Shape)
	}
	var in *nn.Tensor
	if g.Proj != nil {
		if x.Shape[2] != g.Proj.In {
			return nil, nil, fmt.Errorf("gaussian release: input %v, want [B,S,%d]", x.Shape, g.Proj.In)
		}
		in = x
		x, _ = g.Proj.Forward(x) // [B,S,P]
	}
	B, S, P := x.Shape[0], x.Shape[1], x.Shape[2]
	if S > g.L {
		return nil, nil, fmt.Errorf("gaussian release: batch padded to %d positions, the release has L = %d", S, g.L)
	}
	if mask != nil && len(mask) != B*S {
		return nil, nil, fmt.Errorf("gaussian release: mask has %d entries, want B*S = %d", len(mask), B*S)
	}
	N := g.L + 1
	post := &Posterior{B: B, N: N, P: P, Mu: nn.New(B, N, P), Logvar: nn.New(B, N, P), Alpha: nn.New(B, N),
		Mask: make([]float32, B*N), PadsReleased: true}
	c := &GaussianCache{B: B, S: S, N: N, P: P, x: in, mu: post.Mu.Data, real: make([]bool, B*S), norm: make([]float64, B*S)}
	lv := g.Logvar()
	for k := range post.Logvar.Data {
		post.Logvar.Data[k] = lv
	}
	for k := range post.Alpha.Data {
		post.Alpha.Data[k] = GaussianAlpha
	}
	for b := 0; b < B; b++ {
		post.Mask[b*N] = 1
		for t := 0; t < S; t++ {
			r := b*S + t
			if mask != nil && mask[r] == 0 {
				continue // a pad releases 0 + noise
			}
			c.real[r] = true
			post.Mask[b*N+1+t] = 1
			row := post.Mu.Data[(b*N+1+t)*P : (b*N+2+t)*P]
			copy(row, x.Data[r*P:(r+1)*P])
			if n, active := ClipMu(row, nil, g.C); active {
				c.norm[r] = n
			}
			for _, v := range row {
				if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
					return nil, nil, fmt.Errorf("gaussian release: non-finite clipped mean %v at example %d, position %d", v, b, t)
				}
			}
		}
	}
	return post, c, nil
}

// Backward maps dmu [B,N,P] (gradient w.r.t. the released means) to dx
// [B,S,H]: the Jacobian of the L2-ball projection (C/n)(I - u u^T) on
// projected rows, the identity on rows inside the ball, 0 at pads; then,
// with Proj, through it (accumulating its parameter gradients).
func (g *GaussianRelease) Backward(c *GaussianCache, dmu *nn.Tensor) *nn.Tensor {
	B, S, N, P := c.B, c.S, c.N, c.P
	dx := nn.New(B, S, P)
	for b := 0; b < B; b++ {
		for t := 0; t < S; t++ {
			r := b*S + t
			if !c.real[r] {
				continue
			}
			k := (b*N + 1 + t) * P
			d := dx.Data[r*P : (r+1)*P]
			copy(d, dmu.Data[k:k+P])
			if n := c.norm[r]; n > 0 {
				clipMuBackward(d, c.mu[k:k+P], nil, g.C, n)
			}
		}
	}
	if g.Proj != nil {
		return g.Proj.Backward(c.x, dx)
	}
	return dx
}

// DrawGaussian samples the release Z = mu + sigma eps [B,N,P] of a gaussian
// posterior (every component; eps from rng in row-major order) with uniform
// weights pi_i = 1/N (ln pi_i = -ln N: a constant attention bias, so the
// block's softmax does not see it). Training and evaluation alike.
func DrawGaussian(post *Posterior, rng *rand.Rand) *Sample {
	s := &Sample{Z: nn.New(post.Mu.Shape...), Eps: nn.New(post.Mu.Shape...)}
	for k := range s.Z.Data {
		e := rng.NormFloat64()
		s.Eps.Data[k] = float32(e)
		s.Z.Data[k] = float32(float64(post.Mu.Data[k]) + math.Exp(0.5*float64(post.Logvar.Data[k]))*e)
	}
	s.Dir = uniformDirichlet(post.B, post.N)
	return s
}

// uniformDirichlet is the constant weights pi_i = 1/N of B examples (no
// sampling, no gradient: DirichletSample.Backward is never called on it).
func uniformDirichlet(B, N int) *DirichletSample {
	d := &DirichletSample{B: B, N: N, Pi: make([]float32, B*N), LogPi: make([]float64, B*N)}
	lp := -math.Log(float64(N))
	for k := range d.Pi {
		d.Pi[k], d.LogPi[k] = float32(1/float64(N)), lp
	}
	return d
}

// GaussianClipSet is the set of posteriors a gaussian release can write, in
// the clip-set form privacy.Certify certifies: components = L+1 (component 0
// input-independent: mu 0, logvar ln sigma^2, alpha GaussianAlpha), dims P,
// the mean ball of radius c around PriorMu = 0, the logvar range fixed at
// [ln sigma^2, ln sigma^2] (floor = cap, given explicitly) and alpha fixed at
// GaussianAlpha (C_amin = C_amax = prior alpha). Its certificate at order
// lambda is 2 lambda C^2 L / sigma^2 with C = privacy.StoredRadius(c) and
// sigma^2 = exp(float32(ln variance)) (docs/privacy.md).
func GaussianClipSet(c, variance float64, L, P int) privacy.ClipSet {
	lv := float64(float32(math.Log(variance)))
	return privacy.ClipSet{Components: L + 1, Dims: P, CMu: c,
		PriorMu: []float64{0}, PriorVar: []float64{variance},
		LogvarFloor: []float64{lv}, LogvarCap: []float64{lv},
		AlphaMin: GaussianAlpha, AlphaMax: GaussianAlpha, PriorAlpha: GaussianAlpha}
}

// ClipSet is GaussianClipSet of the release's constants for P dimensions
// (the latent width, Config.Latent).
func (g *GaussianRelease) ClipSet(P int) privacy.ClipSet { return GaussianClipSet(g.C, g.Var, g.L, P) }
