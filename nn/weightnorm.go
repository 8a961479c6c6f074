package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// WeightNorm is the weight reparameterisation of torch.nn.utils.weight_norm,
// after Salimans and Kingma, 2016, along dimension Dim:
//
//	weight = G * V / ||V||
//
// where the norm runs over every axis of V but Dim. V, the direction, has
// the weight's shape. G, the magnitude, has size 1 on every axis but Dim,
// as torch's norm_except_dim. For a Conv1d weight [Out, In/Groups, Kernel]
// with Dim 2, as in Hugging Face's Wav2Vec2PositionalConvEmbedding with
// weight_norm(conv, dim=2), G is [1, 1, Kernel] and each kernel tap k has
// its own norm over all channels.
//
// The parameters are named prefix+".weight_g" and prefix+".weight_v", the
// layout of torch.nn.utils.weight_norm; torch.nn.utils.parametrizations
// names them parametrizations.weight.original0 and original1. A slice of V
// with zero norm gives a non-finite weight, as in torch.
type WeightNorm struct {
	G, V *Param
	Dim  int
}

// NewWeightNorm returns zero parameters of a weight of the given shape,
// normalised over every axis but dim; see [WeightNorm.InitFrom]. dim must
// be in [0, len(shape)); a wiring error panics.
func NewWeightNorm(prefix string, dim int, shape ...int) *WeightNorm {
	if dim < 0 || dim >= len(shape) {
		panic(fmt.Sprintf("nn.NewWeightNorm(%s): dim %d for shape %v", prefix, dim, shape))
	}
	gs := make([]int, len(shape))
	for i := range gs {
		gs[i] = 1
	}
	gs[dim] = shape[dim]
	return &WeightNorm{G: NewParam(prefix+".weight_g", gs...), V: NewParam(prefix+".weight_v", shape...), Dim: dim}
}

// Params returns G then V, the order of torch's weight_g and weight_v.
func (w *WeightNorm) Params() []*Param { return []*Param{w.G, w.V} }

// split returns the sizes before, along and after Dim.
func (w *WeightNorm) split() (outer, d, inner int) {
	s := w.V.Value.Shape
	outer, d, inner = 1, s[w.Dim], 1
	for _, v := range s[:w.Dim] {
		outer *= v
	}
	for _, v := range s[w.Dim+1:] {
		inner *= v
	}
	return outer, d, inner
}

// norms returns ||V|| per index along Dim (float64 accumulation).
func (w *WeightNorm) norms() []float64 {
	outer, d, inner := w.split()
	n := make([]float64, d)
	v := w.V.Value.Data
	for a := 0; a < outer; a++ {
		for j := 0; j < d; j++ {
			for _, x := range v[(a*d+j)*inner:][:inner] {
				n[j] += float64(x) * float64(x)
			}
		}
	}
	for j := range n {
		n[j] = math.Sqrt(n[j])
	}
	return n
}

// InitFrom sets V = weight and G = ||weight||, so that the effective weight
// is weight. weight_norm does the same when it wraps an initialised layer.
func (w *WeightNorm) InitFrom(weight *Tensor) {
	MustSameShape("WeightNorm.InitFrom", w.V.Value, weight)
	copy(w.V.Value.Data, weight.Data)
	for j, n := range w.norms() {
		w.G.Value.Data[j] = float32(n)
	}
}

// InitNormal draws the effective weight from N(0, std^2), from rng in
// row-major order, and sets V and G from it with [WeightNorm.InitFrom].
func (w *WeightNorm) InitNormal(rng *rand.Rand, std float64) {
	t := New(w.V.Value.Shape...)
	for i := range t.Data {
		t.Data[i] = float32(rng.NormFloat64() * std)
	}
	w.InitFrom(t)
}

// WeightNormCache holds the norms [WeightNorm.Backward] needs.
type WeightNormCache struct{ norm []float64 }

// Weight returns the effective weight G * V / ||V||, of V's shape, and the
// cache for Backward.
func (w *WeightNorm) Weight() (*Tensor, *WeightNormCache) {
	outer, d, inner := w.split()
	n := w.norms()
	out := New(w.V.Value.Shape...)
	v, g := w.V.Value.Data, w.G.Value.Data
	for a := 0; a < outer; a++ {
		for j := 0; j < d; j++ {
			s := float32(float64(g[j]) / n[j])
			o := (a*d + j) * inner
			for i, x := range v[o : o+inner] {
				out.Data[o+i] = s * x
			}
		}
	}
	return out, &WeightNormCache{norm: n}
}

// Backward takes the cache of Weight and dL/dweight, of V's shape, and
// accumulates
//
//	dG_j = sum_{.j.} dW * V / ||V||_j
//	dV   = G_j / ||V||_j * (dW - dG_j / ||V||_j * V)
func (w *WeightNorm) Backward(c *WeightNormCache, dW *Tensor) {
	MustSameShape("WeightNorm.Backward", w.V.Value, dW)
	outer, d, inner := w.split()
	v, g := w.V.Value.Data, w.G.Value.Data
	dg := make([]float64, d)
	for a := 0; a < outer; a++ {
		for j := 0; j < d; j++ {
			o := (a*d + j) * inner
			for i, x := range v[o : o+inner] {
				dg[j] += float64(dW.Data[o+i]) * float64(x)
			}
		}
	}
	for j := range dg {
		dg[j] /= c.norm[j]
		w.G.Grad.Data[j] += float32(dg[j])
	}
	for a := 0; a < outer; a++ {
		for j := 0; j < d; j++ {
			s := float64(g[j]) / c.norm[j]
			r := dg[j] / c.norm[j]
			o := (a*d + j) * inner
			for i, x := range v[o : o+inner] {
				w.V.Grad.Data[o+i] += float32(s * (float64(dW.Data[o+i]) - r*float64(x)))
			}
		}
	}
}
