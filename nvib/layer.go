package nvib

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/privacy"
)

// Initialisation modes of the NVIB projections, as in ref §1.
const (
	// InitNVIB is the intended NVIB initialisation:
	//
	//	W_mu = mu_tau I, b_mu = prior_mu (1 - mu_tau)
	//	W_logvar = 0, b_logvar = ln((prior_sigma stdev_tau)^2)
	//	w_lin = 0, w_quad = 1/(2 sqrt d_h), b_alpha = alpha_tau
	//
	// with prior_log_alpha_stdev = 1. With a latent width P != H, I is the
	// rectangular identity [P,H]: W_mu[j,j] = mu_tau for j < min(P,H), so mu
	// reads the first P coordinates of x, and for P > H the rows j >= H are
	// 0. w_quad is then 1/(2 sqrt d_h) on the same first min(P,H)
	// coordinates and 0 on the others, so that the quadratic term still
	// cancels ||z||^2/(2 sqrt d_h) at init, where d_h = P/heads.
	InitNVIB = "nvib"
	// InitHF is what the released pipeline ends up with, as ref §10 item 10
	// describes: every NVIB weight drawn from N(0, 0.02^2), every bias 0.
	InitHF = "hf"
	// InitClip is the principled default: the intended NVIB initialisation
	// moved inside the clipping region, where every clamp passes gradient.
	//
	// W_mu = mu_tau I and b_mu is as in InitNVIB, so information flows
	// through the bottleneck from step 0 and the mu projection rescales it
	// into the C_mu ball. W_logvar = 0 and w_lin = w_quad = 0. b_logvar is
	// the logvar floor plus [ClipInitMargin], which puts sigma just above
	// sqrt((lambda-1)/lambda) prior sigma, and b_alpha = ln C_amax -
	// ClipInitMargin. The floor and C_amax are those of Cfg.Clip whether or
	// not clipping is enabled, so that nvdp and nvdp-clipped start from the
	// same posterior and differ only by the clipping. With P != H, W_mu is
	// the rectangular identity of InitNVIB.
	//
	// InitClip is not in the reference; see docs/model.md.
	InitClip = "clip"
)

// ClipInitMargin is the distance, in nats, by which InitClip keeps the
// logvar and log-alpha biases inside their clip bounds, so that the clamps
// pass gradient.
const ClipInitMargin = 0.1

// LayerConfig configures the NVIB layer.
type LayerConfig struct {
	Hidden int `json:"hidden"` // H, the width of the encoder output x the layer reads
	// Latent is P, the width of the posterior's mu and logvar, which is the
	// width of the release. 0 means P = Hidden.
	Latent int          `json:"latent,omitempty"`
	Heads  int          `json:"heads"` // heads of the NVDP block (d_h = P/heads enters the quadratic init)
	Mode   privacy.Mode `json:"mode"`
	Prior  Prior        `json:"prior"`
	Clip   ClipConfig   `json:"clip"`
	Init   string       `json:"init"`
	// MuTau, StdevTau and AlphaTau parameterise InitNVIB. The reference
	// scripts use 1, 0.1 and -10.
	MuTau    float64 `json:"mu_tau"`
	StdevTau float64 `json:"stdev_tau"`
	AlphaTau float64 `json:"alpha_tau"`
}

// latent is P (Latent, or Hidden when 0).
func (c LayerConfig) latent() int {
	if c.Latent == 0 {
		return c.Hidden
	}
	return c.Latent
}

// Layer is the NVIB layer of ref §1. For each token x_i [H] of the encoder
// output it computes
//
//	mu_i = W_mu x_i + b_mu,  logvar_i = W_l x_i + b_l
//	ln alpha_i = w_lin.x_i + w_quad.(x_i ⊙ x_i) + b_alpha
//
// mu_i and logvar_i have width P, with W [P,H] the projection to the latent
// width. ln alpha_i is a scalar, with w [H] read from x as in the reference.
// The prior component, with mu the prior mean, logvar ln prior_var and ln
// alpha the prior log alpha over P dimensions, is prepended at index 0, and
// the result is clipped by [ClipConfig].
//
// The released code has square projections, P = H. P != H is the latent
// width lever described under "Latent width P" in docs/model.md, for
// principled mode only.
type Layer struct {
	Cfg       LayerConfig
	Mu        *nn.Linear // prefix.mu_proj       [P,H]
	Logvar    *nn.Linear // prefix.logvar_proj   [P,H]
	AlphaLin  *nn.Linear // prefix.alpha_proj.linear [1,H] + bias
	AlphaQuad *nn.Param  // prefix.alpha_proj.quadratic.weight [1,H], no bias
}

