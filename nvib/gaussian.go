package nvib

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/privacy"
)

// GaussianAlpha is the Dirichlet pseudo-count that a gaussian release's
// posterior carries for every component, the prior-like component 0
// included. The release has no Dirichlet weights, since the block uses
// uniform weights. The constant only gives the posterior file and the clip
// set the NVDP format, where equal pseudo-counts in every posterior
// contribute exactly 0 to Eq. rdp.
const GaussianAlpha = 1.0

// GaussianRelease is the release of [ModelGaussian]: a Gaussian mechanism
// in the style of DP-Forward, Du et al., CCS 2023, placed at the NVDP
// release point.
//
// For the encoder output x [B,S,H] and the token mask [B,S] of a batch with
// S <= L, it releases L+1 rows z_0..z_L of P dimensions per example. The
// mask holds 1 for a real token; nil means all real. The rows are
//
//	z_0 = 0 + sigma eps_0
//	z_t = clip_C(u_t) + sigma eps_t,  clip_C(v) = v min(1, C/||v||_2)
//	z_t = 0 + sigma eps_t
//
// The first row is independent of the input, like NVDP's prior component;
// the second form is for the real tokens among t = 1..S; the third for the
// pads among t = 1..S and for t = S+1..L. eps is drawn from N(0, I).
//
// When P = H, u_t = x_t and the release has no parameters, as in
// DP-Forward. When P != H, u_t = W x_t + b, a learned projection to the
// latent width P held in Proj, with W [P,H] initialised to the rectangular
// identity and b = 0, as the NVIB layer's mu projection under InitClip. P
// is then the same as in an nvdp-clipped release of that latent width, so
// the two compare at equal certified epsilon. The projection is applied
// before the clip, so it does not enter the certificate.
//
// C is [Config].Clip.CMu, and the rows are clipped to the stored radius
// [privacy.StoredRadius](C): [ClipMu] with a zero centre keeps the float32
// row inside it. sigma^2 is the prior variance [Config].Prior.Var, as
// stored: exp(float32(ln sigma^2)). Every one of the L positions is
// released, so the release does not reveal the length and does not depend
// on how the batch was padded; nothing after it reads the mask.
//
// Its posterior, from [GaussianRelease.Forward], has the NVDP posterior
// format: mu is the rows above without noise, logvar is ln sigma^2
// everywhere, alpha is [GaussianAlpha] everywhere, and component 0 is
// (0, ln sigma^2, GaussianAlpha). Its clip set is [GaussianClipSet], whose
// certificate under [privacy.Certify] is the Gaussian mechanism's RDP
// 2 lambda C^2 L / sigma^2; see "Gaussian mechanism" in docs/privacy.md.
type GaussianRelease struct {
	C   float64 // radius of the token-embedding ball (>= 0)
	Var float64 // noise variance sigma^2 (> 0)
	L   int     // released token positions (>= 1)
	// Proj is the learned projection "gaussian.latent_proj" [P,H] of the
	// encoder output to the latent width P, applied before the clip. It is
	// nil when P = H.
	Proj *nn.Linear
}

// NewGaussianRelease returns the release of a gaussian model configuration,
// with C = Clip.CMu, sigma^2 = Prior.Var and L = ReleaseLen. With a latent
// width P = cfg.Latent() other than Hidden, Proj [P,H] is initialised to the
// rectangular identity with bias 0.
func NewGaussianRelease(cfg Config) *GaussianRelease {
	g := &GaussianRelease{C: cfg.Clip.CMu, Var: cfg.Prior.Var, L: cfg.ReleaseLen}
	if P := cfg.Latent(); P != cfg.Hidden {
		g.Proj = nn.NewLinear("gaussian.latent_proj", cfg.Hidden, P, true)
		setRectIdentity(g.Proj.W.Value, 1)
	}
	return g
}

// Params returns the release's parameters: those of Proj, or none when
// P = H.
func (g *GaussianRelease) Params() []*nn.Param {
	if g.Proj == nil {
		return nil
	}
	return g.Proj.Params()
}

// Logvar returns ln sigma^2 as the posterior stores it, in float32.
func (g *GaussianRelease) Logvar() float32 { return float32(math.Log(g.Var)) }

// StoredVar returns the noise variance the release draws with: exp of the
// stored float32 logvar. It is sigma^2 itself when ln sigma^2 is a float32,
// as for sigma^2 = 1.
func (g *GaussianRelease) StoredVar() float64 { return math.Exp(float64(g.Logvar())) }

// GaussianCache holds what [GaussianRelease.Backward] needs.
type GaussianCache struct {
	B, S, N, P int
	x          *nn.Tensor // [B,S,H] the input of Proj (nil without one)
	mu         []float32  // [B*N*P] released means (shared with the posterior)
	real       []bool     // [B*S] row t of example b is a real token (its mean is clip(x))
	norm       []float64  // [B*S] pre-projection norm of a projected row; 0 = not projected
}

