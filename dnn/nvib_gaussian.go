package dnn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// GaussianRelease is the twin of [nvib.GaussianRelease], the Gaussian-mechanism baseline. Each real
// token's row, x or Proj x when P != H, is clipped into the ball of radius C around 0 with the
// arithmetic of [nvib.ClipMu] bit for bit, by nvib_clip_mu. Pads and positions past S are released
// as 0, and logvar is ln sigma^2 and alpha 1 everywhere.
type GaussianRelease struct {
	C    float64
	Var  float64
	L    int
	Proj *Linear // nil when P = H
}

// NewGaussianRelease uploads g's parameters, those of its projection if it has one.
func (e *Engine) NewGaussianRelease(g *nvib.GaussianRelease) *GaussianRelease {
	d := &GaussianRelease{C: g.C, Var: g.Var, L: g.L}
	if g.Proj != nil {
		d.Proj = e.NewLinear(g.Proj)
	}
	return d
}

// Params returns the projection's parameters, or none when P = H.
func (g *GaussianRelease) Params() []*Param {
	if g.Proj == nil {
		return nil
	}
	return g.Proj.Params()
}

// GaussianCache holds what [GaussianRelease.Backward] needs.
type GaussianCache struct {
	B, S, N, P int
	x          *Tensor // the projection's input (nil without one)
	mask       *Tensor // [B,S] token mask (nil: all real)
	post       *NVIBPosterior
	norm       nvibF64 // [B*N] pre-projection norm of a projected row, else 0
}

// Forward maps x [B,S,H] and the token mask [B*S] to the release's posterior, with N = L+1
// components, as [nvib.GaussianRelease.Forward] does. A nil mask means all real. It returns nvib's
// errors: S > L, a mask or input of the wrong size, or a non-finite clipped row.
func (g *GaussianRelease) Forward(e *Engine, x *Tensor, mask []float32) (*NVIBPosterior, *GaussianCache, error) {
	post, c, err := g.forwardNoCheck(e, x, mask)
	if err == nil {
		err = post.Check(e)
	}
	if err != nil {
		return nil, nil, err
	}
	return post, c, nil
}

// forwardNoCheck is Forward without the posterior's Check (the shape errors
// are returned).
func (g *GaussianRelease) forwardNoCheck(e *Engine, x *Tensor, mask []float32) (*NVIBPosterior, *GaussianCache, error) {
	if len(x.Shape) != 3 {
		return nil, nil, fmt.Errorf("gaussian release: input %v, want [B,S,H]", x.Shape)
	}
	var in *Tensor
	if g.Proj != nil {
		if x.Shape[2] != g.Proj.In {
			return nil, nil, fmt.Errorf("gaussian release: input %v, want [B,S,%d]", x.Shape, g.Proj.In)
		}
		in = x
		x, _ = g.Proj.Forward(e, x)
	}
	B, S, P := x.Shape[0], x.Shape[1], x.Shape[2]
	if S > g.L {
		return nil, nil, fmt.Errorf("gaussian release: batch padded to %d positions, the release has L = %d", S, g.L)
	}
	if mask != nil && len(mask) != B*S {
		return nil, nil, fmt.Errorf("gaussian release: mask has %d entries, want B*S = %d", len(mask), B*S)
	}
	N := g.L + 1
	host := make([]float32, B*N)
	for b := 0; b < B; b++ {
		host[b*N] = 1
		for t := 0; t < S; t++ {
			if mask == nil || mask[b*S+t] != 0 {
				host[b*N+1+t] = 1
			}
		}
	}
	post := &NVIBPosterior{B: B, N: N, P: P, Mu: e.New(B, N, P), Logvar: e.New(B, N, P), Alpha: e.New(B, N),
		Mask: e.Upload(nn.FromData(host, B, N)), HostMask: host, PadsReleased: true,
		status: &nvibStatus{rows: e.arena.alloc(4 * B * N), gauss: true}}
	c := &GaussianCache{B: B, S: S, N: N, P: P, x: in, post: post, norm: e.newF64(B * N)}
	if mask != nil {
		c.mask = e.Upload(nn.FromData(mask, B, S))
	}
	mb, use := maskArgs(c.mask)
	lv := float32(math.Log(g.Var)) // nvib.GaussianRelease.Logvar
	e.launchRows("nvib_gauss_fwd", B*N, post.Mu.Buf, post.Logvar.Buf, post.Alpha.Buf, c.norm.Buf, post.status.rows,
		x.Buf, mb, use, S, N, P, lv, g.C, privacy.StoredRadius(g.C))
	return post, c, nil
}

