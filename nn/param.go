package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Param is a named trainable tensor with its gradient (same shape).
// Names follow Hugging Face conventions (e.g. "encoder.layer.0.attention.self.query.weight").
type Param struct {
	Name  string
	Value *Tensor
	Grad  *Tensor
	// NoDecay excludes the parameter from AdamW weight decay (biases, LayerNorm).
	NoDecay bool
}

// NewParam allocates a zero parameter and its gradient.
func NewParam(name string, shape ...int) *Param {
	return &Param{Name: name, Value: New(shape...), Grad: New(shape...)}
}

// InitNormal fills the value with N(0, std^2) draws from rng (HF initialisation uses std 0.02).
func (p *Param) InitNormal(rng *rand.Rand, std float64) {
	for i := range p.Value.Data {
		p.Value.Data[i] = float32(rng.NormFloat64() * std)
	}
}

// Fill sets every value to v.
func (p *Param) Fill(v float32) {
	for i := range p.Value.Data {
		p.Value.Data[i] = v
	}
}

// ZeroGrads clears the gradients of all params.
func ZeroGrads(ps []*Param) {
	for _, p := range ps {
		p.Grad.Zero()
	}
}

// GradNorm returns the global L2 norm of all gradients (float64 accumulation).
func GradNorm(ps []*Param) float64 {
	var s float64
	for _, p := range ps {
		for _, g := range p.Grad.Data {
			s += float64(g) * float64(g)
		}
	}
	return math.Sqrt(s)
}

// ClipGradNorm scales all gradients so that their global L2 norm is at most
// maxNorm (as torch.nn.utils.clip_grad_norm_) and returns the norm before
// clipping. maxNorm <= 0 disables clipping.
func ClipGradNorm(ps []*Param, maxNorm float64) float64 {
	n := GradNorm(ps)
	if maxNorm > 0 && n > maxNorm {
		s := float32(maxNorm / (n + 1e-6))
		for _, p := range ps {
			for i := range p.Grad.Data {
				p.Grad.Data[i] *= s
			}
		}
	}
	return n
}

// ParamMap indexes params by name and reports duplicates.
func ParamMap(ps []*Param) (map[string]*Param, error) {
	m := make(map[string]*Param, len(ps))
	for _, p := range ps {
		if _, dup := m[p.Name]; dup {
			return nil, fmt.Errorf("duplicate parameter name %q", p.Name)
		}
		m[p.Name] = p
	}
	return m, nil
}

// SortedNames returns the parameter names in lexical order.
func SortedNames(ps []*Param) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	sort.Strings(names)
	return names
}