// NewLayer returns a layer with parameters named prefix+".mu_proj.weight"
// and so on, initialised by cfg.Init: [InitNVIB], the default, [InitHF] or
// [InitClip]. Only InitHF draws from rng. An unknown mode is an error.
func NewLayer(prefix string, cfg LayerConfig, rng *rand.Rand) (*Layer, error) {
	H, P := cfg.Hidden, cfg.latent()
	if H < 1 {
		return nil, fmt.Errorf("nvib layer: hidden %d < 1", H)
	}
	if P < 1 || cfg.Heads < 1 || P%cfg.Heads != 0 {
		return nil, fmt.Errorf("nvib layer: latent width %d not divisible into %d heads", P, cfg.Heads)
	}
	if !cfg.Mode.Valid() {
		return nil, fmt.Errorf("nvib layer: unknown mode %q", cfg.Mode)
	}
	if !(cfg.Prior.Var > 0) || math.IsInf(cfg.Prior.Var, 0) || math.IsNaN(cfg.Prior.Mu) || math.IsNaN(cfg.Prior.LogAlpha) {
		return nil, fmt.Errorf("nvib layer: invalid prior %+v (want finite, var > 0)", cfg.Prior)
	}
	if err := cfg.Clip.Validate(); err != nil {
		return nil, fmt.Errorf("nvib layer: %w", err)
	}
	l := &Layer{Cfg: cfg,
		Mu:        nn.NewLinear(prefix+".mu_proj", H, P, true),
		Logvar:    nn.NewLinear(prefix+".logvar_proj", H, P, true),
		AlphaLin:  nn.NewLinear(prefix+".alpha_proj.linear", H, 1, true),
		AlphaQuad: nn.NewParam(prefix+".alpha_proj.quadratic.weight", 1, H),
	}
	// identityMu sets W_mu = mu_tau I (rectangular for P != H: the first
	// min(P,H) coordinates, setRectIdentity) and b_mu = prior_mu (1 - mu_tau)
	// (weights start at zero).
	identityMu := func() {
		setRectIdentity(l.Mu.W.Value, float32(cfg.MuTau))
		l.Mu.B.Fill(float32(cfg.Prior.Mu * (1 - cfg.MuTau)))
	}
	switch cfg.Init {
	case InitNVIB, "":
		identityMu()
		sd := math.Sqrt(cfg.Prior.Var) * cfg.StdevTau
		l.Logvar.B.Fill(float32(math.Log(sd*sd + 1.1754943508222875e-38)))
		// on the coordinates W_mu copies (all H when P >= H): the term cancels ||z||^2/(2 sqrt d_h)
		q := float32(1 / (2 * math.Sqrt(float64(P/cfg.Heads))))
		for j := range min(P, H) {
			l.AlphaQuad.Value.Data[j] = q
		}
		l.AlphaLin.B.Fill(float32(cfg.AlphaTau))
	case InitHF:
		for _, lin := range []*nn.Linear{l.Mu, l.Logvar, l.AlphaLin} {
			lin.InitHF(rng, 0.02)
		}
		l.AlphaQuad.InitNormal(rng, 0.02)
	case InitClip:
		identityMu() // the other weights stay zero, as InitNVIB's W_logvar and w_lin
		floor, _ := cfg.Clip.LogvarBounds(cfg.Prior.Var)
		l.Logvar.B.Fill(float32(floor + ClipInitMargin))
		l.AlphaLin.B.Fill(float32(math.Log(cfg.Clip.CAlphaMax) - ClipInitMargin))
	default:
		return nil, fmt.Errorf("nvib layer: unknown init %q (want %q, %q or %q)", cfg.Init, InitNVIB, InitHF, InitClip)
	}
	return l, nil
}

// setRectIdentity sets w [P,H] (zero) to v times the rectangular identity:
// w[j,j] = v for j < min(P,H) (the square identity when P = H).
func setRectIdentity(w *nn.Tensor, v float32) {
	P, H := w.Shape[0], w.Shape[1]
	for j := range min(P, H) {
		w.Data[j*H+j] = v
	}
}

