package dnn

import (
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// nvibF64 is an arena array of float64 on the device: the statistics nvib
// keeps in double (pre-projection distances, ln pi, Gamma shapes, KL terms).
type nvibF64 struct {
	Buf cuda.Buffer
	N   int
}

// newF64 returns an arena array of n float64 (uninitialised).
func (e *Engine) newF64(n int) nvibF64 { return nvibF64{Buf: e.arena.alloc(8 * max(1, n)), N: n} }

// uploadF64 returns an arena array holding v.
func (e *Engine) uploadF64(v []float64) nvibF64 {
	a := e.newF64(len(v))
	must(cuda.Upload(e.Dev, a.Buf, v))
	return a
}

// downloadF64 returns the host copy of a.
func (e *Engine) downloadF64(a nvibF64) []float64 {
	v := make([]float64, a.N)
	must(cuda.Download(e.Dev, v, a.Buf))
	return v
}

// NVIBLayer is the twin of [nvib.Layer]: the mu and logvar projections as dnn Linear layers,
// ln alpha = w_lin.x + w_quad.(x⊙x) + b_alpha, the prior component prepended at index 0, and the
// clipping of nvib/clip.go.
//
// The mean clipping is [nvib.ClipMu] bit for bit, by nvib_clip_mu: its two distances are summed by
// one thread per row in the Go loop's order, with unfused IEEE operations, for P up to a few
// thousand. What the certificate assumes of a stored posterior thus holds on the device as on the
// CPU.
type NVIBLayer struct {
	Cfg                  nvib.LayerConfig
	Mu, Logvar, AlphaLin *Linear
	AlphaQuad            *Param
}

// NewNVIBLayer uploads l's parameters.
func (e *Engine) NewNVIBLayer(l *nvib.Layer) *NVIBLayer {
	return &NVIBLayer{Cfg: l.Cfg, Mu: e.NewLinear(l.Mu), Logvar: e.NewLinear(l.Logvar), AlphaLin: e.NewLinear(l.AlphaLin),
		AlphaQuad: e.Param(l.AlphaQuad)}
}

// Params returns the layer's parameters, in [nvib.Layer]'s order.
func (l *NVIBLayer) Params() []*Param {
	return append(append(append(l.Mu.Params(), l.Logvar.Params()...), l.AlphaLin.Params()...), l.AlphaQuad)
}

// NVIBPosterior is the device twin of [nvib.Posterior]: component 0 is the prior and 1..S the
// token positions.
type NVIBPosterior struct {
	B, N, P    int
	Mu, Logvar *Tensor // [B,N,P]
	Alpha      *Tensor // [B,N]
	// Mask [B,N] labels the components, with 1 for a real token or the prior and 0 for padding. It
	// is on the device and, as HostMask, on the host.
	Mask         *Tensor
	HostMask     []float32
	PadsReleased bool

	status *nvibStatus // the forward pass's validity check (nil: none)
}

// sampleMask is the mask the sampler honours: nil (every component) when
// PadsReleased, else Mask (nvib.Posterior.SampleMask).
func (p *NVIBPosterior) sampleMask() *Tensor {
	if p.PadsReleased {
		return nil
	}
	return p.Mask
}

// maskArgs returns the (mask, use) kernel arguments of an optional mask.
func maskArgs(m *Tensor) (cuda.Buffer, int) {
	if m == nil {
		return cuda.Buffer{}, 0
	}
	return m.Buf, 1
}

// Download returns the host copy of p as an [nvib.Posterior]: the posterior dump of nvdp eval,
// and the twin of [nvib.Model.Posterior].
func (p *NVIBPosterior) Download(e *Engine) *nvib.Posterior {
	return &nvib.Posterior{B: p.B, N: p.N, P: p.P, Mu: e.Download(p.Mu), Logvar: e.Download(p.Logvar),
		Alpha: e.Download(p.Alpha), Mask: append([]float32(nil), p.HostMask...), PadsReleased: p.PadsReleased}
}

// UploadPosterior returns the device copy of the host posterior p, for tests and for a posterior
// computed on the host.
func (e *Engine) UploadPosterior(p *nvib.Posterior) *NVIBPosterior {
	return &NVIBPosterior{B: p.B, N: p.N, P: p.P, Mu: e.Upload(p.Mu), Logvar: e.Upload(p.Logvar), Alpha: e.Upload(p.Alpha),
		Mask: e.Upload(nn.FromData(p.Mask, p.B, p.N)), HostMask: append([]float32(nil), p.Mask...), PadsReleased: p.PadsReleased}
}

// nvibStatus is the per-row validity of a forward pass (bits: 1 mu, 2
// logvar, 4 alpha) and what Check needs to name the first invalid value as
// nvib does.
type nvibStatus struct {
	rows   cuda.Buffer // [B*N] int32
	gauss  bool        // a gaussian release (its error names example and position)
	checks bool        // checked already
}

// Check returns the error of nvib's posterior check for p, or nil when p is valid. The check is
// that of [nvib.Layer.Forward], or the non-finite clipped mean of [nvib.GaussianRelease.Forward].
// It downloads 3 ints and, on an error, the offending row. Forward calls it; a caller that deferred
// it, through forwardNoCheck, calls it before using the posterior on the host.
func (p *NVIBPosterior) Check(e *Engine) error {
	s := p.status
	if s == nil || s.checks {
		return nil
	}
	s.checks = true
	rows := p.B * p.N
	out := e.arena.alloc(4 * 3)
	e.launch("nvib_first_bad", cuda.Dim3{X: 1, Y: 1, Z: 1}, cuda.Threads(threads), 0, out, s.rows, rows)
	first := make([]int32, 3)
	must(cuda.Download(e.Dev, first, out))
	for bit, nt := range []struct {
		name string
		t    *Tensor
		per  int
	}{{"mu", p.Mu, p.P}, {"logvar", p.Logvar, p.P}, {"alpha", p.Alpha, 1}} {
		r := int(first[bit])
		if r < 0 {
			continue
		}
		row := make([]float32, nt.per)
		must(cuda.Download(e.Dev, row, nt.t.Buf.Offset(4*r*nt.per)))
		v := row[0]
		for _, x := range row {
			if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
				v = x
				break
			}
		}
		if s.gauss {
			return fmt.Errorf("gaussian release: non-finite clipped mean %v at example %d, position %d", v, r/p.N, r%p.N-1)
		}
		return fmt.Errorf("nvib posterior: tensor %s: invalid value %v at example %d, component %d (unclipped pseudo-counts overflow exp; consider clipping)",
			nt.name, v, r/p.N, r%p.N)
	}
	return nil
}

