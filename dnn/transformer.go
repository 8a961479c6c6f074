package dnn

import (
	"fmt"

	"github.com/nvdp-project/nvdp/nn"
)

// TransformerLayer is the twin of [nn.TransformerLayer]: BERT's post-LN layer with its query
// source, key and value source and additive key bias as inputs, serving the encoders'
// self-attention layers and the NVDP block's denoising attention, or, with
// [nn.LayerOptions].PreLN, wav2vec2-large's pre-LN layer. nn.TransformerLayer gives the equations.
// The parameters and names are those of the nn layer it is built from by
// [Engine.NewTransformerLayer].
type TransformerLayer struct {
	Query, Key, Value *Linear    // attention.self.{query,key,value}
	AttnOut           *Linear    // attention.output.dense
	AttnLN            *LayerNorm // attention.output.LayerNorm (LN_1)
	Inter             *Linear    // intermediate.dense
	Out               *Linear    // output.dense
	OutLN             *LayerNorm // output.LayerNorm (LN_2)
}

// NewTransformerLayer uploads l's parameters.
func (e *Engine) NewTransformerLayer(l *nn.TransformerLayer) *TransformerLayer {
	return &TransformerLayer{
		Query: e.NewLinear(l.Query), Key: e.NewLinear(l.Key), Value: e.NewLinear(l.Value),
		AttnOut: e.NewLinear(l.AttnOut), AttnLN: e.NewLayerNorm(l.AttnLN),
		Inter: e.NewLinear(l.Inter), Out: e.NewLinear(l.Out), OutLN: e.NewLayerNorm(l.OutLN),
	}
}

// Params returns the layer's parameters in the order of [nn.TransformerLayer.Params], Hugging
// Face's state_dict order.
func (l *TransformerLayer) Params() []*Param {
	var ps []*Param
	for _, lin := range []*Linear{l.Query, l.Key, l.Value, l.AttnOut} {
		ps = append(ps, lin.Params()...)
	}
	ps = append(ps, l.AttnLN.Params()...)
	ps = append(ps, l.Inter.Params()...)
	ps = append(ps, l.Out.Params()...)
	return append(ps, l.OutLN.Params()...)
}

// TransformerCache holds what [TransformerLayer.Backward] needs.
type TransformerCache struct {
	xq, xkv    *Tensor // the layer's inputs
	qin, kvin  *Tensor // inputs of W_q and of W_k, W_v (LN_1 xq with PreLN)
	self       bool    // xq == xkv
	residual   bool
	preLN      bool
	hidden     Dropout
	act        Dropout
	attn       *AttentionCache
	ctx        *Tensor // attention context (input of W_o)
	d1, d2, d3 *DropoutCache
	ln1, ln2   *LayerNormCache
	a          *Tensor // input of W_1 (LN_1 output; LN_2 output with PreLN)
	h          *Tensor // GELU pre-activation; only when recomputed
	g, dgelu   *Tensor // input of W_2 (GELU output after ActDropout) and GELU'(h); nil when recomputed
}

// Forward runs the layer as [nn.TransformerLayer.Forward] does and returns y [B,Tq,H] and the cache
// for Backward. The cache is nil when o.NoGrad is set and train is not. xq is [B,Tq,H] and xkv
// [B,Tk,H], the same *Tensor for self-attention; keyBias is [B,Tk] or nil.
//
// train enables the dropouts, drawn from g in nn's order: attention probabilities, W_o output, GELU
// output, W_2 output, each drawing as [Engine.AttentionDropout] and [Dropout.Apply] state. nn's
// layer drawing from rand.New of a copy of g thus drops the same elements. g may be nil when no
// dropout is active. o.RecomputeGELU keeps only the GELU pre-activation.
//
// Shape mismatches, and PreLN without self-attention and AttnResidual, panic.
func (l *TransformerLayer) Forward(e *Engine, xq, xkv, keyBias *Tensor, o nn.LayerOptions, train bool, g *Philox) (*Tensor, *TransformerCache) {
	if xq.Dim(-1) != xkv.Dim(-1) {
		panic(fmt.Sprintf("dnn.TransformerLayer: xq %v, xkv %v", xq.Shape, xkv.Shape))
	}
	if o.PreLN && (xq != xkv || !o.AttnResidual) {
		panic("dnn.TransformerLayer: PreLN needs self-attention (xq == xkv) and AttnResidual")
	}
	keep := train || !o.NoGrad
	hidden, act := Dropout(o.HiddenDropout), Dropout(o.ActDropout)
	c := &TransformerCache{xq: xq, xkv: xkv, qin: xq, kvin: xkv, self: xq == xkv, residual: o.AttnResidual,
		preLN: o.PreLN, hidden: hidden, act: act}
	if o.PreLN {
		c.qin, c.ln1 = l.AttnLN.Forward(e, xq)
		c.kvin = c.qin
	}
	q, _ := l.Query.Forward(e, c.qin)
	k, _ := l.Key.Forward(e, c.kvin)
	v, _ := l.Value.Forward(e, c.kvin)
	c.ctx, c.attn = e.AttentionDropout(q, k, v, o.Heads, keyBias, o.AttnDropout, g, train)
	s1, _ := l.AttnOut.Forward(e, c.ctx)
	c.d1 = hidden.Apply(e, s1, g, train)
	if o.AttnResidual {
		e.AddInPlace(s1, xq)
	}
	a := s1 // the residual stream after attention
	if o.PreLN {
		c.a, c.ln2 = l.OutLN.Forward(e, a)
	} else {
		a, c.ln1 = l.AttnLN.Forward(e, s1)
		c.a = a
	}
	s2 := l.feedForward(e, c, o, keep, train, g)
	e.AddInPlace(s2, a)
	y := s2
	if !o.PreLN {
		y, c.ln2 = l.OutLN.Forward(e, s2)
	}
	if !keep {
		return y, nil
	}
	return y, c
}

