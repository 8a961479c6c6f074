package dnn

import (
	"fmt"
	"math"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
)

// NVDPBlock is the twin of [nvib.Block]: the TransformerLayer twin with keys and values from Z and
// no attention residual. In principled mode the queries come from the sample's token components
// and the key bias is ln pi_j - ||z_j||^2/(2 sqrt d_h). In reference mode the queries come from
// the encoder output x, and the key bias takes the reference's clamped form and padding bias.
type NVDPBlock struct {
	Cfg nvib.BlockConfig
	*TransformerLayer
	drop Dropout
}

// NewNVDPBlock uploads b's parameters.
func (e *Engine) NewNVDPBlock(b *nvib.Block) *NVDPBlock {
	return &NVDPBlock{Cfg: b.Cfg, TransformerLayer: e.NewTransformerLayer(b.TransformerLayer), drop: Dropout{P: float32(b.Cfg.Dropout)}}
}

// NVDPBlockCache holds what [NVDPBlock.Backward] needs.
type NVDPBlockCache struct {
	B, S, N, P int
	clamped    *Tensor // [B,N] reference: ln(max(pi, tiny)) clamped
	layer      *TransformerCache
}

// sq is sqrt(d_h) as nvib computes it.
func (b *NVDPBlock) sq(P int) float64 { return math.Sqrt(float64(P / b.Cfg.Heads)) }

// Forward returns the block's output y [B,S,P] for the sample s of post, as
// [nvib.Block.Forward] does, and the cache Backward needs. x [B,S,P] is the encoder output, read
// only in reference mode, for the queries, along with post.Mask for the padding bias; it may be
// nil in principled mode. train enables the hidden dropout, drawn from g as the TransformerLayer
// twin does.
func (b *NVDPBlock) Forward(e *Engine, x *Tensor, post *NVIBPosterior, s *NVIBSample, train bool, g *Philox) (*Tensor, *NVDPBlockCache) {
	B, N, P := post.B, post.N, post.P
	S := N - 1
	c := &NVDPBlockCache{B: B, S: S, N: N, P: P, clamped: e.New(B, N)}
	ref := b.Cfg.Mode.IsReference()
	qIn := x
	if !ref {
		qIn = e.New(B, S, P)
		e.launch1D("nvib_block_query", B*S*P, qIn.Buf, s.Z.Buf, B, S, P)
	} else if x == nil || x.Len() != B*S*P {
		panic(fmt.Sprintf("dnn.NVDPBlock: reference mode reads the queries from x [B,S,P] = [%d,%d,%d]", B, S, P))
	}
	bias := e.New(B, N)
	refArg := 0
	if ref {
		refArg = 1
	}
	e.launchRows("nvib_block_bias", B*N, bias.Buf, c.clamped.Buf, s.Z.Buf, s.Dir.LogPi.Buf, s.Dir.Pi.Buf, post.Mask.Buf, refArg, P, b.sq(P))
	var y *Tensor
	y, c.layer = b.TransformerLayer.Forward(e, qIn, s.Z, bias, nn.LayerOptions{Heads: b.Cfg.Heads, HiddenDropout: nn.Dropout{P: b.drop.P}}, train, g)
	return y, c
}

// Backward takes dy [B,S,P], accumulates the parameter gradients and returns dZ [B,N,P], dLogPi
// [B,N] and dx [B,S,P], as [nvib.Block.Backward] does. dLogPi is float32 and 0 where pi = 0 or,
// in reference mode, where pi was clamped. dx is nil in principled mode.
func (b *NVDPBlock) Backward(e *Engine, c *NVDPBlockCache, s *NVIBSample, dy *Tensor) (dZ, dLogPi, dx *Tensor) {
	B, S, N, P := c.B, c.S, c.N, c.P
	dqIn, dZ, dBias := b.TransformerLayer.Backward(e, c.layer, dy)
	dLogPi = e.New(B, N)
	e.launchRows("nvib_block_bias_bwd", B*N, dLogPi.Buf, dZ.Buf, dBias.Buf, s.Z.Buf, s.Dir.LogPi.Buf, c.clamped.Buf, P, b.sq(P))
	if b.Cfg.Mode.IsReference() {
		return dZ, dLogPi, dqIn
	}
	e.launch1D("nvib_block_query_bwd", B*S*P, dZ.Buf, dqIn.Buf, B, S, P)
	return dZ, dLogPi, nil
}

// NVDPHead is the twin of [nvib.Head]: mean pooling over the rows the mask marks, or the first
// token with dense and tanh; then dropout and the classifier.
type NVDPHead struct {
	Kind       string
	Dense, Out *Linear // Dense: first-token only
	drop       Dropout
}

// NewNVDPHead uploads h's parameters. dropout is the head's probability, [nvib.Config].Dropout,
// which [nvib.NewHead] gave it.
func (e *Engine) NewNVDPHead(h *nvib.Head, dropout float64) *NVDPHead {
	d := &NVDPHead{Kind: h.Kind, Out: e.NewLinear(h.Out), drop: Dropout{P: float32(dropout)}}
	if h.Dense != nil {
		d.Dense = e.NewLinear(h.Dense)
	}
	return d
}

// Params returns the head's parameters in [nvib.Head]'s order.
func (h *NVDPHead) Params() []*Param {
	if h.Dense != nil {
		return append(h.Dense.Params(), h.Out.Params()...)
	}
	return h.Out.Params()
}

// NVDPHeadCache holds what [NVDPHead.Backward] needs.
type NVDPHeadCache struct {
	S          int
	mask       *Tensor
	d1, d2     *DropoutCache
	dIn, tanhY *Tensor
	outIn      *Tensor
}

// Forward maps y [B,S,P] and the token mask [B*S] to logits [B,C], as [nvib.Head.Forward] does. A
// nil mask means every row. Dropout is drawn from g when train is set.
func (h *NVDPHead) Forward(e *Engine, y *Tensor, mask []float32, train bool, g *Philox) (*Tensor, *NVDPHeadCache) {
	B, S := y.Shape[0], y.Shape[1]
	c := &NVDPHeadCache{S: S}
	if h.Kind == nvib.HeadMean {
		m := mask
		if m == nil {
			m = make([]float32, B*S)
			for i := range m {
				m[i] = 1
			}
		}
		c.mask = e.Upload(nn.FromData(m, B, S))
		c.outIn, c.d1 = h.drop.Forward(e, e.MaskedMeanPool(y, c.mask), g, train)
	} else {
		c.dIn, c.d1 = h.drop.Forward(e, e.FirstToken(y), g, train)
		d, _ := h.Dense.Forward(e, c.dIn)
		c.tanhY = e.Tanh(d)
		c.outIn, c.d2 = h.drop.Forward(e, c.tanhY, g, train)
	}
	logits, _ := h.Out.Forward(e, c.outIn)
	return logits, c
}

// Backward maps dlogits [B,C] to dy [B,S,P], accumulating the parameter
// gradients.
func (h *NVDPHead) Backward(e *Engine, c *NVDPHeadCache, dlogits *Tensor) *Tensor {
	d := h.Out.Backward(e, c.outIn, dlogits)
	if h.Kind == nvib.HeadMean {
		return e.MaskedMeanPoolBackward(c.mask, h.drop.Backward(e, c.d1, d), c.S)
	}
	d = e.TanhBackward(c.tanhY, h.drop.Backward(e, c.d2, d))
	d = h.Dense.Backward(e, c.dIn, d)
	return e.FirstTokenBackward(h.drop.Backward(e, c.d1, d), c.S)
}
