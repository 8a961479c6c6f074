package attack

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
)

// The learned attackers: a linear softmax classifier, which is logistic
// regression for two classes, and a multi-layer perceptron with one hidden
// layer.
const (
	ModelLinear = "linear"
	ModelMLP    = "mlp"
)

// Learner configures the training of the attacks' learned models, the
// inversion's decoders and the attribute's classifiers, on the public split.
// They minimise softmax cross-entropy, [nn.SoftmaxCrossEntropy], by AdamW
// with torch's betas and eps, [nn.AdamBeta1], [nn.AdamBeta2] and [nn.AdamEps],
// at a constant learning rate, over minibatches in an order drawn from the
// attack's seed. Inputs are standardised by the training rows' per-dimension
// mean and standard deviation; a dimension of deviation 0 is only centred.
type Learner struct {
	Epochs      int     `json:"epochs"`       // passes over the training rows (>= 1)
	BatchSize   int     `json:"batch_size"`   // rows per step (>= 1)
	LR          float64 `json:"lr"`           // learning rate (> 0)
	WeightDecay float64 `json:"weight_decay"` // AdamW's decoupled weight decay of the weights, not the biases (>= 0)
	Hidden      int     `json:"mlp_hidden"`   // the MLP's hidden width (>= 1)
}

// Validate checks l; its errors are [*option.Error].
func (l Learner) Validate() error {
	switch {
	case l.Epochs < 1:
		return option.Errorf("epochs", l.Epochs, "must be >= 1")
	case l.BatchSize < 1:
		return option.Errorf("batch_size", l.BatchSize, "must be >= 1")
	case !(l.LR > 0) || math.IsInf(l.LR, 0):
		return option.Errorf("lr", l.LR, "must be a finite number > 0")
	case !(l.WeightDecay >= 0) || math.IsInf(l.WeightDecay, 0):
		return option.Errorf("weight_decay", l.WeightDecay, "must be a finite number >= 0")
	case l.Hidden < 1:
		return option.Errorf("mlp_hidden", l.Hidden, "must be >= 1")
	}
	return nil
}

// classifier maps a row of dims features to logits over classes:
// standardise, then ModelLinear (W [C,D] x + b, zero-initialised) or
// ModelMLP (W2 GELU(W1 x + b1) + b2 with W1 ~ N(0, 1/D), W2 ~ N(0, 1/Hidden),
// biases 0).
type classifier struct {
	dims        int
	mean, scale []float32 // standardisation: (x - mean) * scale
	l1, l2      *nn.Linear
}

// newClassifier initialises a classifier of kind (ModelLinear, ModelMLP)
// from rng. An unknown kind is a programmer error (options are validated).
func newClassifier(kind string, dims, hidden, classes int, rng *rand.Rand) *classifier {
	c := &classifier{dims: dims}
	switch kind {
	case ModelLinear:
		c.l1 = nn.NewLinear("linear", dims, classes, true)
	case ModelMLP:
		c.l1 = nn.NewLinear("mlp.hidden", dims, hidden, true)
		c.l1.W.InitNormal(rng, 1/math.Sqrt(float64(dims)))
		c.l2 = nn.NewLinear("mlp.out", hidden, classes, true)
		c.l2.W.InitNormal(rng, 1/math.Sqrt(float64(hidden)))
	default:
		panic("attack: unknown classifier " + kind)
	}
	return c
}

func (c *classifier) params() []*nn.Param {
	if c.l2 == nil {
		return c.l1.Params()
	}
	return append(c.l1.Params(), c.l2.Params()...)
}

// classifierCache holds what backward needs.
type classifierCache struct {
	x, act, dact *nn.Tensor
}

// forward maps standardised rows x [B, dims] to logits [B, classes].
func (c *classifier) forward(x *nn.Tensor) (*nn.Tensor, *classifierCache) {
	h, _ := c.l1.Forward(x)
	if c.l2 == nil {
		return h, &classifierCache{x: x}
	}
	act, dact := nn.GELUWithGrad(h)
	out, _ := c.l2.Forward(act)
	return out, &classifierCache{x: x, act: act, dact: dact}
}