// feedForward returns Dropout(W_2 ActDropout(GELU(W_1 c.a + b_1)) + b_2)
// and keeps in c what its backward needs.
func (l *TransformerLayer) feedForward(e *Engine, c *TransformerCache, o nn.LayerOptions, keep, train bool, g *Philox) *Tensor {
	h, _ := l.Inter.Forward(e, c.a)
	var gl *Tensor
	if keep && !o.RecomputeGELU {
		gl, c.dgelu = e.GELUWithGrad(h)
	} else {
		gl = e.GELU(h)
		c.h = h
	}
	c.d3 = c.act.Apply(e, gl, g, train)
	s2, _ := l.Out.Forward(e, gl)
	c.d2 = c.hidden.Apply(e, s2, g, train)
	if !o.RecomputeGELU {
		c.g = gl
	}
	return s2
}

// feedForwardBackward takes dL/d(feed-forward output) and returns dL/dc.a.
func (l *TransformerLayer) feedForwardBackward(e *Engine, c *TransformerCache, ds2 *Tensor) *Tensor {
	do2 := c.hidden.Backward(e, c.d2, ds2)
	gl, dgelu := c.g, c.dgelu
	if gl == nil {
		gl, dgelu = e.GELUWithGrad(c.h)
		c.d3.reapply(e, gl)
	}
	dg := c.act.Backward(e, c.d3, l.Out.Backward(e, gl, do2))
	dh := e.GELUGradMul(dg, dgelu)
	return l.Inter.Backward(e, c.a, dh)
}

// Backward takes the cache of Forward and dL/dy [B,Tq,H], adds the gradients of every parameter to
// their Grad, and returns dL/dxq, dL/dxkv and dL/dkeyBias, as [nn.TransformerLayer.Backward]
// does. dKeyBias is [B,Tk], as in [Engine.AttentionBackward], and nil without a key bias. For
// self-attention dxq is the whole input gradient and dxkv is nil. A nil cache panics.
func (l *TransformerLayer) Backward(e *Engine, c *TransformerCache, dy *Tensor) (dxq, dxkv, dKeyBias *Tensor) {
	return l.backward(e, c, dy, true)
}

// BackwardInputs is [TransformerLayer.Backward] without dL/dkeyBias, for a caller whose key bias
// is a constant, such as the encoder's padding bias. It skips the attention's key-bias gradient,
// a launch per layer.
func (l *TransformerLayer) BackwardInputs(e *Engine, c *TransformerCache, dy *Tensor) (dxq, dxkv *Tensor) {
	dxq, dxkv, _ = l.backward(e, c, dy, false)
	return dxq, dxkv
}

// backward is Backward, computing dL/dkeyBias when biasGrad (else nil).
func (l *TransformerLayer) backward(e *Engine, c *TransformerCache, dy *Tensor, biasGrad bool) (dxq, dxkv, dKeyBias *Tensor) {
	if c == nil {
		panic("dnn.TransformerLayer.Backward: nil cache (Forward ran with NoGrad)")
	}
	var ds1 *Tensor // dL/d(residual stream after attention)
	if c.preLN {
		ds1 = l.OutLN.Backward(e, c.ln2, l.feedForwardBackward(e, c, dy))
		e.AddInPlace(ds1, dy)
	} else {
		ds2 := l.OutLN.Backward(e, c.ln2, dy)
		da := l.feedForwardBackward(e, c, ds2)
		e.AddInPlace(da, ds2)
		ds1 = l.AttnLN.Backward(e, c.ln1, da)
	}
	do1 := c.hidden.Backward(e, c.d1, ds1)
	dctx := l.AttnOut.Backward(e, c.ctx, do1)
	dq, dk, dv, dKeyBias := e.attentionBackward(c.attn, dctx, biasGrad)
	dxq = l.Query.Backward(e, c.qin, dq)
	if c.self {
		e.AddInPlace(dxq, l.Key.Backward(e, c.kvin, dk))
		e.AddInPlace(dxq, l.Value.Backward(e, c.kvin, dv))
	} else {
		dxkv = l.Key.Backward(e, c.kvin, dk)
		e.AddInPlace(dxkv, l.Value.Backward(e, c.kvin, dv))
	}
	if c.preLN {
		dxq = l.AttnLN.Backward(e, c.ln1, dxq)
	}
	if c.residual {
		e.AddInPlace(dxq, ds1)
	}
	return dxq, dxkv, dKeyBias
}
