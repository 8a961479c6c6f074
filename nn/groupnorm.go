package nn

import (
	"fmt"
	"math"
)

// GroupNorm is torch.nn.GroupNorm(num_groups, num_channels, eps, affine=True)
// on channels-last sequences: for x [B, T, C] with C channels in Groups
// groups of C/Groups consecutive channels, each (batch row, group) is
// normalised over its T*C/Groups values with the biased variance,
//
//	y[b,t,c] = (x[b,t,c] - mean[b,g(c)]) / sqrt(var[b,g(c)] + Eps) * Weight[c] + Bias[c],
//
// Weight and Bias [C] named prefix+".weight" (init 1) and prefix+".bias"
// (init 0), both excluded from weight decay. Groups = C (the first layer of
// wav2vec2-base's feature encoder) normalises each channel over time.
type GroupNorm struct {
	Groups       int
	Weight, Bias *Param
	Eps          float32
}

// GroupNormCache holds the input and per-(row, group) statistics for Backward.
type GroupNormCache struct {
	X    *Tensor   // input [B, T, C]
	Mean []float32 // [B*Groups]
	Rstd []float32 // [B*Groups] 1/sqrt(var+eps)
}

// NewGroupNorm creates a GroupNorm of channels channels in groups groups
// (groups must divide channels; a wiring error panics).
func NewGroupNorm(prefix string, groups, channels int, eps float32) *GroupNorm {
	if groups <= 0 || channels <= 0 || channels%groups != 0 {
		panic(fmt.Sprintf("nn.NewGroupNorm(%s): %d groups for %d channels", prefix, groups, channels))
	}
	g := &GroupNorm{Groups: groups, Weight: NewParam(prefix+".weight", channels), Bias: NewParam(prefix+".bias", channels), Eps: eps}
	g.Weight.Fill(1)
	g.Weight.NoDecay, g.Bias.NoDecay = true, true
	return g
}

// InitHF resets the parameters to Hugging Face initialisation (weight 1, bias 0).
func (l *GroupNorm) InitHF() {
	l.Weight.Fill(1)
	l.Bias.Value.Zero()
}

// Params returns the layer's parameters.
func (l *GroupNorm) Params() []*Param { return []*Param{l.Weight, l.Bias} }

// Forward normalises x [B, T, C] and returns y (same shape) and the cache.
// Statistics are accumulated in float64; groups run in parallel.
func (l *GroupNorm) Forward(x *Tensor) (*Tensor, *GroupNormCache) {
	C := l.Weight.Value.Len()
	if len(x.Shape) != 3 || x.Shape[2] != C {
		panic(fmt.Sprintf("nn.GroupNorm(%s): input %v, want [B, T, %d]", l.Weight.Name, x.Shape, C))
	}
	B, T := x.Shape[0], x.Shape[1]
	G, cg := l.Groups, C/l.Groups
	y := New(x.Shape...)
	c := &GroupNormCache{X: x, Mean: make([]float32, B*G), Rstd: make([]float32, B*G)}
	w, bias := l.Weight.Value.Data, l.Bias.Value.Data
	n := float64(T * cg)
	Parallel(B*G, 4*T*cg, func(lo, hi int) {
		for bg := lo; bg < hi; bg++ {
			b, g := bg/G, bg%G
			var s float64
			for t := 0; t < T; t++ {
				for _, v := range x.Data[(b*T+t)*C+g*cg:][:cg] {
					s += float64(v)
				}
			}
			mean := s / n
			var ss float64
			for t := 0; t < T; t++ {
				for _, v := range x.Data[(b*T+t)*C+g*cg:][:cg] {
					d := float64(v) - mean
					ss += d * d
				}
			}
			m32, r32 := float32(mean), float32(1/math.Sqrt(ss/n+float64(l.Eps)))
			for t := 0; t < T; t++ {
				o := (b*T+t)*C + g*cg
				for i, v := range x.Data[o : o+cg] {
					y.Data[o+i] = (v-m32)*r32*w[g*cg+i] + bias[g*cg+i]
				}
			}
			c.Mean[bg], c.Rstd[bg] = m32, r32
		}
	})
	return y, c
}

// Backward accumulates dWeight, dBias and returns dx (shape of x): per
// (row, group) dx = rstd * (h - mean(h) - xhat * mean(h * xhat)) with
// h = dy * weight and xhat = (x - mean) * rstd, means over the group's
// T*C/Groups values. Groups run in parallel (each owns its channels'
// parameter gradients; batch rows are summed in order).
func (l *GroupNorm) Backward(c *GroupNormCache, dy *Tensor) *Tensor {
	MustSameShape("GroupNorm.Backward", c.X, dy)
	C := l.Weight.Value.Len()
	B, T := c.X.Shape[0], c.X.Shape[1]
	G, cg := l.Groups, C/l.Groups
	dx := New(c.X.Shape...)
	w := l.Weight.Value.Data
	gw, gb := l.Weight.Grad.Data, l.Bias.Grad.Data
	n := float32(T * cg)
	Parallel(G, 8*B*T*cg, func(lo, hi int) {
		for g := lo; g < hi; g++ {
			for b := 0; b < B; b++ {
				m, rs := c.Mean[b*G+g], c.Rstd[b*G+g]
				var sh, shx float32
				for t := 0; t < T; t++ {
					o := (b*T+t)*C + g*cg
					for i, v := range c.X.Data[o : o+cg] {
						xhat := (v - m) * rs
						d := dy.Data[o+i]
						h := d * w[g*cg+i]
						sh += h
						shx += h * xhat
						gw[g*cg+i] += d * xhat
						gb[g*cg+i] += d
					}
				}
				sh /= n
				shx /= n
				for t := 0; t < T; t++ {
					o := (b*T+t)*C + g*cg
					for i, v := range c.X.Data[o : o+cg] {
						xhat := (v - m) * rs
						dx.Data[o+i] = rs * (dy.Data[o+i]*w[g*cg+i] - sh - xhat*shx)
					}
				}
			}
		}
	})
	return dx
}
