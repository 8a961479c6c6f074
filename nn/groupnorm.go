package nn

import (
	"fmt"
	"math"
)

// GroupNorm is torch.nn.GroupNorm(num_groups, num_channels, eps,
// affine=True) on channels-last sequences.
//
// For x [B, T, C], the C channels form Groups groups of C/Groups
// consecutive channels. Each pair of batch row and group is normalised over
// its T*C/Groups values with the biased variance:
//
//	y[b,t,c] = (x[b,t,c] - mean[b,g(c)]) / sqrt(var[b,g(c)] + Eps) * Weight[c] + Bias[c]
//
// Weight and Bias [C] are named prefix+".weight", initialised to 1, and
// prefix+".bias", initialised to 0; both are excluded from weight decay.
// Groups = C, as in the first layer of wav2vec2-base's feature encoder,
// normalises each channel over time.
type GroupNorm struct {
	Groups       int
	Weight, Bias *Param
	Eps          float32
}

// GroupNormCache holds the input and the statistics per row and group for
// Backward.
type GroupNormCache struct {
	X    *Tensor   // input [B, T, C]
	Mean []float32 // [B*Groups]
	Rstd []float32 // [B*Groups] 1/sqrt(var+eps)
}

// NewGroupNorm returns a GroupNorm of channels channels in groups groups.
// groups must divide channels; a wiring error panics.
func NewGroupNorm(prefix string, groups, channels int, eps float32) *GroupNorm {
	if groups <= 0 || channels <= 0 || channels%groups != 0 {
		panic(fmt.Sprintf("nn.NewGroupNorm(%s): %d groups for %d channels", prefix, groups, channels))
	}
	g := &GroupNorm{Groups: groups, Weight: NewParam(prefix+".weight", channels), Bias: NewParam(prefix+".bias", channels), Eps: eps}
	g.Weight.Fill(1)
	g.Weight.NoDecay, g.Bias.NoDecay = true, true
	return g
}

// InitHF resets the parameters to the Hugging Face initialisation: weight
// 1, bias 0.
func (l *GroupNorm) InitHF() {
	l.Weight.Fill(1)
	l.Bias.Value.Zero()
}

// Params returns the layer's parameters.
func (l *GroupNorm) Params() []*Param { return []*Param{l.Weight, l.Bias} }

// Forward normalises x [B, T, C] and returns y, of the same shape, and the
// cache. The statistics are accumulated in float64, per channel over the
// rows of x in one contiguous sweep, then per group. Batch rows run in
// parallel.
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
	Parallel(B, 4*T*C, func(lo, hi int) {
		acc := make([]float64, C)
		mean, rstd := make([]float32, C), make([]float32, C) // per channel, of its group
		for b := lo; b < hi; b++ {
			xb, yb := x.Data[b*T*C:(b+1)*T*C], y.Data[b*T*C:(b+1)*T*C]
			clear(acc)
			for t := 0; t < T; t++ {
				for i, v := range xb[t*C : (t+1)*C] {
					acc[i] += float64(v)
				}
			}
			gm := groupSums(acc, G, cg)
			for g := range gm {
				gm[g] /= n
			}
			clear(acc)
			for t := 0; t < T; t++ {
				for i, v := range xb[t*C : (t+1)*C] {
					d := float64(v) - gm[i/cg]
					acc[i] += d * d
				}
			}
			for g, ss := range groupSums(acc, G, cg) {
				m32, r32 := float32(gm[g]), float32(1/math.Sqrt(ss/n+float64(l.Eps)))
				c.Mean[b*G+g], c.Rstd[b*G+g] = m32, r32
				for i := g * cg; i < (g+1)*cg; i++ {
					mean[i], rstd[i] = m32, r32
				}
			}
			for t := 0; t < T; t++ {
				yr := yb[t*C : (t+1)*C]
				for i, v := range xb[t*C : (t+1)*C] {
					yr[i] = (v-mean[i])*rstd[i]*w[i] + bias[i]
				}
			}
		}
	})
	return y, c
}

// groupSums returns the sums of consecutive runs of cg values of a.
func groupSums[T float32 | float64](a []T, G, cg int) []T {
	s := make([]T, G)
	for i, v := range a {
		s[i/cg] += v
	}
	return s
}

// Backward accumulates the gradients of Weight and Bias and returns dx, of
// the shape of x. For each row and group
//
//	dx = rstd * (h - mean(h) - xhat * mean(h * xhat))
//
// with h = dy * weight, xhat = (x - mean) * rstd, and the means over the
// group's T*C/Groups values. Batch rows run in parallel; their parameter
// gradients are summed in row order, so the result does not depend on the
// number of goroutines.
func (l *GroupNorm) Backward(c *GroupNormCache, dy *Tensor) *Tensor {
	MustSameShape("GroupNorm.Backward", c.X, dy)
	C := l.Weight.Value.Len()
	B, T := c.X.Shape[0], c.X.Shape[1]
	G, cg := l.Groups, C/l.Groups
	dx := New(c.X.Shape...)
	w := l.Weight.Value.Data
	part := make([]float32, B*2*C) // per row: dWeight, dBias
	n := float32(T * cg)
	Parallel(B, 8*T*C, func(lo, hi int) {
		sh, shx := make([]float32, C), make([]float32, C)
		mean, rstd := make([]float32, C), make([]float32, C)
		for b := lo; b < hi; b++ {
			xb, gb, db := c.X.Data[b*T*C:(b+1)*T*C], dy.Data[b*T*C:(b+1)*T*C], dx.Data[b*T*C:(b+1)*T*C]
			for i := range mean {
				mean[i], rstd[i] = c.Mean[b*G+i/cg], c.Rstd[b*G+i/cg]
			}
			dw, dbias := part[b*2*C:b*2*C+C], part[b*2*C+C:(b+1)*2*C]
			clear(sh)
			clear(shx)
			for t := 0; t < T; t++ {
				gr := gb[t*C : (t+1)*C]
				for i, v := range xb[t*C : (t+1)*C] {
					xhat := (v - mean[i]) * rstd[i]
					d := gr[i]
					h := d * w[i]
					sh[i] += h
					shx[i] += h * xhat
					dw[i] += d * xhat
					dbias[i] += d
				}
			}
			gsh, gshx := groupSums(sh, G, cg), groupSums(shx, G, cg)
			for i := range sh {
				sh[i], shx[i] = gsh[i/cg]/n, gshx[i/cg]/n
			}
			for t := 0; t < T; t++ {
				gr, dr := gb[t*C:(t+1)*C], db[t*C:(t+1)*C]
				for i, v := range xb[t*C : (t+1)*C] {
					xhat := (v - mean[i]) * rstd[i]
					dr[i] = rstd[i] * (gr[i]*w[i] - sh[i] - xhat*shx[i])
				}
			}
		}
	})
	gw, gbias := l.Weight.Grad.Data, l.Bias.Grad.Data
	for b := 0; b < B; b++ {
		for i := 0; i < C; i++ {
			gw[i] += part[b*2*C+i]
			gbias[i] += part[b*2*C+C+i]
		}
	}
	return dx
}