// backward accumulates the parameters' gradients of dlogits [B, classes].
func (c *classifier) backward(cache *classifierCache, dlogits *nn.Tensor) {
	if c.l2 == nil {
		c.l1.Backward(cache.x, dlogits)
		return
	}
	dact := c.l2.Backward(cache.act, dlogits)
	c.l1.Backward(cache.x, nn.GELUGradMul(dact, cache.dact))
}

// standardise sets the standardisation from the training rows x [rows*dims]
// (float64 sums).
func (c *classifier) standardise(x []float32) {
	d := c.dims
	rows := len(x) / d
	c.mean, c.scale = make([]float32, d), make([]float32, d)
	for j := range d {
		var s, ss float64
		for r := range rows {
			s += float64(x[r*d+j])
		}
		m := s / float64(rows)
		for r := range rows {
			e := float64(x[r*d+j]) - m
			ss += e * e
		}
		c.mean[j], c.scale[j] = float32(m), 1
		if sd := math.Sqrt(ss / float64(rows)); sd > 0 {
			c.scale[j] = float32(1 / sd)
		}
	}
}

// gather copies the standardised rows idx of x [rows*dims] into a tensor
// [len(idx), dims].
func (c *classifier) gather(x []float32, idx []int) *nn.Tensor {
	d := c.dims
	out := nn.New(len(idx), d)
	for k, r := range idx {
		row, dst := x[r*d:(r+1)*d], out.Data[k*d:(k+1)*d]
		for j, v := range row {
			dst[j] = (v - c.mean[j]) * c.scale[j]
		}
	}
	return out
}

// fit standardises by x [rows*dims] and trains on the rows with labels y
// (class indices) as l says, drawing the order from rng; it reports the
// steps and their loss to report under stage. Errors: a non-finite loss,
// ctx cancelled.
func (c *classifier) fit(ctx context.Context, x []float32, y []int, l Learner, rng *rand.Rand, report progress.Func, stage string) error {
	rows := len(y)
	if rows == 0 || len(x) != rows*c.dims {
		panic(fmt.Sprintf("attack: %d training values for %d rows of %d", len(x), rows, c.dims))
	}
	c.standardise(x)
	params := c.params()
	opt := nn.NewAdamW(l.LR, nn.AdamBeta1, nn.AdamBeta2, nn.AdamEps, l.WeightDecay)
	perEpoch := (rows + l.BatchSize - 1) / l.BatchSize
	total := int64(l.Epochs * perEpoch)
	step := int64(0)
	for epoch := range l.Epochs {
		order := rng.Perm(rows)
		for lo := 0; lo < rows; lo += l.BatchSize {
			if err := ctx.Err(); err != nil {
				return err
			}
			idx := order[lo:min(lo+l.BatchSize, rows)]
			labels := make([]int, len(idx))
			for k, r := range idx {
				labels[k] = y[r]
			}
			logits, cache := c.forward(c.gather(x, idx))
			loss, dlogits := nn.SoftmaxCrossEntropy(logits, labels)
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				return fmt.Errorf("attack: %s: loss %v at epoch %d", stage, loss, epoch+1)
			}
			c.backward(cache, dlogits)
			opt.Update(params, l.LR)
			nn.ZeroGrads(params)
			step++
			report.Report(progress.Event{Stage: stage, Unit: "steps", Done: step, Total: total, Loss: loss,
				Detail: fmt.Sprintf("epoch %d/%d", epoch+1, l.Epochs)})
		}
	}
	return nil
}

// predictBatch is the number of rows predict scores at a time.
const predictBatch = 512

// predict calls each with the logits of every row of x [rows*dims], in
// order, predictBatch rows at a time (the slice is reused).
func (c *classifier) predict(x []float32, each func(row int, logits []float32)) {
	rows := len(x) / c.dims
	for lo := 0; lo < rows; lo += predictBatch {
		hi := min(lo+predictBatch, rows)
		idx := make([]int, hi-lo)
		for k := range idx {
			idx[k] = lo + k
		}
		logits, _ := c.forward(c.gather(x, idx))
		C := logits.Dim(-1)
		for k := range idx {
			each(lo+k, logits.Data[k*C:(k+1)*C])
		}
	}
}

// argmax is the index of the largest value (the first of ties).
func argmax(v []float32) int {
	best := 0
	for j, x := range v {
		if x > v[best] {
			best = j
		}
	}
	return best
}
