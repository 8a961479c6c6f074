package attack

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
)

// The classifiers' gradients (linear and MLP, every parameter) equal central finite differences of
// the softmax cross-entropy, computed in float64 from the float32 forward pass.
func TestClassifierGradient(t *testing.T) {
	const dims, hidden, classes, rows = 4, 5, 3, 6
	rng := rand.New(rand.NewPCG(1, 2))
	x := nn.New(rows, dims)
	for i := range x.Data {
		x.Data[i] = float32(rng.NormFloat64())
	}
	y := []int{0, 1, 2, 1, 0, 2}
	for _, kind := range []string{ModelLinear, ModelMLP} {
		c := newClassifier(kind, dims, hidden, classes, rng)
		for _, p := range c.params() {
			p.InitNormal(rng, 0.5)
		}
		loss := func() float64 {
			logits, _ := c.forward(x)
			l, _ := nn.SoftmaxCrossEntropy(logits, y)
			return l
		}
		logits, cache := c.forward(x)
		_, dlogits := nn.SoftmaxCrossEntropy(logits, y)
		c.backward(cache, dlogits)
		for _, p := range c.params() {
			for i := range p.Value.Data {
				v := p.Value.Data[i]
				const h = 1e-2
				p.Value.Data[i] = v + h
				up := loss()
				p.Value.Data[i] = v - h
				down := loss()
				p.Value.Data[i] = v
				fd, g := (up-down)/(2*h), float64(p.Grad.Data[i])
				if math.Abs(fd-g) > 2e-3+2e-2*math.Abs(fd) {
					t.Errorf("%s %s[%d]: gradient %v, finite difference %v", kind, p.Name, i, g, fd)
				}
			}
		}
	}
}

// On XOR of two signs (with a large offset and scale that the standardisation removes) the MLP
// classifies every point and the linear model, which cannot separate XOR, is at chance; on a linearly
// separable problem both are right everywhere.
func TestClassifierLearns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 400
	x := make([]float32, 2*n)
	xor, lin := make([]int, n), make([]int, n)
	for i := range n {
		a, b := rng.Float64()*2-1, rng.Float64()*2-1
		x[2*i], x[2*i+1] = float32(1000+50*a), float32(-7+0.01*b)
		if (a > 0) != (b > 0) {
			xor[i] = 1
		}
		if a+b > 0 {
			lin[i] = 1
		}
	}
	l := Learner{Epochs: 200, BatchSize: 32, LR: 1e-2, Hidden: 16}
	accuracy := func(kind string, y []int) float64 {
		c := newClassifier(kind, 2, l.Hidden, 2, rand.New(rand.NewPCG(5, 6)))
		if err := c.fit(context.Background(), x, y, l, rand.New(rand.NewPCG(7, 8)), nil, "test"); err != nil {
			t.Fatal(err)
		}
		right := 0
		c.predict(x, func(row int, logits []float32) {
			if argmax(logits) == y[row] {
				right++
			}
		})
		return float64(right) / n
	}
	for _, tc := range []struct {
		kind     string
		y        []int
		min, max float64
	}{
		{ModelMLP, xor, 0.97, 1},
		{ModelLinear, xor, 0.3, 0.7},
		{ModelMLP, lin, 0.98, 1},
		{ModelLinear, lin, 0.98, 1},
	} {
		if a := accuracy(tc.kind, tc.y); a < tc.min || a > tc.max {
			t.Errorf("%s: training accuracy %.3f outside [%v, %v]", tc.kind, a, tc.min, tc.max)
		}
	}
}
