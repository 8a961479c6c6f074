package nn

import (
	"fmt"
	"math/rand/v2"
)

// TransformerLayer is the post-LayerNorm BERT layer, Hugging Face's
// BertLayer, with its query source, key and value source and additive key
// bias as inputs. One implementation thus serves the encoders'
// self-attention layers and the NVDP block's denoising attention over a
// released sample:
//
//	q = W_q xq + b_q,   k = W_k xkv + b_k,   v = W_v xkv + b_v
//	c = Attention(q, k, v; keyBias)
//	a = LN_1(Dropout(W_o c + b_o) + [xq if AttnResidual])
//	y = LN_2(Dropout(W_2 ActDropout(GELU(W_1 a + b_1)) + b_2) + a)
//
// The attention applies dropout to its probabilities. With
// [LayerOptions].PreLN the layer is the pre-LayerNorm layer of
// wav2vec2-large, transformers' Wav2Vec2EncoderLayerStableLayerNorm, with
// self-attention only:
//
//	a = xq + Dropout(W_o Attention(LN_1 xq) + b_o)
//	y = a + Dropout(W_2 ActDropout(GELU(W_1 LN_2(a) + b_1)) + b_2)
//
// xq is [B,Tq,H]; xkv is [B,Tk,H], the same tensor for self-attention;
// keyBias is [B,Tk] or nil; y is [B,Tq,H]. GELU is the erf form of [GELU].
//
// [NewTransformerLayer] names the parameters in the BERT layout: prefix +
// "attention.self.{query,key,value}", "attention.output.dense",
// "attention.output.LayerNorm", "intermediate.dense", "output.dense" and
// "output.LayerNorm". Other layouts, such as wav2vec2's, build the struct
// from their own Linear and LayerNorm layers.
type TransformerLayer struct {
	Query, Key, Value *Linear    // attention.self.{query,key,value}
	AttnOut           *Linear    // attention.output.dense
	AttnLN            *LayerNorm // attention.output.LayerNorm (LN_1)
	Inter             *Linear    // intermediate.dense
	Out               *Linear    // output.dense
	OutLN             *LayerNorm // output.LayerNorm (LN_2)
}

// LayerOptions are the per-call settings of [TransformerLayer.Forward].
type LayerOptions struct {
	Heads         int     // attention heads (H divisible by Heads)
	HiddenDropout Dropout // after W_o and after W_2 (HF hidden_dropout_prob)
	AttnDropout   float32 // on the attention probabilities (HF attention_probs_dropout_prob)
	// ActDropout is applied to the GELU output, as wav2vec2's
	// activation_dropout. BERT has none: the zero value is the identity and
	// draws nothing.
	ActDropout Dropout
	// AttnResidual adds xq to the attention output before LN_1, as BERT
	// does. The NVDP block has none, since its output is a function of the
	// sample only.
	AttnResidual bool
	// PreLN selects the pre-LayerNorm order described at [TransformerLayer].
	// It needs self-attention, with xq and xkv the same tensor, and
	// AttnResidual.
	PreLN bool
	// NoGrad keeps no cache, for inference without activations; Backward
	// cannot be called. A training Forward ignores it.
	NoGrad bool
	// RecomputeGELU keeps only the GELU pre-activation and recomputes GELU
	// and its derivative in Backward, trading speed for memory. Otherwise
	// the output and derivative are kept.
	RecomputeGELU bool
}

// NewTransformerLayer returns a layer of width hidden and intermediate size
// inter, with LayerNorm epsilon eps, LayerNorm weights 1 and every other
// parameter 0. prefix ends with the separator, as in "encoder.layer.0.".
func NewTransformerLayer(prefix string, hidden, inter int, eps float32) *TransformerLayer {
	return &TransformerLayer{
		Query:   NewLinear(prefix+"attention.self.query", hidden, hidden, true),
		Key:     NewLinear(prefix+"attention.self.key", hidden, hidden, true),
		Value:   NewLinear(prefix+"attention.self.value", hidden, hidden, true),
		AttnOut: NewLinear(prefix+"attention.output.dense", hidden, hidden, true),
		AttnLN:  NewLayerNorm(prefix+"attention.output.LayerNorm", hidden, eps),
		Inter:   NewLinear(prefix+"intermediate.dense", hidden, inter, true),
		Out:     NewLinear(prefix+"output.dense", inter, hidden, true),
		OutLN:   NewLayerNorm(prefix+"output.LayerNorm", hidden, eps),
	}
}

