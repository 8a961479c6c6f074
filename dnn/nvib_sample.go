package dnn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
)

// NVIBSample is the twin of [nvib.Sample]: Z = mu + sigma eps [B,N,P] and the Dirichlet weights
// pi [B,N] of one draw from a posterior.
type NVIBSample struct {
	Z, Eps *Tensor // [B,N,P]
	Dir    *NVIBDirichlet
}

// NVIBDirichlet is the twin of [nvib.DirichletSample], with what the backward pass needs. pi
// [B,N] is float32 and 0 where not sampled; ln pi is float64 and -Inf there.
type NVIBDirichlet struct {
	B, N  int
	Pi    *Tensor // [B,N]
	LogPi nvibF64 // [B*N]

	mask    *Tensor // the sampler's mask (nil: every component)
	alpha   *Tensor // the pseudo-counts
	shape   nvibF64 // [B*N] guarded shapes alpha'_i (0 where not sampled)
	logG    nvibF64 // [B*N] the ln-Gamma draws
	dlogG   nvibF64 // [B*N] d ln g_i/d alpha'_i
	total   nvibF64 // [B] A per example
	uniform bool    // the constant weights of a gaussian release (no backward)
}

// Download returns the host copies of pi and ln pi.
func (d *NVIBDirichlet) Download(e *Engine) (pi []float32, logPi []float64) {
	return e.Download(d.Pi).Data, e.downloadF64(d.LogPi)
}

// NVIBDrawHost is [nvib.Draw] with its random numbers drawn on the host from rng in nvib's order,
// so that the same seeded rng gives the device the draws it gives nvib. The arithmetic, for Z, the
// shapes, the implicit gradients and ln pi, runs on the device.
//
// The draws are eps, one NormFloat64 per element of [B,N,P] in row-major order; then, per example
// and sampled component in order, one [nvib.SampleLogGamma] at the component's guarded shape. The
// shapes are computed on the device and downloaded, B*N+B doubles.
//
// For training on the device without the host, see [Engine.NVIBDrawDevice]. To draw what
// nvib.Model draws from rand.New(p) for a copy p of the device's dropout generator g, giving the
// same noise on both devices with dropout on, pass rand.New(g): the host then consumes g's stream
// between the device's dropout draws, in nvib's order.
func (e *Engine) NVIBDrawHost(post *NVIBPosterior, rng *rand.Rand) *NVIBSample {
	return e.NVIBDrawWith(post, rng, nil)
}

// NVIBDrawWith is [Engine.NVIBDrawHost] with the ln-Gamma sampler injected, for tests at fixed
// quantiles. It is nvib's drawWith hook: logGamma(k, shape) for flat component index k; nil means
// nvib.SampleLogGamma on rng.
func (e *Engine) NVIBDrawWith(post *NVIBPosterior, rng *rand.Rand, logGamma func(k int, a float64) float64) *NVIBSample {
	eps := nn.New(post.Mu.Shape...)
	for k := range eps.Data {
		eps.Data[k] = float32(rng.NormFloat64())
	}
	if logGamma == nil {
		logGamma = func(_ int, a float64) float64 { return nvib.SampleLogGamma(rng, a) }
	}
	s := e.nvibGaussian(post, e.Upload(eps))
	d := e.dirichletShapes(post)
	shape := e.downloadF64(d.shape)
	logG := make([]float64, len(shape))
	mask := post.HostMask
	for k := range logG {
		if post.PadsReleased || mask[k] != 0 {
			logG[k] = logGamma(k, shape[k])
		} else {
			logG[k] = math.Inf(-1)
		}
	}
	e.dirichletNormalise(d, e.uploadF64(logG))
	s.Dir = d
	return s
}

// NVIBDrawInjected returns the draw with its random numbers given on the device: eps [B,N,P]
// standard normals, and logG [B*N] the ln-Gamma draws at the shapes of post, as
// [Engine.NVIBDirichletShapes] returns them. logG is ignored where the sampler masks.
func (e *Engine) NVIBDrawInjected(post *NVIBPosterior, eps *Tensor, logG []float64) *NVIBSample {
	s := e.nvibGaussian(post, eps)
	d := e.dirichletShapes(post)
	if len(logG) != post.B*post.N {
		panic(fmt.Sprintf("dnn.NVIBDrawInjected: %d ln-Gamma draws for [%d,%d]", len(logG), post.B, post.N))
	}
	e.dirichletNormalise(d, e.uploadF64(logG))
	s.Dir = d
	return s
}

// nvibGammaDraws is the number of Philox draws NVIBDrawDevice reserves per
// component for its Gamma draw (NVIB_GAMMA_DRAWS of kernels/nvib_sample.cu).
const nvibGammaDraws = 1 + 3*32