// Params returns the layer's trainable parameters. The prior is frozen and
// not among them.
func (l *Layer) Params() []*nn.Param {
	return append(append(append(l.Mu.Params(), l.Logvar.Params()...), l.AlphaLin.Params()...), l.AlphaQuad)
}

// Posterior holds the clipped NVIB posterior of a batch. Component 0 is the
// prior and components 1..S are the token positions, padding included.
type Posterior struct {
	B, N, P int
	Mu      *nn.Tensor // [B,N,P] means
	Logvar  *nn.Tensor // [B,N,P] log variances (nats); sigma = exp(logvar/2)
	Alpha   *nn.Tensor // [B,N]   Dirichlet pseudo-counts (> 0 where released)
	// Mask [B,N] labels the components: 1 for a real token or the prior,
	// which is always 1, and 0 for padding. It goes to the posterior file,
	// for the audit's opt-in --mask; in principled mode nothing downstream
	// of the layer reads it.
	Mask []float32
	// PadsReleased is true in principled mode: the release has all N
	// components, and padding components are ordinary clipped components
	// with Dirichlet mass, given by their clipped alpha, and Gaussian draws.
	// The release then does not reveal the length, and the default unmasked
	// audit describes it; see "Padding components" in docs/model.md, and
	// docs/privacy.md. It is false in reference mode, where padding
	// components get pi = 0, as in ref §2.
	PadsReleased bool
}

// SampleMask returns the mask [B,N] the sampler honours, with 1 where the
// component gets Dirichlet mass. It is nil, meaning every component, when
// PadsReleased is set, and Mask otherwise.
func (p *Posterior) SampleMask() []float32 {
	if p.PadsReleased {
		return nil
	}
	return p.Mask
}

// LayerCache holds what [Layer.Backward] needs.
type LayerCache struct {
	x    *nn.Tensor
	clip *clipCache
}

// Forward returns the clipped posterior of the encoder output x [B,S,H] and
// the cache Backward needs.
//
// The posterior has N = S+1 components of P dimensions: mu and logvar
// [B,N,P] and alpha [B,N]. mask [B,S] holds 1 for a real token; nil means
// all real. Every component, padding included, is projected and clipped
// alike. The mask only fills [Posterior.Mask] and, in reference mode,
// decides which components the sampler gives mass.
//
// Forward returns an error naming the tensor and position for a non-finite
// posterior value, such as an alpha whose exp overflowed in an unclipped
// model, or for a zero alpha on a released component.
func (l *Layer) Forward(x *nn.Tensor, mask []float32) (*Posterior, *LayerCache, error) {
	post, cc, err := l.forward(x, mask, nil, nil, true)
	if err != nil {
		return nil, nil, err
	}
	return post, &LayerCache{x: x, clip: cc}, nil
}

// Infer is [Layer.Forward] without the cache: the same operations in the
// same order, with the projections taken from ws and the posterior from out
// ([nn.Workspace.New]; nil: newly allocated). A posterior from out is valid
// until out's next Reset.
func (l *Layer) Infer(x *nn.Tensor, mask []float32, ws, out *nn.Workspace) (*Posterior, error) {
	post, _, err := l.forward(x, mask, ws, out, false)
	return post, err
}

