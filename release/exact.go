package release

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/noise"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/privacy"
)

// exactRelease is the exact release of a fixed-noise model (docs/privacy.md,
// "Floating-point safety"): z = G (m + n) per value, m the clipped mean
// rounded toward the ball's centre (noise.Lattice.MeanIndex), n the exact
// lattice noise (noise.Noise), and the Dirichlet weights of the fixed
// pseudo-counts (their law is the same for every input). The noise and the
// weights of a release (a draw) are drawn before the posterior is known,
// by a pool for real releases.
type exactRelease struct {
	lat     noise.Lattice
	lv      float32   // every component's stored log-variance
	centres []int64   // the lattice index of each dimension's ball centre (length 1 or P)
	alpha   []float32 // [N] the fixed pseudo-counts: component 0 the prior's, the others C_amax
	uniform bool      // a gaussian model: pi = 1/N, nothing drawn
	N, P    int
}

// newExact returns the exact release of clip set set (privacy.ClipSet.ReleaseLattice)
// for a model whose release has uniform weights (a gaussian model) or not.
// Errors: as ReleaseLattice (privacy.ErrNotFixedNoise for a noise that
// depends on the input).
func newExact(set privacy.ClipSet, uniform bool) (*exactRelease, error) {
	lat, lv, centres, err := set.ReleaseLattice()
	if err != nil {
		return nil, err
	}
	e := &exactRelease{lat: lat, lv: lv, centres: centres, uniform: uniform, N: set.Components, P: set.Dims,
		alpha: make([]float32, set.Components)}
	e.alpha[0] = float32(set.PriorAlpha)
	for i := 1; i < e.N; i++ {
		e.alpha[i] = float32(set.AlphaMax)
	}
	return e, nil
}

// draw is the noise of one release, drawn ahead of its posterior: the
// lattice noise n [N*P] and the weights pi [N].
type draw struct {
	n  []int64
	pi []float32
}

func (e *exactRelease) newDraw() *draw {
	return &draw{n: make([]int64, e.N*e.P), pi: make([]float32, e.N)}
}

// fill draws d: the lattice noise from nz, then the weights from rng (the
// source nz draws from), in that order.
func (e *exactRelease) fill(d *draw, nz *noise.Noise, rng *rand.Rand) {
	nz.Fill(d.n)
	var pi []float32
	if e.uniform {
		pi, _ = nvib.UniformWeights(e.N)
	} else {
		pi, _ = nvib.DrawWeights(e.alpha, rng)
	}
	copy(d.pi, pi)
}

// wipe zeroes d, so that no noise outlives the release that used it.
func (d *draw) wipe() {
	clear(d.n)
	clear(d.pi)
}

// errNotFixed reports a posterior whose noise is not the fixed one the
// exact release was built for (a defect of the model, never expected).
var errNotFixed = errors.New("release: posterior does not have the model's fixed noise")

// apply releases the posterior post (one example, N x P) with the noise of
// d: Z = G (m + n) in row-major order, pi = d.pi. It checks first that
// post has the fixed noise (every logvar the model's, every alpha its
// component's): the exact release covers nothing else. The work per value
// is the same for every posterior and noise (a rounding toward the centre,
// an integer addition, a conversion).
func (e *exactRelease) apply(post *nvib.Posterior, d *draw) (Embedding, error) {
	if post.N != e.N || post.P != e.P {
		return Embedding{}, fmt.Errorf("release: posterior %d x %d, the exact release is %d x %d", post.N, post.P, e.N, e.P)
	}
	for k, v := range post.Logvar.Data {
		if v != e.lv {
			return Embedding{}, fmt.Errorf("%w: logvar %v at component %d, dim %d, want %v", errNotFixed, v, k/e.P, k%e.P, e.lv)
		}
	}
	for i, a := range post.Alpha.Data {
		if a != e.alpha[i] {
			return Embedding{}, fmt.Errorf("%w: alpha %v at component %d, want %v", errNotFixed, a, i, e.alpha[i])
		}
	}
	z := make([]float32, e.N*e.P)
	if err := e.lat.Release(z, post.Mu.Data, d.n, e.centres); err != nil {
		return Embedding{}, fmt.Errorf("release: %w", err)
	}
	return Embedding{Z: z, Pi: append([]float32(nil), d.pi...)}, nil
}