// NVIBDrawDevice is [nvib.Draw] with its random numbers made on the device from the Philox stream
// g, the device's training generator, with nothing transferred.
//
// eps[i] is a Box-Muller normal, the cosine branch, of draws g.Pos + 2i and 2i+1 taken as 53-bit
// uniforms. Then for each component k, the ln-Gamma draw follows the algorithm of
// [nvib.SampleLogGamma], Marsaglia-Tsang with U^(1/a) in log space below a shape of 1, from the
// nvibGammaDraws draws that follow at k nvibGammaDraws. g.Pos advances by
// 2 B N P + nvibGammaDraws B N.
//
// The distribution is nvib's, but the values are not, since nvib draws with a *rand.Rand's normal
// and uniform algorithms. For the same draws on both devices use [Engine.NVIBDrawHost].
func (e *Engine) NVIBDrawDevice(post *NVIBPosterior, g *Philox) *NVIBSample {
	s := e.nvibGaussian(post, e.philoxNormals(post.Mu.Shape, g))
	k0, k1 := g.keys()
	d := e.dirichletShapes(post)
	logG := e.newF64(post.B * post.N)
	mb, use := maskArgs(d.mask)
	e.launch1D("nvib_philox_log_gamma", post.B*post.N, logG.Buf, d.shape.Buf, mb, use, post.B*post.N, k0, k1, g.take(nvibGammaDraws*post.B*post.N))
	e.dirichletNormalise(d, logG)
	s.Dir = d
	return s
}

// philoxNormals returns a tensor of standard normals from g (normal i from
// draws g.Pos + 2i and 2i+1, Box-Muller's cosine branch on 53-bit
// uniforms), advancing g.Pos by twice its size.
func (e *Engine) philoxNormals(shape []int, g *Philox) *Tensor {
	eps := e.New(shape...)
	n := eps.Len()
	pos := g.take(2 * n)
	k0, k1 := g.keys()
	e.launch1D("nvib_philox_normals", n, eps.Buf, n, k0, k1, pos)
	return eps
}

// NVIBDirichletShapes returns the guarded Gamma shapes alpha'_i [B*N] of post's Dirichlet, for
// draws made on the host. A shape is 0 where the sampler masks.
func (e *Engine) NVIBDirichletShapes(post *NVIBPosterior) []float64 {
	return e.downloadF64(e.dirichletShapes(post).shape)
}

// nvibGaussian returns the sample with Z = mu + sigma eps (no weights yet).
func (e *Engine) nvibGaussian(post *NVIBPosterior, eps *Tensor) *NVIBSample {
	sameLen("NVIB draw", post.Mu, eps)
	s := &NVIBSample{Z: e.New(post.Mu.Shape...), Eps: eps}
	n := post.Mu.Len()
	e.launch1D("nvib_gauss_sample", n, s.Z.Buf, post.Mu.Buf, post.Logvar.Buf, eps.Buf, n)
	return s
}

// dirichletShapes starts post's Dirichlet draw: totals and guarded shapes.
func (e *Engine) dirichletShapes(post *NVIBPosterior) *NVIBDirichlet {
	B, N := post.B, post.N
	d := &NVIBDirichlet{B: B, N: N, Pi: e.New(B, N), LogPi: e.newF64(B * N), mask: post.sampleMask(), alpha: post.Alpha,
		shape: e.newF64(B * N), dlogG: e.newF64(B * N), total: e.newF64(B)}
	mb, use := maskArgs(d.mask)
	e.launch1D("nvib_dir_shape", B, d.shape.Buf, d.total.Buf, post.Alpha.Buf, mb, use, B, N)
	return d
}

// dirichletNormalise finishes the draw from the ln-Gamma draws logG [B*N]:
// the implicit gradients, ln pi and pi.
func (e *Engine) dirichletNormalise(d *NVIBDirichlet, logG nvibF64) {
	d.logG = logG
	mb, use := maskArgs(d.mask)
	e.launchRows("nvib_dir_norm", d.B, d.Pi.Buf, d.LogPi.Buf, d.dlogG.Buf, d.shape.Buf, logG.Buf, mb, use, d.N)
}

// Backward returns dL/d alpha [B,N] from dL/d ln pi [B,N], as [nvib.DirichletSample.Backward]
// does, through the normalisation, the implicit Gamma gradient and the guards; it is 0 where not
// sampled. dLogPi is float32, as the block's key-bias gradient; nvib takes the same values as
// float64.
func (d *NVIBDirichlet) Backward(e *Engine, dLogPi *Tensor) *Tensor {
	if d.uniform {
		panic("dnn.NVIBDirichlet.Backward: the uniform weights of a gaussian release have no gradient")
	}
	if dLogPi.Len() != d.B*d.N {
		panic(fmt.Sprintf("dnn.NVIBDirichlet.Backward: dLogPi %v for [%d,%d]", dLogPi.Shape, d.B, d.N))
	}
	out := e.New(d.B, d.N)
	mb, use := maskArgs(d.mask)
	e.launchRows("nvib_dir_bwd", d.B, out.Buf, dLogPi.Buf, d.LogPi.Buf, d.dlogG.Buf, d.shape.Buf, d.total.Buf, d.alpha.Buf, mb, use, d.N)
	return out
}

// Backward accumulates into dmu and dlogvar [B,N,P] and dalpha [B,N] the gradients from dZ
// [B,N,P], with dz/dmu = 1 and dz/dlogvar = eps sigma/2, and from dLogPi [B,N], through the
// Dirichlet path, as [nvib.Sample.Backward] does. Either may be nil.
func (s *NVIBSample) Backward(e *Engine, post *NVIBPosterior, dZ, dLogPi, dmu, dlogvar, dalpha *Tensor) {
	if dZ != nil {
		sameLen("NVIBSample.Backward", post.Mu, dZ)
		n := dZ.Len()
		e.launch1D("nvib_gauss_sample_bwd", n, dmu.Buf, dlogvar.Buf, dZ.Buf, s.Eps.Buf, post.Logvar.Buf, n)
	}
	if dLogPi != nil {
		e.AddInPlace(dalpha, s.Dir.Backward(e, dLogPi))
	}
}