// forward is Forward with the projections and log-alphas taken from ws and
// the posterior from out; it records what the backward pass needs only
// when keep.
func (l *Layer) forward(x *nn.Tensor, mask []float32, ws, out *nn.Workspace, keep bool) (*Posterior, *clipCache, error) {
	if len(x.Shape) != 3 || x.Shape[2] != l.Cfg.Hidden {
		panic(fmt.Sprintf("nvib.Layer: input %v, want [B,S,%d]", x.Shape, l.Cfg.Hidden))
	}
	B, S, H := x.Shape[0], x.Shape[1], x.Shape[2]
	N, P := S+1, l.Cfg.latent()
	mu := l.Mu.Infer(x, ws)       // [B,S,P]
	lv := l.Logvar.Infer(x, ws)   // [B,S,P]
	la := l.AlphaLin.Infer(x, ws) // [B,S,1]
	q := l.AlphaQuad.Value.Data
	for r := 0; r < B*S; r++ {
		var s float64
		for j, v := range x.Data[r*H : (r+1)*H] {
			s += float64(q[j]) * float64(v) * float64(v)
		}
		la.Data[r] += float32(s)
	}
	post := &Posterior{B: B, N: N, P: P, Mu: out.New(B, N, P), Logvar: out.New(B, N, P), Mask: out.Floats(B * N),
		PadsReleased: !l.Cfg.Mode.IsReference()}
	logAlpha := ws.Floats(B * N)
	pm, plv := float32(l.Cfg.Prior.Mu), float32(math.Log(l.Cfg.Prior.Var))
	for b := 0; b < B; b++ {
		r0 := b * N * P
		for j := 0; j < P; j++ {
			post.Mu.Data[r0+j] = pm
			post.Logvar.Data[r0+j] = plv
		}
		copy(post.Mu.Data[r0+P:r0+N*P], mu.Data[b*S*P:(b+1)*S*P])
		copy(post.Logvar.Data[r0+P:r0+N*P], lv.Data[b*S*P:(b+1)*S*P])
		logAlpha[b*N] = float32(l.Cfg.Prior.LogAlpha)
		copy(logAlpha[b*N+1:(b+1)*N], la.Data[b*S:(b+1)*S])
		post.Mask[b*N] = 1
		for i := 0; i < S; i++ {
			post.Mask[b*N+1+i] = 1
			if mask != nil {
				post.Mask[b*N+1+i] = mask[b*S+i]
			}
		}
	}
	var cc *clipCache
	if keep {
		_, cc = clipPosterior(l.Cfg.Clip, l.Cfg.Prior, post.Mu.Data, post.Logvar.Data, logAlpha, B, N, P)
		post.Alpha = nn.FromData(cc.alphaOut, B, N)
	} else {
		post.Alpha = out.New(B, N)
		clipPosteriorInto(&clipCache{cfg: l.Cfg.Clip, B: B, N: N, P: P, muOut: post.Mu.Data, alphaOut: post.Alpha.Data},
			l.Cfg.Prior, post.Mu.Data, post.Logvar.Data, logAlpha)
	}
	if err := post.checkFinite(); err != nil {
		return nil, nil, err
	}
	return post, cc, nil
}

func (p *Posterior) checkFinite() error {
	invalid := func(name string, t *nn.Tensor, per, k int) error {
		idx := fmt.Sprintf("example %d, component %d", k/per/p.N, (k/per)%p.N)
		return fmt.Errorf("nvib posterior: tensor %s: invalid value %v at %s (unclipped pseudo-counts overflow exp; consider clipping)", name, t.Data[k], idx)
	}
	if k := nn.NonFinite(p.Mu.Data); k >= 0 {
		return invalid("mu", p.Mu, p.P, k)
	}
	if k := nn.NonFinite(p.Logvar.Data); k >= 0 {
		return invalid("logvar", p.Logvar, p.P, k)
	}
	released := p.SampleMask()
	for k, v := range p.Alpha.Data {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) || !(f > 0) && isReal(released, k) {
			return invalid("alpha", p.Alpha, 1, k)
		}
	}
	return nil
}

// Backward takes the gradients with respect to the clipped posterior, dmu
// and dlogvar [B,N,P] and dalpha [B,N], which it modifies in place. It
// accumulates the parameter gradients and returns dx [B,S,H]. The prior
// component is frozen, so its gradient is discarded.
func (l *Layer) Backward(c *LayerCache, dmu, dlogvar, dalpha *nn.Tensor) *nn.Tensor {
	B, N, P := c.clip.B, c.clip.N, c.clip.P
	S, H := N-1, l.Cfg.Hidden
	dla := c.clip.backward(dmu.Data, dlogvar.Data, dalpha.Data)
	dMuTok, dLvTok, dLaTok := nn.New(B, S, P), nn.New(B, S, P), nn.New(B, S, 1)
	for b := 0; b < B; b++ {
		copy(dMuTok.Data[b*S*P:(b+1)*S*P], dmu.Data[b*N*P+P:(b+1)*N*P])
		copy(dLvTok.Data[b*S*P:(b+1)*S*P], dlogvar.Data[b*N*P+P:(b+1)*N*P])
		copy(dLaTok.Data[b*S:(b+1)*S], dla[b*N+1:(b+1)*N])
	}
	dx := l.Mu.Backward(c.x, dMuTok)
	nn.AddInPlace(dx, l.Logvar.Backward(c.x, dLvTok))
	nn.AddInPlace(dx, l.AlphaLin.Backward(c.x, dLaTok))
	q, dq := l.AlphaQuad.Value.Data, l.AlphaQuad.Grad.Data
	for r := 0; r < B*S; r++ {
		g := dLaTok.Data[r]
		if g == 0 {
			continue
		}
		xr := c.x.Data[r*H : (r+1)*H]
		for j, v := range xr {
			dq[j] += g * v * v
			dx.Data[r*H+j] += 2 * g * q[j] * v
		}
	}
	return dx
}