// Forward returns the release's posterior for x [B,S,H] and mask [B,S], and
// the cache Backward needs.
//
// The posterior has N = L+1 components of P dimensions, component 0 being
// the prior-like one, with mu, logvar and alpha as described at
// [GaussianRelease]. Its Mask is 1 at component 0 and the real tokens and 0
// at the pads, positions past S included; PadsReleased is true.
//
// Forward returns an error when S > L, when the input width differs from
// Proj's, or when a clipped row is not finite.
func (g *GaussianRelease) Forward(x *nn.Tensor, mask []float32) (*Posterior, *GaussianCache, error) {
	return g.forward(x, mask, nil, nil)
}

// Infer is [GaussianRelease.Forward] without the cache: the same operations
// in the same order, with the projection taken from ws and the posterior
// from out ([nn.Workspace.New]; nil: newly allocated). A posterior from out
// is valid until out's next Reset.
func (g *GaussianRelease) Infer(x *nn.Tensor, mask []float32, ws, out *nn.Workspace) (*Posterior, error) {
	post, _, err := g.forward(x, mask, ws, out)
	return post, err
}

// forward is Forward with the projection taken from ws and the posterior
// from out.
func (g *GaussianRelease) forward(x *nn.Tensor, mask []float32, ws, out *nn.Workspace) (*Posterior, *GaussianCache, error) {
	if len(x.Shape) != 3 {
		return nil, nil, fmt.Errorf("gaussian release: input %v, want [B,S,H]", x.Shape)
	}
	var in *nn.Tensor
	if g.Proj != nil {
		if x.Shape[2] != g.Proj.In {
			return nil, nil, fmt.Errorf("gaussian release: input %v, want [B,S,%d]", x.Shape, g.Proj.In)
		}
		in = x
		x = g.Proj.Infer(x, ws) // [B,S,P]
	}
	B, S, P := x.Shape[0], x.Shape[1], x.Shape[2]
	if S > g.L {
		return nil, nil, fmt.Errorf("gaussian release: batch padded to %d positions, the release has L = %d", S, g.L)
	}
	if mask != nil && len(mask) != B*S {
		return nil, nil, fmt.Errorf("gaussian release: mask has %d entries, want B*S = %d", len(mask), B*S)
	}
	N := g.L + 1
	post := &Posterior{B: B, N: N, P: P, Mu: out.New(B, N, P), Logvar: out.New(B, N, P), Alpha: out.New(B, N),
		Mask: out.Floats(B * N), PadsReleased: true}
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

// Backward maps dmu [B,N,P], the gradient with respect to the released
// means, to dx [B,S,H]. On projected rows it applies the Jacobian of the
// L2-ball projection, (C/n)(I - u u^T); on rows inside the ball the
// identity; at pads 0. With Proj it then goes through the projection,
// accumulating its parameter gradients.
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
// posterior, for training and evaluation alike. Every component is sampled,
// with eps drawn from rng in row-major order. The weights are uniform,
// pi_i = 1/N and ln pi_i = -ln N: a constant attention bias, which the
// block's softmax does not see.
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

// GaussianClipSet returns the set of posteriors a gaussian release can
// write, in the clip-set form that [privacy.Certify] certifies.
//
// The set has L+1 components in P dimensions. Component 0 is independent of
// the input, with mu 0, logvar ln sigma^2 and alpha GaussianAlpha. The means
// lie in the ball of radius c around PriorMu = 0; the logvar range is fixed
// at [ln sigma^2, ln sigma^2], given explicitly with floor equal to cap; and
// alpha is fixed at GaussianAlpha, with C_amin = C_amax = the prior alpha.
//
// Its certificate at order lambda is 2 lambda C^2 L / sigma^2, with
// C = [privacy.StoredRadius](c) and sigma^2 = exp(float32(ln variance));
// see docs/privacy.md.
func GaussianClipSet(c, variance float64, L, P int) privacy.ClipSet {
	lv := float64(float32(math.Log(variance)))
	return privacy.ClipSet{Components: L + 1, Dims: P, CMu: c,
		PriorMu: []float64{0}, PriorVar: []float64{variance},
		LogvarFloor: []float64{lv}, LogvarCap: []float64{lv},
		AlphaMin: GaussianAlpha, AlphaMax: GaussianAlpha, PriorAlpha: GaussianAlpha}
}

// ClipSet returns [GaussianClipSet] of the release's constants for P
// dimensions, the latent width [Config.Latent].
func (g *GaussianRelease) ClipSet(P int) privacy.ClipSet { return GaussianClipSet(g.C, g.Var, g.L, P) }
