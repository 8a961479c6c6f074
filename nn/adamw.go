package nn

import (
	"fmt"
	"math"
)

// AdamW is Adam with decoupled weight decay, after Loshchilov and Hutter,
// with the exact update order of torch.optim.AdamW with amsgrad=False and
// maximize=False:
//
//	p <- p - lr*wd*p
//	m <- beta1 m + (1-beta1) g
//	v <- beta2 v + (1-beta2) g^2
//	p <- p - lr * (m / (1-beta1^t)) / (sqrt(v / (1-beta2^t)) + eps)
//
// The decay step is skipped for a [Param] with NoDecay. The moments are
// float32, as in torch for float32 parameters, and keyed by parameter name;
// the per-element arithmetic is float32, as in torch.
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	// Step is the number of updates taken: after an Update, the t of the
	// bias correction.
	Step int
	// M and V are the first and second moments by parameter name, created
	// on first use.
	M, V map[string][]float32
}

// The AdamW constants of nvdp's runs, defined once.
//
// AdamBeta1, AdamBeta2 and AdamEps are torch.optim.AdamW's defaults. The
// released NVDP code trains with them, as ref §8 says: default betas and
// the default eps, 1e-8. So does `nvdp train`. BERTAdamEps is the eps of BERT's
// pretraining optimizer, epsilon=1e-6 in google-research/bert
// optimization.py, used by `nvdp pretrain`. torch's default weight decay,
// 0.01, is not used: each run passes its own.
const (
	AdamBeta1   = 0.9
	AdamBeta2   = 0.999
	AdamEps     = 1e-8
	BERTAdamEps = 1e-6
)

// NewAdamW returns an optimizer with base learning rate lr, betas, eps and
// decoupled weight decay. Update takes the scheduled rate. [AdamBeta1],
// [AdamBeta2] and [AdamEps] are torch's defaults.
func NewAdamW(lr, beta1, beta2, eps, weightDecay float64) *AdamW {
	return &AdamW{LR: lr, Beta1: beta1, Beta2: beta2, Eps: eps, WeightDecay: weightDecay,
		M: map[string][]float32{}, V: map[string][]float32{}}
}

// Update takes one AdamW step on params, using their Grad, with learning
// rate lr, typically o.LR * [LinearWarmupDecay](...). It increments Step
// first, so the first update uses t = 1. It does not clear the gradients;
// call [ZeroGrads] for that. A parameter whose size changed since its
// moments were created panics.
func (o *AdamW) Update(params []*Param, lr float64) {
	if o.M == nil {
		o.M, o.V = map[string][]float32{}, map[string][]float32{}
	}
	o.Step++
	t := float64(o.Step)
	bc1 := 1 - math.Pow(o.Beta1, t)
	bc2sqrt := math.Sqrt(1 - math.Pow(o.Beta2, t))
	stepSize := lr / bc1
	b1, b2, eps := o.Beta1, o.Beta2, o.Eps
	for _, p := range params {
		m, v := o.M[p.Name], o.V[p.Name]
		if m == nil {
			m, v = make([]float32, p.Value.Len()), make([]float32, p.Value.Len())
			o.M[p.Name], o.V[p.Name] = m, v
		}
		if len(m) != p.Value.Len() || len(p.Grad.Data) != p.Value.Len() {
			panic(fmt.Sprintf("nn.AdamW: parameter %s has %d values, %d grads, %d moments", p.Name, p.Value.Len(), p.Grad.Len(), len(m)))
		}
		decay := 1.0
		if !p.NoDecay {
			decay = 1 - lr*o.WeightDecay
		}
		w, g := p.Value.Data, p.Grad.Data[:len(p.Value.Data)]
		m, v = m[:len(w)], v[:len(w)]
		// float32 arithmetic, in torch's operation order (the scalar
		// coefficients are computed in float64 and rounded once).
		f1, f2 := float32(b1), float32(b2)
		g1, g2 := float32(1-b1), float32(1-b2)
		dec, ss := float32(decay), float32(stepSize)
		ibc2, e32 := float32(1/bc2sqrt), float32(eps)
		Parallel(len(w), 16, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				gi := g[i]
				mi := f1*m[i] + g1*gi
				vi := f2*v[i] + g2*gi*gi
				m[i], v[i] = mi, vi
				denom := float32(math.Sqrt(float64(vi)))*ibc2 + e32
				w[i] = w[i]*dec - ss*(mi/denom)
			}
		})
	}
}

// LinearWarmupDecay returns the learning-rate multiplier of Hugging Face's
// get_linear_schedule_with_warmup after step updates: step/warmup while
// step < warmup, then max(0, (total-step)/(total-warmup)).
func LinearWarmupDecay(step, warmupSteps, totalSteps int) float64 {
	if step < warmupSteps {
		return float64(step) / float64(max(1, warmupSteps))
	}
	return math.Max(0, float64(totalSteps-step)/float64(max(1, totalSteps-warmupSteps)))
}