// InitHF draws the six dense weights from N(0, std^2) in the order query,
// key, value, attention output, intermediate, output, and zeroes the
// biases, as transformers' _init_weights does in parameter order.
func (l *TransformerLayer) InitHF(rng *rand.Rand, std float64) {
	for _, lin := range []*Linear{l.Query, l.Key, l.Value, l.AttnOut, l.Inter, l.Out} {
		lin.InitHF(rng, std)
	}
}

// Params returns the layer's parameters in Hugging Face state_dict order.
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

// Forward returns the layer's output y [B,Tq,H], with the equations of
// [TransformerLayer], and the cache for Backward. The cache is nil when
// o.NoGrad is set and train is not.
//
// train enables the dropouts, drawn from rng in the order attention
// probabilities, W_o output, GELU output, W_2 output; rng may be nil when
// no dropout is active. Shape mismatches, and PreLN without self-attention
// and AttnResidual, are wiring errors and panic.
func (l *TransformerLayer) Forward(xq, xkv, keyBias *Tensor, o LayerOptions, train bool, rng *rand.Rand) (*Tensor, *TransformerCache) {
	return l.forward(xq, xkv, keyBias, o, train, rng, nil)
}

// Infer is [TransformerLayer.Forward] for inference, without dropout or cache, with every
// activation, y included, taken from ws ([Workspace.New]; nil: newly allocated): the same
// operations in the same order. o.NoGrad is implied.
func (l *TransformerLayer) Infer(xq, xkv, keyBias *Tensor, o LayerOptions, ws *Workspace) *Tensor {
	o.NoGrad = true
	y, _ := l.forward(xq, xkv, keyBias, o, false, nil, ws)
	return y
}

// forward is Forward with the activations of a pass that keeps no cache taken from ws.
func (l *TransformerLayer) forward(xq, xkv, keyBias *Tensor, o LayerOptions, train bool, rng *rand.Rand, ws *Workspace) (*Tensor, *TransformerCache) {
	if xq.Dim(-1) != xkv.Dim(-1) {
		panic(fmt.Sprintf("nn.TransformerLayer: xq %v, xkv %v", xq.Shape, xkv.Shape))
	}
	if o.PreLN && (xq != xkv || !o.AttnResidual) {
		panic("nn.TransformerLayer: PreLN needs self-attention (xq == xkv) and AttnResidual")
	}
	keep := train || !o.NoGrad
	if keep {
		ws = nil // a cache holds the activations: they are its own
	}
	c := &TransformerCache{xq: xq, xkv: xkv, qin: xq, kvin: xkv, self: xq == xkv, residual: o.AttnResidual,
		preLN: o.PreLN, hidden: o.HiddenDropout, act: o.ActDropout}
	if o.PreLN {
		c.qin, c.ln1 = layerNorm(l.AttnLN, xq, keep, ws)
		c.kvin = c.qin
	}
	q := l.Query.Infer(c.qin, ws)
	k := l.Key.Infer(c.kvin, ws)
	v := l.Value.Infer(c.kvin, ws)
	c.ctx, c.attn = attention(q, k, v, o.Heads, keyBias, o.AttnDropout, rng, train, ws)
	s1 := l.AttnOut.Infer(c.ctx, ws)
	c.d1 = o.HiddenDropout.Apply(s1, rng, train)
	if o.AttnResidual {
		AddInPlace(s1, xq)
	}
	a := s1 // the residual stream after attention
	if o.PreLN {
		c.a, c.ln2 = layerNorm(l.OutLN, a, keep, ws)
	} else {
		a, c.ln1 = layerNorm(l.AttnLN, s1, keep, ws)
		c.a = a
	}
	s2 := l.feedForward(c, o, keep, train, rng, ws)
	AddInPlace(s2, a)
	y := s2
	if !o.PreLN {
		y, c.ln2 = layerNorm(l.OutLN, s2, keep, ws)
	}
	if !keep {
		return y, nil
	}
	return y, c
}