// Sample is one draw from the posterior, as in ref §2; Z and pi together
// are the release.
//
// Z [B,N,P] holds z_i = mu_i + sigma_i ⊙ eps_i for every component, the
// prior and pads included. pi [B,N] holds the Dirichlet weights over the
// components of [Posterior.SampleMask]: in principled mode all N, with
// pi_i > 0 everywhere including pads; in reference mode 0 at pads.
type Sample struct {
	Z   *nn.Tensor // [B,N,P]
	Eps *nn.Tensor // [B,N,P] standard normal noise
	Dir *DirichletSample
}

// Draw samples Z and pi from post. NVDP always samples, in training and
// evaluation alike.
func Draw(post *Posterior, rng *rand.Rand) *Sample { return drawWith(post, rng, nil) }

// drawWith is Draw with an optional injected ln-Gamma sampler (tests).
func drawWith(post *Posterior, rng *rand.Rand, logGamma func(k int, a float64) float64) *Sample {
	s := &Sample{Z: nn.New(post.Mu.Shape...), Eps: nn.New(post.Mu.Shape...)}
	for k := range s.Z.Data {
		e := rng.NormFloat64()
		s.Eps.Data[k] = float32(e)
		s.Z.Data[k] = float32(float64(post.Mu.Data[k]) + math.Exp(0.5*float64(post.Logvar.Data[k]))*e)
	}
	if logGamma == nil {
		logGamma = func(_ int, a float64) float64 { return SampleLogGamma(rng, a) }
	}
	s.Dir = sampleDirichlet(logGamma, post.Alpha.Data, post.SampleMask(), post.B, post.N, true)
	return s
}

// Backward accumulates into dmu and dlogvar [B,N,P] and dalpha [B,N] the
// gradients from dZ [B,N,P], with dz/dmu = 1 and dz/dlogvar = eps sigma/2,
// and from dLogPi [B,N], through the Dirichlet path. Either may be nil.
func (s *Sample) Backward(post *Posterior, dZ *nn.Tensor, dLogPi []float64, dmu, dlogvar, dalpha *nn.Tensor) {
	if dZ != nil {
		for k, g := range dZ.Data {
			dmu.Data[k] += g
			dlogvar.Data[k] += float32(float64(g) * float64(s.Eps.Data[k]) * 0.5 * math.Exp(0.5*float64(post.Logvar.Data[k])))
		}
	}
	if dLogPi != nil {
		for k, g := range s.Dir.Backward(dLogPi) {
			dalpha.Data[k] += g
		}
	}
}

// DrawWeights samples the Dirichlet weights pi [N] and their logs for one
// example with pseudo-counts alpha [N] whose every component is sampled, as
// in a release with PadsReleased. It draws as [Draw] does: the same Gamma
// draws from rng in component order. The exact release of package release
// uses it to draw the weights of a fixed-noise model ahead of the request,
// since their law is the same for every input.
func DrawWeights(alpha []float32, rng *rand.Rand) (pi []float32, logPi []float64) {
	d := sampleDirichlet(func(_ int, a float64) float64 { return SampleLogGamma(rng, a) }, alpha, nil, 1, len(alpha), false)
	return d.Pi, d.LogPi
}

// UniformWeights returns the constant weights pi_i = 1/N of a gaussian
// release, as [DrawGaussian] uses, and their logs.
func UniformWeights(N int) (pi []float32, logPi []float64) {
	d := uniformDirichlet(1, N)
	return d.Pi, d.LogPi
}
