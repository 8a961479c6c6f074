package nn

import "fmt"

// MaskedMeanPool averages x [B,S,D] over the real positions of each
// sequence and returns y [B,D]:
//
//	y[b] = sum_s mask[b,s] x[b,s] / max(sum_s mask[b,s], 1e-9)
//
// mask is [B,S] with 1 for a real token and 0 for padding; fractional
// weights are allowed. The 1e-9 floor follows ref §3.3, so an all-padding
// row pools to 0.
func MaskedMeanPool(x *Tensor, mask []float32) *Tensor {
	if len(x.Shape) != 3 || len(mask) != x.Shape[0]*x.Shape[1] {
		panic(fmt.Sprintf("nn.MaskedMeanPool: x %v with mask of %d", x.Shape, len(mask)))
	}
	B, S, D := x.Shape[0], x.Shape[1], x.Shape[2]
	y := New(B, D)
	for b := 0; b < B; b++ {
		yr := y.Data[b*D : (b+1)*D]
		den := poolDenominator(mask[b*S : (b+1)*S])
		for s := 0; s < S; s++ {
			m := mask[b*S+s]
			if m == 0 {
				continue
			}
			xr := x.Data[(b*S+s)*D : (b*S+s+1)*D]
			for i, v := range xr {
				yr[i] += m * v
			}
		}
		for i := range yr {
			yr[i] = float32(float64(yr[i]) / den)
		}
	}
	return y
}

func poolDenominator(m []float32) float64 {
	var n float64
	for _, v := range m {
		n += float64(v)
	}
	return max(n, 1e-9)
}

// MaskedMeanPoolBackward returns dx [B,S,D] for dy [B,D]:
//
//	dx[b,s] = mask[b,s] dy[b] / max(sum_s mask[b,s], 1e-9)
func MaskedMeanPoolBackward(mask []float32, dy *Tensor, S int) *Tensor {
	B, D := dy.Shape[0], dy.Dim(-1)
	if len(mask) != B*S || dy.Len() != B*D {
		panic(fmt.Sprintf("nn.MaskedMeanPoolBackward: dy %v, S %d, mask of %d", dy.Shape, S, len(mask)))
	}
	dx := New(B, S, D)
	for b := 0; b < B; b++ {
		den := poolDenominator(mask[b*S : (b+1)*S])
		g := dy.Data[b*D : (b+1)*D]
		for s := 0; s < S; s++ {
			m := mask[b*S+s]
			if m == 0 {
				continue
			}
			w := float32(float64(m) / den)
			dr := dx.Data[(b*S+s)*D : (b*S+s+1)*D]
			for i, v := range g {
				dr[i] = w * v
			}
		}
	}
	return dx
}

// FirstToken returns x[:, 0, :], of shape [B,D], from x [B,S,D]: the
// pooling on BERT's [CLS] or RoBERTa's <s>.
func FirstToken(x *Tensor) *Tensor {
	if len(x.Shape) != 3 {
		panic(fmt.Sprintf("nn.FirstToken: x %v, want [B,S,D]", x.Shape))
	}
	B, S, D := x.Shape[0], x.Shape[1], x.Shape[2]
	y := New(B, D)
	for b := 0; b < B; b++ {
		copy(y.Data[b*D:(b+1)*D], x.Data[b*S*D:b*S*D+D])
	}
	return y
}

// FirstTokenBackward scatters dy [B,D] into position 0 of a zero [B,S,D] gradient.
func FirstTokenBackward(dy *Tensor, S int) *Tensor {
	B, D := dy.Shape[0], dy.Dim(-1)
	dx := New(B, S, D)
	for b := 0; b < B; b++ {
		copy(dx.Data[b*S*D:b*S*D+D], dy.Data[b*D:(b+1)*D])
	}
	return dx
}