// layerNorm is ln.Forward when keep, else ln.Infer from ws (no cache).
func layerNorm(ln *LayerNorm, x *Tensor, keep bool, ws *Workspace) (*Tensor, *LayerNormCache) {
	if keep {
		return ln.Forward(x)
	}
	return ln.Infer(x, ws), nil
}

// feedForward returns Dropout(W_2 ActDropout(GELU(W_1 c.a + b_1)) + b_2) and
// keeps in c what its backward needs; without keep, its activations come from ws.
func (l *TransformerLayer) feedForward(c *TransformerCache, o LayerOptions, keep, train bool, rng *rand.Rand, ws *Workspace) *Tensor {
	h := l.Inter.Infer(c.a, ws)
	var g *Tensor
	if keep && !o.RecomputeGELU {
		g, c.dgelu = GELUWithGrad(h)
	} else {
		g = GELUInfer(h, ws)
		c.h = h
	}
	c.d3 = o.ActDropout.Apply(g, rng, train)
	s2 := l.Out.Infer(g, ws)
	c.d2 = o.HiddenDropout.Apply(s2, rng, train)
	if !o.RecomputeGELU {
		c.g = g
	}
	return s2
}

// feedForwardBackward takes dL/d(feed-forward output) and returns dL/dc.a.
func (l *TransformerLayer) feedForwardBackward(c *TransformerCache, ds2 *Tensor) *Tensor {
	do2 := c.hidden.Backward(c.d2, ds2)
	g, dgelu := c.g, c.dgelu
	if g == nil {
		g, dgelu = GELUWithGrad(c.h)
		c.d3.reapply(g)
	}
	dg := c.act.Backward(c.d3, l.Out.Backward(g, do2))
	dh := GELUGradMul(dg, dgelu)
	return l.Inter.Backward(c.a, dh)
}

// Backward takes the cache of Forward and dL/dy [B,Tq,H], adds the
// gradients of every parameter to their Grad and returns dL/dxq, dL/dxkv
// and dL/dkeyBias [B,Tk], as [AttentionBackward] does. For self-attention,
// with xq and xkv the same tensor, dxq is the whole input gradient and dxkv
// is nil.
func (l *TransformerLayer) Backward(c *TransformerCache, dy *Tensor) (dxq, dxkv, dKeyBias *Tensor) {
	if c == nil {
		panic("nn.TransformerLayer.Backward: nil cache (Forward ran with NoGrad)")
	}
	var ds1 *Tensor // dL/d(residual stream after attention)
	if c.preLN {
		ds1 = l.OutLN.Backward(c.ln2, l.feedForwardBackward(c, dy))
		AddInPlace(ds1, dy)
	} else {
		ds2 := l.OutLN.Backward(c.ln2, dy)
		da := l.feedForwardBackward(c, ds2)
		AddInPlace(da, ds2)
		ds1 = l.AttnLN.Backward(c.ln1, da)
	}
	do1 := c.hidden.Backward(c.d1, ds1)
	dctx := l.AttnOut.Backward(c.ctx, do1)
	dq, dk, dv, dKeyBias := AttentionBackward(c.attn, dctx)
	dxq = l.Query.Backward(c.qin, dq)
	if c.self {
		AddInPlace(dxq, l.Key.Backward(c.kvin, dk))
		AddInPlace(dxq, l.Value.Backward(c.kvin, dv))
	} else {
		dxkv = l.Key.Backward(c.kvin, dk)
		AddInPlace(dxkv, l.Value.Backward(c.kvin, dv))
	}
	if c.preLN {
		dxq = l.AttnLN.Backward(c.ln1, dxq)
	}
	if c.residual {
		AddInPlace(dxq, ds1)
	}
	return dxq, dxkv, dKeyBias
}