// Backward maps dmu [B,N,P] to dx [B,S,H], as [nvib.GaussianRelease.Backward] does: through the
// ball projection's Jacobian at real tokens and 0 at pads, then through the projection,
// accumulating its gradients.
func (g *GaussianRelease) Backward(e *Engine, c *GaussianCache, dmu *Tensor) *Tensor {
	sameLen("GaussianRelease.Backward", c.post.Mu, dmu)
	du := e.New(c.B, c.S, c.P)
	mb, use := maskArgs(c.mask)
	e.launchRows("nvib_gauss_bwd", c.B*c.S, du.Buf, dmu.Buf, c.post.Mu.Buf, c.norm.Buf, mb, use, c.S, c.N, c.P,
		privacy.StoredRadius(g.C))
	if g.Proj != nil {
		return g.Proj.Backward(e, c.x, du)
	}
	return du
}

// GaussianDrawHost is [nvib.DrawGaussian] with the noise eps drawn from rng on the host in nvib's
// order, one NormFloat64 per element in row-major order, and uploaded. Z = mu + sigma eps is
// computed on the device, with the uniform weights pi = 1/N and ln pi = -ln N. Outside training,
// the release's noise must come from a cryptographically secure generator, see docs/privacy.md;
// rng is the caller's.
func (e *Engine) GaussianDrawHost(post *NVIBPosterior, rng *rand.Rand) *NVIBSample {
	eps := nn.New(post.Mu.Shape...)
	for k := range eps.Data {
		eps.Data[k] = float32(rng.NormFloat64())
	}
	return e.GaussianDrawWith(post, e.Upload(eps))
}

// GaussianDrawDevice is [nvib.DrawGaussian] for training, with the noise made on the device from
// the Philox stream g as [Engine.NVIBDrawDevice] makes eps, in 2 B N P draws. A release outside
// training draws its noise from a cryptographically secure generator, see docs/privacy.md, and
// passes it to [Engine.GaussianDrawWith].
func (e *Engine) GaussianDrawDevice(post *NVIBPosterior, g *Philox) *NVIBSample {
	return e.GaussianDrawWith(post, e.philoxNormals(post.Mu.Shape, g))
}

// GaussianDrawWith is [nvib.DrawGaussian] with the standard normal noise eps [B,N,P] given on the
// device.
func (e *Engine) GaussianDrawWith(post *NVIBPosterior, eps *Tensor) *NVIBSample {
	sameLen("GaussianDrawWith", post.Mu, eps)
	s := &NVIBSample{Z: e.New(post.Mu.Shape...), Eps: eps}
	n := post.Mu.Len()
	e.launch1D("nvib_gauss_sample", n, s.Z.Buf, post.Mu.Buf, post.Logvar.Buf, eps.Buf, n)
	B, N := post.B, post.N
	d := &NVIBDirichlet{B: B, N: N, Pi: e.New(B, N), LogPi: e.newF64(B * N), uniform: true}
	e.launch1D("nvib_fill_f", B*N, d.Pi.Buf, float32(1/float64(N)), B*N)
	e.launch1D("nvib_fill_d", B*N, d.LogPi.Buf, -math.Log(float64(N)), B*N)
	s.Dir = d
	return s
}
