package nvib

import (
	"fmt"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/nn"
)

// Head kinds, as in ref §3.3.
const (
	// HeadMean is mean pooling, dropout and a Linear layer, as in the BERT
	// family and the baseline: logits = W_c mean_t y_t + b_c.
	//
	// The mean runs over the rows t the mask marks real for the baseline
	// and in reference mode, as in ref §3.3. Principled NVDP models pass a
	// nil mask and the mean runs over all S rows: every token component,
	// padding included, is part of the release, so the pooled vector is a
	// function of Z and pi alone; see "Padding components" in docs/model.md.
	HeadMean = "mean"
	// HeadFirstToken is the RobertaClassificationHead on position 0, the
	// <s> token: dropout, dense P->P, tanh, dropout, out_proj P->num_labels.
	HeadFirstToken = "first-token"
)

// Head maps the block output y [B,S,P] to logits [B,C].
type Head struct {
	Kind  string
	Dense *nn.Linear // classifier.dense (first-token only)
	Out   *nn.Linear // classifier (mean) or classifier.out_proj (first-token)
	drop  nn.Dropout
}

// NewHead returns a head with the Hugging Face initialisation for rows of
// the given width: the block's width P, or the encoder's hidden size for
// the baseline.
func NewHead(kind string, width, numLabels int, dropout float64, rng *rand.Rand) (*Head, error) {
	if numLabels < 1 {
		return nil, fmt.Errorf("head: num_labels %d < 1", numLabels)
	}
	h := &Head{Kind: kind, drop: nn.Dropout{P: float32(dropout)}}
	switch kind {
	case HeadMean:
		h.Out = nn.NewLinear("classifier", width, numLabels, true)
	case HeadFirstToken:
		h.Dense = nn.NewLinear("classifier.dense", width, width, true)
		h.Dense.InitHF(rng, 0.02)
		h.Out = nn.NewLinear("classifier.out_proj", width, numLabels, true)
	default:
		return nil, fmt.Errorf("head: unknown kind %q (want %q or %q)", kind, HeadMean, HeadFirstToken)
	}
	h.Out.InitHF(rng, 0.02)
	return h, nil
}

// Params returns the head's parameters.
func (h *Head) Params() []*nn.Param {
	if h.Dense != nil {
		return append(h.Dense.Params(), h.Out.Params()...)
	}
	return h.Out.Params()
}

// HeadCache holds what [Head.Backward] needs.
type HeadCache struct {
	S          int
	mask       []float32
	pooled     *nn.Tensor
	d1, d2     *nn.DropoutCache
	dIn, tanhY *nn.Tensor
	outIn      *nn.Tensor
}

// Forward maps y [B,S,P] and the token mask [B,S] to logits [B,C]. The mask
// holds 1 for a real token; nil means every row, as principled NVDP models
// pass. Only HeadMean reads the mask.
func (h *Head) Forward(y *nn.Tensor, mask []float32, train bool, rng *rand.Rand) (*nn.Tensor, *HeadCache) {
	c := &HeadCache{S: y.Shape[1], mask: mask}
	if mask == nil {
		c.mask = make([]float32, y.Shape[0]*y.Shape[1])
		for i := range c.mask {
			c.mask[i] = 1
		}
	}
	if h.Kind == HeadMean {
		c.pooled = nn.MaskedMeanPool(y, c.mask)
		c.outIn, c.d1 = h.drop.Forward(c.pooled, rng, train)
	} else {
		c.pooled = nn.FirstToken(y)
		c.dIn, c.d1 = h.drop.Forward(c.pooled, rng, train)
		d, _ := h.Dense.Forward(c.dIn)
		c.tanhY = nn.Tanh(d)
		c.outIn, c.d2 = h.drop.Forward(c.tanhY, rng, train)
	}
	logits, _ := h.Out.Forward(c.outIn)
	return logits, c
}

// Backward maps dlogits [B,C] to dy [B,S,P], accumulating the parameter
// gradients.
func (h *Head) Backward(c *HeadCache, dlogits *nn.Tensor) *nn.Tensor {
	d := h.Out.Backward(c.outIn, dlogits)
	if h.Kind == HeadMean {
		return nn.MaskedMeanPoolBackward(c.mask, h.drop.Backward(c.d1, d), c.S)
	}
	d = nn.TanhBackward(c.tanhY, h.drop.Backward(c.d2, d))
	d = h.Dense.Backward(c.dIn, d)
	return nn.FirstTokenBackward(h.drop.Backward(c.d1, d), c.S)
}
