package dnn

import "fmt"

// MaskedMeanPool is the twin of [nn.MaskedMeanPool]: it averages x [B,S,D] over the real positions
// of each sequence and returns [B,D]. An all-padding row pools to 0, through nn's 1e-9 floor.
//
// mask [B,S] is on the device, with 1 for a real token and 0 for padding; fractional weights are
// allowed. The caller uploads it, as with e.Upload(nn.FromData(mask, B, S)).
func (e *Engine) MaskedMeanPool(x, mask *Tensor) *Tensor {
	if len(x.Shape) != 3 || mask.Len() != x.Shape[0]*x.Shape[1] {
		panic(fmt.Sprintf("dnn.MaskedMeanPool: x %v with mask %v", x.Shape, mask.Shape))
	}
	B, S, D := x.Shape[0], x.Shape[1], x.Shape[2]
	y := e.New(B, D)
	e.launch1D("masked_mean_pool", B*D, y.Buf, x.Buf, mask.Buf, B, S, D)
	return y
}

// MaskedMeanPoolBackward is the twin of [nn.MaskedMeanPoolBackward]. It returns dx [B,S,D] for
// dy [B,D]:
//
//	dx[b,s] = mask[b,s] dy[b] / max(sum_s mask[b,s], 1e-9)
func (e *Engine) MaskedMeanPoolBackward(mask, dy *Tensor, S int) *Tensor {
	B, D := dy.Shape[0], dy.Dim(-1)
	if mask.Len() != B*S || dy.Len() != B*D {
		panic(fmt.Sprintf("dnn.MaskedMeanPoolBackward: dy %v, S %d, mask %v", dy.Shape, S, mask.Shape))
	}
	dx := e.New(B, S, D)
	w := e.New(B, S)
	e.launch1D("masked_mean_weights", B*S, w.Buf, mask.Buf, B, S)
	e.launch1D("masked_mean_pool_bwd", B*S*D, dx.Buf, dy.Buf, w.Buf, mask.Buf, B, S, D)
	return dx
}

// FirstToken is the twin of [nn.FirstToken]: it returns x[:, 0, :], of shape [B,D], of x
// [B,S,D], the pooling on BERT's [CLS] or RoBERTa's <s>.
func (e *Engine) FirstToken(x *Tensor) *Tensor {
	if len(x.Shape) != 3 || x.Shape[1] < 1 {
		panic(fmt.Sprintf("dnn.FirstToken: x %v, want [B,S,D] with S >= 1", x.Shape))
	}
	B, S, D := x.Shape[0], x.Shape[1], x.Shape[2]
	y := e.New(B, D)
	e.launch1D("first_token", B*D, y.Buf, x.Buf, B, S, D)
	return y
}

// FirstTokenBackward is the twin of [nn.FirstTokenBackward]: it scatters dy [B,D] into position 0
// of an otherwise zero [B,S,D] gradient.
func (e *Engine) FirstTokenBackward(dy *Tensor, S int) *Tensor {
	B, D := dy.Shape[0], dy.Dim(-1)
	if dy.Len() != B*D || S < 1 {
		panic(fmt.Sprintf("dnn.FirstTokenBackward: dy %v, S %d", dy.Shape, S))
	}
	dx := e.New(B, S, D)
	e.launch1D("first_token_bwd", B*S*D, dx.Buf, dy.Buf, B, S, D)
	return dx
}