// NVIBLayerCache holds what [NVIBLayer.Backward] needs.
type NVIBLayerCache struct {
	x                   *Tensor // [B,S,H]
	muTok, lvTok, laTok *Tensor // the projections before clipping: [B,S,P], [B,S,P], [B,S]
	norm                nvibF64 // [B*N] pre-projection distance of a projected row, else 0
	post                *NVIBPosterior
}

// clipArgs are the kernel arguments of a clipping configuration (nvib's
// clipPosterior: the centre, the stored radius, the float32 logvar bounds).
type clipArgs struct {
	enabled, clipPrior, hasCenter int
	center                        float32
	cMu, radius                   float64
	lvFloor, lvCap                float32
	aMin, aMax                    float64
}

func newClipArgs(cfg nvib.ClipConfig, prior nvib.Prior) clipArgs {
	a := clipArgs{cMu: cfg.CMu, radius: privacy.StoredRadius(cfg.CMu), aMin: cfg.CAlphaMin, aMax: cfg.CAlphaMax}
	if cfg.Enabled {
		a.enabled = 1
	}
	if cfg.ClipPrior {
		a.clipPrior = 1
	}
	if !cfg.ReferenceCenter && prior.Mu != 0 {
		a.hasCenter, a.center = 1, float32(prior.Mu)
	}
	floor, cap := cfg.LogvarBounds(prior.Var)
	a.lvFloor, a.lvCap = float32(floor), float32(math.Min(cap, math.MaxFloat32))
	if math.IsInf(cap, 1) {
		a.lvCap = float32(math.Inf(1))
	}
	return a
}

// posteriorMask returns the [B,N] component mask of nvib.Layer.Forward: 1
// for the prior, the token mask (nil: 1) for components 1..S.
func posteriorMask(mask []float32, B, S int) []float32 {
	N := S + 1
	m := make([]float32, B*N)
	for b := 0; b < B; b++ {
		m[b*N] = 1
		for i := 0; i < S; i++ {
			m[b*N+1+i] = 1
			if mask != nil {
				m[b*N+1+i] = mask[b*S+i]
			}
		}
	}
	return m
}

// Forward maps x [B,S,H] and the token mask [B*S] to the clipped posterior with N = S+1
// components, as [nvib.Layer.Forward] does. The mask holds 1 for a real token; nil means all real.
// It returns nvib's errors, from [NVIBPosterior.Check]: a non-finite posterior value or a zero
// alpha on a released component.
func (l *NVIBLayer) Forward(e *Engine, x *Tensor, mask []float32) (*NVIBPosterior, *NVIBLayerCache, error) {
	post, c := l.forwardNoCheck(e, x, mask)
	if err := post.Check(e); err != nil {
		return nil, nil, err
	}
	return post, c, nil
}

