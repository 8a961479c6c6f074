package dnn

import (
	"math"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/nvib"
)

// NVIBKL holds the NVIB regularisers of a batch on the device, the twin of [nvib.KLResult]: the
// per-example L_G and L_D and their batch means, in double.
type NVIBKL struct {
	B      int
	LG, LD nvibF64 // [B]
	Mean   nvibF64 // [2]: mean_b L_G, mean_b L_D
	comp   nvibF64 // [B*N] per-component Gaussian terms
	dLD    nvibF64 // [B] dL_D/d alpha0
	a0     nvibF64 // [B] alpha0
}

// Download returns the host copy as an [nvib.KLResult].
func (k *NVIBKL) Download(e *Engine) nvib.KLResult {
	m := e.downloadF64(k.Mean)
	return nvib.KLResult{LG: e.downloadF64(k.LG), LD: e.downloadF64(k.LD), MeanLG: m[0], MeanLD: m[1]}
}

// klArgs are the mask arguments of a KL configuration (the mask is read
// only with MaskPads).
func klArgs(cfg nvib.KLConfig, post *NVIBPosterior) (mask cuda.Buffer, maskPads int) {
	if cfg.MaskPads {
		return post.Mask.Buf, 1
	}
	return post.Mask.Buf, 0
}

// NVIBKL computes L_G and L_D of post, whose component 0 is the prior, as [nvib.KL] does. It
// computes in double: the per-component sums over P by block reductions, and the rest per example
// in nvib's order.
func (e *Engine) NVIBKL(cfg nvib.KLConfig, post *NVIBPosterior) *NVIBKL {
	B, N, P := post.B, post.N, post.P
	k := &NVIBKL{B: B, LG: e.newF64(B), LD: e.newF64(B), Mean: e.newF64(2), comp: e.newF64(B * N), dLD: e.newF64(B), a0: e.newF64(B)}
	mask, mp := klArgs(cfg, post)
	vp := cfg.Prior.Var
	e.launchRows("nvib_kl_comp", B*N, k.comp.Buf, post.Mu.Buf, post.Logvar.Buf, mask, mp, P, vp, cfg.Prior.Mu, math.Log(vp))
	e.launch1D("nvib_kl_example", B, k.LG.Buf, k.LD.Buf, k.dLD.Buf, k.a0.Buf, k.comp.Buf, post.Alpha.Buf, mask, mp, B, N,
		math.Exp(cfg.Prior.LogAlpha), cfg.Delta)
	e.launch1D("nvib_kl_mean", 1, k.Mean.Buf, k.LG.Buf, k.LD.Buf, B)
	return k
}

// NVIBKLBackward accumulates into dmu and dlogvar [B,N,P] and dalpha [B,N] the gradient of
// wG mean_b L_G + wD mean_b L_D, as [nvib.KLBackward] does. Like nvib, it recomputes the terms.
func (e *Engine) NVIBKLBackward(cfg nvib.KLConfig, post *NVIBPosterior, wG, wD float64, dmu, dlogvar, dalpha *Tensor) {
	sameLen("NVIBKLBackward", post.Mu, dmu)
	sameLen("NVIBKLBackward", post.Logvar, dlogvar)
	sameLen("NVIBKLBackward", post.Alpha, dalpha)
	k := e.NVIBKL(cfg, post)
	B, N, P := post.B, post.N, post.P
	mask, mp := klArgs(cfg, post)
	e.launchRows("nvib_kl_bwd", B*N, dmu.Buf, dlogvar.Buf, dalpha.Buf, k.comp.Buf, k.LG.Buf, k.dLD.Buf, k.a0.Buf,
		post.Mu.Buf, post.Logvar.Buf, post.Alpha.Buf, mask, mp, N, P, cfg.Prior.Var, cfg.Prior.Mu, wG/float64(B), wD/float64(B))
}