// forwardNoCheck is Forward without the check: the posterior's Check must be
// called before its values are trusted (the model checks it with the loss,
// saving a synchronisation in the middle of the step).
func (l *NVIBLayer) forwardNoCheck(e *Engine, x *Tensor, mask []float32) (*NVIBPosterior, *NVIBLayerCache) {
	H := l.Cfg.Hidden
	if len(x.Shape) != 3 || x.Shape[2] != H {
		panic(fmt.Sprintf("dnn.NVIBLayer: input %v, want [B,S,%d]", x.Shape, H))
	}
	B, S := x.Shape[0], x.Shape[1]
	if mask != nil && len(mask) != B*S {
		panic(fmt.Sprintf("dnn.NVIBLayer: mask of %d for input %v", len(mask), x.Shape))
	}
	P := l.Mu.Out
	N := S + 1
	mu, _ := l.Mu.Forward(e, x)
	lv, _ := l.Logvar.Forward(e, x)
	la, _ := l.AlphaLin.Forward(e, x) // [B,S,1]
	e.launchRows("nvib_alpha_quad", B*S, la.Buf, x.Buf, l.AlphaQuad.Value.Buf, H)
	hostMask := posteriorMask(mask, B, S)
	post := &NVIBPosterior{B: B, N: N, P: P, Mu: e.New(B, N, P), Logvar: e.New(B, N, P), Alpha: e.New(B, N),
		Mask: e.Upload(nn.FromData(hostMask, B, N)), HostMask: hostMask, PadsReleased: !l.Cfg.Mode.IsReference(),
		status: &nvibStatus{rows: e.arena.alloc(4 * B * N)}}
	c := &NVIBLayerCache{x: x, muTok: mu, lvTok: lv, laTok: la, norm: e.newF64(B * N), post: post}
	a := newClipArgs(l.Cfg.Clip, l.Cfg.Prior)
	all := 0
	if post.PadsReleased {
		all = 1
	}
	pr := l.Cfg.Prior
	e.launchRows("nvib_clip_fwd", B*N, post.Mu.Buf, post.Logvar.Buf, post.Alpha.Buf, c.norm.Buf, post.status.rows,
		mu.Buf, lv.Buf, la.Buf, post.Mask.Buf, all, N, P, float32(pr.Mu), float32(math.Log(pr.Var)), float32(pr.LogAlpha),
		a.enabled, a.clipPrior, a.hasCenter, a.center, a.cMu, a.radius, a.lvFloor, a.lvCap, a.aMin, a.aMax)
	return post, c
}

// Backward takes the gradients with respect to the clipped posterior, dmu and dlogvar [B,N,P] and
// dalpha [B,N], accumulates the parameter gradients and returns dx [B,S,H]. Unlike nvib, it does
// not modify the gradients. The prior component is frozen, so its gradient is discarded.
func (l *NVIBLayer) Backward(e *Engine, c *NVIBLayerCache, dmu, dlogvar, dalpha *Tensor) *Tensor {
	post := c.post
	B, N, P := post.B, post.N, post.P
	S, H := N-1, l.Cfg.Hidden
	sameLen("NVIBLayer.Backward", post.Mu, dmu)
	sameLen("NVIBLayer.Backward", post.Logvar, dlogvar)
	sameLen("NVIBLayer.Backward", post.Alpha, dalpha)
	dMu, dLv, dLa := e.New(B, S, P), e.New(B, S, P), e.New(B, S, 1)
	a := newClipArgs(l.Cfg.Clip, l.Cfg.Prior)
	e.launchRows("nvib_clip_bwd", B*S, dMu.Buf, dLv.Buf, dLa.Buf, dmu.Buf, dlogvar.Buf, dalpha.Buf,
		post.Mu.Buf, post.Alpha.Buf, c.norm.Buf, c.lvTok.Buf, c.laTok.Buf,
		S, P, a.enabled, a.hasCenter, a.center, a.radius, a.lvFloor, a.lvCap, a.aMin, a.aMax)
	dx := l.Mu.Backward(e, c.x, dMu)
	e.AddInPlace(dx, l.Logvar.Backward(e, c.x, dLv))
	e.AddInPlace(dx, l.AlphaLin.Backward(e, c.x, dLa))
	e.launch1D("nvib_alpha_quad_dx", B*S*H, dx.Buf, dLa.Buf, c.x.Buf, l.AlphaQuad.Value.Buf, B*S, H)
	e.launch1D("nvib_alpha_quad_dq", H, l.AlphaQuad.Grad.Buf, dLa.Buf, c.x.Buf, B*S, H)
	return dx
}
